"""Best-of-repeats wall-clock timing, shared by ``wsesparse demo``, ``wsesparse bench`` and
the scripts in ``benchmarks/`` (private: not part of the API)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

MAX_REPEATS = 50


def best_time(fn: Callable[[], Any], repeats: int = 5, budget: float | None = None,
              max_repeats: int = MAX_REPEATS,
              single_call_above: float | None = None, *,
              warmup: bool = True) -> tuple[Any, float]:
    """``(result of the first (warm-up) call, best time in seconds of the timed calls)``.

    Without ``budget``: exactly ``repeats`` timed calls after the warm-up. With ``budget``
    (seconds) the repeats are adaptive: a warm-up that takes more than
    ``single_call_above`` (default ``2 * budget``) is the only call (its time is
    reported); otherwise timed calls run until ``repeats`` of them have run and half of
    ``budget`` is spent, or, from the second call on, all of ``budget`` (at most
    ``max_repeats`` calls), so fast calls get many repeats, which on a shared machine is
    what finds a quiet moment. With ``warmup=False`` (no ``budget``) the first call is timed as
    one of the ``repeats`` calls (at least one) instead of being a warm-up: for loops whose
    first call is part of the measurement, as the STREAM-like triads of ``wsesparse bench``.

    Examples
    --------
    >>> out, t = best_time(lambda: sum(range(100)), repeats=3)
    >>> out, t > 0
    (4950, True)
    >>> calls = []
    >>> _ = best_time(lambda: calls.append(1), repeats=3, warmup=False)
    >>> len(calls)
    3
    """
    if not warmup and budget is not None:
        raise ValueError("best_time: warmup=False takes no budget")
    t0 = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t0
    if budget is None:
        best = first if repeats < 1 or not warmup else float("inf")
        for _ in range(repeats if warmup else repeats - 1):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return result, best
    if first > (2 * budget if single_call_above is None else single_call_above):
        return result, first
    best, spent = float("inf"), 0.0
    for i in range(max_repeats):
        t0 = time.perf_counter()
        fn()
        t = time.perf_counter() - t0
        spent += t
        best = min(best, t)
        if i >= 1 and spent > budget:
            break
        if i + 1 >= repeats and spent > budget / 2:
            break
    return result, best


def thread_counts(cores: int) -> list[int]:
    """The thread counts a scaling measurement visits: 1, 2, 4, ... below ``cores``, and
    ``cores`` (``benchmarks/scaling.py``, ``benchmarks/phases.py``).

    Examples
    --------
    >>> thread_counts(16), thread_counts(6), thread_counts(1)
    ([1, 2, 4, 8, 16], [1, 2, 4, 6], [1])
    """
    cores = max(int(cores), 1)
    return sorted({1 << k for k in range(cores.bit_length()) if 1 << k < cores} | {cores})


def comma_list(cast: Callable[[str], Any]) -> Callable[[str], list]:
    """An argparse ``type`` for comma-separated values, each through ``cast`` (empty items
    skipped); the benchmark scripts' ``--sizes 4096,16384`` style options.

    Examples
    --------
    >>> comma_list(int)("1,8,,64")
    [1, 8, 64]
    """
    return lambda s: [cast(v) for v in s.split(",") if v]
