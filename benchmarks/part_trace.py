"""Where a product on T threads loses against 1/T of one thread's time: its row parts traced.

Issue #27 asks the prepared kernels to scale 12x from 1 to 16 threads; on the lent 16-core
Xeon the 16384^2 density-0.001 SpMV took 23.6 us on 16 threads against 156 on one (session
47), and the grid's density-0.01 products with 64 and 256 columns scaled under 7x. This
script says where such a call's time goes. For each product (a prepared ``CSR`` of the
random matrices of #27's grid, ``method="sparse"``) and thread count, it makes ``--calls``
traced calls after a warm-up, the thread counts in turn in every round (the kernels'
``_spmm.part_trace``: which thread took each row part, and when it started and ended it).
Medians over the calls, in microseconds:

- ``call``: the whole ``sparse_matmul`` call; ``sweep``: from the kernel's start of the
  sweep to the team's join (for several panels, the first panel's sweep);
- ``start 1st / last``: when the first and the last thread began its first part (a team
  waking slowly shows here);
- ``busy``: the sum of the part times; ``x1``: that over one thread's (cores contending for
  caches or memory show as x1 above 1; a matrix that fits the caches of T cores together
  and not one core's may go below 1);
- ``end / mean``: the last thread's end over the mean end of the threads (an imbalance);
- ``stolen``: the share of parts not taken by their queue's own thread (_part_queues.h;
  ``-`` in a build with one shared queue, ``WS_PARTS_SHARED=1``).

With ``--tlr`` it traces TLR-MVM products instead (issue #24: on the Xeon the 9801^2
forward with 64 vectors scaled 5.85x from 1 to 16 threads): the seismic operators of
``wsesparse bench --tlr`` (``--grids``, nx x ny sources), forward and adjoint with
``--vectors`` right-hand sides. A product's three phases are traced as one sweep
(``_tlrmvm.part_trace``), and the columns are per phase: ``ph1 / ph2 / ph3``, each phase's
time (from the last end of the phase before, or the sweep's start, to its own last end:
barriers and waking included); ``x1`` of phases 1 and 3; ``end/mean`` of phases 1 and 3,
from the phase's start, threads without an item counted as ending there (so 16 threads on
10 items show it). ``--previous-cut`` adds rows ``fwd-prev``: the forward with the work
items of the rule before session 50 (docs/tuning.md, "Shares of equal work"), in the same
rounds.

The teams are the size asked for (the small-product rule is lifted meanwhile, as in
``scaling.py``). Example::

    python benchmarks/part_trace.py --sizes 16384 --densities 0.001,0.01 --tokens 1,8,64
    python benchmarks/part_trace.py --threads 1,8,16 --calls 31
    python benchmarks/part_trace.py --tlr --grids 49x51,99x99 --vectors 1,16,64 --previous-cut
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

try:
    import wsesparse  # noqa: F401
except ImportError:  # run from a source checkout that is built in place but not installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from wsesparse import CSR, sparse_matmul
from wsesparse import _thresholds as th
from wsesparse._hardware import available_cores
from wsesparse._kernels import _spmm, _tlrmvm
from wsesparse._timing import comma_list, thread_counts
from wsesparse.datasets import random_csr, random_dense

#: Untraced calls before each traced one (the team of that size awake, the caches warm)
WARM_CALLS = 5


def trace_call(fn, n_parts: int, module=_spmm) -> tuple[float, np.ndarray, int, tuple]:
    """``(call_us, parts, joined_ns, phases)`` of one call of ``fn`` with the part trace of
    ``module`` (``_spmm`` or ``_tlrmvm``) armed for ``n_parts`` parts (``parts``: rows of
    thread, start and end in ns; ``phases``: the first part of phases 2 and 3)."""
    module.part_trace_arm(n_parts)
    t0 = time.perf_counter()
    fn()
    call = (time.perf_counter() - t0) * 1e6
    got = module.part_trace()
    if got is None:
        raise RuntimeError("the call made no traced sweep (a product that is not a CSR "
                           "sweep or TLR product, or one of more parts than armed)")
    return (call, *got)


def summary(parts: np.ndarray, joined: int, n_threads: int) -> dict[str, float]:
    """The figures of one traced sweep (see the module docstring; times in us)."""
    n = len(parts)
    thread, start, end = parts[:, 0], parts[:, 1], parts[:, 2]
    firsts = [start[thread == t].min() for t in np.unique(thread)]
    ends = np.array([end[thread == t].max() for t in np.unique(thread)], dtype=float)
    # queue k holds parts [n k / T, n (k + 1) / T): its owner is thread k
    owner = np.searchsorted(np.arange(1, n_threads + 1) * n // n_threads, np.arange(n),
                            side="right")
    return {"sweep": joined / 1e3, "first": min(firsts) / 1e3, "last": max(firsts) / 1e3,
            "busy": float((end - start).sum()) / 1e3,
            "end/mean": float(ends.max() / ends.mean()) if ends.mean() > 0 else 1.0,
            "stolen": float((thread != owner).mean()) if n_threads > 1 else 0.0}


def phase_summary(parts: np.ndarray, joined: int, phases: tuple[int, int],
                  n_threads: int) -> dict[str, float]:
    """The per-phase figures of one traced TLR product (see the module docstring; us)."""
    out = {"sweep": joined / 1e3}
    bounds = [0, *phases, len(parts)]
    begin = 0.0
    for k in range(3):
        mine = parts[bounds[k]:bounds[k + 1]]
        if len(mine) == 0:
            out.update({f"ph{k + 1}": 0.0, f"busy{k + 1}": 0.0, f"end/mean{k + 1}": 1.0})
            continue
        last = float(mine[:, 2].max())
        ends = np.full(n_threads, begin)
        for t, e in zip(mine[:, 0], mine[:, 2]):
            ends[t] = max(ends[t], e)
        span = ends - begin
        out.update({f"ph{k + 1}": (last - begin) / 1e3,
                    f"busy{k + 1}": float((mine[:, 2] - mine[:, 1]).sum()) / 1e3,
                    f"end/mean{k + 1}": float(span.max() / span.mean()) if span.mean() > 0
                    else 1.0})
        begin = last
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=comma_list(int), default=[16384], help="M = K values")
    p.add_argument("--tokens", type=comma_list(int), default=[1, 8, 64])
    p.add_argument("--densities", type=comma_list(float), default=[0.01, 0.001])
    p.add_argument("--dtypes", type=comma_list(str), default=["float32"])
    p.add_argument("--threads", type=comma_list(int), default=None,
                   help="thread counts (default: 1, 2, 4, ... and all cores)")
    p.add_argument("--calls", type=int, default=21, help="traced calls per count")
    p.add_argument("--tlr", action="store_true", help="trace TLR-MVM products instead")
    p.add_argument("--grids", type=comma_list(_grid), default=[(49, 51), (99, 99)],
                   help="with --tlr: seismic operators, nx x ny sources")
    p.add_argument("--vectors", type=comma_list(int), default=[1, 16, 64],
                   help="with --tlr: right-hand sides")
    p.add_argument("--previous-cut", action="store_true",
                   help="with --tlr: also the forward with the work items of the rule before "
                        "session 50 (rows fwd-prev)")
    args = p.parse_args(argv)
    counts = sorted(set(args.threads or thread_counts(available_cores())) | {1})
    if counts[0] < 1 or args.calls < 1:
        p.error("need --threads >= 1 and --calls >= 1")
    saved, th.MIN_WORK_PER_THREAD = th.MIN_WORK_PER_THREAD, 1
    try:
        (_tlr_table if args.tlr else _table)(args, counts)
    finally:
        th.MIN_WORK_PER_THREAD = saved
    return 0


def _table(args, counts: list[int]) -> None:
    print(f"{available_cores()} cores, kernels built for {_spmm.KERNEL_ISA}, parts from "
          f"{'one shared queue' if _spmm.PARTS_SHARED else 'a queue per thread'}; "
          f"medians of {args.calls} traced calls, us")
    head = (f"{'product':<32}{'thr':>4}{'call':>9}{'sweep':>9}{'start 1st/last':>16}"
            f"{'busy':>9}{'x1':>6}{'end/mean':>9}{'stolen':>8}{'speedup':>8}")
    print(head)
    for n, d, N, dt in [(n, d, N, dt) for n in args.sizes for d in args.densities
                        for N in args.tokens for dt in args.dtypes]:
        P = CSR(random_csr(n, n, d, np.dtype(dt), seed=1))
        X = random_dense(n, N, np.dtype(dt), seed=2)
        X = X[:, 0].copy() if N == 1 else X
        rows: dict[int, list] = {T: [] for T in counts}
        for _ in range(args.calls):
            for T in counts:
                def fn(T=T):
                    return sparse_matmul(P, X, n_threads=T, method="sparse")
                for _ in range(WARM_CALLS):
                    fn()
                n_parts = 1 if T == 1 else T * th.PARTS_PER_THREAD
                call, parts, joined, _ = trace_call(fn, n_parts)
                rows[T].append(dict(summary(parts, joined, T), call=call))
        med = {T: {k: statistics.median(r[k] for r in rows[T]) for k in rows[T][0]}
               for T in counts}
        label = f"{n}^2 d={d:g} N={N} {dt}"
        for T in counts:
            m = med[T]
            print(f"{label:<32}{T:>4}{m['call']:>9.1f}{m['sweep']:>9.1f}"
                  f"{m['first']:>8.1f}/{m['last']:<7.1f}{m['busy']:>9.1f}"
                  f"{m['busy'] / med[1]['busy']:>6.2f}{m['end/mean']:>9.2f}"
                  f"{stolen(m['stolen']):>8}{med[1]['call'] / m['call']:>8.2f}")


def _grid(text: str) -> tuple[int, int]:
    """``--grids``' items: ``nx x ny`` (or ``nx`` for a square grid) as two ints >= 1."""
    nx, _, ny = text.partition("x")
    try:
        grid = int(nx), int(ny or nx)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a grid is NXxNY or NX, got {text!r}") from None
    if min(grid) < 1:
        raise argparse.ArgumentTypeError(f"a grid needs sides >= 1, got {text!r}")
    return grid


def _tlr_table(args, counts: list[int]) -> None:
    from wsesparse.bench.tlr_setup import random_operand, seismic_operator

    print(f"{available_cores()} cores, TLR kernels; items from "
          f"{'one shared queue' if _tlrmvm.PARTS_SHARED else 'a queue per thread'}; "
          f"medians of {args.calls} traced calls, us")
    print(f"{'product':<26}{'thr':>4}{'call':>10}{'sweep':>10}{'ph1 / ph2 / ph3':>28}"
          f"{'x1 ph1/3':>12}{'end/mean 1/3':>14}{'speedup':>8}")
    rng = np.random.default_rng(0)
    kinds = ["fwd", "adj"] + (["fwd-prev"] if args.previous_cut else [])
    for grid in args.grids:
        T = seismic_operator(*grid)[0]
        for s in args.vectors:
            # (the forward's x has T.shape[1] rows, the adjoint's T.shape[0])
            Xs = [random_operand(rng, (m, s), T.dtype) for m in T.shape[::-1]]
            Xs = [X[:, 0].copy() if s == 1 else X for X in Xs]
            rows: dict[tuple, list] = {(k, n): [] for k in kinds for n in counts}
            for _ in range(args.calls):
                for kind, n in rows:  # (every kind and count in every round)
                    _use_items(T, n, kind == "fwd-prev")
                    f, X = (T.rmatvec, Xs[1]) if kind == "adj" else (T.matvec, Xs[0])

                    def fn(n=n, f=f, X=X):
                        return f(X, n_threads=n)
                    for _ in range(WARM_CALLS):
                        fn()
                    n_parts = 3 * (T.shape[0] + T.shape[1])  # (more than the items)
                    call, parts, joined, phases = trace_call(fn, n_parts, _tlrmvm)
                    rows[kind, n].append(dict(phase_summary(parts, joined, phases, n),
                                              call=call))
            for n in counts:
                _use_items(T, n, False)
            for kind in kinds:
                _print_tlr_rows(f"{T.shape[0]}^2 {kind} s={s}", rows, kind, counts)


def _use_items(T, n: int, previous: bool) -> None:
    """Plan T's forward on ``n`` threads with its own items, or with those of the rule
    before session 50 (``--previous-cut``: ranges of >= 64 outputs, about PARTS per
    thread, where whole tiles are unbalanced; docs/tuning.md, "Shares of equal work")."""
    from wsesparse.tlr._split import FORWARD_CUT_ABOVE, tile_items

    T.__dict__.pop("_plan_cache", None)
    cache = T.__dict__.setdefault("_item_cache", {})
    cache.pop((n, False), None)
    if previous:
        kc, kr = T.ranks.sum(axis=0), T.ranks.sum(axis=1)
        w, h = np.diff(T.col_ptr), np.diff(T.row_ptr)
        rule = dict(grain=64, cut_above=FORWARD_CUT_ABOVE)
        cache[n, False] = (tile_items(kc, w, n, **rule), tile_items(h, kr, n, **rule))


def _print_tlr_rows(label: str, rows: dict, kind: str, counts: list[int]) -> None:
    med = {n: {k: statistics.median(r[k] for r in rows[kind, n]) for k in rows[kind, n][0]}
           for n in counts}
    one = med[1]
    for n in counts:
        m = med[n]
        x1 = [m[f"busy{k}"] / one[f"busy{k}"] if one[f"busy{k}"] else 1.0 for k in (1, 3)]
        phases_us = f"{m['ph1']:.1f} / {m['ph2']:.1f} / {m['ph3']:.1f}"
        print(f"{label:<26}{n:>4}{m['call']:>10.1f}{m['sweep']:>10.1f}{phases_us:>28}"
              f"{x1[0]:>6.2f}/{x1[1]:<5.2f}{m['end/mean1']:>7.2f}/{m['end/mean3']:<6.2f}"
              f"{one['call'] / m['call']:>8.2f}")


def stolen(share: float) -> str:
    """The ``stolen`` column: a percentage, or ``-`` where all threads share one queue."""
    return "-" if _spmm.PARTS_SHARED else f"{100 * share:.0f}%"


if __name__ == "__main__":
    sys.exit(main())
