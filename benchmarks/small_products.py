"""Where a second thread starts to pay: small prepared products on 1 thread and on a team.

``resolve_n_threads`` gives a product one thread below ``2 * MIN_WORK_PER_THREAD``
multiply-adds, then a thread per ``MIN_WORK_PER_THREAD / TEAM_GROWTH`` of them
(``wsesparse/_thresholds.py``; SpMV counts ``SPMV_WORK`` per nonzero and row). This script
measures that rule instead of trusting it: for a ladder of work sizes around the threshold
it builds a prepared ``CSR`` (square, about 8 nonzeros per row) whose product has that much
work, and times the product on one thread, on ``--threads`` threads (default all cores) with
the threshold lifted, and as the default call decides. Two ways of calling, in interleaved
rounds:

* back to back: ``--inner`` calls per sample, the team still awake from the last one
  (a solver loop with nothing in between);
* spaced: one call per sample after a ``--gap`` seconds pause, in which the OpenMP team
  goes to sleep (a product between other Python work).

For each ladder point it prints the medians (us) and the team's speedup over one thread;
the last lines name the smallest work from which the team is faster in both modes at every
larger point, next to ``MIN_WORK_PER_THREAD``.

Example::

    python benchmarks/small_products.py                 # float64, N = 1 and 8
    python benchmarks/small_products.py --tokens 1,8,64 --dtypes float32,float64 --threads 16
"""

from __future__ import annotations

import argparse
import os
import sys
import time

try:
    import wsesparse  # noqa: F401
except ImportError:  # run from a source checkout that is built in place but not installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from wsesparse import CSR, _thresholds as th, sparse_matmul
from wsesparse._hardware import available_cores
from wsesparse._threads import resolve_n_threads
from wsesparse._timing import comma_list
from wsesparse.datasets import random_csr, random_dense

ROW_NNZ = 8  # nonzeros per row of the test matrices


def product_work(nnz: int, rows: int, n_tokens: int) -> int:
    """The work ``resolve_n_threads`` is given for a prepared CSR product (``_drivers.py``)."""
    if n_tokens == 1:
        return th.SPMV_WORK * (nnz + rows)
    return nnz * n_tokens + rows


def rows_for_work(work: int, n_tokens: int) -> int:
    """Rows of a square matrix with ``ROW_NNZ`` nonzeros per row whose product has about
    ``work`` (at least 16 rows)."""
    per_row = th.SPMV_WORK * (ROW_NNZ + 1) if n_tokens == 1 else ROW_NNZ * n_tokens + 1
    return max(16, int(round(work / per_row)))


def _time(f, inner: int) -> float:
    t = time.perf_counter()
    for _ in range(inner):
        f()
    return (time.perf_counter() - t) / inner


def measure(A: CSR, X: np.ndarray, team: int, rounds: int, inner: int,
            gap: float) -> dict[str, dict[str, float]]:
    """Medians (seconds) of ``1 thread``, ``team`` and ``default`` per mode."""
    calls = {"1": lambda: _matmul(A, X, 1),
             "team": lambda: _matmul(A, X, team),
             "default": lambda: _matmul(A, X, None)}
    out = {mode: {k: [] for k in calls} for mode in ("back to back", "spaced")}
    saved = th.MIN_WORK_PER_THREAD
    for f in calls.values():
        f()
    for _ in range(rounds):
        for k, f in calls.items():
            th.MIN_WORK_PER_THREAD = saved if k == "default" else 1  # the team as asked
            try:
                f()
                out["back to back"][k].append(_time(f, inner))
                time.sleep(gap)
                out["spaced"][k].append(_time(f, 1))
            finally:
                th.MIN_WORK_PER_THREAD = saved
    return {mode: {k: float(np.median(v)) for k, v in d.items()} for mode, d in out.items()}


def _matmul(A: CSR, X: np.ndarray, n_threads: int | None):
    return sparse_matmul(A, X, n_threads=n_threads, method="sparse")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=comma_list(int), default=[1, 8], help="N values")
    p.add_argument("--dtypes", type=comma_list(str), default=["float64"])
    p.add_argument("--work", type=comma_list(int),
                   default=[2 ** k for k in range(11, 20)],
                   help="multiply-adds of work (the ladder)")
    p.add_argument("--threads", type=int, default=None, help="team size (default all cores)")
    p.add_argument("--rounds", type=int, default=21, help="interleaved rounds per point")
    p.add_argument("--inner", type=int, default=20, help="calls per back-to-back sample")
    p.add_argument("--gap", type=float, default=0.002,
                   help="seconds of pause before each spaced call")
    args = p.parse_args(argv)
    team = args.threads or available_cores()
    if team < 2 or args.rounds < 1 or args.inner < 1 or args.gap < 0 or not args.work \
            or min(args.work) < 1:
        p.error("need --threads >= 2 (or 2 cores), --rounds/--inner >= 1, --gap >= 0 and "
                "positive --work")
    print(f"MIN_WORK_PER_THREAD = {th.MIN_WORK_PER_THREAD}, SPMV_WORK = {th.SPMV_WORK}; "
          f"team of {team}; medians of {args.rounds} rounds, us "
          f"(back to back: {args.inner} calls per sample; spaced: {args.gap * 1e3:g} ms pause)")
    print(f"{'N':>4} {'dtype':>8} {'work':>8} {'rows':>7} {'default':>7} | "
          f"{'1 thr':>8} {'team':>8} {'default':>8} {'speedup':>7} | "
          f"{'1 thr':>8} {'team':>8} {'default':>8} {'speedup':>7}")
    print(f"{'':>38} | {'back to back':^34} | {'spaced':^34}")
    for N in args.tokens:
        for dtype in args.dtypes:
            wins, done = [], set()
            for work in sorted(args.work):
                n = rows_for_work(work, N)
                if n in done:  # the 16-row floor: the same matrix again
                    continue
                done.add(n)
                A = CSR(random_csr(n, n, min(1.0, ROW_NNZ / n), dtype))
                X = random_dense(n, N, dtype)
                X = X[:, 0].copy() if N == 1 else X
                w = product_work(A.nnz, n, N)
                chosen = resolve_n_threads(None, w)
                r = measure(A, X, team, args.rounds, args.inner, args.gap)
                row = f"{N:>4} {dtype:>8} {w:>8} {n:>7} {chosen:>7} |"
                ok = True
                for mode in ("back to back", "spaced"):
                    m = r[mode]
                    s = m["1"] / m["team"]
                    ok = ok and s > 1.0
                    row += (f" {m['1'] * 1e6:>8.1f} {m['team'] * 1e6:>8.1f} "
                            f"{m['default'] * 1e6:>8.1f} {s:>6.2f}x |")
                wins.append((w, ok))
                print(row.rstrip(" |"), flush=True)
            # smallest work from which the team wins at every larger point
            first = None
            for w, ok in reversed(wins):
                if not ok:
                    break
                first = w
            where = f"from {first} multiply-adds" if first is not None else "at no point"
            whole = max(2 * th.MIN_WORK_PER_THREAD,
                        team * th.MIN_WORK_PER_THREAD // th.TEAM_GROWTH)
            print(f"N={N} {dtype}: a team of {team} beats one thread in both modes {where} "
                  f"(MIN_WORK_PER_THREAD = {th.MIN_WORK_PER_THREAD}: parallel from "
                  f"{2 * th.MIN_WORK_PER_THREAD}, all {team} threads from {whole})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
