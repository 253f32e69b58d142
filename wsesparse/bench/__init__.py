"""``wsesparse bench``: ``sparse_matmul`` against the sparse libraries users have today.

Times sparse (M x K) @ dense (K x N) (or, with ``--left``, dense (N x K) @ sparse (K x M))
with

* ``wsesparse``      - ``sparse_matmul(A, X)`` on a scipy CSR matrix (validates every call)
* ``wsesparse.CSR``  - the same with a prepared ``wsesparse.CSR`` operand (validated once)
* ``scipy``          - ``A @ X`` (the reference every other result is checked against)
* ``mkl``            - ``sparse_dot_mkl.dot_product_mkl(A, X)``            (if installed)
* ``graphblas``      - python-graphblas / SuiteSparse:GraphBLAS ``mxm``/``mxv`` (if installed)
* ``torch``          - ``torch.sparse_csr_tensor(...) @ X``                 (if installed)
* ``dense``          - numpy BLAS ``A_dense @ X`` (dense matrix built outside the timing)

Every time is the best of a few repeats (fewer for slow points) in one process; the repeats
are spread over ``--rounds`` rounds that time every library in turn. Every result is
checked against scipy's (a peer whose result is wrong is reported as FAIL, never with a time),
and rates are GFLOP/s = 2 * nnz * N / t for every library, dense BLAS included, so the columns
compare directly. A STREAM-like triad at the top gives the memory bandwidth to compare the
SpMV (N = 1) rows with. ``benchmarks/peers.py`` runs the same code from a source tree.

The peers are optional (``pip install sparse_dot_mkl python-graphblas torch``); missing
ones are listed as "not installed" and left out. Importing this package does no work.

Modules: ``peers`` (loading the optional libraries, one call per library), ``points`` (one
point of the grid: timing, checks against scipy), ``bandwidth`` (the STREAM-like triad,
SpMV bytes), ``tables`` (the printed table and summary), ``cli`` (options, the run,
``register`` for ``wsesparse bench``), ``tlr`` (the ``--tlr`` section: TLR-MVM rates, the
numpy three-phase comparison). The random operands come from
:mod:`wsesparse.datasets`, the timing loop from ``wsesparse._timing``; both are re-exported
here, as is everything ``benchmarks/`` imports from this package.
"""

from wsesparse._timing import MAX_REPEATS, best_time
from wsesparse.bench.bandwidth import (spmv_bytes, triad_bandwidth, triad_bandwidth_kernel,
                                       triad_bandwidth_torch, triad_kernel_pass)
from wsesparse.bench.cli import (DESCRIPTION, add_arguments, finish_args, main, parse_args,
                                 print_load_average, register, run)
from wsesparse.bench.peers import PEER_ORDER, PEERS, load_peers, make_calls
from wsesparse.bench.points import (DENSE_LIMIT_BYTES, TOLERANCE, check, check_reference,
                                    retime, run_point)
from wsesparse.bench.tables import format_row, header, summary
from wsesparse.bench.tlr import format_rates, run_tlr, tlr_rates
from wsesparse.datasets import random_csr, random_dense

__all__ = [
    "DENSE_LIMIT_BYTES", "DESCRIPTION", "MAX_REPEATS", "PEERS", "PEER_ORDER", "TOLERANCE",
    "add_arguments", "best_time", "check", "check_reference", "finish_args", "format_rates",
    "format_row", "header", "load_peers", "main", "make_calls", "parse_args",
    "print_load_average", "random_csr", "random_dense", "register", "retime", "run",
    "run_point", "run_tlr", "spmv_bytes", "summary", "tlr_rates", "triad_bandwidth",
    "triad_bandwidth_kernel", "triad_bandwidth_torch", "triad_kernel_pass",
]
