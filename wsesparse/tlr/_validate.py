"""Argument checks of the TLR builders and products, and the dtypes they settle on.

Each check returns the normalised value or raises a TypeError/ValueError that
names the argument; :func:`kernel_dtype` is also what ``wsesparse.dask`` uses
to pick the dtype of a TLR product.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from wsesparse._checks import (KERNEL_DTYPES, check_int, check_numeric_dtype, check_real,
                               check_seed, describe)

__all__ = ["check_nb", "check_tol", "check_tol_metadata", "kernel_dtype", "storage_dtype",
           "check_seed", "check_shape", "check_magnitude", "reject_sparse", "rounding_slack",
           "tile_factors", "work_dtype"]


def check_nb(nb) -> int:
    """The tile size: a positive int that ``TLRMatrix.save`` can write (an int64)."""
    nb = check_int(nb, "nb", minimum=1)
    if nb >= 2**63:
        raise ValueError(f"nb must be a positive int below 2**63, got {nb}")
    return nb


def check_tol_metadata(tol) -> float | None:
    """The ``tol`` a matrix records (from_tiles, the constructor, load): None, or a finite
    real >= 0 as a float, so that ``save`` writes it and ``load`` reads it back."""
    if tol is None:
        return None
    return check_real(tol, "tol", minimum=0)


def check_tol(tol, dtype: np.dtype, max_rank: int) -> float:
    """``tol`` as a float in (0, 1) that ``dtype`` bases of tiles of rank up to
    ``max_rank`` (the shorter side of the largest tile) can honour."""
    tol = check_real(tol, "tol", minimum=0, maximum=1, inclusive=(False, False))
    floor = 10.0 * rounding_slack(dtype, max_rank)
    if tol < floor:
        raise ValueError(
            f"tol={tol:g} is below what {np.dtype(dtype)} bases can hold for tiles of rank "
            f"up to {max_rank} "
            f"(rounding the factors alone costs about {floor / 10:.1e}); use tol >= {floor:.1e}"
            + (" or a double-precision dtype" if np.dtype(dtype).itemsize
               < (16 if np.dtype(dtype).kind == "c" else 8) else "")
        )
    return tol


def kernel_dtype(dtype, name: str) -> np.dtype:
    """The kernel dtype for ``dtype``: itself if float32/64 or complex64/128, float64 for
    bool, ints and float16, else TypeError naming ``name``."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a numpy dtype or its name, got {dtype!r}") from None
    check_numeric_dtype(dtype, name)
    if not dtype.isnative:  # big-endian data (FITS, HDF5, np.load): the native equivalent
        dtype = dtype.newbyteorder("=")
    if dtype in KERNEL_DTYPES:
        return dtype
    if dtype.kind in "biu" or dtype == np.float16:
        return np.dtype(np.float64)
    raise TypeError(
        f"{name} has dtype {dtype}; TLR matrices are float32, float64, complex64 or complex128"
    )


def storage_dtype(dtype) -> np.dtype:
    """An explicit ``dtype=`` argument: one of the four kernel dtypes, nothing converted."""
    dt = kernel_dtype(dtype, "dtype")
    if dt != np.dtype(dtype).newbyteorder("="):
        raise TypeError(f"dtype must be float32, float64, complex64 or complex128, got {dtype!r}")
    return dt


def check_shape(shape) -> tuple[int, int]:
    """``shape`` as a pair of positive ints, or TypeError/ValueError naming it."""
    try:
        ok = len(shape) == 2 and all(isinstance(v, numbers.Integral)
                                     and not isinstance(v, bool) for v in shape)
    except TypeError:
        ok = False
    if not ok:
        raise TypeError(f"shape must be a pair of ints, got {shape!r}")
    m, n = int(shape[0]), int(shape[1])
    if m <= 0 or n <= 0:
        raise ValueError(f"shape must be positive, got {shape!r}")
    return m, n


# Squared norms are accumulated in float64: values must keep their squares
# (and tol**2 times those) normal and their sums finite.
_MAG_MIN, _MAG_MAX = 1e-100, 1e150


def check_magnitude(amax: float, norm2: float, what: str, dtype=None, width: int = 1) -> None:
    """ValueError naming ``what`` unless its largest magnitude ``amax`` (0: all zeros) lets
    the compression account squared norms in float64 and, with ``dtype``, store the factors
    of tiles at most ``width`` wide in that dtype: a stored ``U_ij * sigma`` entry can reach
    ``amax * sqrt(width)`` (a constant tile), which must stay finite, and ``amax`` must be
    far enough above the subnormal range that rounding the factors there stays within the
    reserve of :func:`rounding_slack` (only float32/complex64 narrow the float64 range)."""
    lo, hi = _MAG_MIN, _MAG_MAX
    if dtype is not None:
        fi = np.finfo(np.dtype(dtype))
        lo = max(lo, float(fi.tiny) / float(fi.eps))
        hi = min(hi, float(fi.max) / (2.0 * float(np.sqrt(max(width, 1)))))
    if amax and (amax < lo or amax > hi or not np.isfinite(norm2)):
        single = hi < _MAG_MAX
        where = f" and stores the factors in {np.dtype(dtype)}" if single else ""
        raise ValueError(f"{what} has entries of magnitude up to {amax:.3g}; compression "
                         f"accounts squared norms in float64{where}, which needs max |A| in "
                         f"[{lo:.3g}, {hi:.3g}] and a finite ||A||_F^2: rescale A"
                         + (" or store it in double precision" if single else ""))


def reject_sparse(x, name: str) -> None:
    if hasattr(x, "format") and hasattr(x, "tocsr"):  # scipy.sparse, without importing it
        raise TypeError(f"{name} must be a dense array, got {describe(x)} (use .toarray())")


def rounding_slack(dtype: np.dtype, nb: int) -> float:
    """Relative Frobenius error of storing rank-<=nb factors in ``dtype``.

    Rounding U (scaled by the singular values) and V elementwise perturbs a
    tile by at most about eps * (1 + sqrt(k)) * ||A_ij||_F; twice that is kept
    in reserve so the guarantee also holds for the stored (rounded) factors.
    """
    eps = np.finfo(np.dtype(dtype)).eps
    return 2.0 * eps * (1.0 + np.sqrt(nb))


def work_dtype(dtype: np.dtype) -> np.dtype:
    # Compression runs in double precision: the error accounting subtracts
    # norms of nearly equal size, which single precision cannot resolve at tol=1e-3.
    return np.dtype(np.complex128) if dtype.kind == "c" else np.dtype(np.float64)


def tile_factors(tiles, rp: np.ndarray, cp: np.ndarray, nb: int) -> dict:
    """The checked factors ``{(i, j): (U_ij, V_ij)}`` of ``TLRMatrix.from_tiles``' ``tiles``
    (a dict, or a callable of ``(i, j)``; None or a missing key: rank 0) on the tile grid
    of bounds ``rp`` x ``cp``: keys in the grid, U of (h_i, k) and V of (w_j, k) with
    k <= min(h_i, w_j), numeric and finite; else ValueError or TypeError naming the tile."""
    ntr, ntc = len(rp) - 1, len(cp) - 1
    if callable(tiles):
        get = tiles
    elif not isinstance(tiles, Mapping):
        raise TypeError(f"tiles must be a dict of (i, j): (U, V) or a callable of (i, j), "
                        f"got {describe(tiles)}")
    else:
        for key in tiles:
            if not (isinstance(key, tuple) and len(key) == 2
                    and all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                            for v in key)
                    and 0 <= key[0] < ntr and 0 <= key[1] < ntc):
                raise ValueError(f"tiles has key {key!r}; keys are (i, j) with 0 <= i < "
                                 f"{ntr} and 0 <= j < {ntc} (the tile grid in tiles of {nb})")
        get = lambda i, j: tiles.get((i, j))  # noqa: E731
    factors = {}
    for i in range(ntr):
        for j in range(ntc):
            f = get(i, j)
            if f is None:
                continue
            Uij, Vij = np.asarray(f[0]), np.asarray(f[1])
            hh, ww = rp[i + 1] - rp[i], cp[j + 1] - cp[j]
            if Uij.ndim != 2 or Vij.ndim != 2 or Uij.shape[0] != hh or Vij.shape[0] != ww \
                    or Uij.shape[1] != Vij.shape[1]:
                raise ValueError(f"tile ({i}, {j}) needs U of shape ({hh}, k) and V of shape "
                                 f"({ww}, k), got U {describe(Uij)}, V {describe(Vij)}")
            if Uij.shape[1] > min(hh, ww):
                raise ValueError(f"tile ({i}, {j}) of {hh} x {ww} has factors of rank "
                                 f"{Uij.shape[1]}; at most {min(hh, ww)}")
            check_numeric_dtype(Uij.dtype, f"U of tile ({i}, {j})")
            check_numeric_dtype(Vij.dtype, f"V of tile ({i}, {j})")
            if not (np.isfinite(Uij).all() and np.isfinite(Vij).all()):
                raise ValueError(f"the factors of tile ({i}, {j}) contain NaN or inf")
            factors[(i, j)] = (Uij, Vij)
    return factors
