"""Thread scaling of the sparse kernels: 1, 2, 4, 8, ... threads up to all cores, prepared CSR.

Prints GFLOP/s (2*nnz*N / t, best of adaptive repeats) for each thread count (default: 1
and the powers of two up to all cores, and all cores) and the speedup of the largest count
over one thread, per point of the grid, with ``method="sparse"`` so that the AXPY kernels
are measured (never the dense dispatch), on teams of the size asked for (the library's
small-product rule, which gives small products fewer threads, is lifted meanwhile). The
thread counts are timed in turn at each point, round after round, so a load that comes and
goes on a shared machine hits all of them about equally. The last lines give the median
speedup over one thread for each count.

``--references`` adds two rows, each count in turn in alternating rounds, for what the
machine itself gives more threads: a dense float32 GEMM through numpy's BLAS (a
compute-bound kernel, whose rate per core falls with the clocks of a busier chip; at 16
threads its 2048^2 @ 256 lasts 1.5 ms, short too) and the STREAM-like triad as an OpenMP
loop (DRAM-bound; arrays of 3 x 160 MB allocated for each count and round, best of 3).

Example::

    python benchmarks/scaling.py --sizes 4096 --tokens 1,8,64,256 --densities 0.01,0.001
    python benchmarks/scaling.py --threads 1,16      # two counts only
    python benchmarks/scaling.py --references        # and the GEMM's and triad's scaling
"""

from __future__ import annotations

import argparse
import os
import sys

try:
    import wsesparse  # noqa: F401
except ImportError:  # run from a source checkout that is built in place but not installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from wsesparse import CSR, sparse_matmul
from wsesparse import _thresholds as th
from wsesparse._hardware import available_cores
from wsesparse._timing import best_time, comma_list, thread_counts
from wsesparse.bench.bandwidth import triad_kernel_pass
from wsesparse.datasets import random_csr, random_dense

#: The references' sizes: GEMM (side, side) @ (side, columns) float32, triad arrays of
#: float64 (3 x 160 MB: beyond the L3 of the machines measured)
REF_GEMM_SIDE, REF_GEMM_COLUMNS, REF_TRIAD_ELEMS = 2048, 256, 20_000_000


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=comma_list(int), default=[4096, 16384], help="M = K values")
    p.add_argument("--tokens", type=comma_list(int), default=[1, 8, 64, 256, 1024])
    p.add_argument("--densities", type=comma_list(float), default=[0.1, 0.01, 0.001])
    p.add_argument("--dtypes", type=comma_list(str), default=["float32", "float64"])
    p.add_argument("--threads", type=comma_list(int), default=None,
                   help="thread counts (default: 1, 2, 4, ... and all cores)")
    p.add_argument("--budget", type=float, default=0.5,
                   help="seconds of timed calls per thread count, per round")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per point")
    p.add_argument("--references", action="store_true",
                   help="also time a dense GEMM (BLAS) and the triad (OpenMP) per count")
    args = p.parse_args(argv)
    counts = sorted(set(args.threads or thread_counts(available_cores())))
    if not counts or counts[0] < 1 or args.rounds < 1 or not args.budget > 0:
        p.error("need --threads >= 1, --rounds >= 1 and --budget > 0")
    if counts[0] != 1:
        counts = [1] + counts  # the speedups are over one thread

    T = counts[-1]
    # Teams as asked: below MIN_WORK_PER_THREAD multiply-adds per thread the library gives
    # a product fewer threads than n_threads, and the "16 thr" column of a small point ran
    # on 2 (found by a review session). Lifted while timing, as in small_products.py.
    saved, th.MIN_WORK_PER_THREAD = th.MIN_WORK_PER_THREAD, 1
    try:
        return _table(args, counts, T)
    finally:
        th.MIN_WORK_PER_THREAD = saved


def _table(args, counts: list[int], T: int) -> int:
    print("teams as asked (the small-product rule, MIN_WORK_PER_THREAD, is lifted)")
    print(f"{'M':>6} {'N':>5} {'density':>7} {'dtype':>8} {'nnz':>10} | "
          + " ".join(f"{f'{n} thr':>8}" for n in counts)
          + f" | {f'{T}/1':>7}   (GFLOP/s, prepared CSR)")
    speedups: dict[int, list[float]] = {n: [] for n in counts[1:]}
    worst = None
    for M in args.sizes:
        for dtype in args.dtypes:
            for density in args.densities:
                A = CSR(random_csr(M, M, density, dtype))
                for N in args.tokens:
                    X = random_dense(M, N, dtype)
                    X = X[:, 0].copy() if N == 1 else X
                    flops = 2.0 * A.nnz * N
                    best = dict.fromkeys(counts, np.inf)
                    for _ in range(args.rounds):
                        for n in counts:
                            _, t = best_time(lambda n=n: sparse_matmul(A, X, n_threads=n,
                                                                       method="sparse"),
                                             budget=args.budget)
                            best[n] = min(best[n], t)
                    for n in counts[1:]:
                        speedups[n].append(best[1] / best[n])
                    s = best[1] / best[T]
                    if worst is None or s < worst[0]:
                        worst = (s, M, N, density, dtype)
                    print(f"{M:>6} {N:>5} {density:>7g} {dtype:>8} {A.nnz:>10} | "
                          + " ".join(f"{flops / best[n] / 1e9:>8.3g}" for n in counts)
                          + f" | {s:>6.2f}x", flush=True)
    if worst is not None and T > 1:
        print(f"min {T}-thread speedup {worst[0]:.2f}x at M={worst[1]} N={worst[2]} "
              f"density={worst[3]:g} {worst[4]}")
        for n in counts[1:]:
            print(f"median speedup over 1 thread, {n} threads: "
                  f"{float(np.median(speedups[n])):.2f}x")
    if args.references:
        _references(args, counts, T)
    return 0


def _references(args, counts: list[int], T: int) -> None:
    """The GEMM's GFLOP/s and the triad's GB/s per thread count, and their T / 1."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    G = rng.standard_normal((REF_GEMM_SIDE, REF_GEMM_SIDE), dtype=np.float32)
    B = rng.standard_normal((REF_GEMM_SIDE, REF_GEMM_COLUMNS), dtype=np.float32)
    C = np.empty((REF_GEMM_SIDE, REF_GEMM_COLUMNS), dtype=np.float32)

    def gemm(n: int) -> float:
        with threadpool_limits(limits=n, user_api="blas"):
            return best_time(lambda: np.matmul(G, B, out=C), budget=args.budget)[1]

    def triad(n: int) -> float:
        step, check, _ = triad_kernel_pass(n, REF_TRIAD_ELEMS)   # (arrays of this count)
        t = best_time(step, repeats=3)[1]
        check()
        return t

    rows = [(f"GEMM float32 {REF_GEMM_SIDE}^2 @ {REF_GEMM_COLUMNS} (BLAS), GFLOP/s", gemm,
             2.0 * G.size * REF_GEMM_COLUMNS)]
    if triad_kernel_pass(1, 1) is not None:
        mb = REF_TRIAD_ELEMS * 8 / 1e6
        rows.append((f"triad float64 3 x {mb:.3g} MB (OpenMP), GB/s", triad,
                     24.0 * REF_TRIAD_ELEMS))
    for label, fn, work in rows:
        best = dict.fromkeys(counts, np.inf)
        for _ in range(args.rounds):
            for n in counts:
                best[n] = min(best[n], fn(n))
        print(f"reference: {label:44s} | "
              + " ".join(f"{work / best[n] / 1e9:>8.3g}" for n in counts)
              + f" | {best[1] / best[T]:>6.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
