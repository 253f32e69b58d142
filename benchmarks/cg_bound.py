"""How far routing products can take scipy's cg on a machine: #28's CG target under
``wsesparse.accelerated()`` against what the product leaves to numpy.

scipy's cg does numpy vector work between its products (two dots, a norm, three scaled
additions, each on one thread); routing the product speeds up only the rest. This times, on
the Poisson matrix of ``wsesparse bench --workflows``, in alternating rounds in one process
(per iteration or product, ms):

- scipy's cg iteration, and the same with a matvec that returns a stored vector (numpy's
  vector work alone);
- products alone (medians of ``--reps`` back to back): scipy's, the routed one-shot under
  ``accelerated()``, a prepared ``CSR``'s;
- the routed cg's iteration and ``wsesparse.linalg.cg``'s.

and prints the bounds ``scipy / (vector work + product)`` for the routed and the prepared
product and for a product of no cost, beside the measured speedups (docs/accelerate.md,
session 45: on 2 cores 1.15x, 1.28x and 1.88x, the routed cg measured 1.14x and
``linalg.cg`` 2.4x in the workflows bench).

Example (a small grid)::

    python benchmarks/cg_bound.py --grid 300 --rounds 2
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import scipy.sparse.linalg as sla

import wsesparse
from wsesparse.bench.workflows import poisson_2d


def _per_iteration(solve, iterations: int) -> float:
    t0 = time.perf_counter()
    solve()
    return (time.perf_counter() - t0) / iterations


def _alone(product, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        product()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(grid: int, iterations: int, rounds: int, reps: int) -> dict[str, list[float]]:
    """Seconds, a list per quantity (one entry a round): ``scipy``, ``numpy_only``,
    ``routed`` and ``linalg`` per cg iteration; ``product_scipy``, ``product_routed`` and
    ``product_csr`` per product alone."""
    A = poisson_2d(grid)
    b = np.ones(A.shape[0])
    x = np.random.default_rng(0).standard_normal(A.shape[1])
    P = wsesparse.CSR(A)
    stored = A @ x
    kw = dict(rtol=1e-30, maxiter=iterations)

    def cg_with(matvec):
        op = sla.LinearOperator(A.shape, matvec=matvec, dtype=A.dtype)
        return _per_iteration(lambda: sla.cg(op, b, **kw), iterations)

    out: dict[str, list[float]] = {k: [] for k in (
        "scipy", "numpy_only", "routed", "linalg", "product_scipy", "product_routed",
        "product_csr")}
    for _ in range(rounds):
        out["scipy"].append(cg_with(lambda v: A @ v))
        out["numpy_only"].append(cg_with(lambda v: stored.copy()))
        with wsesparse.accelerated():
            out["routed"].append(cg_with(lambda v: A @ v))
            out["product_routed"].append(_alone(lambda: A @ x, reps))
            out["product_csr"].append(_alone(lambda: P @ x, reps))
        out["product_scipy"].append(_alone(lambda: A @ x, reps))
        out["linalg"].append(_per_iteration(lambda: wsesparse.linalg.cg(A, b, **kw),
                                            iterations))
    return out


def report(times: dict[str, list[float]]) -> list[str]:
    """The lines printed: each quantity's times in ms, then the bounds and the measured
    speedups (from medians over the rounds)."""
    names = {"scipy": "scipy's cg iteration", "numpy_only": "numpy's vector work alone",
             "routed": "routed cg iteration", "linalg": "wsesparse.linalg.cg iteration",
             "product_scipy": "scipy's product alone", "product_routed":
             "routed one-shot product alone", "product_csr": "prepared CSR product alone"}
    lines = [f"{names[k]:32s} " + " ".join(f"{t * 1e3:.3g}" for t in v) + " ms"
             for k, v in times.items()]
    m = {k: float(np.median(v)) for k, v in times.items()}
    lines.append(
        f"bounds: routed product {m['scipy'] / (m['numpy_only'] + m['product_routed']):.2f}x, "
        f"prepared product {m['scipy'] / (m['numpy_only'] + m['product_csr']):.2f}x, "
        f"a product of no cost {m['scipy'] / m['numpy_only']:.2f}x; measured: routed cg "
        f"{m['scipy'] / m['routed']:.2f}x, wsesparse.linalg.cg {m['scipy'] / m['linalg']:.2f}x")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", type=int, default=1000, help="Poisson grid side (1000: 10^6 "
                   "unknowns, as the workflows bench)")
    p.add_argument("--iterations", type=int, default=100, help="cg iterations a run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=50, help="products timed alone a round")
    args = p.parse_args(argv)
    if args.grid < 4 or args.iterations < 1 or args.rounds < 1 or args.reps < 1:
        p.error("need --grid >= 4 and --iterations, --rounds, --reps >= 1")
    print(f"cg on the Poisson matrix {args.grid}x{args.grid}, {args.iterations} iterations, "
          f"{args.rounds} alternating rounds (ms per iteration or product):")
    for line in report(measure(args.grid, args.iterations, args.rounds, args.reps)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
