"""Tile low-rank (TLR) matrices and the three-phase TLR-MVM.

A dense but data-sparse matrix A (m x n) is cut into nb x nb tiles (the last
tile row and column are as large as what is left) and every tile is replaced
by a low-rank product ``U_ij @ V_ij.T`` with its own rank ``k_ij``. The
product ``y = A x`` then runs in three memory-bound phases (see
``_kernels/_tlrmvm.pyx``): stacked-V GEMV per tile column, a reshuffle, and
stacked-U GEMV per tile row. This is the operator format of seismic
multi-dimensional deconvolution and of the 92.58 PB/s TLR-MVM run on 48 CS-2
systems (see ``wsesparse.wafer.tlr`` for the wafer mapping).

Accuracy: :meth:`TLRMatrix.from_dense` and :meth:`TLRMatrix.from_function`
guarantee ``||A - T.toarray()||_F <= tol * ||A||_F`` for the *whole* matrix.
The error budget is spread over the tiles by a global greedy: every tile gets
a randomized (or, when that is not cheaper, full) SVD, and singular values are
dropped across all tiles in increasing order of "energy removed per byte
saved" until the budget is spent. This keeps fewer bytes than giving every
tile the same relative tolerance.
"""

from __future__ import annotations

import numbers
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy import linalg as sla
from scipy.sparse.linalg import LinearOperator

from wsesparse._checks import (KERNEL_DTYPES, check_allocation, check_array_allocation,
                               check_numeric_dtype, describe)
from wsesparse._progress import Progress, progress_enabled
from wsesparse._threads import resolve_n_threads
from wsesparse._kernels import _tlrmvm

__all__ = ["TLRMatrix", "TLRBatch"]

# Randomized range finder: columns added per step. 16 keeps the QR and the
# two GEMMs per step BLAS-3 while overshooting the needed rank by little.
_BLOCK = 16
# Fraction of the error budget the range finders may leave behind (their
# residual ||A_ij - Q Q^H A_ij|| is unavoidable); the rest goes to the global
# truncation, which is where the bytes are saved.
_RANGE_FRACTION = 0.1
# Byte alignment of the stacked bases (a cache line / one AVX-512 register).
_ALIGN = 64
# Python objects per tile during compression (key, seed sequence, factor
# arrays), measured at ~1 KiB even for rank 0: bounds the tile count.
_TILE_OVERHEAD_BYTES = 1024


# --------------------------------------------------------------------------- checks

def _check_nb(nb) -> int:
    if isinstance(nb, bool) or not isinstance(nb, numbers.Integral):
        raise TypeError(f"nb must be a positive int (tile size), got {nb!r}")
    if nb <= 0:
        raise ValueError(f"nb must be a positive int (tile size), got {nb}")
    return int(nb)


def _check_tol(tol, dtype: np.dtype, nb: int) -> float:
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise TypeError(f"tol must be a float in (0, 1), got {tol!r}")
    tol = float(tol)
    if not (0.0 < tol < 1.0):
        raise ValueError(f"tol must be a float in (0, 1), got {tol}")
    floor = 10.0 * _rounding_slack(dtype, nb)
    if tol < floor:
        raise ValueError(
            f"tol={tol:g} is below what {np.dtype(dtype)} bases can hold at nb={nb} "
            f"(rounding the factors alone costs about {floor / 10:.1e}); use tol >= {floor:.1e} "
            "or a double-precision dtype"
        )
    return tol


def _check_rank(rank) -> int:
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank must be a positive int, got {rank!r}")
    if rank <= 0:
        raise ValueError(f"rank must be a positive int, got {rank}")
    return int(rank)


def _kernel_dtype(dtype, name: str) -> np.dtype:
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a numpy dtype or its name, got {dtype!r}") from None
    check_numeric_dtype(dtype, name)
    if dtype in KERNEL_DTYPES:
        return dtype
    if dtype.kind in "biu" or dtype == np.float16:
        return np.dtype(np.float64)
    raise TypeError(
        f"{name} has dtype {dtype}; TLR matrices are float32, float64, complex64 or complex128"
    )


def _storage_dtype(dtype) -> np.dtype:
    """An explicit ``dtype=`` argument: one of the four kernel dtypes, nothing converted."""
    dt = _kernel_dtype(dtype, "dtype")
    if dt != np.dtype(dtype):
        raise TypeError(f"dtype must be float32, float64, complex64 or complex128, got {dtype!r}")
    return dt


def _check_seed(seed):
    try:
        np.random.SeedSequence(seed)
    except (TypeError, ValueError):
        raise TypeError(f"seed must be None or a nonnegative int, got {seed!r}") from None
    return seed


def _check_shape(shape) -> tuple[int, int]:
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


def _check_magnitude(amax: float, norm2: float, what: str) -> None:
    if amax and (amax < _MAG_MIN or amax > _MAG_MAX or not np.isfinite(norm2)):
        raise ValueError(f"{what} has entries of magnitude up to {amax:.3g}; compression "
                         f"accounts squared norms in float64 and needs max |A| in "
                         f"[{_MAG_MIN:g}, {_MAG_MAX:g}] and a finite ||A||_F^2: rescale A")


def _reject_sparse(x, name: str) -> None:
    if hasattr(x, "format") and hasattr(x, "tocsr"):  # scipy.sparse, without importing it
        raise TypeError(f"{name} must be a dense array, got {describe(x)} (use .toarray())")


def _rounding_slack(dtype: np.dtype, nb: int) -> float:
    """Relative Frobenius error of storing rank-<=nb factors in ``dtype``.

    Rounding U (scaled by the singular values) and V elementwise perturbs a
    tile by at most about eps * (1 + sqrt(k)) * ||A_ij||_F; twice that is kept
    in reserve so the guarantee also holds for the stored (rounded) factors.
    """
    eps = np.finfo(np.dtype(dtype)).eps
    return 2.0 * eps * (1.0 + np.sqrt(nb))


def _work_dtype(dtype: np.dtype) -> np.dtype:
    # Compression runs in double precision: the error accounting subtracts
    # norms of nearly equal size, which single precision cannot resolve at tol=1e-3.
    return np.dtype(np.complex128) if dtype.kind == "c" else np.dtype(np.float64)


def _aligned_empty(n: int, dtype: np.dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    raw = np.empty(n * dtype.itemsize + _ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % _ALIGN
    return raw[start:start + n * dtype.itemsize].view(dtype)


def _tile_bounds(size: int, nb: int) -> np.ndarray:
    return np.append(np.arange(0, size, nb, dtype=np.int64), np.int64(size))


# ------------------------------------------------------------ per-tile factorizations

def _gaussian(rng: np.random.Generator, shape, complex_: bool) -> np.ndarray:
    if complex_:
        # real and imaginary parts interleaved in one draw
        return rng.standard_normal((shape[0], 2 * shape[1])).view(np.complex128)
    return rng.standard_normal(shape)


def _svd_factors(A: np.ndarray):
    U, s, Vh = sla.svd(A, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    return U, s, Vh, 0.0


def _adaptive_factors(A: np.ndarray, stop2: float, rng: np.random.Generator):
    """Factor a tile to residual^2 <= stop2: ``A ~ U diag(s) Vh`` plus exact residual^2.

    Randomized blocked range finder (Halko, Martinsson & Tropp 2011, Alg. 4.2
    with blocks): add ``_BLOCK`` orthonormal directions at a time until
    ``||A - Q Q^H A||_F^2 <= stop2``, then an SVD of the small ``Q^H A``.
    Falls back to a full SVD when the rank gets close to half the tile size,
    where the randomized steps stop being cheaper.
    """
    h, w = A.shape
    kmax = min(h, w)
    norm2 = float(np.vdot(A, A).real)
    if norm2 <= stop2:
        return np.zeros((h, 0), A.dtype), np.zeros(0), np.zeros((0, w), A.dtype), norm2
    if kmax <= 4 * _BLOCK:
        return _svd_factors(A)
    complex_ = A.dtype.kind == "c"
    Q = np.zeros((h, 0), A.dtype)
    B = np.zeros((0, w), A.dtype)
    res2 = norm2
    while res2 > stop2:
        if Q.shape[1] + _BLOCK > kmax // 2:
            return _svd_factors(A)
        Y = A @ _gaussian(rng, (w, _BLOCK), complex_)
        if Q.shape[1]:
            # Block Gram-Schmidt twice ("twice is enough") keeps Q orthonormal.
            Y -= Q @ (Q.conj().T @ Y)
            Y -= Q @ (Q.conj().T @ Y)
        Qb, _ = np.linalg.qr(Y)
        Bb = Qb.conj().T @ A
        Q = np.hstack([Q, Qb])
        B = np.vstack([B, Bb])
        res2 -= float(np.vdot(Bb, Bb).real)
    # The running residual came from subtractions; recompute it directly so
    # the accounting is exact to rounding.
    R = A - Q @ B
    res2 = float(np.vdot(R, R).real)
    # SVD of the short, wide B through a QR of B^H: LAPACK's SVD of a k x w
    # matrix costs about 20x more here than QR plus a k x k SVD.
    Qh, Rh = np.linalg.qr(B.conj().T)
    Ub, s, Vrh = np.linalg.svd(Rh.conj().T)
    return Q @ Ub, s, Vrh @ Qh.conj().T, res2


def _fixed_rank_factors(A: np.ndarray, rank: int, rng: np.random.Generator):
    h, w = A.shape
    r = min(rank, h, w)
    p = r + 10
    if 2 * p >= min(h, w):
        U, s, Vh, _ = _svd_factors(A)
    else:
        # Randomized SVD with oversampling 10 and two power iterations.
        Q, _ = np.linalg.qr(A @ _gaussian(rng, (w, p), A.dtype.kind == "c"))
        for _ in range(2):
            Q, _ = np.linalg.qr(A.conj().T @ Q)
            Q, _ = np.linalg.qr(A @ Q)
        Ub, s, Vh = sla.svd(Q.conj().T @ A, full_matrices=False, check_finite=False)
        U = Q @ Ub
    return U[:, :r], s[:r], Vh[:r]


def _n_workers(n_threads: int | None) -> int:
    return resolve_n_threads(n_threads)


def _map_tiles(func, items: Sequence, n_threads: int | None, progress: Progress):
    """Run ``func`` over tiles on a thread pool (numpy/LAPACK release the GIL).

    BLAS is held to one thread meanwhile: small-tile GEMMs gain nothing from
    BLAS threads, and two levels of threads would oversubscribe the cores.
    """
    from threadpoolctl import threadpool_limits

    workers = _n_workers(n_threads)
    out = []
    with threadpool_limits(1, user_api="blas"):
        if workers == 1:
            for it in items:
                out.append(func(it))
                progress.step()
        else:
            with ThreadPoolExecutor(workers) as pool:
                for res in pool.map(func, items):
                    out.append(res)
                    progress.step()
    return out


# ------------------------------------------------------------------- the matrix

class TLRMatrix:
    """A tile low-rank matrix stored for the three-phase TLR-MVM.

    Build one with :meth:`from_dense`, :meth:`from_function` or
    :meth:`from_tiles`; the constructor itself takes the kernel layout and is
    used by those and by :meth:`load`.

    Parameters
    ----------
    shape : (int, int)
        ``(m, n)``.
    nb : int
        Tile size; tile row i covers rows ``i*nb : min((i+1)*nb, m)``.
    ranks : ndarray of int64, shape (ceil(m/nb), ceil(n/nb))
        Rank of every tile.
    U, V : 1-D ndarray
        The stacked bases in the kernel layout (see ``_kernels/_tlrmvm.pyx``):
        ``V`` holds, per tile column j, ``[V_0j, V_1j, ...]`` as a row-major
        (w_j, sum_i k_ij) block; ``U`` holds, per tile row i,
        ``[U_i0, U_i1, ...]`` in column-major order.
    tol : float or None
        The accuracy the matrix was built with (metadata).

    Attributes
    ----------
    perm : ndarray of int64
        The precomputed phase-2 permutation: ``yu = yv[perm]``.

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRMatrix
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((600, 12)) @ rng.standard_normal((12, 500))
    >>> T = TLRMatrix.from_dense(A, nb=128, tol=1e-6)
    >>> T.shape, bool(T.ranks.max() <= 12)
    ((600, 500), True)
    >>> x = rng.standard_normal(500)
    >>> bool(np.allclose(T @ x, A @ x))
    True
    >>> bool(np.linalg.norm(A - T.toarray()) <= 1e-6 * np.linalg.norm(A))
    True
    """

    # ndarray @ TLRMatrix raises a TypeError instead of numpy treating T as an object scalar.
    __array_ufunc__ = None

    def __init__(self, shape: tuple[int, int], nb: int, ranks: np.ndarray,
                 U: np.ndarray, V: np.ndarray, tol: float | None = None):
        m, n = _check_shape(shape)
        nb = _check_nb(nb)
        U, V = np.asarray(U), np.asarray(V)
        self.shape = (m, n)
        self.nb = nb
        self.tol = tol
        self.row_ptr = _tile_bounds(m, nb)
        self.col_ptr = _tile_bounds(n, nb)
        ranks = np.asarray(ranks)
        grid = (len(self.row_ptr) - 1, len(self.col_ptr) - 1)
        if ranks.shape != grid or ranks.dtype.kind not in "iu" or (ranks < 0).any():
            raise ValueError(f"ranks must be a nonnegative int array of shape {grid}, "
                             f"got {describe(ranks)}")
        h = np.diff(self.row_ptr)
        w = np.diff(self.col_ptr)
        if (ranks > np.minimum.outer(h, w)).any():
            raise ValueError("ranks exceed the size of their tiles")
        self.ranks = ranks.astype(np.int64)
        self.ranks.setflags(write=False)
        dtype = np.dtype(U.dtype)
        if dtype not in KERNEL_DTYPES or V.dtype != dtype:
            raise TypeError(f"U and V must share one of {[str(d) for d in KERNEL_DTYPES]}, "
                            f"got U {describe(U)}, V {describe(V)}")
        self._layout()
        if U.shape != (self._u_size,) or V.shape != (self._v_size,):
            raise ValueError(f"U and V must be 1-D of lengths {self._u_size} and {self._v_size}, "
                             f"got U {describe(U)}, V {describe(V)}")
        self.U = U if (U.flags.c_contiguous and U.ctypes.data % _ALIGN == 0) else _copy_aligned(U)
        self.V = V if (V.flags.c_contiguous and V.ctypes.data % _ALIGN == 0) else _copy_aligned(V)
        self.dtype = dtype
        self._cast_cache: dict[np.dtype, tuple[np.ndarray, np.ndarray]] = {}

    def _layout(self) -> None:
        """Offsets of the stacked bases and the phase-2 permutation (from the ranks)."""
        R = self.ranks
        h = np.diff(self.row_ptr)
        w = np.diff(self.col_ptr)
        Kc = R.sum(axis=0)
        Kr = R.sum(axis=1)
        self.kcol_ptr = np.concatenate([[0], np.cumsum(Kc)]).astype(np.int64)
        self.krow_ptr = np.concatenate([[0], np.cumsum(Kr)]).astype(np.int64)
        self.v_off = np.concatenate([[0], np.cumsum(Kc * w)]).astype(np.int64)
        self.u_off = np.concatenate([[0], np.cumsum(Kr * h)]).astype(np.int64)
        self._v_size = int(self.v_off[-1])
        self._u_size = int(self.u_off[-1])
        # Tile (i, j) starts at yv_start[i, j] in tile-column order and at
        # yu_start[i, j] in tile-row order.
        self._yv_start = self.kcol_ptr[:-1][None, :] + np.cumsum(R, axis=0) - R
        self._yu_start = self.krow_ptr[:-1][:, None] + np.cumsum(R, axis=1) - R
        K = int(self.kcol_ptr[-1])
        perm = np.empty(K, dtype=np.int64)
        flat = R.ravel()
        starts_u = np.repeat(self._yu_start.ravel(), flat)
        starts_v = np.repeat(self._yv_start.ravel(), flat)
        within = np.arange(K) - np.repeat(np.cumsum(flat) - flat, flat)
        perm[starts_u + within] = starts_v + within
        self.perm = perm

    # ---------------------------------------------------------------- builders
    @classmethod
    def from_tiles(cls, shape: tuple[int, int], nb: int,
                   tiles: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | Callable,
                   dtype=None, tol: float | None = None) -> "TLRMatrix":
        """Assemble from given factors: tile (i, j) is ``U_ij @ V_ij.T``.

        Parameters
        ----------
        shape : (int, int)
        nb : int
        tiles : dict or callable
            ``tiles[(i, j)]`` (or ``tiles(i, j)``) is a pair ``(U_ij, V_ij)``
            of shapes (h_i, k) and (w_j, k); missing dict keys mean rank 0.
        dtype : dtype, optional
            Storage dtype; default: the common dtype of the factors.

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> T = TLRMatrix.from_tiles((3, 3), 2, {(0, 0): (np.ones((2, 1)), np.ones((2, 1)))})
        >>> T.toarray()
        array([[1., 1., 0.],
               [1., 1., 0.],
               [0., 0., 0.]])
        """
        nb = _check_nb(nb)
        m, n = _check_shape(shape)
        rp, cp = _tile_bounds(m, nb), _tile_bounds(n, nb)
        get = tiles if callable(tiles) else (lambda i, j: tiles.get((i, j)))
        factors = {}
        for i in range(len(rp) - 1):
            for j in range(len(cp) - 1):
                f = get(i, j)
                if f is None:
                    continue
                Uij, Vij = np.asarray(f[0]), np.asarray(f[1])
                hh, ww = rp[i + 1] - rp[i], cp[j + 1] - cp[j]
                if Uij.ndim != 2 or Vij.ndim != 2 or Uij.shape[0] != hh or Vij.shape[0] != ww \
                        or Uij.shape[1] != Vij.shape[1]:
                    raise ValueError(f"tile ({i}, {j}) needs U of shape ({hh}, k) and V of shape "
                                     f"({ww}, k), got U {describe(Uij)}, V {describe(Vij)}")
                check_numeric_dtype(Uij.dtype, f"U of tile ({i}, {j})")
                check_numeric_dtype(Vij.dtype, f"V of tile ({i}, {j})")
                if not (np.isfinite(Uij).all() and np.isfinite(Vij).all()):
                    raise ValueError(f"the factors of tile ({i}, {j}) contain NaN or inf")
                factors[(i, j)] = (Uij, Vij)
        if dtype is None:
            dtype = np.result_type(*([f for uv in factors.values() for f in uv] or [np.float64]))
        dtype = _kernel_dtype(dtype, "dtype")
        return cls._assemble((m, n), nb, factors, dtype, tol)

    @classmethod
    def _assemble(cls, shape, nb, factors, dtype, tol):
        m, n = shape
        rp, cp = _tile_bounds(m, nb), _tile_bounds(n, nb)
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
        U = _aligned_empty(T._u_size, dtype)
        V = _aligned_empty(T._v_size, dtype)
        h, w = np.diff(rp), np.diff(cp)
        Kc, Kr = ranks.sum(axis=0), ranks.sum(axis=1)
        for j in range(ntc):
            blk = V[T.v_off[j]:T.v_off[j + 1]].reshape(w[j], Kc[j])
            for i in range(ntr):
                if ranks[i, j]:
                    s = T._yv_start[i, j] - T.kcol_ptr[j]
                    blk[:, s:s + ranks[i, j]] = factors[(i, j)][1]
        for i in range(ntr):
            blk = U[T.u_off[i]:T.u_off[i + 1]].reshape(Kr[i], h[i])
            for j in range(ntc):
                if ranks[i, j]:
                    s = T._yu_start[i, j] - T.krow_ptr[i]
                    blk[s:s + ranks[i, j], :] = factors[(i, j)][0].T
        T.U, T.V, T.dtype = U, V, np.dtype(dtype)
        T._cast_cache = {}
        return T

    @classmethod
    def from_dense(cls, A, nb: int = 256, tol: float | None = 1e-3, *, rank: int | None = None,
                   dtype=None, seed: int | None = 0, n_threads: int | None = None,
                   progress: bool | None = False) -> "TLRMatrix":
        """Compress a dense matrix tile by tile.

        Parameters
        ----------
        A : array_like, shape (m, n)
            float32, float64, complex64 or complex128 (integers become
            float64); must be finite.
        nb : int, default 256
            Tile size. A value larger than the matrix gives a single tile.
        tol : float in (0, 1), default 1e-3
            Whole-matrix relative accuracy: ``||A - T.toarray()||_F <= tol *
            ||A||_F`` is guaranteed (computed in double precision, with a
            reserve for rounding the stored factors to ``dtype``). Must not
            be below about ``20 * eps(dtype) * sqrt(nb)``.
        rank : int, optional
            Fixed rank per tile instead of a tolerance (``tol`` is then
            ignored; no accuracy guarantee).
        dtype : dtype, optional
            Storage dtype; default ``A.dtype``.
        seed : int or None
            Seed of the randomized range finders (the result does not depend
            on the number of threads).
        n_threads : int, optional
            Threads compressing tiles in parallel; default all cores.
        progress : bool or None
            Print a progress bar over the tiles to stderr (tqdm's if installed);
            None: only when stderr is a terminal. Default False.

        Returns
        -------
        TLRMatrix

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> from wsesparse.datasets import seismic_slice
        >>> A = seismic_slice(nx=20, ny=20, order="hilbert")
        >>> T = TLRMatrix.from_dense(A, nb=100, tol=1e-3)
        >>> bool(np.linalg.norm(A - T.toarray()) <= 1e-3 * np.linalg.norm(A))
        True
        >>> bool(T.compression_ratio > 1)
        True
        """
        if A is None or np.isscalar(A):
            raise TypeError(f"A must be a 2-D array, got {describe(A)}")
        _reject_sparse(A, "A")
        arr = np.asarray(A)
        check_numeric_dtype(arr.dtype, "A")
        if arr.ndim != 2:
            raise ValueError(f"A must be 2-D, got {describe(arr)}")
        if arr.size == 0:
            raise ValueError(f"A must not be empty, got {describe(arr)}")
        dtype = _kernel_dtype(arr.dtype, "A") if dtype is None else _storage_dtype(dtype)
        if arr.dtype.kind == "c" and dtype.kind != "c":
            raise TypeError(f"A is complex ({describe(arr)}) but dtype={dtype} is real; "
                            "storing it would drop the imaginary part")
        if not np.isfinite(arr).all():
            raise ValueError(f"A contains NaN or inf ({describe(arr)}); a low-rank "
                             "approximation of non-finite values is undefined")
        wd = _work_dtype(dtype)
        with np.errstate(over="ignore", under="ignore"):  # judged by _check_magnitude
            norm2 = float(np.linalg.norm(arr.astype(wd, copy=False)) ** 2) if arr.size < 2**26 \
                else float(sum(np.linalg.norm(arr[r:r + 4096].astype(wd)) ** 2
                               for r in range(0, arr.shape[0], 4096)))
        _check_magnitude(float(np.abs(arr).max()), norm2, "A")
        return cls._compress(arr.shape, lambda r, c: arr[r, c], nb, tol, rank, dtype, seed,
                             n_threads, progress, norm2=norm2, check=False)

    @classmethod
    def from_function(cls, f: Callable[[slice, slice], np.ndarray], shape: tuple[int, int],
                      nb: int = 256, tol: float | None = 1e-3, *, rank: int | None = None,
                      dtype=np.float64, seed: int | None = 0, n_threads: int | None = None,
                      progress: bool | None = False) -> "TLRMatrix":
        """Compress a matrix given by a tile generator, never holding it densely.

        Parameters
        ----------
        f : callable
            ``f(rows, cols)`` with two ``slice`` objects returns the dense block
            ``A[rows, cols]``. Called once per tile, possibly from several
            threads at once (it must be thread-safe).
        shape : (int, int)
        nb, tol, rank, seed, n_threads, progress
            As in :meth:`from_dense`. Without a global norm up front each
            tile's range finder aims at ``tol`` relative to its own norm; the
            final truncation still uses the whole-matrix budget, so the
            guarantee ``||A - T||_F <= tol ||A||_F`` holds.
        dtype : dtype, default float64
            Storage dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from wsesparse import TLRMatrix
        >>> f = lambda r, c: 1.0 / (1.0 + np.abs(np.arange(1000)[r, None] - np.arange(1000)[None, c]))
        >>> T = TLRMatrix.from_function(f, (1000, 1000), nb=200, tol=1e-4)
        >>> A = f(slice(0, 1000), slice(0, 1000))
        >>> bool(np.linalg.norm(A - T.toarray()) <= 1e-4 * np.linalg.norm(A))
        True
        """
        if not callable(f):
            raise TypeError(f"f must be callable f(rows, cols) -> block, got {describe(f)}")
        m, n = _check_shape(shape)
        dtype = _storage_dtype(dtype)
        return cls._compress((m, n), f, nb, tol, rank, dtype, seed, n_threads, progress,
                             norm2=None, check=True)

    @classmethod
    def _compress(cls, shape, get, nb, tol, rank, dtype, seed, n_threads, progress, norm2, check):
        nb = _check_nb(nb)
        if rank is not None:
            rank = _check_rank(rank)
        else:
            if tol is None:
                raise TypeError("give tol (accuracy) or rank (fixed rank)")
            tol = _check_tol(tol, dtype, nb)
        seed = _check_seed(seed)
        m, n = shape
        n_tiles = -(-m // nb) * -(-n // nb)
        # Each tile costs ~1 KiB of Python objects (key, seed, factors) even at rank 0.
        check_allocation(n_tiles * _TILE_OVERHEAD_BYTES,
                         f"compressing a {m} x {n} matrix in {n_tiles:,} tiles of {nb} x {nb} "
                         f"(~{_TILE_OVERHEAD_BYTES} B of bookkeeping per tile)")
        rp, cp = _tile_bounds(m, nb), _tile_bounds(n, nb)
        ntr, ntc = len(rp) - 1, len(cp) - 1
        keys = [(i, j) for j in range(ntc) for i in range(ntr)]
        seeds = np.random.SeedSequence(seed).spawn(len(keys))
        wd = _work_dtype(dtype)
        n_tiles = len(keys)

        amaxes: list[float] = []   # max |f| per tile (list.append is thread-safe)

        def tile(idx: int):
            i, j = keys[idx]
            r, c = slice(int(rp[i]), int(rp[i + 1])), slice(int(cp[j]), int(cp[j + 1]))
            blk = np.asarray(get(r, c))
            if check:
                want = (r.stop - r.start, c.stop - c.start)
                if blk.shape != want:
                    raise ValueError(f"f({r}, {c}) returned {describe(blk)}, expected shape {want}")
                check_numeric_dtype(blk.dtype, "f(rows, cols)")
                if not np.isfinite(blk).all():
                    raise ValueError(f"f({r}, {c}) returned NaN or inf")
                if blk.dtype.kind == "c" and wd.kind != "c":
                    raise TypeError(f"f({r}, {c}) returned complex values but dtype={dtype} is "
                                    "real; storing them would drop the imaginary part")
                if blk.size:
                    amaxes.append(float(np.abs(blk).max()))
            blk = blk.astype(wd, copy=False)
            rng = np.random.default_rng(seeds[idx])
            if rank is not None:
                U, sv, Vh = _fixed_rank_factors(blk, rank, rng)
                return (U * sv).astype(dtype), sv, Vh.astype(dtype)
            t2 = float(np.vdot(blk, blk).real)
            if norm2 is None:
                stop2 = _RANGE_FRACTION * tol**2 * t2
            else:
                stop2 = 0.5 * _RANGE_FRACTION * tol**2 * (t2 + norm2 / n_tiles)
            U, sv, Vh, res2 = _adaptive_factors(blk, stop2, rng)
            # Keep the factors in the storage dtype right away (scaled by the
            # singular values, as stored): halves peak memory for complex64.
            return (U * sv).astype(dtype), sv, Vh.astype(dtype), res2, t2

        bar = Progress(n_tiles, progress_enabled(progress), label="compressing", unit="tiles")
        results = _map_tiles(tile, range(n_tiles), n_threads, bar)
        factors = {}
        if rank is not None:
            for key, (Us, sv, Vh) in zip(keys, results):
                if sv.size:
                    factors[key] = (Us, Vh.T)
            return cls._assemble((m, n), nb, factors, dtype, None)

        total2 = sum(r[4] for r in results) if norm2 is None else norm2
        if check:
            _check_magnitude(max(amaxes, default=0.0), total2, "the matrix given by f")
        keep = _allocate_ranks(results, keys, rp, cp, total2, tol, dtype, nb)
        for key, res, k in zip(keys, results, keep):
            if k:
                factors[key] = (res[0][:, :k], res[2][:k].T)
        return cls._assemble((m, n), nb, factors, dtype, tol)

    # --------------------------------------------------------------- products
    @property
    def H(self) -> "_TLRAdjoint":
        """The conjugate transpose as a lazy operator (shares the bases)."""
        return _TLRAdjoint(self)

    @property
    def T(self) -> "_TLRAdjoint":  # noqa: N802 - numpy's name
        """Transpose (= ``.H`` for real matrices); complex needs ``.H`` or conj."""
        if self.dtype.kind == "c":
            raise NotImplementedError("the plain transpose of a complex TLRMatrix is not "
                                      "provided; use .H (conjugate transpose)")
        return _TLRAdjoint(self)

    def _bases(self, dtype: np.dtype):
        if dtype == self.dtype:
            return self.U, self.V
        if dtype not in self._cast_cache:
            # Promotion to a wider dtype (e.g. float32 matrix @ float64 vector)
            # casts the bases once and keeps them.
            self._cast_cache[dtype] = (self.U.astype(dtype), self.V.astype(dtype))
        return self._cast_cache[dtype]

    def _apply(self, x, adjoint: bool, n_threads: int | None):
        m, n = self.shape
        n_in, n_out = (m, n) if adjoint else (n, m)
        name = "y" if adjoint else "x"
        if x is None or np.isscalar(x):
            raise TypeError(f"{name} must be a 1-D or 2-D array, got {describe(x)}")
        _reject_sparse(x, name)
        arr = np.asarray(x)
        check_numeric_dtype(arr.dtype, name)
        if arr.ndim not in (1, 2) or arr.shape[0] != n_in:
            op = "T.H" if adjoint else "T"
            shp = (n_out, n_in)
            raise ValueError(f"{op} @ {name}: {op} has shape {shp} but {name} is {describe(arr)}; "
                             f"{name} needs {n_in} rows")
        rt = np.result_type(self.dtype, arr.dtype)
        if rt not in KERNEL_DTYPES:
            rt = _kernel_dtype(rt, name)
        vec = arr.ndim == 1
        X = arr.reshape(n_in, -1)
        s = X.shape[1]
        # The kernel's copy of x, its output and two work arrays of K per rhs.
        check_allocation(s * (n_in + n_out + 2 * int(self.kcol_ptr[-1])) * rt.itemsize,
                         f"{'T.H' if adjoint else 'T'} @ {name} for {name} of shape {arr.shape} "
                         f"(result of shape {(n_out, s) if not vec else (n_out,)} and dtype {rt}, "
                         "work arrays)")
        if s == 0:
            return np.zeros((n_out, 0) if not vec else (n_out,), dtype=rt)
        if self.dtype.kind != "c" and rt.kind == "c":
            # Real matrix, complex vector: run the real kernel on [Re x, Im x]
            # as 2s right-hand sides instead of casting the bases to complex.
            real_t = np.finfo(rt).dtype
            Xs = np.concatenate([X.real, X.imag], axis=1).astype(real_t)
            Y2 = self._run(Xs, adjoint, real_t, n_threads)
            Y = Y2[:, :s] + 1j * Y2[:, s:]
            Y = Y.astype(rt, copy=False)
        else:
            Y = self._run(X.astype(rt, copy=False), adjoint, rt, n_threads)
        return Y[:, 0] if vec else Y

    def _run(self, X: np.ndarray, adjoint: bool, dtype: np.dtype, n_threads) -> np.ndarray:
        U, V = self._bases(dtype)
        m, n = self.shape
        s = X.shape[1]
        XT = np.ascontiguousarray(X.T)
        K = int(self.kcol_ptr[-1])
        YT = np.empty((s, n if adjoint else m), dtype=dtype)
        yv = np.empty((s, K), dtype=dtype)
        yu = np.empty((s, K), dtype=dtype)
        work = (self._u_size + self._v_size) * s
        nt = resolve_n_threads(n_threads, work)
        f = _tlrmvm.tlr_rmatmat if adjoint else _tlrmvm.tlr_matmat
        f(U, V, self.row_ptr, self.col_ptr, self.u_off, self.v_off, self.krow_ptr,
          self.kcol_ptr, self.perm, XT, YT, yv, yu, nt)
        return YT.T

    def matvec(self, x, n_threads: int | None = None) -> np.ndarray:
        """``A @ x`` for a vector (n,) or a block of right-hand sides (n, s)."""
        return self._apply(x, False, n_threads)

    matmat = matvec

    def rmatvec(self, y, n_threads: int | None = None) -> np.ndarray:
        """``A^H @ y`` (conjugate transpose) for (m,) or (m, s), same bases."""
        return self._apply(y, True, n_threads)

    rmatmat = rmatvec

    def __matmul__(self, x):
        if isinstance(x, (TLRMatrix, _TLRAdjoint)):
            return NotImplemented
        return self._apply(x, False, None)

    # ------------------------------------------------------------- inspection
    def tile(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Views ``(U_ij, V_ij)`` of tile (i, j), with ``A_ij ~ U_ij @ V_ij.T``."""
        h = self.row_ptr[i + 1] - self.row_ptr[i]
        w = self.col_ptr[j + 1] - self.col_ptr[j]
        k = self.ranks[i, j]
        Kr = self.krow_ptr[i + 1] - self.krow_ptr[i]
        Kc = self.kcol_ptr[j + 1] - self.kcol_ptr[j]
        ub = self.U[self.u_off[i]:self.u_off[i + 1]].reshape(Kr, h)
        vb = self.V[self.v_off[j]:self.v_off[j + 1]].reshape(w, Kc)
        su = self._yu_start[i, j] - self.krow_ptr[i]
        sv = self._yv_start[i, j] - self.kcol_ptr[j]
        return ub[su:su + k].T, vb[:, sv:sv + k]

    def toarray(self) -> np.ndarray:
        """The dense matrix ``sum_ij U_ij V_ij^T`` placed at its tiles.

        Raises MemoryError at once if it would not fit in the memory available.
        """
        check_array_allocation(self.shape, self.dtype, "TLRMatrix.toarray()")
        out = np.zeros(self.shape, dtype=self.dtype)
        for i in range(self.ranks.shape[0]):
            for j in range(self.ranks.shape[1]):
                if self.ranks[i, j]:
                    Uij, Vij = self.tile(i, j)
                    out[self.row_ptr[i]:self.row_ptr[i + 1],
                        self.col_ptr[j]:self.col_ptr[j + 1]] = Uij @ Vij.T
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the stacked U and V bases (what one TLR-MVM streams)."""
        return int(self.U.nbytes + self.V.nbytes)

    @property
    def dense_nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    @property
    def compression_ratio(self) -> float:
        """Dense bytes over TLR bytes (higher is better)."""
        return self.dense_nbytes / max(self.nbytes, 1)

    def mvm_bytes(self, n_rhs: int = 1) -> int:
        """Bytes one product moves by the bandwidth measure of the TLR-MVM record.

        The bases once plus the input and output vectors once:
        ``nbytes + (m + n) * itemsize * n_rhs``.
        """
        return self.nbytes + (self.shape[0] + self.shape[1]) * self.dtype.itemsize * n_rhs

    def aslinearoperator(self) -> LinearOperator:
        """A :class:`scipy.sparse.linalg.LinearOperator` with matvec and rmatvec.

        Examples
        --------
        >>> import numpy as np
        >>> from scipy.sparse.linalg import lsqr
        >>> from wsesparse import TLRMatrix
        >>> A = np.eye(300) + 0.01 * np.ones((300, 300))
        >>> op = TLRMatrix.from_dense(A, nb=64, tol=1e-8).aslinearoperator()
        >>> x = lsqr(op, A @ np.ones(300), atol=1e-12, btol=1e-12)[0]
        >>> bool(np.allclose(x, 1))
        True
        """
        return LinearOperator(self.shape, matvec=self.matvec, rmatvec=self.rmatvec,
                              matmat=self.matvec, rmatmat=self.rmatvec, dtype=self.dtype)

    def __repr__(self) -> str:
        return (f"<TLRMatrix {self.shape[0]}x{self.shape[1]} {self.dtype} nb={self.nb} "
                f"tiles={self.ranks.shape[0]}x{self.ranks.shape[1]} "
                f"ranks mean {self.ranks.mean():.1f} max {self.ranks.max()} "
                f"compression {self.compression_ratio:.1f}x>")

    # ------------------------------------------------------------ persistence
    def save(self, file) -> None:
        """Write to an ``.npz`` file (bases, ranks, shape, nb, tol)."""
        np.savez(file, U=self.U, V=self.V, ranks=self.ranks, shape=np.array(self.shape),
                 nb=np.array(self.nb), tol=np.array(np.nan if self.tol is None else self.tol),
                 format=np.array("wsesparse.TLRMatrix/1"))

    @classmethod
    def load(cls, file) -> "TLRMatrix":
        """Read what :meth:`save` wrote (the layout is rebuilt and checked).

        Raises
        ------
        FileNotFoundError, IsADirectoryError, PermissionError
            As ``open`` does for a path that cannot be read.
        ValueError
            Anything that is not an intact file written by :meth:`save`
            (empty, truncated, another format, missing or malformed fields,
            ranks or bases that do not fit together).
        """
        import os
        import zipfile

        if not isinstance(file, (str, bytes, os.PathLike)) and not hasattr(file, "read"):
            raise TypeError(f"file must be a path or a binary file object, got {describe(file)}")

        def bad(why: str) -> ValueError:
            return ValueError(f"{file!r} is not a TLRMatrix file written by TLRMatrix.save: {why}")

        try:
            z = np.load(file, allow_pickle=False)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            raise
        except (ValueError, EOFError, OSError, zipfile.BadZipFile) as exc:
            raise bad(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise bad(f"it holds a single {describe(z)}, not an .npz archive")
        with z:
            fields = ("format", "shape", "nb", "ranks", "U", "V", "tol")
            missing = [k for k in fields if k not in z.files]
            if missing:
                raise bad(f"missing {missing}" if "format" not in missing else "no format tag")
            try:
                d = {k: z[k] for k in fields}
            except (ValueError, EOFError, OSError, zipfile.BadZipFile) as exc:
                raise bad(f"{type(exc).__name__}: {exc}") from None
        if d["format"].shape != () or str(d["format"]) != "wsesparse.TLRMatrix/1":
            raise bad(f"format tag {d['format']!r}")
        shape, nb, tol = d["shape"], d["nb"], d["tol"]
        if shape.shape != (2,) or shape.dtype.kind not in "iu":
            raise bad(f"shape must be 2 ints, got {describe(shape)}")
        if nb.shape != () or nb.dtype.kind not in "iu":
            raise bad(f"nb must be one int, got {describe(nb)}")
        if tol.shape != () or tol.dtype.kind != "f":
            raise bad(f"tol must be one float, got {describe(tol)}")
        tol = float(tol)
        T = cls(tuple(int(v) for v in shape), int(nb), d["ranks"], d["U"], d["V"],
                None if np.isnan(tol) else tol)
        if not (np.isfinite(T.U).all() and np.isfinite(T.V).all()):
            raise bad("the bases contain NaN or inf")
        return T


def _copy_aligned(a: np.ndarray) -> np.ndarray:
    out = _aligned_empty(a.size, a.dtype)
    out[:] = a.ravel()
    return out


def _allocate_ranks(results, keys, rp, cp, total2, tol, dtype, nb) -> list[int]:
    """Global greedy truncation: the ranks that spend the error budget best.

    Dropping singular value l of tile t removes sigma_tl^2 of squared error
    and saves (h_t + w_t) stored numbers. Dropping in increasing order of
    sigma^2 / (h + w) over all tiles until the budget is spent is the greedy
    knapsack solution; within a tile this order drops the tail first (the
    sigma are sorted and the cost is the same), so every tile keeps a prefix.
    """
    slack = _rounding_slack(dtype, nb)
    allowed = (tol - slack) * np.sqrt(total2)
    budget = allowed**2 * (1.0 - 1e-9) - sum(r[3] for r in results)
    if budget < 0:  # cannot happen with _RANGE_FRACTION < 1; kept as a safety net
        raise RuntimeError("range finders used more than the error budget")
    sig2, cost, owner, pos = [], [], [], []
    for t, ((i, j), r) in enumerate(zip(keys, results)):
        s = r[1]
        if s.size:
            sig2.append(s.astype(np.float64) ** 2)
            c = float((rp[i + 1] - rp[i]) + (cp[j + 1] - cp[j]))
            cost.append(np.full(s.size, c))
            owner.append(np.full(s.size, t))
            pos.append(np.arange(s.size))
    keep = [r[1].size for r in results]
    if not sig2:
        return keep
    sig2 = np.concatenate(sig2)
    ratio = sig2 / np.concatenate(cost)
    owner = np.concatenate(owner)
    pos = np.concatenate(pos)
    # Ties: drop the later singular value of a tile first (keeps prefixes).
    order = np.lexsort((-pos, ratio))
    csum = np.cumsum(sig2[order])
    n_drop = int(np.searchsorted(csum, budget, side="right"))
    dropped = order[:n_drop]
    counts = np.bincount(owner[dropped], minlength=len(results))
    return [int(k - c) for k, c in zip(keep, counts)]


class _TLRAdjoint:
    """``T.H``: the conjugate transpose, applied with the same bases."""

    __array_ufunc__ = None

    def __init__(self, parent: TLRMatrix):
        self._p = parent
        self.shape = (parent.shape[1], parent.shape[0])
        self.dtype = parent.dtype

    @property
    def H(self) -> TLRMatrix:
        return self._p

    def matvec(self, y, n_threads: int | None = None) -> np.ndarray:
        return self._p.rmatvec(y, n_threads)

    def rmatvec(self, x, n_threads: int | None = None) -> np.ndarray:
        return self._p.matvec(x, n_threads)

    def __matmul__(self, y):
        return self._p.rmatvec(y)

    def toarray(self) -> np.ndarray:
        return self._p.toarray().conj().T

    def __repr__(self) -> str:
        return f"<adjoint of {self._p!r}>"


# ------------------------------------------------------------------------ batches

class TLRBatch:
    """Independent TLR matrices applied together (e.g. seismic frequency slices).

    Parameters
    ----------
    matrices : iterable of TLRMatrix

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRBatch
    >>> from wsesparse.datasets import seismic_slice
    >>> As = [seismic_slice(nx=12, ny=12, frequency=f) for f in (5.0, 8.0, 11.0)]
    >>> B = TLRBatch.from_dense(As, nb=48, tol=1e-3)
    >>> xs = [np.ones(144, dtype=np.complex64)] * 3
    >>> ys = B @ xs
    >>> bool(np.allclose(ys[1], B[1] @ xs[1]))
    True
    """

    def __init__(self, matrices: Iterable[TLRMatrix]):
        if isinstance(matrices, TLRMatrix) or not isinstance(matrices, Iterable):
            raise TypeError(f"matrices must be an iterable of TLRMatrix, got {describe(matrices)}")
        self.matrices = list(matrices)
        for k, T in enumerate(self.matrices):
            if not isinstance(T, TLRMatrix):
                raise TypeError(f"matrices[{k}] must be a TLRMatrix, got {describe(T)}")

    @classmethod
    def from_dense(cls, As, nb: int = 256, tol: float = 1e-3, **kw) -> "TLRBatch":
        """Compress each matrix of ``As`` (a sequence or an (F, m, n) array)."""
        if As is None or np.isscalar(As) or (hasattr(As, "ndim") and As.ndim != 3):
            raise ValueError(f"As must be a sequence of 2-D arrays or an (F, m, n) array, "
                             f"got {describe(As)}")
        return cls(TLRMatrix.from_dense(A, nb=nb, tol=tol, **kw) for A in As)

    def __len__(self) -> int:
        return len(self.matrices)

    def __getitem__(self, k: int) -> TLRMatrix:
        return self.matrices[k]

    @property
    def nbytes(self) -> int:
        return sum(T.nbytes for T in self.matrices)

    @property
    def compression_ratio(self) -> float:
        return sum(T.dense_nbytes for T in self.matrices) / max(self.nbytes, 1)

    def mvm_bytes(self, n_rhs: int = 1) -> int:
        return sum(T.mvm_bytes(n_rhs) for T in self.matrices)

    def matvec(self, xs, n_threads: int | None = None, adjoint: bool = False) -> list[np.ndarray]:
        """``[T_f @ x_f for f]`` with slices spread over threads (one kernel thread each).

        Many small independent products parallelise better across slices
        than inside each product (no barrier between the three phases).
        """
        if xs is None or np.isscalar(xs) or not isinstance(xs, Iterable):
            raise TypeError(f"xs must be a sequence of one vector (or block) per matrix, "
                            f"got {describe(xs)}")
        xs = list(xs)
        if len(xs) != len(self.matrices):
            raise ValueError(f"xs has {len(xs)} vectors for {len(self.matrices)} matrices")
        workers = min(resolve_n_threads(n_threads), max(len(xs), 1))
        op = (lambda T, x: T.rmatvec(x, n_threads=1)) if adjoint else \
             (lambda T, x: T.matvec(x, n_threads=1))
        if workers == 1:
            return [op(T, x) for T, x in zip(self.matrices, xs)]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(op, self.matrices, xs))

    def rmatvec(self, ys, n_threads: int | None = None) -> list[np.ndarray]:
        return self.matvec(ys, n_threads, adjoint=True)

    def __matmul__(self, xs):
        return self.matvec(xs)
