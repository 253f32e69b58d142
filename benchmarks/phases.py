"""Where a one-shot ``sparse_matmul`` spends its time, phase by phase, per thread count.

A one-shot product (a scipy CSR matrix in, as users call it) does more than the prepared
``CSR``'s: it checks ``indptr`` (``plain_csr_nnz``, threaded from ``PARALLEL_INDPTR_ROWS``
rows on), allocates the output, has the kernel cut the rows and compare every column index
as it goes, and runs the Python glue between them. This script times each phase separately, interleaved, at every thread count
from 1 to all cores, so that the phases that do not get faster with threads (the serial
fraction that caps many-core speedups) stand out:

* ``call``: the whole one-shot ``sparse_matmul(A, X, n_threads=t)``;
* ``prepared``: the same product on ``CSR(A)`` (bounds cached, indices checked once);
* ``indptr``: ``plain_csr_nnz`` (the ``indptr`` check, on the call's threads);
* ``alloc``: the output allocation;
* ``kernel``: the kernel driver as the one-shot call runs it (rows cut and column indices
  checked inside the kernel);
* ``kernel prep``: the driver as the prepared call runs it;
* ``glue``: ``call - indptr - alloc - kernel`` (dispatch and conversions in Python).

From ``DENSE_MIN_TOKENS`` (64) columns on, the one-shot call takes the general path instead of
the fast one: it builds a ``CSR`` (which checks every column index in a threaded pass of its
own) and runs the prepared kernel. Its ``glue`` then holds that pass less the in-kernel
check's cost, and ``kernel`` still times the fast path's checked kernel.

Medians of interleaved rounds, milliseconds. Example::

    python benchmarks/phases.py --sizes 4096,16384 --tokens 1,64 --densities 0.01
"""

from __future__ import annotations

import argparse
import os
import sys
import time

try:
    import wsesparse  # noqa: F401
except ImportError:  # run from a source checkout that is built in place but not installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from wsesparse import CSR, sparse_matmul
from wsesparse import _hardware
from wsesparse import _thresholds as th
from wsesparse._drivers import product_into
from wsesparse._hardware import available_cores
from wsesparse._kernels import _spmm
from wsesparse._outputs import empty_output
from wsesparse._threads import resolve_n_threads
from wsesparse._timing import comma_list, thread_counts
from wsesparse.datasets import random_csr, random_dense

PHASES = ("call", "prepared", "indptr", "alloc", "kernel", "kernel prep", "glue")


def phase_times(A, X: np.ndarray, n_threads: int, rounds: int = 15) -> dict[str, float]:
    """Median milliseconds of each phase of ``sparse_matmul(A, X)`` on ``n_threads``.

    ``A`` is a scipy CSR matrix with sorted int32/int64 indices, ``X`` a C-contiguous
    ndarray of ``A``'s dtype (1-D or 2-D, fewer columns than the dense dispatch takes).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    >>> t = phase_times(A, np.ones(200), 1, rounds=2)
    >>> sorted(t) == sorted(PHASES) and t["call"] > 0
    True
    """
    hw = _hardware.current()
    P = CSR(A)
    shape, nnz = A.shape, A.nnz
    out_shape = shape[:1] + X.shape[1:]
    out_bytes = int(np.prod(out_shape)) * X.dtype.itemsize
    Y = np.empty(out_shape, X.dtype)
    ip, ix, d = A.indptr, A.indices, A.data
    want = sparse_matmul(P, X, n_threads=n_threads, method="sparse")
    got = sparse_matmul(A, X, n_threads=n_threads)
    if got.tobytes() != want.tobytes():  # the one-shot call must take the sparse fast path
        raise ValueError("the one-shot call did not give the prepared product's bits "
                         "(dense dispatch?): choose a lower density or fewer columns")
    indptr_threads = (1 if shape[0] < _spmm.PARALLEL_INDPTR_ROWS
                      else resolve_n_threads(n_threads, shape[0]))
    calls = {
        "call": lambda: sparse_matmul(A, X, n_threads=n_threads),
        "prepared": lambda: sparse_matmul(P, X, n_threads=n_threads),
        # (with as many threads as the one-shot call gives this check: matmul._fast_product)
        "indptr": lambda: _spmm.plain_csr_nnz(ip, ix, d, shape[0], shape[1], indptr_threads),
        "alloc": lambda: empty_output(out_shape, X.dtype, out_bytes),
        "kernel": lambda: product_into(ip, ix, d, shape, nnz, X, Y, n_threads, None, hw),
        "kernel prep": lambda: product_into(P.indptr, P.indices, P.data, shape, nnz, X, Y,
                                            n_threads, P._bounds, hw),
    }
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
    med["glue"] = med["call"] - med["indptr"] - med["alloc"] - med["kernel"]
    return med


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=comma_list(int), default=[4096, 16384], help="M = K values")
    p.add_argument("--tokens", type=comma_list(int), default=[1, 8, 64])
    p.add_argument("--densities", type=comma_list(float), default=[0.1, 0.01, 0.001])
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=comma_list(int), default=None,
                   help="thread counts (default: 1, 2, 4, ... up to all cores)")
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    cores = available_cores()
    threads = args.threads or thread_counts(cores)
    if any(t < 1 for t in threads):
        p.error("--threads must be positive")
    dtype = np.dtype(args.dtype)
    print(f"one-shot sparse_matmul by phase, ms (medians of {args.rounds} interleaved rounds), "
          f"{dtype}, {cores} cores")
    print("thr: the threads the product ran on (n_threads as asked, fewer for small products: "
          "MIN_WORK_PER_THREAD)")
    print(f"{'M=K':>6} {'N':>5} {'density':>8} {'thr':>4} "
          + " ".join(f"{name:>11}" for name in PHASES) + "  one-shot/prepared")
    for n in args.sizes:
        for density in args.densities:
            A = random_csr(n, n, density, dtype=dtype, seed=0)
            for N in args.tokens:
                X = random_dense(n, N, dtype=dtype, seed=1)
                X = X[:, 0].copy() if N == 1 else X
                for t in threads:
                    med = phase_times(A, X, t, args.rounds)
                    # (the work measure of _drivers.product_into)
                    work = (th.SPMV_WORK * (A.nnz + n) if X.ndim == 1 else A.nnz * N + n)
                    used = resolve_n_threads(t, work)
                    print(f"{n:>6} {N:>5} {density:>8g} {used:>4} "
                          + " ".join(f"{med[name]:>11.3f}" for name in PHASES)
                          + f"  {med['call'] / med['prepared']:>6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
