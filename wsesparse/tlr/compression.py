"""Compression of a dense matrix into low-rank tiles within a global error budget.

Every tile gets a randomized (or, when that is not cheaper, full) SVD
(:func:`_adaptive_factors`, or :func:`_fixed_rank_factors` for a fixed rank),
tiles are factored in parallel over threads (:func:`_map_tiles`), and the
singular values are then dropped across all tiles in increasing order of
"energy removed per byte saved" until the error budget is spent
(:func:`_allocate_ranks`). :func:`compress_tiles` runs the whole of it and
returns the kept factors; :meth:`TLRMatrix.from_dense
<wsesparse.TLRMatrix.from_dense>` and :meth:`~wsesparse.TLRMatrix.from_function`
lay them out as a :class:`~wsesparse.TLRMatrix`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np
from scipy import linalg as sla

from wsesparse import _blas
from wsesparse._checks import check_allocation, check_int, check_numeric_dtype, describe
from wsesparse._progress import Progress, progress_enabled
from wsesparse._threads import resolve_n_threads
from wsesparse.tlr._layout import tile_bounds
from wsesparse.tlr._validate import (check_magnitude, check_nb, check_seed, check_tol,
                                     rounding_slack, work_dtype)

__all__ = ["compress_tiles"]

# Randomized range finder: columns added per step. 16 keeps the QR and the
# two GEMMs per step BLAS-3 while overshooting the needed rank by little.
_BLOCK = 16
# Fraction of the error budget the range finders may leave behind (their
# residual ||A_ij - Q Q^H A_ij|| is unavoidable); the rest goes to the global
# truncation, which is where the bytes are saved.
_RANGE_FRACTION = 0.1
# Python objects per tile during compression (key, seed sequence, factor
# arrays), measured at ~1 KiB even for rank 0: bounds the tile count.
_TILE_OVERHEAD_BYTES = 1024


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
    while True:
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
        # The running residual came from subtractions, whose cancellation
        # error (about eps * ||A||_F^2) can exceed a small stop2 (tol near
        # 1e-7 and below in double precision): recompute it directly, and go
        # on from the exact value while it is still above stop2.
        R = A - Q @ B
        res2 = float(np.vdot(R, R).real)
        if res2 <= stop2:
            break
    # SVD of the short, wide B through a QR of B^H: LAPACK's SVD of a k x w
    # matrix costs about 20x more here than QR plus a k x k SVD.
    Qh, Rh = np.linalg.qr(B.conj().T)
    Ub, s, Vrh = np.linalg.svd(Rh.conj().T)
    return Q @ Ub, s, Vrh @ Qh.conj().T, res2


def _stored(U: np.ndarray, sv: np.ndarray, Vh: np.ndarray, dtype: np.dtype):
    """``U`` scaled by the singular values, and ``Vh``, in the storage dtype, as kept: right
    away, which halves peak memory for complex64. Values beyond the dtype's range become
    inf without a warning: ``check_magnitude`` refuses such a matrix."""
    with np.errstate(over="ignore"):
        return (U * sv).astype(dtype), Vh.astype(dtype)


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

    BLAS is held to one thread meanwhile (a hold shared with overlapping builds,
    ``wsesparse._blas``): small-tile GEMMs gain nothing from BLAS threads, and two
    levels of threads would oversubscribe the cores.
    """
    workers = _n_workers(n_threads)
    out = []
    with _blas.limited(1):
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


def compress_tiles(shape: tuple[int, int], get: Callable[[slice, slice], np.ndarray], nb: int,
                   tol: float | None, rank: int | None, dtype: np.dtype, seed,
                   n_threads: int | None, progress: bool | None, *, norm2: float | None,
                   check: bool):
    """Factor every tile of a matrix and keep the factors the error budget allows.

    The work behind :meth:`TLRMatrix.from_dense <wsesparse.TLRMatrix.from_dense>`
    and :meth:`TLRMatrix.from_function <wsesparse.TLRMatrix.from_function>`,
    which check ``A`` (or ``shape`` and ``dtype``) and lay the factors out.

    Parameters
    ----------
    shape : (int, int)
        ``(m, n)``, already checked.
    get : callable
        ``get(rows, cols)`` with two slices returns the block ``A[rows, cols]``.
    nb, tol, rank, seed, n_threads, progress
        As in :meth:`TLRMatrix.from_dense <wsesparse.TLRMatrix.from_dense>`
        (checked here, in that order: nb, then rank or tol, then seed).
    dtype : numpy.dtype
        Storage dtype, one of the four kernel dtypes.
    norm2 : float or None
        ``||A||_F^2`` when known up front (then every tile's range finder
        aims at a share of the whole budget), else None (each tile aims at
        ``tol`` relative to its own norm).
    check : bool
        Check the blocks ``get`` returns (shape, dtype, finite, magnitude);
        False when they come from an array checked already.

    Returns
    -------
    nb : int
        The checked tile size.
    factors : dict
        ``factors[(i, j)] = (U_ij, V_ij)`` in ``dtype``, with
        ``A_ij ~ U_ij @ V_ij.T``; tiles of rank 0 are left out.
    tol : float or None
        The checked tolerance, or None for a fixed rank.

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse.tlr.compression import compress_tiles
    >>> A = np.outer(np.arange(1.0, 5.0), np.ones(6))
    >>> nb, factors, tol = compress_tiles(A.shape, lambda r, c: A[r, c], 3, 1e-6, None,
    ...                                   np.dtype(np.float64), 0, 1, False, norm2=None, check=True)
    >>> nb, tol, {key: U.shape[1] for key, (U, V) in sorted(factors.items())}
    (3, 1e-06, {(0, 0): 1, (0, 1): 1, (1, 0): 1, (1, 1): 1})
    >>> bool(np.allclose(factors[(1, 1)][0] @ factors[(1, 1)][1].T, A[3:, 3:]))
    True
    """
    nb = check_nb(nb)
    m, n = shape
    if rank is not None:
        rank = check_int(rank, "rank", minimum=1)
    else:
        if tol is None:
            raise TypeError("give tol (accuracy) or rank (fixed rank)")
        # (a tile's rank is at most its shorter side: nb, or the matrix's if smaller)
        tol = check_tol(tol, dtype, min(nb, m, n))
    seed = check_seed(seed)
    n_tiles = -(-m // nb) * -(-n // nb)
    # Each tile costs ~1 KiB of Python objects (key, seed, factors) even at rank 0.
    check_allocation(n_tiles * _TILE_OVERHEAD_BYTES,
                     f"compressing a {m} x {n} matrix in {n_tiles:,} tiles of {nb} x {nb} "
                     f"(~{_TILE_OVERHEAD_BYTES} B of bookkeeping per tile)")
    rp, cp = tile_bounds(m, nb), tile_bounds(n, nb)
    ntr, ntc = len(rp) - 1, len(cp) - 1
    keys = [(i, j) for j in range(ntc) for i in range(ntr)]
    seeds = np.random.SeedSequence(seed).spawn(len(keys))
    wd = work_dtype(dtype)
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
            Us, Vs = _stored(U, sv, Vh, dtype)
            return Us, sv, Vs
        t2 = float(np.vdot(blk, blk).real)
        if norm2 is None:
            stop2 = _RANGE_FRACTION * tol**2 * t2
        else:
            stop2 = 0.5 * _RANGE_FRACTION * tol**2 * (t2 + norm2 / n_tiles)
        U, sv, Vh, res2 = _adaptive_factors(blk, stop2, rng)
        Us, Vs = _stored(U, sv, Vh, dtype)
        return Us, sv, Vs, res2, t2

    bar = Progress(n_tiles, progress_enabled(progress), label="compressing", unit="tiles")
    results = _map_tiles(tile, range(n_tiles), n_threads, bar)
    if rank is not None:
        total2 = 0.0  # (a fixed rank needs no ||A||_F^2: the check bounds the entries alone)
    else:
        total2 = sum(r[4] for r in results) if norm2 is None else norm2
    if check:
        check_magnitude(max(amaxes, default=0.0), total2, "the matrix given by f", dtype,
                        min(nb, n))
    factors = {}
    if rank is not None:
        for key, (Us, sv, Vh) in zip(keys, results):
            if sv.size:
                factors[key] = (Us, Vh.T)
        return nb, factors, None

    keep = _allocate_ranks(results, keys, rp, cp, total2, tol, dtype, min(nb, m, n))
    for key, res, k in zip(keys, results, keep):
        if k:
            factors[key] = (res[0][:, :k], res[2][:k].T)
    return nb, factors, tol


def _allocate_ranks(results, keys, rp, cp, total2, tol, dtype, max_rank) -> list[int]:
    """Global greedy truncation: the ranks that spend the error budget best.

    Dropping singular value l of tile t removes sigma_tl^2 of squared error
    and saves (h_t + w_t) stored numbers. Dropping in increasing order of
    sigma^2 / (h + w) over all tiles until the budget is spent is the greedy
    knapsack solution; within a tile this order drops the tail first (the
    sigma are sorted and the cost is the same), so every tile keeps a prefix.
    """
    slack = rounding_slack(dtype, max_rank)
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
