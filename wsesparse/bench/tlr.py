"""``wsesparse bench --tlr``: TLR-MVM rates next to the machine's bandwidth and GEMM rate.

For a compressed seismic frequency slice (:func:`wsesparse.datasets.seismic_slice`,
:meth:`wsesparse.TLRMatrix.from_dense`, complex64) it times, in interleaved rounds (every
candidate once per round, so a busy moment of a shared machine hits all alike; a short
pause where the timed code switches between OpenMP and OpenBLAS threads, see
:func:`interleaved`):

* the forward product ``T @ X`` and the adjoint ``T.H @ Y`` for s = 1, 4, 16, 64
  right-hand sides: seconds, GB/s of stored bases (``T.nbytes`` per product, whatever s)
  and GFLOP/s (8 real flops per complex multiply-add, 2 per real one, over the bases);
* the STREAM triad of :func:`wsesparse.bench.triad_bandwidth_kernel` (one pass per round);
* a dense GEMM ``(N x N) @ (N x 64)`` in numpy/BLAS with ``N**2`` = the stored entries of
  the bases: the flops and matrix bytes of the s = 64 product, done by BLAS;

and prints the ratios adjoint / forward, time(s=16) / time(s=1), the s = 64 rate as a share
of the GEMM rate and the forward bandwidth as a share of the triad's. A second, small
operator (2499 x 2499, ``seismic_slice(nx=49, ny=51)``), whose bases stay in cache between
products, is timed against :class:`NumpyThreePhase`, the same three phases in plain numpy
(one BLAS GEMV per tile column and per tile row) built from the same factors; its result is
checked against ``T @ x`` before any timing.

The operators and the timing loop are in :mod:`wsesparse.bench.tlr_setup`, the numpy
comparison in :mod:`wsesparse.bench.tlr_numpy`; ``benchmarks/bench_tlr.py`` uses the same
functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from wsesparse._checks import check_int, check_real
from wsesparse.bench.bandwidth import triad_kernel_pass
from wsesparse.bench.tlr_numpy import (NumpyComparison, NumpyThreePhase, compare_numpy,
                                       rounding_bound)
from wsesparse.bench.tlr_setup import (CACHE_GRID, RHS, ROUNDS, SETTLE, bench_threads,
                                       flops_per_madd, format_pair, interleaved,
                                       random_operand, seismic_operator)
from wsesparse.tlr import TLRMatrix

__all__ = ["CACHE_GRID", "RHS", "ROUNDS", "SETTLE", "NumpyComparison", "NumpyThreePhase",
           "TLRRates", "compare_numpy", "format_rates", "interleaved", "rounding_bound", "run_tlr",
           "seismic_operator", "tlr_rates"]


@dataclass
class TLRRates:
    """What :func:`tlr_rates` measured; times are ``(best, median)`` seconds over the rounds.

    Attributes
    ----------
    products : dict
        ``{("forward" or "adjoint", s): (best, median)}``.
    nbytes : int
        Bytes of the stored bases (``T.nbytes``), read once per product.
    flops_per_rhs : int
        Real flops of one product per right-hand side.
    dtype : numpy.dtype
        Of the operator.
    triad : (float, float) or None
        One triad pass; None when not measured.
    triad_bytes : int
        Bytes one triad pass moves (3 float64 arrays).
    gemm : (float, float) or None
        One dense GEMM; None when not measured.
    gemm_shape : (int, int, int)
        ``(N, N, s)``: ``(N x N) @ (N x s)``.
    gemm_flops : int
        Real flops of one GEMM.
    rounds, n_threads : int
    settle : float
        Seconds of the pauses before and after the GEMM.
    """

    products: dict = field(default_factory=dict)
    nbytes: int = 0
    flops_per_rhs: int = 0
    dtype: np.dtype = np.dtype(np.complex64)
    triad: tuple[float, float] | None = None
    triad_bytes: int = 0
    gemm: tuple[float, float] | None = None
    gemm_shape: tuple[int, int, int] = (0, 0, 0)
    gemm_flops: int = 0
    rounds: int = 0
    n_threads: int = 1
    settle: float = 0.0

    @property
    def sizes(self) -> list[int]:
        """The right-hand side counts, in increasing order."""
        return sorted({s for _, s in self.products})

    def gbs(self, kind: str, s: int) -> tuple[float, float]:
        """GB/s of bases of a product, ``(best, median)``."""
        return tuple(self.nbytes / t / 1e9 for t in self.products[(kind, s)])

    def gflops(self, kind: str, s: int) -> tuple[float, float]:
        """GFLOP/s of a product, ``(best, median)``."""
        return tuple(self.flops_per_rhs * s / t / 1e9 for t in self.products[(kind, s)])

    def triad_gbs(self) -> tuple[float, float] | None:
        """GB/s of the triad, ``(best, median)``, or None."""
        return None if self.triad is None else tuple(self.triad_bytes / t / 1e9
                                                     for t in self.triad)

    def gemm_gflops(self) -> tuple[float, float] | None:
        """GFLOP/s of the dense GEMM, ``(best, median)``, or None."""
        return None if self.gemm is None else tuple(self.gemm_flops / t / 1e9
                                                    for t in self.gemm)


def tlr_rates(T: TLRMatrix, sizes=RHS, rounds: int = ROUNDS, n_threads: int | None = None,
              triad_elems: int | None = 20_000_000, gemm: bool = True,
              seed: int = 0, settle: float = SETTLE) -> TLRRates:
    """Time ``T @ X`` and ``T.H @ Y`` for blocks of s right-hand sides, a triad and a GEMM.

    Every candidate runs once as a warm-up, then once per round, in turn (see
    :func:`interleaved`), with a pause of ``settle`` seconds before and after the GEMM (it
    runs on OpenBLAS's threads, the rest on OpenMP's). Products of one right-hand side
    take 1-D vectors.

    Parameters
    ----------
    T : TLRMatrix
    sizes : sequence of int
        Right-hand side counts s (positive).
    rounds : int
        Interleaved rounds (positive).
    n_threads : int, optional
        Threads of the products, the triad and BLAS (positive); default the cores this
        process may use.
    triad_elems : int or None
        Length of the triad's float64 arrays; None: no triad.
    gemm : bool
        Time the dense GEMM ``(N x N) @ (N x max(sizes))`` in numpy/BLAS, ``N`` the square
        root of the entries of the bases (rounded): the flops and the matrix bytes of the
        widest product, done by BLAS.
    seed : int
        Of the random right-hand sides and GEMM operands.
    settle : float
        Seconds of each pause (nonnegative).

    Returns
    -------
    TLRRates

    Raises
    ------
    ValueError, TypeError
        For an empty ``sizes`` or non-positive sizes, rounds, threads or triad length
        (naming the argument), or ``T`` not a TLRMatrix.

    Examples
    --------
    >>> T, _, _ = seismic_operator(12, nb=64)
    >>> r = tlr_rates(T, sizes=(1, 4), rounds=2, triad_elems=100_000, settle=0.01)
    >>> sorted(r.products)
    [('adjoint', 1), ('adjoint', 4), ('forward', 1), ('forward', 4)]
    >>> [line.split()[:2] for line in format_rates(r).splitlines()[2:4]]
    [['forward', 's=1'], ['forward', 's=4']]
    """
    from threadpoolctl import threadpool_limits

    if not isinstance(T, TLRMatrix):
        raise TypeError(f"T must be a TLRMatrix, got {type(T).__name__}")
    sizes = tuple(check_int(s, "sizes", minimum=1) for s in sizes)
    if not sizes:
        raise ValueError("sizes must name at least one right-hand side count")
    rounds = check_int(rounds, "rounds", minimum=1)
    n_threads = bench_threads(n_threads)
    triad_elems = check_int(triad_elems, "triad_elems", minimum=1, allow_none=True)
    settle = check_real(settle, "settle", minimum=0)
    m, n = T.shape
    per_madd = flops_per_madd(T.dtype)
    out = TLRRates(nbytes=T.nbytes, flops_per_rhs=per_madd * (T.U.size + T.V.size),
                   dtype=T.dtype, rounds=rounds, n_threads=n_threads, settle=settle)
    rng = np.random.default_rng(seed)
    calls: dict[object, Callable[[], object]] = {}
    for s in sorted(set(sizes)):
        X, Y = random_operand(rng, (n, s), T.dtype), random_operand(rng, (m, s), T.dtype)
        if s == 1:
            X, Y = X[:, 0], Y[:, 0]
        calls[("forward", s)] = (lambda X=X: T.matvec(X, n_threads=n_threads))
        calls[("adjoint", s)] = (lambda Y=Y: T.rmatvec(Y, n_threads=n_threads))
    triad = None if triad_elems is None else triad_kernel_pass(n_threads, triad_elems)
    if triad is not None:
        calls["triad"], check, out.triad_bytes = triad
    if gemm:
        N, s = max(1, round(math.sqrt(T.U.size + T.V.size))), max(sizes)
        G, B = random_operand(rng, (N, N), T.dtype), random_operand(rng, (N, s), T.dtype)
        C = np.empty((N, s), dtype=T.dtype)
        calls["gemm"] = lambda: np.matmul(G, B, out=C)
        out.gemm_shape, out.gemm_flops = (N, N, s), per_madd * N * N * s
    # The GEMM runs on OpenBLAS's threads, everything else on OpenMP's: pause at both switches.
    pause = {list(calls)[-2]: settle, "gemm": settle} if gemm else {}
    with threadpool_limits(limits=n_threads, user_api="blas"):
        times = interleaved(calls, rounds, pause_after=pause)
    if triad is not None:
        check()
    out.products = {k: v for k, v in times.items() if isinstance(k, tuple)}
    out.triad, out.gemm = times.get("triad"), times.get("gemm")
    return out



def format_rates(r: TLRRates) -> str:
    """The table of :func:`tlr_rates` and its ratios, as printed by ``wsesparse bench --tlr``.

    One row per product (milliseconds, GB/s of bases, GFLOP/s; best and median over the
    rounds), the triad and the GEMM, then the ratios: adjoint / forward time per s,
    time(s) / time(s=1), the widest product's GFLOP/s as a share of the GEMM's and the
    forward bandwidth at the fewest right-hand sides as a share of the triad's. Ratios are
    given as best / median (each of best times, and of median times).

    Parameters
    ----------
    r : TLRRates

    Returns
    -------
    str

    Examples
    --------
    >>> r = TLRRates(products={("forward", 1): (1e-3, 2e-3), ("adjoint", 1): (1e-3, 1e-3)},
    ...              nbytes=10**7, flops_per_rhs=2 * 10**7, rounds=3)
    >>> print(format_rates(r).splitlines()[2])
    forward  s=1         1.000 /     2.000      10.0 /    5.0     20.0 /    10.0
    """
    pause = f" ({r.settle:g} s pauses around the GEMM)" if r.gemm is not None else ""
    lines = [f"{r.rounds} interleaved rounds{pause}, {r.n_threads} threads; best / median",
             f"{'':13s}{'time ms':>23s}{'GB/s of bases':>19s}{'GFLOP/s':>19s}"]
    sizes = r.sizes
    for kind in ("forward", "adjoint"):
        for s in sizes:
            if (kind, s) in r.products:
                t = r.products[(kind, s)]
                lines.append(f"{kind:8s} s={s:<3d} {t[0] * 1e3:11.3f} / {t[1] * 1e3:9.3f}  "
                             f"{r.gbs(kind, s)[0]:8.1f} / {r.gbs(kind, s)[1]:6.1f}  "
                             f"{r.gflops(kind, s)[0]:7.1f} / {r.gflops(kind, s)[1]:7.1f}")
    triad, gemm = r.triad_gbs(), r.gemm_gflops()
    if triad is not None:
        lines.append(f"STREAM triad (OpenMP loop, float64, 3 x {r.triad_bytes / 3e6:.0f} MB): "
                     f"{format_pair(triad, '%.1f')} GB/s")
    if gemm is not None:
        N, _, s = r.gemm_shape
        lines.append(f"dense {r.dtype} GEMM ({N} x {N}) @ ({N} x {s}), numpy/BLAS: "
                     f"{format_pair(gemm, '%.1f')} GFLOP/s")
    lines.append("ratios (of best times / of median times):")
    has = lambda kind, s: (kind, s) in r.products  # noqa: E731
    ratio = lambda a, b: tuple(x / y for x, y in zip(r.products[a], r.products[b]))  # noqa: E731
    adj = [f"s={s} {format_pair(ratio(('adjoint', s), ('forward', s)), '%.2f')}" for s in sizes
           if has("adjoint", s) and has("forward", s)]
    if adj:
        lines.append("  adjoint / forward time: " + ", ".join(adj))
    s0 = sizes[0]
    for kind in ("forward", "adjoint"):
        more = [f"s={s} {format_pair(ratio((kind, s), (kind, s0)), '%.2f')}" for s in sizes[1:]
                if has(kind, s) and has(kind, s0)]
        if more:
            lines.append(f"  {kind} time(s) / time(s={s0}): " + ", ".join(more))
    if gemm is not None:
        s = r.gemm_shape[2]
        pct = lambda kind: tuple(100 * a / b for a, b in zip(r.gflops(kind, s), gemm))  # noqa
        share = [f"{kind} {format_pair(pct(kind), '%.0f%%')}" for kind in ("forward", "adjoint")
                 if has(kind, s)]
        if share:
            lines.append(f"  s={s} GFLOP/s as % of the dense GEMM's: " + ", ".join(share))
    if triad is not None and has("forward", s0):
        pct = tuple(100 * a / b for a, b in zip(r.gbs("forward", s0), triad))
        lines.append(f"  forward s={s0} GB/s as % of the triad's: {format_pair(pct, '%.0f%%')}")
    return "\n".join(lines)



def run_tlr(nx: int = 99, ny: int | None = None, nb: int = 256, tol: float = 1e-3,
            frequency: float = 10.0, rounds: int = ROUNDS, n_threads: int | None = None,
            sizes=RHS, triad_elems: int | None = 20_000_000,
            cache_grid: tuple[int, int] | None = CACHE_GRID,
            out: Callable[[str], object] = print) -> dict:
    """The ``wsesparse bench --tlr`` section: build, time and print, part by part.

    Parameters
    ----------
    nx, ny : int
        Grid of the seismic slice (default ``ny = nx``; 99: the 9801 x 9801 slice).
    nb, tol, frequency
        As in :func:`seismic_operator`.
    rounds : int
        Interleaved rounds (positive); the cache-resident comparison times 10 calls of
        each per round.
    n_threads : int, optional
        Threads of everything timed; default the cores this process may use.
    sizes : sequence of int
        Right-hand side counts.
    triad_elems : int or None
        Triad array length; None: no triad.
    cache_grid : (int, int) or None
        Grid of the cache-resident operator compared with numpy; None: skip it.
    out : callable
        Takes each printed line (or block of lines).

    Returns
    -------
    dict
        ``"T"`` (the operator), ``"rates"`` (:class:`TLRRates`) and, with ``cache_grid``,
        ``"cache"`` (:class:`NumpyComparison`).

    Raises
    ------
    ValueError, TypeError
        For non-positive sizes, grids, tile size, rounds or threads, or ``tol`` outside
        (0, 1), naming the argument.

    Examples
    --------
    >>> res = run_tlr(nx=12, nb=64, rounds=2, sizes=(1, 4), triad_elems=None,
    ...               cache_grid=(8, 9), out=lambda s: None)
    >>> sorted(res)
    ['T', 'cache', 'rates']
    """
    nx = check_int(nx, "nx", minimum=1)
    ny = nx if ny is None else check_int(ny, "ny", minimum=1)
    nb = check_int(nb, "nb", minimum=1)
    tol = check_real(tol, "tol", minimum=0, maximum=1, inclusive=(False, False))
    frequency = check_real(frequency, "frequency", minimum=0, inclusive=(False, True))
    rounds = check_int(rounds, "rounds", minimum=1)
    n_threads = bench_threads(n_threads)
    sizes = tuple(check_int(s, "sizes", minimum=1) for s in sizes)
    if not sizes:
        raise ValueError("sizes must name at least one right-hand side count")
    triad_elems = check_int(triad_elems, "triad_elems", minimum=1, allow_none=True)
    if cache_grid is not None:
        if len(tuple(cache_grid)) != 2:
            raise ValueError(f"cache_grid must be (nx, ny), got {cache_grid!r}")
        cache_grid = tuple(check_int(g, "cache_grid", minimum=1) for g in cache_grid)

    T, t_slice, t_comp = seismic_operator(nx, ny, nb, tol, frequency, n_threads=n_threads)
    out(f"TLR-MVM: seismic_slice({nx} x {ny}) {T.shape[0]} x {T.shape[1]} {T.dtype} (Hilbert, "
        f"{frequency:g} Hz), nb={nb}, tol={tol:g}, {n_threads} threads")
    out(f"  slice {t_slice:.1f} s, compression {t_comp:.1f} s: ranks mean {T.ranks.mean():.1f}, "
        f"max {T.ranks.max()}; bases {T.nbytes / 1e6:.1f} MB vs dense "
        f"{T.dense_nbytes / 1e6:.1f} MB ({T.compression_ratio:.1f}x)")
    out("  GB/s = bytes of the bases (read once per product) / time; GFLOP/s = "
        f"{flops_per_madd(T.dtype)} flops per entry of the bases and right-hand side / time")
    rates = tlr_rates(T, sizes, rounds, n_threads, triad_elems)
    if triad_elems is not None and rates.triad is None:
        out("  (no triad: the kernels were built without stream_triad)")
    out(format_rates(rates))
    result = {"T": T, "rates": rates}
    if cache_grid is not None:
        C, _, _ = seismic_operator(*cache_grid, nb, tol, frequency, n_threads=n_threads)
        cmp = compare_numpy(C, rounds, n_threads)
        out(f"Cache-resident: seismic_slice({cache_grid[0]} x {cache_grid[1]}) {C.shape[0]} x "
            f"{C.shape[1]}, bases {C.nbytes / 1e6:.1f} MB, forward s=1, {rounds} rounds of "
            f"{cmp.inner} calls of each ({SETTLE:g} s pause after each); best / median per call")
        out(cmp.format())
        result["cache"] = cmp
    return result
