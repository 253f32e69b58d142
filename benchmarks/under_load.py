"""Products beside busy processes: quiet and loaded medians, interleaved.

Users run beside notebooks, Dask workers, test runners and other jobs. This script
times ``sparse_matmul`` (one-shot, default thread count, with the load rule of
``wsesparse._threads`` on and off) and scipy on a grid of products, first on the machine
as it is, then beside ``--busy`` processes spinning in ``while True: pass`` (default:
twice the cores), and prints median milliseconds and loaded / quiet ratios. torch.sparse
joins when it is installed. Settings alternate within each round, so drift hits them
alike; take the medians of several rounds (``--rounds``).

    python benchmarks/under_load.py                       # 4096^2 1 % N = 1, 8, 64; 2048^2 5 % N = 256
    python benchmarks/under_load.py --seconds 0.1 --rounds 1 --busy 1   # a quick look
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

GRID = ((4096, 0.01, 1), (4096, 0.01, 8), (4096, 0.01, 64), (2048, 0.05, 256))


def _calls(A, X):
    """name -> zero-argument call, for every library present."""
    from wsesparse import _threads, sparse_matmul

    def ours(aware):
        def call():
            _threads.LOAD_AWARE = aware
            return sparse_matmul(A, X)
        return call

    calls = {"wsesparse": ours(True), "wsesparse, rule off": ours(False), "scipy": lambda: A @ X}
    try:
        import torch
        At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                     torch.from_numpy(A.indices.astype(np.int64)),
                                     torch.from_numpy(A.data), size=A.shape)
        Xt = torch.from_numpy(X if X.ndim == 2 else X[:, None])
        calls["torch.sparse"] = lambda: At @ Xt
    except ImportError:
        pass
    return calls


def _medians(cases, seconds: float, rounds: int) -> dict:
    times: dict = {}
    for _ in range(rounds):
        for label, calls in cases:
            for name, call in calls.items():
                for _ in range(3):
                    call()
                ts = []
                end = time.perf_counter() + seconds
                while time.perf_counter() < end:
                    t0 = time.perf_counter()
                    call()
                    ts.append(time.perf_counter() - t0)
                times.setdefault((label, name), []).extend(ts)
    return {key: statistics.median(ts) for key, ts in times.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1),
                   help="busy processes beside the loaded run (default: twice the cores)")
    p.add_argument("--seconds", type=float, default=0.4, help="timing per case and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=float, default=1.0, help="matrix sides times this")
    args = p.parse_args(argv)
    if args.busy < 0 or args.rounds < 1 or not args.seconds > 0 or not args.scale > 0:
        p.error(f"need --busy >= 0, --rounds >= 1, --seconds > 0 and --scale > 0, got "
                f"{args.busy}, {args.rounds}, {args.seconds}, {args.scale}")
    import scipy.sparse as sp
    rng = np.random.default_rng(0)
    cases = []
    for m, density, n in GRID:
        m = max(8, int(m * args.scale))
        A = sp.random(m, m, density=density, format="csr", random_state=0, dtype=np.float32)
        X = rng.standard_normal((m,) if n == 1 else (m, n)).astype(np.float32)
        cases.append((f"{m}^2 {density:g} N={n}", _calls(A, X)))
    from wsesparse import _threads
    saved = _threads.LOAD_AWARE
    try:
        quiet = _medians(cases, args.seconds, args.rounds)
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(args.busy)]
        try:
            time.sleep(0.2)
            loaded = _medians(cases, args.seconds, args.rounds)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    finally:
        _threads.LOAD_AWARE = saved
    print(f"{os.cpu_count()} CPUs, {args.busy} busy processes in the loaded run; "
          f"median ms quiet / loaded (ratio), {args.rounds} rounds of {args.seconds} s")
    for label, calls in cases:
        row = "  ".join(f"{name} {quiet[label, name] * 1e3:.3f} / {loaded[label, name] * 1e3:.3f}"
                        f" ({loaded[label, name] / quiet[label, name]:.1f}x)" for name in calls)
        print(f"{label:>18}: {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
