#!/usr/bin/env python
"""Peer comparison: ``wsesparse.sparse_matmul`` against the sparse libraries users have today.

The code lives in ``wsesparse.bench`` (``wsesparse bench`` once the package is installed); this
script runs it from a source tree with the kernels built in place, with the same options::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/peers.py            # full grid
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/peers.py --quick    # ~30 s
    python benchmarks/peers.py --sizes 4096 --tokens 1,64 --densities 0.01 --csv out.csv

It times sparse (M x K) @ dense (K x N) with wsesparse (one-shot and prepared ``CSR``), scipy,
sparse_dot_mkl, python-graphblas, torch.sparse and dense numpy BLAS; the peers are optional
(``pip install sparse_dot_mkl python-graphblas torch``) and missing ones are listed as "not
installed" and left out. See the ``wsesparse.bench`` package for what is measured and
checked.

This module is import-safe: asv imports every module of ``benchmarks/``, so all work
happens in ``main()``.
"""

from __future__ import annotations

import os
import sys


def _import_wsesparse():
    try:
        import wsesparse  # noqa: F401
    except ImportError:
        # Running as `python benchmarks/peers.py` from a source tree built in place.
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import wsesparse
    return wsesparse


_import_wsesparse()

# Re-exported for benchmarks/crossover.py and for existing callers of this script's helpers.
from wsesparse.bench import (DENSE_LIMIT_BYTES, MAX_REPEATS, PEER_ORDER, PEERS,  # noqa: E402,F401
                             TOLERANCE, best_time, check, check_reference, format_row, header,
                             load_peers, make_calls, parse_args, random_csr, random_dense,
                             run_point, spmv_bytes, summary, triad_bandwidth,
                             triad_bandwidth_kernel, triad_bandwidth_torch)
from wsesparse.bench import main as _main  # noqa: E402

EPILOG = ("Example: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "
          "python benchmarks/peers.py --sizes 4096 --csv peers.csv")


def main(argv=None) -> int:
    return _main(argv, epilog=EPILOG)


if __name__ == "__main__":
    sys.exit(main())
