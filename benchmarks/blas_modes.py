"""Solver workflows under ``wsesparse.accelerated()`` with BLAS on its own limit of one
thread (``blas_threads=1``) against BLAS on the kernels' threads (``"shared"``, the
default), beside plain scipy, in alternating rounds in one process.

``wsesparse bench --workflows`` times the default only; this shows what the shared team
gains or costs on a machine (docs/accelerate.md, "One team for BLAS and the kernels": on
2 cores eigsh 1.29x -> 1.46x, lsqr 1.47x -> 1.64x, minres about even; not yet measured on
16 cores). Each line: the workflow, then per mode its best and median seconds and its
speedups over scipy's best and median, and how far its answer is from scipy's.

Example (small problems)::

    python benchmarks/blas_modes.py --scale 0.1 --rounds 2 --only cg,eigsh
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import scipy.sparse.linalg as sla

import wsesparse
from wsesparse.bench.workflows import graph_laplacian, poisson_2d, rectangular_system

MODES = ("scipy", 1, "shared")
NAMES = ("cg", "minres", "eigsh", "lsqr")


def problem(name: str, scale: float):
    """``(scipy matrix, solve(op) returning the answer)`` of a workflow, its size times
    ``scale`` (as in wsesparse/bench/workflows.py)."""
    if name in ("cg", "minres"):
        A = poisson_2d(max(4, int(1000 * scale)))
        b = np.ones(A.shape[0])
        solver = sla.cg if name == "cg" else sla.minres
        return A, lambda op: solver(op, b, rtol=1e-30, maxiter=300)[0]
    if name == "eigsh":
        n = max(50, int(200_000 * scale))
        v0 = np.random.default_rng(1).standard_normal(n)
        return graph_laplacian(n, 20), lambda op: np.sort(
            sla.eigsh(op, k=4, which="LA", v0=v0, ncv=20, tol=1e-8)[0])
    R = rectangular_system(max(40, int(200_000 * scale)), max(10, int(50_000 * scale)), 10)
    c = np.ones(R.shape[0])
    return R, lambda op: sla.lsqr(op, c, atol=0, btol=0, conlim=0, iter_lim=300)[0]


def run(name: str, A, solve, rounds: int) -> str:
    times = {m: [] for m in MODES}
    answers = {}
    for r in range(rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        for mode in order:
            t0 = time.perf_counter()
            if mode == "scipy":
                answers[mode] = solve(A)
            else:
                with wsesparse.accelerated(blas_threads=mode):
                    answers[mode] = solve(A)
            times[mode].append(time.perf_counter() - t0)
    best0, med0 = min(times["scipy"]), float(np.median(times["scipy"]))
    scale = float(np.abs(answers["scipy"]).max()) or 1.0
    cells = [f"scipy {best0:.3f} / {med0:.3f} s"]
    for mode in MODES[1:]:
        best, med = min(times[mode]), float(np.median(times[mode]))
        diff = float(np.abs(answers[mode] - answers["scipy"]).max()) / scale
        label = "blas_threads=1" if mode == 1 else "shared"
        cells.append(f"{label} {best:.3f} / {med:.3f} s ({best0 / best:.2f}x / "
                     f"{med0 / med:.2f}x, difference {diff:.1e})")
    return f"{name}: " + "; ".join(cells)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="problem sizes times this")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default=",".join(NAMES), help=f"among {', '.join(NAMES)}")
    args = p.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if args.rounds < 1 or not 0 < args.scale <= 1 or not set(only) <= set(NAMES) or not only:
        p.error(f"need --rounds >= 1, 0 < --scale <= 1 and --only among {', '.join(NAMES)}")
    from wsesparse import _blas_share
    libs, why = _blas_share.candidates()
    print("shared: " + ("OpenBLAS's parallel calls on wsesparse's threads" if libs and not why
                        else "not possible here (" + "; ".join(why) + "): BLAS on one thread"))
    for name in only:
        print(run(name, *problem(name, args.scale), args.rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
