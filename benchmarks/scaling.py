"""Thread scaling of the sparse kernels: 1 thread vs all cores, prepared CSR.

Prints GFLOP/s (2*nnz*N / t, best of adaptive repeats) with ``n_threads=1`` and with
``n_threads=T`` (default: all cores) and the speedup, per point of the grid, with
``method="sparse"`` so the AXPY kernels are measured (never the dense dispatch). The two
thread counts are timed alternately at each point, so a load that comes and goes on a
shared machine hits both about equally.

Example::

    python benchmarks/scaling.py --sizes 4096 --tokens 1,8,64,256 --densities 0.01,0.001
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
from wsesparse._timing import best_time
from wsesparse.datasets import random_csr, random_dense


def _list(cast):
    return lambda s: [cast(v) for v in s.split(",") if v]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=_list(int), default=[4096, 16384], help="M = K values")
    p.add_argument("--tokens", type=_list(int), default=[1, 8, 64, 256, 1024])
    p.add_argument("--densities", type=_list(float), default=[0.1, 0.01, 0.001])
    p.add_argument("--dtypes", type=_list(str), default=["float32", "float64"])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="the multi-threaded count (default: all cores)")
    p.add_argument("--budget", type=float, default=0.5,
                   help="seconds of timed calls per thread count, per round")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per point")
    args = p.parse_args(argv)

    T = args.threads
    print(f"{'M':>6} {'N':>5} {'density':>7} {'dtype':>8} {'nnz':>10} | "
          f"{'1 thread':>9} {f'{T} threads':>10} | speedup   (GFLOP/s, prepared CSR)")
    speedups = []
    for M in args.sizes:
        for dtype in args.dtypes:
            for density in args.densities:
                A = CSR(random_csr(M, M, density, dtype))
                for N in args.tokens:
                    X = random_dense(M, N, dtype)
                    X = X[:, 0].copy() if N == 1 else X
                    flops = 2.0 * A.nnz * N
                    best = {1: np.inf, T: np.inf}
                    for _ in range(args.rounds):
                        for n in (1, T):
                            _, t = best_time(lambda n=n: sparse_matmul(A, X, n_threads=n,
                                                                       method="sparse"),
                                             budget=args.budget)
                            best[n] = min(best[n], t)
                    s = best[1] / best[T]
                    speedups.append((s, M, N, density, dtype))
                    print(f"{M:>6} {N:>5} {density:>7g} {dtype:>8} {A.nnz:>10} | "
                          f"{flops / best[1] / 1e9:>9.1f} {flops / best[T] / 1e9:>10.1f} | "
                          f"{s:>6.2f}x", flush=True)
    if speedups:
        lo = min(speedups)
        print(f"min speedup {lo[0]:.2f}x at M={lo[1]} N={lo[2]} density={lo[3]:g} {lo[4]}; "
              f"median {float(np.median([s[0] for s in speedups])):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
