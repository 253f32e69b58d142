"""How many OpenMP threads a kernel call may use."""

from __future__ import annotations

import os
from time import monotonic as _monotonic

from wsesparse import _thresholds as th
from wsesparse._checks import check_int
from wsesparse._hardware import available_cores, runnable_threads
from wsesparse._kernels import _runtime, _spmm

_OPENMP = _runtime.openmp_enabled()

# Whether the default thread count leaves out cores that other threads are busy on
# (WSESPARSE_LOAD_AWARE=0 turns it off): a team
# thread that must share its core waits for a scheduler time slice (milliseconds) and
# the whole product waits with it (docs/tuning.md, "Threads").
LOAD_AWARE = os.environ.get("WSESPARSE_LOAD_AWARE", "1").strip() != "0"
# The largest explicit n_threads: 4 per core, at least 64. Beyond the system's thread limit
# OpenMP aborted the process (n_threads=40000) or crashed it (100000); well before it a
# product took seconds to start its team on 2 cores.
MAX_THREADS = max(64, 4 * (os.cpu_count() or 1))
_last_team = 1  # threads of the last team: they may still be spinning, runnable
_last_call = float("-inf")  # monotonic time of the last call that could take a team
_cold_since = float("-inf")  # ... and of the first call after an idle spell
# The last team call after an idle spell, probed (_kernels/_team_wake.h): (probe count
# when armed, its work, its team) until _cold_limit reads it; and what waking the team cost
# the last _WAKE_SAMPLES such calls, seconds (the largest counts: one quick wake does not
# undo a slow one).
_armed: tuple[int, int, int] | None = None
_wake_costs: list[float] = []
_WAKE_SAMPLES = 4
# OpenBLAS's calls run on the kernels' team (wsesparse._blas_share sets it while held):
# their teams count as the last team and as calls (its threads may spin after one too).
blas_shared = False
# A child process forked from this one runs every kernel on one thread: GCC's OpenMP runtime
# does not survive a fork (its pool's threads stay in the parent), and a child's first
# two-thread region after the parent used the team never ended (a SpMV in a child of
# os.fork(), or of multiprocessing's default start method on Linux).
forked = False


def _after_fork_in_child() -> None:
    global forked
    forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def cold_max_work(threads: int) -> int:
    """Multiply-adds below which a product called after an idle spell runs on one thread,
    for a team of ``threads``, at least: ``COLD_MAX_WORK`` for 2, half as many per twice the
    threads (more where waking the team was measured to cost more: ``_cold_limit``).

    A fit to two machines (docs/tuning.md, "Threads"): on the 2-core shared VM a team woken
    after a spell started 5-8 ms late and one thread won up to 4 M multiply-adds; on a
    16-core host it woke in about 0.45 ms and the team won from 1 M. From 128 threads the
    limit is at most ``2 * MIN_WORK_PER_THREAD``, where products run on one thread anyway.

    Examples
    --------
    >>> from wsesparse import _thresholds as th
    >>> cold_max_work(2) == th.COLD_MAX_WORK, cold_max_work(16) == th.COLD_MAX_WORK // 8
    (True, True)
    """
    return th.COLD_MAX_WORK * 2 // max(int(threads), 2)


def _cold_limit(threads: int) -> int:
    """Multiply-adds below which a product after an idle spell runs on one thread: the
    larger of :func:`cold_max_work` and the work one thread does (at
    ``COLD_SECONDS_PER_WORK``) in the largest time that the last ``_WAKE_SAMPLES`` probed
    cold team calls lost, times ``threads / (threads - 1)`` (the break-even of ``t`` alone
    and ``cost + t / threads``; docs/tuning.md, "Measured wake cost").
    """
    global _armed
    if _armed is not None:
        count, work, team = _armed
        _armed = None
        probed, seconds = _spmm.wake_probe()
        if probed == count + 1:  # the armed call's own region (not another kernel's)
            cost = seconds - work * th.COLD_SECONDS_PER_WORK / team
            _wake_costs.append(cost if cost > 0.0 else 0.0)
            del _wake_costs[:-_WAKE_SAMPLES]
    limit = cold_max_work(threads)
    if _wake_costs and threads > 1:
        measured = int(max(_wake_costs) * threads
                       / ((threads - 1) * th.COLD_SECONDS_PER_WORK))
        if measured > limit:
            return measured
    return limit


def resolve_n_threads(n_threads: int | None, work: int = 1 << 62,
                      idle_rule: bool = False) -> int:
    """Return the number of threads for a kernel doing ``work`` multiply-adds.

    Below ``2 * MIN_WORK_PER_THREAD`` multiply-adds a call runs on one thread; from there
    on at most one thread per ``MIN_WORK_PER_THREAD / TEAM_GROWTH`` of them
    (``wsesparse/_thresholds.py``). Within that,
    ``None`` means OpenMP's own default, which honours ``OMP_NUM_THREADS`` and
    ``threadpoolctl.threadpool_limits`` (it limits the OpenMP runtime these
    kernels are linked against), capped at the cores this process may use and,
    with ``LOAD_AWARE``, at the cores no other thread is running on (other
    processes, BLAS threads; see ``runnable_threads``), at least one. Also with
    ``LOAD_AWARE``, products (``idle_rule``: the callers whose ``work`` counts a
    product's multiply-adds) of fewer than :func:`cold_max_work` (of the default team; more
    where waking the team was measured to cost more: ``_cold_limit``) run on one thread
    for ``COLD_RUN_SECONDS`` after no call could take a team for ``COLD_TEAM_SECONDS``: a
    team woken after such a spell may start milliseconds late.
    An explicit positive integer up to ``MAX_THREADS`` (4 per core, at least 64) is used as
    given, except in a process forked from another (``forked``): there every call runs on
    one thread. A larger one raises ValueError.
    """
    if n_threads is not None:  # (None, the commonest value, costs no call)
        n_threads = check_int(n_threads, "n_threads", minimum=1, allow_none=True)
        if n_threads > MAX_THREADS:
            raise ValueError(f"n_threads must be a positive int or None, at most {MAX_THREADS} "
                             f"(4 per core, at least 64), got {n_threads}")
    cap = work // th.MIN_WORK_PER_THREAD
    if cap < 2 or not _OPENMP or forked:
        return 1  # decided without asking the OpenMP runtime or the OS
    # Once a team pays at all, more of it pays sooner (16 cores: docs/tuning.md, Threads).
    cap *= th.TEAM_GROWTH
    # Comparisons rather than min()/max(): this runs on every product, and
    # the builtins cost 0.4 us of a 2.4 us call here.
    global _last_team, _last_call, _cold_since, _armed
    now = _monotonic()
    if blas_shared:
        team, when = _runtime.blas_pool_team()
        if when > _last_call:
            # (else a product decided on one thread stays there: the rule counted the
            # BLAS call's spinning thread as another process's)
            _last_call = when
            if team > _last_team:
                _last_team = team
    if now - _last_call > th.COLD_TEAM_SECONDS:
        _cold_since = now
    _last_call = now
    cold = False
    if n_threads is None:
        n = _runtime.max_threads()  # >= 1
        cores = available_cores()  # >= 1
        if cores < n:
            n = cores
        cold = idle_rule and now - _cold_since < th.COLD_RUN_SECONDS and LOAD_AWARE
        if cold and work < _cold_limit(n):
            # A team idle for COLD_TEAM_SECONDS may wake milliseconds late (shared VMs:
            # docs/tuning.md, "Timing after an idle spell"): a small product runs alone.
            # (_last_team is left as it is: a team that ran in the window may still spin.)
            return 1
        if LOAD_AWARE:
            # Runnable now, less this thread and the last team's (perhaps still
            # spinning): other threads, each holding a core.
            free = cores - (runnable_threads() - _last_team)
            if free < n:
                n = free if free > 1 else 1
    else:
        n = int(n_threads)
    n = n if n < cap else cap
    _last_team = n
    if cold and n > 1:  # the kernel times its team's wake (_cold_limit reads it)
        _armed = (_spmm.wake_probe_arm(), work, n)
    return n
