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

import wsesparse
from wsesparse.bench.workflows import SOLVERS, solver_problems

MODES = ("scipy", 1, "shared")


def run(name: str, A, solve, rounds: int) -> str:
    """The line of one workflow: ``solve(op)`` returns its answer for ``op`` = ``A``."""
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
    p.add_argument("--only", default=",".join(SOLVERS), help=f"among {', '.join(SOLVERS)}")
    args = p.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if args.rounds < 1 or not 0 < args.scale <= 1 or not set(only) <= set(SOLVERS) or not only:
        p.error(f"need --rounds >= 1, 0 < --scale <= 1 and --only among {', '.join(SOLVERS)}")
    from wsesparse import _blas_share
    libs, why = _blas_share.candidates()
    print("shared: " + ("OpenBLAS's parallel calls on wsesparse's threads" if libs
                        else "not possible here (" + "; ".join(why) + "): BLAS on one thread"))
    for name, _, solve, A in solver_problems(args.scale, 300, tuple(only)):
        print(run(name, A, lambda op, solve=solve: solve(op)[0], args.rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
