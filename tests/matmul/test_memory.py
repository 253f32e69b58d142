"""Memory of ``sparse_matmul``: no leaks over many calls (one-shot and prepared, and TLR-MVM
beside them), and an early MemoryError for a result that cannot fit.

The sanitizer run (ASan + UBSan, tools/sanitize.sh) leaves the RSS test out: ASan holds freed
memory in its quarantine.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import CSR, TLRMatrix, sparse_matmul


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# After warm-up, this many calls of each kind may grow the resident set by at
# most RSS_BOUND. Every call allocates a fresh input and output of >= 4000 bytes
# each, so leaking either (or a reference to it) in any one kind alone would grow
# it by >= 4000 * CALLS = 7.6 MiB.
CALLS = 2000
RSS_BOUND = 4 << 20


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
def test_no_leak_over_many_calls():
    """sparse_matmul (one-shot and prepared CSR, N = 1 and N > 1, dense @ sparse)
    and TLR-MVM called CALLS times each: RSS flat within RSS_BOUND after warm-up,
    and the operands' reference counts unchanged over the calls."""
    rng = np.random.default_rng(0)
    # Work below 2 * _MIN_WORK_PER_THREAD: the default thread count resolves to one
    # thread, so the loop's speed does not depend on the machine's load.
    A = sp.random(600, 500, density=0.01, format="csr", random_state=1)
    W = CSR(A)
    T = TLRMatrix.from_dense(rng.standard_normal((256, 192)), nb=64, tol=1e-2)
    kinds = {
        # each: (function of a fresh dense operand, shape of that operand)
        "one-shot N=1": (lambda x: sparse_matmul(A, x), (500,)),
        "one-shot N=8": (lambda x: sparse_matmul(A, x), (500, 8)),
        "prepared N=1": (lambda x: W @ x, (500,)),
        "prepared N=8": (lambda x: W @ x, (500, 8)),
        "dense @ sparse": (lambda x: sparse_matmul(x, A), (8, 600)),
        # One thread: on a loaded 2-core machine the 2-thread TLR kernel (three
        # parallel regions per call) can take milliseconds on this small matrix.
        "TLR-MVM": (lambda x: T.matvec(x, n_threads=1), (192, 8)),
    }

    def run(n):
        for f, shape in kinds.values():
            for _ in range(n):
                x = rng.standard_normal(shape)
                y = f(x)
                assert x.nbytes >= 4000 and y.nbytes >= 4000
        gc.collect()

    run(300)  # warm-up: caches (row partitions, casts), allocator pools
    # (counted after the warm-up: a TLRMatrix's plan of a first product keeps its bases)
    refs = [sys.getrefcount(a) for a in (A.data, A.indices, W.data, W.indptr, T.U, T.V)]
    before = _rss_bytes()
    run(CALLS)
    after = _rss_bytes()
    growth = after - before
    print(f"RSS before {before / 2**20:.1f} MiB, after {len(kinds)} x {CALLS} calls "
          f"{after / 2**20:.1f} MiB, growth {growth / 2**10:.0f} KiB")
    assert growth < RSS_BOUND, f"RSS grew by {growth / 2**20:.1f} MiB over {CALLS} calls per kind"
    assert [sys.getrefcount(a) for a in (A.data, A.indices, W.data, W.indptr, T.U, T.V)] == refs


def test_sparse_matmul_output_too_big(assert_early_memory_error):
    """A product whose dense result cannot fit fails at once, naming shape, dtype and size."""
    S = sp.coo_array((np.ones(3), ([0, 5, 2**40 - 1], [0, 1, 3])), shape=(2**40, 4))
    assert_early_memory_error(lambda: sparse_matmul(S, np.ones((4, 4))),
                               "(1099511627776, 4)", "float64", "32.0 TiB")
    S32 = S.astype(np.float32)
    assert_early_memory_error(lambda: sparse_matmul(np.ones((3, 4), np.float32), S32.T),
                               "(3, 1099511627776)", "float32", "12.0 TiB")
    # A prepared CSR on the right (4 x 2**40, tiny arrays) and an int result (scipy's path).
    W = CSR.from_arrays([1.0], [2**40 - 1], [0, 1, 1, 1, 1], (4, 2**40))
    assert_early_memory_error(lambda: sparse_matmul(np.ones((3, 4)), W), "(3, 1099511627776)")
    Si = S.astype(np.int32)
    assert_early_memory_error(lambda: sparse_matmul(Si, np.ones((4, 4), np.int32)), "int32")
    # A 0-stride dense operand that is cheap but whose product is not.
    X = np.broadcast_to(np.float32(1), (4, 2**40))
    assert_early_memory_error(lambda: sparse_matmul(sp.random(3, 4, density=0.5), X),
                               "(3, 1099511627776)")
