"""Building a :class:`~wsesparse.tlr.TLRMatrix`: checked arguments, tile factors, the kernel
layout. The public builders are ``TLRMatrix``'s class methods, which document these."""

from __future__ import annotations

from typing import Callable

import numpy as np

from wsesparse._checks import check_numeric_dtype, describe
from wsesparse.tlr._layout import aligned_empty, tile_bounds
from wsesparse.tlr._validate import (check_magnitude, check_nb, check_shape, check_tol_metadata,
                                     kernel_dtype, reject_sparse, storage_dtype, tile_factors,
                                     work_dtype)
from wsesparse.tlr.compression import compress_tiles


def from_tiles(cls, shape, nb, tiles, dtype, tol):
    """``TLRMatrix.from_tiles``."""
    nb = check_nb(nb)
    tol = check_tol_metadata(tol)
    m, n = check_shape(shape)
    rp, cp = tile_bounds(m, nb), tile_bounds(n, nb)
    factors = tile_factors(tiles, rp, cp, nb)
    if dtype is None:
        dtype = kernel_dtype(np.result_type(
            *([f for uv in factors.values() for f in uv] or [np.float64])), "dtype")
    else:
        dtype = storage_dtype(dtype)
        for (i, j), uv in factors.items():
            if dtype.kind != "c" and any(f.dtype.kind == "c" for f in uv):
                raise TypeError(f"the factors of tile ({i}, {j}) are complex but "
                                f"dtype={dtype} is real; storing them would drop the "
                                "imaginary part")
    with np.errstate(over="ignore"):  # (judged below)
        T = assemble(cls, (m, n), nb, factors, dtype, tol)
    if not (np.isfinite(T.U).all() and np.isfinite(T.V).all()):
        raise ValueError(f"the factors do not fit in {dtype}: stored, some overflow to "
                         "inf; rescale them or use a double-precision dtype")
    return T


def from_dense(cls, A, nb, tol, rank, dtype, seed, n_threads, progress):
    """``TLRMatrix.from_dense``."""
    if A is None or np.isscalar(A):
        raise TypeError(f"A must be a 2-D array, got {describe(A)}")
    reject_sparse(A, "A")
    arr = np.asarray(A)
    check_numeric_dtype(arr.dtype, "A")
    if arr.ndim != 2:
        raise ValueError(f"A must be 2-D, got {describe(arr)}")
    if arr.size == 0:
        raise ValueError(f"A must not be empty, got {describe(arr)}")
    dtype = kernel_dtype(arr.dtype, "A") if dtype is None else storage_dtype(dtype)
    if arr.dtype.kind == "c" and dtype.kind != "c":
        raise TypeError(f"A is complex ({describe(arr)}) but dtype={dtype} is real; "
                        "storing it would drop the imaginary part")
    if not np.isfinite(arr).all():
        raise ValueError(f"A contains NaN or inf ({describe(arr)}); a low-rank "
                         "approximation of non-finite values is undefined")
    wd = work_dtype(dtype)
    with np.errstate(over="ignore", under="ignore"):  # judged by check_magnitude
        norm2 = float(np.linalg.norm(arr.astype(wd, copy=False)) ** 2) if arr.size < 2**26 \
            else float(sum(np.linalg.norm(arr[r:r + 4096].astype(wd)) ** 2
                           for r in range(0, arr.shape[0], 4096)))
    nb = check_nb(nb)
    check_magnitude(float(np.abs(arr).max()), norm2, "A", dtype, min(nb, arr.shape[1]))
    nb, factors, tol = compress_tiles(arr.shape, lambda r, c: arr[r, c], nb, tol, rank, dtype,
                                      seed, n_threads, progress, norm2=norm2, check=False)
    return assemble(cls, arr.shape, nb, factors, dtype, tol)



def from_function(cls, f: Callable, shape, nb, tol, rank, dtype, seed, n_threads, progress):
    """``TLRMatrix.from_function``."""
    if not callable(f):
        raise TypeError(f"f must be callable f(rows, cols) -> block, got {describe(f)}")
    m, n = check_shape(shape)
    dtype = storage_dtype(dtype)
    nb, factors, tol = compress_tiles((m, n), f, nb, tol, rank, dtype, seed, n_threads,
                                      progress, norm2=None, check=True)
    return assemble(cls, (m, n), nb, factors, dtype, tol)


def assemble(cls, shape, nb, factors, dtype, tol):
    """A ``cls`` holding ``factors`` (``{(i, j): (U_ij, V_ij)}``, checked) in the kernel
    layout."""
    m, n = shape
    rp, cp = tile_bounds(m, nb), tile_bounds(n, nb)
    ntr, ntc = len(rp) - 1, len(cp) - 1
    ranks = np.zeros((ntr, ntc), dtype=np.int64)
    for (i, j), (Uij, _) in factors.items():
        ranks[i, j] = Uij.shape[1]
    T = cls.__new__(cls)
    T.shape, T.nb, T.tol = (m, n), nb, tol
    T.row_ptr, T.col_ptr = rp, cp
    T.ranks = ranks
    T.ranks.setflags(write=False)
    T._layout()
    U = aligned_empty(T._u_size, dtype)
    V = aligned_empty(T._v_size, dtype)
    h, w = np.diff(rp), np.diff(cp)
    Kc, Kr = ranks.sum(axis=0), ranks.sum(axis=1)
    # (stacks of rank 0 hold nothing: skipped, as numpy refused to reshape an empty one
    # of 2**61 rows, "array is too big", naming no argument)
    for j in np.flatnonzero(Kc):
        blk = V[T.v_off[j]:T.v_off[j + 1]].reshape(w[j], Kc[j])
        for i in range(ntr):
            if ranks[i, j]:
                s = T._yv_start[i, j] - T.kcol_ptr[j]
                blk[:, s:s + ranks[i, j]] = factors[(i, j)][1]
    for i in np.flatnonzero(Kr):
        blk = U[T.u_off[i]:T.u_off[i + 1]].reshape(Kr[i], h[i])
        for j in range(ntc):
            if ranks[i, j]:
                s = T._yu_start[i, j] - T.krow_ptr[i]
                blk[s:s + ranks[i, j], :] = factors[(i, j)][0].T
    T.U, T.V, T.dtype = U, V, np.dtype(dtype)
    T._cast_cache = {}
    return T

