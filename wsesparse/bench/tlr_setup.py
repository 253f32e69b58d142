"""The operators and the timing loop of ``wsesparse bench --tlr``.

:func:`seismic_operator` builds the compressed seismic slice the section times;
:func:`interleaved` times several calls in rounds (every candidate once per round, so a busy
moment of a shared machine hits all alike), with pauses where the timed code switches between
OpenMP and OpenBLAS threads. :mod:`wsesparse.bench.tlr` (the rates) and
:mod:`wsesparse.bench.tlr_numpy` (the cache-resident comparison) use both.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from wsesparse._checks import check_int, check_real
from wsesparse._hardware import available_cores
from wsesparse.tlr import TLRMatrix

__all__ = ["CACHE_GRID", "RHS", "ROUNDS", "SETTLE", "bench_threads", "flops_per_madd",
           "format_pair", "interleaved", "random_operand", "relative_difference",
           "seismic_operator"]

RHS = (1, 4, 16, 64)
ROUNDS = 20
CACHE_GRID = (49, 51)     # seismic_slice(nx=49, ny=51): 2499 x 2499
SETTLE = 0.15            # s: pause at a switch between OpenMP and OpenBLAS (see interleaved)


def flops_per_madd(dtype) -> int:
    """Real flops of one multiply-add in ``dtype``: 8 for complex, 2 for real.

    Examples
    --------
    >>> flops_per_madd(np.complex64), flops_per_madd("float64")
    (8, 2)
    """
    return 8 if np.dtype(dtype).kind == "c" else 2


def bench_threads(n_threads: int | None) -> int:
    """``n_threads`` checked, or the cores this process may use.

    Examples
    --------
    >>> bench_threads(3), bench_threads(None) >= 1
    (3, True)
    """
    if n_threads is not None:
        return check_int(n_threads, "n_threads", minimum=1)
    return available_cores()


def random_operand(rng, shape, dtype) -> np.ndarray:
    """Standard normal entries of ``dtype`` (real and imaginary parts for complex).

    Examples
    --------
    >>> random_operand(np.random.default_rng(0), (2, 3), np.complex64).dtype
    dtype('complex64')
    """
    z = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        z = z + 1j * rng.standard_normal(shape)
    return z.astype(dtype)


def seismic_operator(nx: int, ny: int | None = None, nb: int = 256, tol: float = 1e-3,
                     frequency: float = 10.0, dtype=np.complex64,
                     n_threads: int | None = None) -> tuple[TLRMatrix, float, float]:
    """A Hilbert-ordered seismic slice compressed to a :class:`~wsesparse.TLRMatrix`.

    Parameters
    ----------
    nx, ny : int
        The source grid (default ``ny = nx``); the matrix is ``nx*ny`` square.
    nb : int
        Tile size.
    tol : float
        Whole-matrix relative accuracy of the compression, in (0, 1).
    frequency : float
        Frequency of the slice in Hz (ranks grow with it).
    dtype : dtype
        Of the slice and the bases.
    n_threads : int, optional
        Threads compressing tiles; default all cores.

    Returns
    -------
    T : TLRMatrix
    t_slice, t_compress : float
        Seconds spent building the dense slice and compressing it.

    Examples
    --------
    >>> T, _, _ = seismic_operator(12, nb=64)
    >>> T.shape, T.dtype
    ((144, 144), dtype('complex64'))
    """
    from wsesparse.datasets import seismic_slice

    nx = check_int(nx, "nx", minimum=1)
    ny = nx if ny is None else check_int(ny, "ny", minimum=1)
    check_int(nb, "nb", minimum=1)
    t = time.perf_counter()
    A = seismic_slice(nx=nx, ny=ny, frequency=frequency, order="hilbert", dtype=dtype)
    t_slice = time.perf_counter() - t
    t = time.perf_counter()
    T = TLRMatrix.from_dense(A, nb=nb, tol=tol, n_threads=n_threads)
    return T, t_slice, time.perf_counter() - t



def format_pair(v: tuple[float, float], fmt: str) -> str:
    """``"best / median"`` of a pair, each with ``fmt``.

    Examples
    --------
    >>> format_pair((1.0, 2.5), "%.1f")
    '1.0 / 2.5'
    """
    return f"{fmt % v[0]} / {fmt % v[1]}"


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``||a - b|| / ||b||`` (``||a - b||`` where ``b`` is zero).

    Examples
    --------
    >>> relative_difference(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    0.0
    """
    ref = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b)) / (ref if ref > 0 else 1.0)



def interleaved(calls: dict[str, Callable[[], object]], rounds: int, inner: int = 1,
                pause_after: dict[str, float] | None = None,
                warmup: float = 0.02) -> dict[str, tuple[float, float]]:
    """Time several calls in rounds: one warm-up each, then every call in turn per round.

    Parameters
    ----------
    calls : dict of str to callable
        What to time, by name; called without arguments.
    rounds : int
        Timed rounds (positive).
    inner : int
        Back-to-back calls per timing (positive); each sample is their mean (for calls too
        short to time one by one).
    pause_after : dict of str to float, optional
        Seconds to sleep (untimed) after the named calls' samples; the call timed next then
        runs untimed for ``warmup`` seconds first (at least once). For switches between
        thread pools: idle OpenBLAS threads busy-wait about 0.1 s after a call (OpenMP's
        more briefly), taking the cores of the other pool's next call; the pause lets them
        sleep, the untimed calls wake the next pool's threads and bring its data back into
        cache.
    warmup : float
        Seconds of untimed calls after a pause (nonnegative): the calls timed before the
        next one that pauses, in turn, each at least once (so every thread the stretch uses
        is awake; the pausing call itself only where it comes first). Warming up the next
        call alone left a later one on a cold core where the first ran on one thread: on
        the 2-core VM of session 30 ``wsesparse bench --tlr --nx 20`` timed the forward
        product of 4 right-hand sides, the first two-thread call after the pause, at 0.16
        ms best, 10x its 0.016 ms in a row. Nor was one call of each: on the 2-core
        development VM the first four or five 2499^2 TLR products (4.5 MB of bases) after
        a 0.15 s pause took 1.3-7x their steady time, and so did numpy's (medians of 15
        pauses: 747, 197, 132, 149, 113 us, then about 100 us). Nor were
        2 ms: the next 10 two-thread products still took 103-120 us each (one thread's
        time), against 64 us without the pause or after 20 ms of calls; after a sleep
        Linux ran both of the team's threads on one core for some milliseconds. With
        20 ms the cache-resident comparison read 60/63 us (best/median) for ``T @ x``
        and 111/118 us for numpy, against 110/120 and 137/148 us with 2 ms.

    Returns
    -------
    dict of str to (float, float)
        ``(best, median)`` seconds per call over the rounds, by name.

    Examples
    --------
    >>> t = interleaved({"a": lambda: sum(range(100)), "b": lambda: None}, rounds=3,
    ...                 pause_after={"b": 0.001})
    >>> sorted(t), all(0 <= best <= med for best, med in t.values())
    (['a', 'b'], True)
    """
    rounds = check_int(rounds, "rounds", minimum=1)
    inner = check_int(inner, "inner", minimum=1)
    warmup = check_real(warmup, "warmup", minimum=0)
    pause_after = dict(pause_after or {})
    for k, v in pause_after.items():
        if k not in calls:
            raise ValueError(f"pause_after names {k!r}, which is not among the calls")
        check_real(v, f"pause_after[{k!r}]", minimum=0)
    samples: dict[str, list[float]] = {k: [] for k in calls}
    for f in calls.values():
        f()
    # The warm-up ends like a round: after a call that pauses, the first timed call runs
    # its untimed warm-up too (round 1's first sample came straight after the last call's
    # warm-up, on the other pool's spinning threads: found by a review session).
    last = next(reversed(calls)) if calls else None
    paused = last in pause_after
    if paused:
        time.sleep(pause_after[last])
    names = list(calls)
    stretch = {}  # name -> the calls from it to the next pause, its warm-up after one
    for i, k in enumerate(names):
        j = next((j for j in range(i, len(names)) if names[j] in pause_after), len(names))
        stretch[k] = [calls[n] for n in names[i:max(j, i + 1)]]  # (not the pausing call)
    for _ in range(rounds):
        for k, f in calls.items():
            if paused:
                t_end = time.perf_counter() + warmup
                for g in stretch[k]:
                    g()
                while time.perf_counter() < t_end:
                    for g in stretch[k]:
                        g()
            t = time.perf_counter()
            for _ in range(inner):
                f()
            samples[k].append((time.perf_counter() - t) / inner)
            paused = k in pause_after
            if paused:
                time.sleep(pause_after[k])
    return {k: (float(np.min(v)), float(np.median(v))) for k, v in samples.items()}

