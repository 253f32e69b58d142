"""One-shot transposed products (scatter) per thread count, against scipy.

``X @ W`` with a scipy CSR ``W`` and ``A @ X`` with a scipy CSC ``A`` multiply by the
transpose of the stored CSR arrays. ``sparse_matmul`` scatters them without transposing
(one or two 128-byte token panels, row chunks summed into copies, or zones of a banded
matrix) or, for wide token rows, transposes the arrays first (``csr_transpose``); see
docs/tuning.md, "Transposed products (scatter) and copies". Every rule there was tuned on
2 cores. This script times the products users call (activations times weights, lsqr's
``R.T @ u``, the logistic-regression gradient ``F.T @ r``, a CSC Poisson matrix times one
or a few vectors) at 1, 2, 4, ... and all threads, with scipy's product in the same rounds.
(``benchmarks/scatter_zones.py`` times the zones of banded one-chunk scatters against one
chunk per core count.)

Best of rounds of adaptive repeats (``--budget`` seconds per product and round), ms; the
last column is scipy's time over all threads'. Example (issue #27's 16-core run)::

    python benchmarks/transposed.py
    python benchmarks/transposed.py --scale 0.1 --threads 1,2    # a small run
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

from wsesparse import sparse_matmul
from wsesparse._hardware import available_cores
from wsesparse._timing import best_time, comma_list, thread_counts
from wsesparse.bench.workflows import poisson_2d, rectangular_system, tfidf_like
from wsesparse.datasets import random_csr


def _cases(scale: float):
    """``(label, scipy call, our call taking n_threads)`` for every product timed, the
    problems' sides times ``scale``."""
    rng = np.random.default_rng(0)

    def side(n: int) -> int:
        return max(16, int(n * scale))

    cases = []
    for n, d in ((side(4096), 0.01), (side(16384), 0.001)):
        W = random_csr(n, n, d, np.float32, seed=1)
        for T in (1, 8, 24, 48, 64):
            X = rng.standard_normal((T, n)).astype(np.float32)
            X = X[0].copy() if T == 1 else X
            cases.append((f"X @ W  {n}^2 d={d:g} f32 T={T}", lambda X=X, W=W: X @ W,
                          lambda t, X=X, W=W: sparse_matmul(X, W, n_threads=t)))
    P = poisson_2d(side(1000)).tocsc()
    for N in (1, 3, 8):
        X = rng.standard_normal(P.shape[1] if N == 1 else (P.shape[1], N))
        cases.append((f"CSC Poisson {P.shape[0]} f64 N={N}", lambda X=X: P @ X,
                      lambda t, X=X: sparse_matmul(P, X, n_threads=t)))
    R = rectangular_system(side(200_000), side(50_000), 10)
    u = rng.standard_normal(R.shape[0])
    cases.append((f"lsqr R.T @ u {R.shape[1]}x{R.shape[0]}", lambda: R.T @ u,
                  lambda t: sparse_matmul(R.T, u, n_threads=t)))
    F = tfidf_like(side(50_000), side(20_000), 42)[0]
    r = rng.standard_normal(F.shape[0])
    cases.append((f"gradient F.T @ r {F.shape[1]}x{F.shape[0]}", lambda: F.T @ r,
                  lambda t: sparse_matmul(F.T, r, n_threads=t)))
    return cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=comma_list(int), default=None,
                   help="thread counts (default: 1, 2, 4, ... and all cores)")
    p.add_argument("--budget", type=float, default=0.2,
                   help="seconds of timed calls per product and round")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per product")
    p.add_argument("--scale", type=float, default=1.0,
                   help="problem sides times this (1: W of 4096^2 and 16384^2, Poisson "
                        "1000^2, lsqr 200,000 x 50,000, TF-IDF 50,000 x 20,000)")
    args = p.parse_args(argv)
    counts = sorted(set(args.threads or thread_counts(available_cores())))
    if (not counts or counts[0] < 1 or args.rounds < 1 or not args.budget > 0
            or not 0 < args.scale <= 1):
        p.error("need --threads >= 1, --rounds >= 1, --budget > 0 and 0 < --scale <= 1")
    T = counts[-1]
    cols = ["scipy"] + [f"{n} thr" for n in counts]
    print(f"ms, best of {args.rounds} rounds")
    print(f"{'product':42s} " + " ".join(f"{c:>8}" for c in cols) + f" {'scipy/' + str(T):>9}")
    for label, ref, ours in _cases(args.scale):
        calls = {"scipy": ref, **{f"{n} thr": (lambda n=n: ours(n)) for n in counts}}
        want = np.asarray(ref())
        scale = float(np.abs(want).max()) or 1.0
        best = dict.fromkeys(calls, np.inf)
        for _ in range(args.rounds):
            for k, f in calls.items():
                got, t = best_time(f, budget=args.budget)
                if not np.allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4 * scale):
                    raise AssertionError(f"{label}, {k}: the result differs from scipy's")
                best[k] = min(best[k], t)
        print(f"{label:42s} " + " ".join(f"{best[c] * 1e3:>8.3f}" for c in cols)
              + f" {best['scipy'] / best[f'{T} thr']:>8.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
