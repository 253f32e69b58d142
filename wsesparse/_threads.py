"""How many OpenMP threads a kernel call may use."""

from __future__ import annotations

import numbers

from wsesparse import _thresholds as th
from wsesparse._hardware import available_cores
from wsesparse._kernels import _runtime

_OPENMP = _runtime.openmp_enabled()


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
    cap = work // th.MIN_WORK_PER_THREAD
    if cap < 2 or not _OPENMP:
        return 1  # decided without asking the OpenMP runtime or the OS
    # Comparisons rather than min()/max(): this runs on every product, and
    # the builtins cost 0.4 us of a 2.4 us call here.
    if n_threads is None:
        n = _runtime.max_threads()  # >= 1
        cores = available_cores()  # >= 1
        if cores < n:
            n = cores
    else:
        n = int(n_threads)
    return n if n < cap else cap
