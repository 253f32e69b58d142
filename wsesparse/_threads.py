"""How many OpenMP threads a kernel call may use."""

from __future__ import annotations

import numbers
import os
import time

from wsesparse._kernels import _spmm

# Below this many multiply-adds a call runs on one thread: waking the OpenMP
# team costs more than it saves.
_MIN_WORK_PER_THREAD = 32_768

_OPENMP = _spmm.openmp_enabled()


# The affinity mask is re-read at most this often (seconds): the system call
# costs 0.5-1.5 us here, a tenth of a small product; a mask changed with
# os.sched_setaffinity takes effect within this delay.
AFFINITY_MAX_AGE = 0.05
_affinity: tuple[float, int] = (-float("inf"), 1)  # (when read, CPU count)


def _available_cores() -> int:
    """CPUs this process may run on (its affinity mask, read AFFINITY_MAX_AGE s ago at most)."""
    global _affinity
    now = time.monotonic()
    when, n = _affinity
    if now - when <= AFFINITY_MAX_AGE:
        return n
    n = _spmm.available_cores()  # sched_getaffinity from C: ~3x cheaper than os's
    if n <= 0:  # pragma: no cover - not Linux
        try:
            n = max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            n = max(1, os.cpu_count() or 1)
    _affinity = (now, n)
    return n


def resolve_n_threads(n_threads: int | None, work: int = 1 << 62) -> int:
    """Return the number of threads for a kernel doing ``work`` multiply-adds.

    ``None`` means OpenMP's own default, which honours ``OMP_NUM_THREADS`` and
    ``threadpoolctl.threadpool_limits`` (it limits the OpenMP runtime these
    kernels are linked against), capped at the cores this process may use.
    An explicit positive integer is used as given.
    """
    if n_threads is not None:
        if isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral):
            raise TypeError(f"n_threads must be a positive int or None, got {n_threads!r}")
        if n_threads < 1:
            raise ValueError(f"n_threads must be a positive int or None, got {n_threads}")
    cap = work // _MIN_WORK_PER_THREAD
    if cap < 2 or not _OPENMP:
        return 1  # decided without asking the OpenMP runtime or the OS
    # Comparisons rather than min()/max(): this runs on every product, and
    # the builtins cost 0.4 us of a 2.4 us call here.
    if n_threads is None:
        n = _spmm.max_threads()  # >= 1
        cores = _available_cores()  # >= 1
        if cores < n:
            n = cores
    else:
        n = int(n_threads)
    return n if n < cap else cap
