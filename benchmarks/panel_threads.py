"""Token panels against thread counts: the prepared product with the panel width forced.

Issue #27 asks 12x from 1 to 16 threads. On the lent 16-core Xeon (session 28) the points that
scaled least were products with rows of more than ``SHORT_ROW_NNZ`` nonzeros and N >= 64
(5.9-7x), whose panel width (``_drivers.panel_width``) was chosen for one core: an L3 slice of
X when the one-core probe finds L3 fast (``_hardware.probe_fast_l3``). With every core reading
X from L3 at once the slice may no longer be worth it. This times, at each point, the
prepared ``CSR`` (``method="sparse"``) with the widths the library picks (``default``) and
with forced widths (whole 64-byte lines of a row of X, ``k_block`` off), on one thread and
on all cores: medians of ``--rounds`` interleaved rounds
(``wsesparse.bench.tlr_setup.interleaved``), GFLOP/s, and each width's speedup of all cores
over one thread. Panel widths change which register tile sums a column, so the forced
results may differ from the default's in the last bits (never with the thread count).

Example::

    python benchmarks/panel_threads.py --tokens 64,256 --densities 0.01
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

from wsesparse import CSR, _drivers, sparse_matmul
from wsesparse import _thresholds as th
from wsesparse._hardware import available_cores, current
from wsesparse._timing import comma_list
from wsesparse.bench.tlr_setup import interleaved
from wsesparse.datasets import random_csr, random_dense


def _forced(width: int | None):
    """Patch the drivers to sweep ``width`` columns a panel (None: the library's choice)."""
    if width is None:
        return _drivers.panel_width, _drivers.k_block
    return (lambda shape, nnz, n, itemsize, hw: min(width, n)), (lambda *a: 0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=16384, help="M = K")
    p.add_argument("--tokens", type=comma_list(int), default=[8, 64, 256])
    p.add_argument("--densities", type=comma_list(float), default=[0.1, 0.01])
    p.add_argument("--dtypes", type=comma_list(str), default=["float32", "float64"])
    p.add_argument("--lines", type=comma_list(int), default=[1, 2, 4, 8, 16],
                   help="forced widths, in 64-byte lines of a row of X")
    p.add_argument("--threads", type=int, default=None, help="all cores by default")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    if (args.rounds < 1 or (args.threads is not None and args.threads < 1) or args.size < 1
            or min(args.lines, default=0) < 1):
        p.error("need --rounds, --threads, --size and every --lines >= 1")
    T = args.threads or available_cores()
    hw = current()
    print(f"L2 {hw.l2_bytes >> 10} KiB, L3 {hw.l3_bytes >> 20} MiB, cores {available_cores()}, "
          f"L3 panel {_drivers.l3_panel_bytes(hw) >> 10} KiB (0: L3 not fast)")
    saved = (_drivers.panel_width, _drivers.k_block, th.MIN_WORK_PER_THREAD)
    th.MIN_WORK_PER_THREAD = 1  # teams as asked
    try:
        for dtype in args.dtypes:
            itemsize = np.dtype(dtype).itemsize
            for density in args.densities:
                A = CSR(random_csr(args.size, args.size, density, dtype))
                for N in args.tokens:
                    X = random_dense(args.size, N, dtype)
                    line = 64 // itemsize
                    widths = [None] + sorted({min(n * line, N) for n in args.lines})
                    kb = _drivers.k_block(A.shape, A.nnz, N, np.dtype(dtype), hw)
                    # (the panel product_into sweeps: one column-block tile wide with kb)
                    default = (hw.kblock_tile_bytes // itemsize if kb
                               else _drivers.panel_width(A.shape, A.nnz, N, itemsize, hw))
                    calls = {}
                    for w in widths:
                        for n in (1, T):
                            def call(w=w, n=n):
                                _drivers.panel_width, _drivers.k_block = _forced(w)
                                try:
                                    sparse_matmul(A, X, n_threads=n, method="sparse")
                                finally:
                                    _drivers.panel_width, _drivers.k_block = saved[:2]
                            calls[f"{w}/{n}"] = call
                    med = interleaved(calls, args.rounds)
                    flops = 2.0 * A.nnz * N
                    cells = []
                    for w in widths:
                        one, all_ = med[f"{w}/1"][1], med[f"{w}/{T}"][1]
                        name = f"default({default}{',kb' if kb else ''})" if w is None else w
                        cells.append(f"{name}: {flops / one / 1e9:.3g}/{flops / all_ / 1e9:.3g}"
                                     f" {one / all_:.1f}x")
                    print(f"{dtype} d={density:g} N={N} (GFLOP/s 1/{T} thr): "
                          + "; ".join(cells), flush=True)
    finally:
        _drivers.panel_width, _drivers.k_block, th.MIN_WORK_PER_THREAD = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
