"""Zones of banded one-chunk scatters against one chunk, per core count.

A one-shot ``A @ x`` with a scipy CSC ``A`` (and ``x @ W`` with a CSR ``W``) scatters the
rows of its CSR transpose. Where the output gives one row chunk, a banded matrix still splits
into zones, one per core (``_drivers.scatter_zones``; docs/tuning.md, "Transposed products
(scatter) and copies"). Until session 28 only token rows of 24 bytes or more took them; this
script measured the narrow ones: for every thread count n, as if the machine had n cores
(``available_cores`` patched to n, ``n_threads=n``), ``chunk`` (zones off) against ``zones``
(the shipped rule), with scipy's product in the same rounds. Banded matrices (Poisson 2-D
and 3-D) and a random one (which takes no zones: its columns spread over every row).

Best of ``--rounds`` rounds of adaptive repeats (``--budget`` s a product and round), ms::

    python benchmarks/scatter_zones.py                      # all thread counts
    python benchmarks/scatter_zones.py --threads 1,2 --scale 0.3
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager

try:
    import wsesparse  # noqa: F401
except ImportError:  # run from a source checkout that is built in place but not installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import scipy.sparse as sp

from wsesparse import _drivers
from wsesparse import _thresholds as th
from wsesparse import sparse_matmul
from wsesparse._hardware import available_cores
from wsesparse._timing import best_time, comma_list, thread_counts
from wsesparse.bench.workflows import poisson_2d


def _poisson_3d(g: int) -> sp.csc_array:
    """The 7-point Laplacian on a g^3 grid, CSC."""
    one = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(g, g))
    eye = sp.eye_array(g)
    return (sp.kron(sp.kron(one, eye), eye) + sp.kron(sp.kron(eye, one), eye)
            + sp.kron(sp.kron(eye, eye), one)).tocsc()


def cases(scale: float):
    """``(label, A, X)``: banded CSC matrices (Poisson 2-D and 3-D) and a random one (no
    zones: its columns spread over every row) times one or a few vectors."""
    rng = np.random.default_rng(0)
    P2 = poisson_2d(max(8, int(1000 * scale))).tocsc()
    P3 = _poisson_3d(max(4, int(100 * scale)))
    n = P2.shape[0]
    R = sp.random_array((n, n), density=5 / n, format="csc", rng=1)
    out = []
    for label, A, widths in ((f"Poisson 2-D {n}", P2, ((np.float64, 1), (np.float64, 2),
                                                         (np.float32, 1), (np.float32, 2),
                                                         (np.float32, 4))),
                             (f"Poisson 3-D {P3.shape[0]}", P3, ((np.float64, 1),
                                                                 (np.float32, 1))),
                             (f"random {n}, 5 a column", R, ((np.float64, 1),))):
        for dtype, N in widths:
            Ad = A.astype(dtype)
            k = A.shape[1]
            X = rng.standard_normal(k if N == 1 else (k, N)).astype(dtype)
            out.append((f"{label} {np.dtype(dtype).name} N={N}", Ad, X))
    return out


@contextmanager
def as_if(cores: int, zones: bool):
    """``_drivers`` sees ``cores`` cores; without ``zones`` no scatter takes them."""
    saved = _drivers.available_cores, th.SCATTER_ZONE_MIN_WORK
    _drivers.available_cores = lambda: cores
    if not zones:
        th.SCATTER_ZONE_MIN_WORK = 1 << 62
    try:
        yield
    finally:
        _drivers.available_cores, th.SCATTER_ZONE_MIN_WORK = saved


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=comma_list(int), default=None,
                   help="thread (and core) counts (default: 1, 2, 4, ... and all cores)")
    p.add_argument("--budget", type=float, default=0.1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=float, default=1.0, help="grid sides times this")
    a = p.parse_args(argv)
    counts = sorted(set(a.threads or thread_counts(available_cores())))
    if not counts or counts[0] < 1 or a.rounds < 1 or not a.budget > 0 or not a.scale > 0:
        p.error("need --threads >= 1, --rounds >= 1, --budget > 0, --scale > 0")
    print(f"ms, best of {a.rounds} rounds; n thr: one chunk / zones, as if the machine had "
          f"n cores")
    print(f"{'product':36s} {'scipy':>7} " + " ".join(f"{str(n) + ' thr':>15}" for n in counts))
    for label, A, X in cases(a.scale):
        want = A @ X
        scale = float(np.abs(want).max()) or 1.0
        calls = {"scipy": lambda A=A, X=X: A @ X}
        for n in counts:
            for z in (False, True):
                def ours(n=n, z=z, A=A, X=X):
                    with as_if(n, z):
                        return sparse_matmul(A, X, n_threads=n)
                calls[(n, z)] = ours
        best = dict.fromkeys(calls, np.inf)
        for _ in range(a.rounds):
            for k, f in calls.items():
                got, t = best_time(f, budget=a.budget)
                if not np.allclose(got, want, rtol=1e-4, atol=1e-4 * scale):
                    raise AssertionError(f"{label}, {k}: the result differs from scipy's")
                best[k] = min(best[k], t)
        row = " ".join(f"{best[(n, False)] * 1e3:>7.3f}/{best[(n, True)] * 1e3:<7.3f}"
                       for n in counts)
        print(f"{label:36s} {best['scipy'] * 1e3:>7.3f} {row}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
