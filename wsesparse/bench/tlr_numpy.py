"""The cache-resident part of ``wsesparse bench --tlr``: ``T @ x`` against plain numpy.

:class:`NumpyThreePhase` is the three-phase TLR-MVM written with one BLAS GEMV per tile
column and per tile row, built from the same factors as the :class:`~wsesparse.TLRMatrix`;
:func:`compare_numpy` checks it against ``T @ x`` (to :func:`rounding_bound`) and times the
two in interleaved rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wsesparse._checks import check_int, check_real
from wsesparse.bench.bandwidth import read_kernel_pass
from wsesparse.bench.tlr_setup import (ROUNDS, SETTLE, bench_threads, format_pair, interleaved,
                                       random_operand, relative_difference)
from wsesparse.tlr import TLRMatrix

__all__ = ["NumpyComparison", "NumpyThreePhase", "compare_numpy", "rounding_bound"]


class NumpyThreePhase:
    """The three-phase TLR-MVM ``y = T @ x`` in plain numpy, from the factors of ``T``.

    Built from the tiles' factors (:meth:`TLRMatrix.tile`), not from ``T``'s kernel layout:
    per tile column j the bases ``V_ij.T`` of all tile rows i stacked into one
    ``(sum_i k_ij, w_j)`` array, per tile row i the bases ``U_ij`` of all tile columns
    stacked into one ``(h_i, sum_j k_ij)`` array (both C-contiguous copies). A product is

    1. for each tile column j, one GEMV of its stacked ``V`` bases with ``x_j``, giving the
       coefficients of all its tiles (tile-column order);
    2. the reshuffle of those coefficients into tile-row order (one fancy-indexed copy);
    3. for each tile row i, one GEMV of its stacked ``U`` bases with its coefficients,
       which sums the tiles of the row.

    Parameters
    ----------
    T : TLRMatrix

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRMatrix
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((300, 8)) @ rng.standard_normal((8, 250))
    >>> T = TLRMatrix.from_dense(A, nb=64, tol=1e-8)
    >>> x = rng.standard_normal(250)
    >>> bool(np.allclose(NumpyThreePhase(T)(x), T @ x))
    True
    """

    def __init__(self, T: TLRMatrix):
        if not isinstance(T, TLRMatrix):
            raise TypeError(f"T must be a TLRMatrix, got {type(T).__name__}")
        R = np.asarray(T.ranks)
        ntr, ntc = R.shape
        self.shape, self.dtype = T.shape, T.dtype
        self.row_ptr, self.col_ptr = np.asarray(T.row_ptr), np.asarray(T.col_ptr)
        self.v = [np.ascontiguousarray(np.concatenate(
            [T.tile(i, j)[1] for i in range(ntr)], axis=1).T) for j in range(ntc)]
        self.u = [np.ascontiguousarray(np.concatenate(
            [T.tile(i, j)[0] for j in range(ntc)], axis=1)) for i in range(ntr)]
        # Phase 1 leaves the coefficients of tile (i, j) at v_start[i, j] (tile-column
        # order: j major); phase 3 wants them in tile-row order (i major).
        col_major = R.T.ravel()
        v_start = (np.cumsum(col_major) - col_major).reshape(ntc, ntr).T
        self.perm = np.concatenate(
            [np.arange(v_start[i, j], v_start[i, j] + R[i, j]) for i in range(ntr)
             for j in range(ntc)]).astype(np.int64)
        self.k_col = np.concatenate([[0], np.cumsum(R.sum(axis=0))])
        self.k_row = np.concatenate([[0], np.cumsum(R.sum(axis=1))])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``T @ x`` for ``x`` of shape (n,) or (n, s), in the result type of ``T.dtype`` and
        ``x.dtype`` (numpy's promotion; the benchmarks pass ``x`` of ``T.dtype``)."""
        x = np.asarray(x)
        if x.ndim not in (1, 2) or x.shape[0] != self.shape[1]:
            raise ValueError(f"x must have {self.shape[1]} rows, got shape {x.shape}")
        cp, rp, kc, kr = self.col_ptr, self.row_ptr, self.k_col, self.k_row
        yv = np.empty((int(kc[-1]),) + x.shape[1:], dtype=np.result_type(self.dtype, x))
        for j, v in enumerate(self.v):                       # phase 1
            np.matmul(v, x[cp[j]:cp[j + 1]], out=yv[kc[j]:kc[j + 1]])
        yu = yv[self.perm]                                   # phase 2
        y = np.empty((self.shape[0],) + x.shape[1:], dtype=yv.dtype)
        for i, u in enumerate(self.u):                       # phase 3
            np.matmul(u, yu[kr[i]:kr[i + 1]], out=y[rp[i]:rp[i + 1]])
        return y


def rounding_bound(T: TLRMatrix) -> float:
    """Relative difference two orders of summation of ``T @ x`` may show from rounding.

    ``32 * eps * sqrt(L)`` with ``L`` the longest inner product of the three phases (the
    widest tile plus the largest sum of ranks of a tile row): rounding errors of random
    sign grow as ``sqrt(L)``, and 32 leaves room for unlucky vectors.

    Parameters
    ----------
    T : TLRMatrix

    Returns
    -------
    float

    Examples
    --------
    >>> from wsesparse import TLRMatrix
    >>> import numpy as np
    >>> T = TLRMatrix.from_tiles((4, 4), 2, {(0, 0): (np.ones((2, 1)), np.ones((2, 1)))})
    >>> bool(rounding_bound(T) < 1e-13)
    True
    """
    inner = int(np.diff(T.col_ptr).max()) + int(np.asarray(T.ranks).sum(axis=1).max())
    return 32 * float(np.finfo(T.dtype).eps) * math.sqrt(max(inner, 1))



@dataclass
class NumpyComparison:
    """What :func:`compare_numpy` measured; times are ``(best, median)`` seconds per call.

    Attributes
    ----------
    shape : (int, int)
    nbytes : int
        Bytes of the stored bases.
    wsesparse, numpy : (float, float)
        ``T @ x`` and :class:`NumpyThreePhase` on the same ``x``.
    difference : float
        ``||numpy - T @ x|| / ||T @ x||``, checked to be at most ``bound``.
    bound : float
        :func:`rounding_bound` of ``T``.
    rounds, inner, n_threads : int
    read : (float, float) or None
        One OpenMP read of a buffer of ``nbytes`` on ``n_threads`` threads, timed in the
        same rounds (:func:`~wsesparse.bench.bandwidth.read_kernel_pass`): what the caches
        deliver, the bound of a product that reads its bases from them; None when not
        measured.
    """

    shape: tuple[int, int]
    nbytes: int
    wsesparse: tuple[float, float]
    numpy: tuple[float, float]
    difference: float
    bound: float
    rounds: int
    inner: int
    n_threads: int
    read: tuple[float, float] | None = None

    @property
    def speedup(self) -> tuple[float, float]:
        """numpy time / wsesparse time, ``(of best times, of median times)``."""
        return tuple(a / b for a, b in zip(self.numpy, self.wsesparse))

    def gbs(self, times: tuple[float, float]) -> tuple[float, float]:
        """``nbytes`` / ``times`` in GB/s, ``(best, median)``."""
        return tuple(self.nbytes / t / 1e9 for t in times)

    def format(self) -> str:
        """Three lines (both times and the speedup), and a fourth with the read rate."""
        ms = lambda v: format_pair(tuple(t * 1e3 for t in v), "%.3f")  # noqa: E731
        lines = [
            f"  wsesparse T @ x          {ms(self.wsesparse)} ms"
            f"  ({format_pair(self.gbs(self.wsesparse), '%.0f')} GB/s of bases)",
            f"  numpy three-phase        {ms(self.numpy)} ms"
            f"  (same result: relative difference {self.difference:.1e} <= {self.bound:.1e})",
            f"  speedup over numpy       {format_pair(self.speedup, '%.2fx')}"]
        if self.read is not None:
            share = tuple(r / w for r, w in zip(self.read, self.wsesparse))
            lines.append(f"  read of as many bytes    {ms(self.read)} ms"
                         f"  ({format_pair(self.gbs(self.read), '%.0f')} GB/s, OpenMP, "
                         f"{self.n_threads} threads): T @ x at "
                         f"{format_pair(tuple(100 * v for v in share), '%.0f')} % of it")
        return "\n".join(lines)


def compare_numpy(T: TLRMatrix, rounds: int = ROUNDS, n_threads: int | None = None,
                  inner: int = 10, seed: int = 0, settle: float = SETTLE) -> NumpyComparison:
    """``T @ x`` against :class:`NumpyThreePhase` of the same factors, in interleaved rounds.

    The numpy result is checked against ``T @ x`` first (relative difference at most
    :func:`rounding_bound`); each round times ``inner`` back-to-back calls of each, so the
    bases of a small ``T`` stay in cache as in an iterative solver's loop, with a pause of
    ``settle`` seconds after each (numpy's GEMVs run on OpenBLAS's threads, ``T @ x`` on
    OpenMP's; see :func:`interleaved`). A plain OpenMP read of as many bytes as the bases,
    timed in the same rounds, gives the rate the caches deliver to the same threads.

    Parameters
    ----------
    T : TLRMatrix
    rounds, inner : int
        Interleaved rounds and calls per timing (positive).
    n_threads : int, optional
        Threads of ``T @ x`` and of BLAS (positive); default the cores this process may use.
    seed : int
        Of the random ``x``.
    settle : float
        Seconds of pause after each timing (nonnegative).

    Returns
    -------
    NumpyComparison

    Raises
    ------
    AssertionError
        If the two results differ by more than rounding.

    Examples
    --------
    >>> from wsesparse.bench.tlr_setup import seismic_operator
    >>> T, _, _ = seismic_operator(12, nb=64)
    >>> c = compare_numpy(T, rounds=2, inner=1, settle=0)
    >>> bool(c.difference <= c.bound), len(c.format().splitlines())
    (True, 4)
    """
    from threadpoolctl import threadpool_limits

    rounds = check_int(rounds, "rounds", minimum=1)
    inner = check_int(inner, "inner", minimum=1)
    n_threads = bench_threads(n_threads)
    settle = check_real(settle, "settle", minimum=0)
    three = NumpyThreePhase(T)
    x = random_operand(np.random.default_rng(seed), T.shape[1], T.dtype)
    with threadpool_limits(limits=n_threads, user_api="blas"):
        diff = relative_difference(three(x), T.matvec(x, n_threads=n_threads))
        bound = rounding_bound(T)
        if not diff <= bound:
            raise AssertionError(f"numpy three-phase differs from T @ x by {diff:.3e} "
                                 f"(relative), more than rounding ({bound:.3e})")
        calls = {"wsesparse": lambda: T.matvec(x, n_threads=n_threads),
                 "numpy": lambda: three(x)}
        read = read_kernel_pass(n_threads, T.nbytes)
        if read is not None:
            calls["read"], check_read, _ = read
        # A pause after every call, so that each is timed after its warm-up: without one
        # after the read, T @ x was timed straight after it with no warm-up of its own
        # (numpy's samples had theirs) and took about 1.5x its time in a loop, with the
        # load rule on or off (docs/tuning.md, "TLR tiles").
        times = interleaved(calls, rounds, inner, pause_after=dict.fromkeys(calls, settle))
        if read is not None:
            check_read()
    return NumpyComparison(T.shape, T.nbytes, times["wsesparse"], times["numpy"], diff, bound,
                           rounds, inner, n_threads, times.get("read"))

