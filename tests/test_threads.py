"""Threads: bitwise-identical results for every thread count, ``threadpool_limits``,
``n_threads`` validation, concurrent calls from Python threads and nested use inside a
thread pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

import wsesparse
from matmul_helpers import KERNEL_DTYPES, assert_matches, random_dense, random_sparse
from wsesparse import CSR, TLRMatrix, sparse_matmul
from wsesparse._kernels import _runtime
from wsesparse._hardware import AFFINITY_MAX_AGE
from wsesparse._hardware import available_cores as _available_cores
from wsesparse._threads import resolve_n_threads

REPO = Path(wsesparse.__file__).resolve().parent.parent


THREAD_COUNTS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def big():
    """A skewed 3000 x 3000 operand with ~150k nonzeros: even N = 1 is enough work
    (>= 4 * the per-thread minimum) for 4 threads."""
    rng = np.random.default_rng(1234)
    return random_sparse(rng, 3000, 3000, 0.017, pattern="skewed") + \
        random_sparse(rng, 3000, 3000, 0.012)


def _really_parallel(work: int) -> None:
    """The kernel would use all 4 threads for ``work`` multiply-adds."""
    if not _runtime.openmp_enabled():
        pytest.skip("wsesparse was built without OpenMP")
    assert resolve_n_threads(4, work) == 4, (
        "the determinism test no longer exercises 4 threads: enlarge its operands")


@pytest.mark.parametrize("dtype", KERNEL_DTYPES, ids=str)
@pytest.mark.parametrize("n", [None, 1, 24, 130])
@pytest.mark.parametrize("side", ["left", "right"])
def test_bitwise_identical_across_thread_counts(big, dtype, n, side):
    """Results are bitwise identical for n_threads = 1, 2, 3, 4 and under
    threadpool_limits(1), for the GEMV (1-D and N = 1) and GEMM kernels, both sides."""
    A = big.astype(dtype)
    rng = np.random.default_rng(7)
    _really_parallel(A.nnz * (1 if n is None else n))
    if side == "left":
        X = random_dense(rng, (3000,) if n is None else (3000, n), dtype)
        args = (A, X)
    else:
        X = random_dense(rng, (3000,) if n is None else (n, 3000), dtype)
        args = (X, A)
    ref = sparse_matmul(*args, n_threads=1, method="sparse")
    assert_matches(ref, A @ X if side == "left" else X @ A, *args)
    for t in THREAD_COUNTS[1:]:
        got = sparse_matmul(*args, n_threads=t, method="sparse")
        assert got.tobytes() == ref.tobytes(), f"n_threads={t} differs from n_threads=1"
    got = sparse_matmul(*args, method="sparse")  # default: all cores
    assert got.tobytes() == ref.tobytes()
    with threadpool_limits(limits=1):
        got = sparse_matmul(*args, method="sparse")
    assert got.tobytes() == ref.tobytes()


def test_bitwise_identical_noncanonical_and_prepared(big):
    """Duplicates/unsorted indices and a reused CSR operand: still identical per thread count."""
    rng = np.random.default_rng(3)
    A = sp.csr_array((np.concatenate([big.data, big.data[:5000]]),
                      np.concatenate([big.indices[::-1], big.indices[:5000]]),
                      big.indptr.copy()), shape=big.shape)
    # Rebuild a valid indptr for the appended duplicates: put them all in the last row.
    A.indptr[-1] = len(A.indices)
    W = CSR(A)
    X = random_dense(rng, (3000, 16), np.float32)
    ref = W @ X
    for t in THREAD_COUNTS:
        assert sparse_matmul(W, X, n_threads=t).tobytes() == ref.tobytes()
        assert sparse_matmul(A, X, n_threads=t).tobytes() == ref.tobytes()


def test_threadpool_limits_reaches_the_kernels():
    """threadpool_limits(1) limits the OpenMP runtime the kernels use."""
    if not _runtime.openmp_enabled():
        pytest.skip("wsesparse was built without OpenMP")
    with threadpool_limits(limits=1):
        assert _runtime.max_threads() == 1
        assert resolve_n_threads(None) == 1
    with threadpool_limits(limits=2):
        assert resolve_n_threads(None) <= 2


def test_more_threads_than_cores(big):
    X = np.ones((3000, 4))
    assert_matches(sparse_matmul(big, X, n_threads=64), big @ X, big, X)


BAD_N_THREADS = [(0, ValueError), (-1, ValueError), (-8, ValueError), (1.5, TypeError),
                 (2.0, TypeError), (True, TypeError), (False, TypeError), ("2", TypeError),
                 (np.float64(2), TypeError)]


@pytest.mark.parametrize("value,exc", BAD_N_THREADS, ids=repr)
@pytest.mark.parametrize("case", ["kernel", "gemv", "dense", "int", "empty", "sparse_sparse",
                                  "csr_operand", "coo_vector", "dia_vector", "bsr_vector"])
def test_bad_n_threads(rng, value, exc, case):
    """Invalid n_threads is rejected on every path, naming the argument, even where no
    OpenMP kernel would run (integer dtypes, nnz = 0, dense BLAS, sparse @ sparse)."""
    A = random_sparse(rng, 10, 8, 0.5)
    X = np.ones((8, 3))
    args = {
        "kernel": (A, X), "gemv": (A, X[:, 0]), "dense": (A, X),
        "int": (A.astype(np.int32), X.astype(np.int32)),
        "empty": (sp.csr_array((10, 8)), X), "sparse_sparse": (A, A.T),
        "csr_operand": (X.T, CSR(A.T)),
        # (scipy's own vector products of these formats: no kernel, no thread)
        "coo_vector": (sp.coo_array(A), X[:, 0]), "dia_vector": (sp.dia_array(A), X[:, 0]),
        "bsr_vector": (sp.bsr_array(A, blocksize=(2, 2)), X[:, 0]),
    }[case]
    kw = {"method": "dense"} if case == "dense" else {}
    with pytest.raises(exc, match="n_threads must be a positive int or None"):
        sparse_matmul(*args, n_threads=value, **kw)


@pytest.mark.parametrize("value", [1, 2, np.int64(3), np.int32(2)], ids=repr)
def test_good_n_threads(rng, value):
    """Python and numpy integers are accepted, on the kernel and the dense path."""
    A = random_sparse(rng, 10, 8, 0.5)
    X = random_dense(rng, (8, 70))
    for method in ("sparse", "dense"):
        assert_matches(sparse_matmul(A, X, n_threads=value, method=method), A @ X, A, X)


def test_concurrent_calls_share_an_operand(big):
    """Python threads calling the kernels at once (the GIL is released) on one shared
    CSR operand get the right, deterministic results."""
    W = CSR(big)
    rng = np.random.default_rng(5)
    Xs = [random_dense(rng, (3000, n)) for n in (1, 3, 8, 17, 32, 5, 2, 9)]
    refs = [sparse_matmul(W, X, n_threads=1) for X in Xs]

    def job(i):
        return sparse_matmul(W, Xs[i], n_threads=2)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(job, range(len(Xs))))
    for got, ref, X in zip(results, refs, Xs):
        assert got.tobytes() == ref.tobytes()
    assert_matches(refs[2], big @ Xs[2], big, Xs[2])


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("n", [None, 1, 8])
def test_fewer_rows_than_threads(m, n):
    """1-3 long dense rows and up to 4 threads (empty row ranges): identical bits, and
    X @ A.T (the transposed path) too."""
    rng = np.random.default_rng(m)
    A = sp.csr_array(rng.standard_normal((m, 60000)))
    X = rng.standard_normal((60000,) if n is None else (60000, n))
    ref = sparse_matmul(A, X, n_threads=1)
    assert_matches(ref, A @ X, A, X)
    Y = X.T
    refT = sparse_matmul(Y, A.T, n_threads=1)
    assert_matches(refT, Y @ A.T, Y, A.T)
    for t in (2, 3, 4):
        assert sparse_matmul(A, X, n_threads=t).tobytes() == ref.tobytes()
        assert sparse_matmul(Y, A.T, n_threads=t).tobytes() == refT.tobytes()


@pytest.fixture(scope="module")
def mixed_rows():
    """Runs of long rows (16-60 nonzeros) among short ones (0-15), so that
    different row partitions give parts of very different average length
    (the SpMV kernels pick their inner loop per part) and a row of any length
    can land in any kind of part."""
    rng = np.random.default_rng(99)
    lengths = rng.integers(0, 16, size=8000)
    lengths[:2500] = rng.integers(16, 61, size=2500)  # a long-row head
    lengths[rng.choice(8000, size=300, replace=False)] = rng.integers(16, 61, size=300)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = rng.integers(0, 3000, size=indptr[-1]).astype(np.int32)
    # (int32 as scipy makes them: a prepared CSR narrows int64 indices, and the int32 and
    # int64 builds of the complex row tile may round complex128 differently, docs/tuning.md)
    return sp.csr_array((rng.standard_normal(indptr[-1]), indices, indptr), shape=(8000, 3000))


@pytest.mark.parametrize("dtype", KERNEL_DTYPES, ids=str)
@pytest.mark.parametrize("n", [None, 1, 8, 40])
def test_every_row_summed_the_same_way(mixed_rows, dtype, n):
    """Each row comes out bitwise the same for every thread count, and for a
    one-shot product (indices checked inside the kernels) as for a prepared
    operand (checked before): a row's summation order depends on the row
    alone, not on the part of rows it was computed with. Complex values have
    both parts nonzero (with real values, a fused and an unfused complex
    multiply agree, which hid a difference)."""
    A = mixed_rows.astype(dtype)
    if A.dtype.kind == "c":
        A.data += 1j * np.random.default_rng(6).standard_normal(A.nnz).astype(A.dtype)
    _really_parallel(A.nnz * (1 if n is None else n))
    X = random_dense(np.random.default_rng(5), (3000,) if n is None else (3000, n), dtype)
    W = CSR(A)
    ref = sparse_matmul(W, X, n_threads=1)
    assert_matches(ref, A @ X, A, X)
    for t in THREAD_COUNTS:
        for operand in (W, A):
            got = sparse_matmul(operand, X, n_threads=t)
            assert got.tobytes() == ref.tobytes(), (
                f"n_threads={t}, {'prepared' if operand is W else 'one-shot'} differs")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux affinity calls")
def test_available_cores_follows_the_affinity_mask(monkeypatch):
    """The C-level count is the OS's, also after the mask changes; the thread count
    follows within AFFINITY_MAX_AGE (other load on the machine left out of it)."""
    from wsesparse import _threads
    monkeypatch.setattr(_threads, "LOAD_AWARE", False)
    before = os.sched_getaffinity(0)
    assert _runtime.available_cores() == len(before)
    try:
        os.sched_setaffinity(0, {min(before)})
        assert _runtime.available_cores() == 1
        time.sleep(AFFINITY_MAX_AGE * 1.5)
        assert resolve_n_threads(None) == 1
    finally:
        os.sched_setaffinity(0, before)
    assert _runtime.available_cores() == len(before)
    time.sleep(AFFINITY_MAX_AGE * 1.5)
    assert resolve_n_threads(None) == min(len(before), _runtime.max_threads())


def test_default_thread_count_leaves_out_busy_cores(monkeypatch):
    """Cores that other runnable threads hold are left out of the default team (at least
    one thread); the last team's own threads, which may still spin, do not count as
    others; an explicit n_threads and WSESPARSE_LOAD_AWARE=0 keep every core."""
    from wsesparse import _threads
    monkeypatch.setattr(_threads, "LOAD_AWARE", True)  # (whatever WSESPARSE_LOAD_AWARE says)
    monkeypatch.setattr(_threads, "available_cores", lambda: 8)
    monkeypatch.setattr(_threads._runtime, "max_threads", lambda: 8)
    work = 1 << 40
    for runnable, last, expected in ((1, 1, 8), (3, 1, 6), (8, 8, 8), (10, 8, 6),
                                     (12, 1, 1), (0, 1, 8)):
        monkeypatch.setattr(_threads, "runnable_threads", lambda r=runnable: r)
        monkeypatch.setattr(_threads, "_last_team", last)
        assert resolve_n_threads(None, work) == expected, (runnable, last)
        assert _threads._last_team == expected
        assert resolve_n_threads(5, work) == 5  # the caller's count is kept
    monkeypatch.setattr(_threads, "runnable_threads", lambda: 100)
    monkeypatch.setattr(_threads, "LOAD_AWARE", False)
    assert resolve_n_threads(None, work) == 8
    monkeypatch.setattr(_threads, "LOAD_AWARE", True)
    assert resolve_n_threads(None, 3 * 32_768) == 1  # small work: one thread, as before


def _idle_machine(monkeypatch, cores: int) -> list[float]:
    """``cores`` idle cores, OpenMP's default as many, no call yet and no wake measured;
    returns the clock ``resolve_n_threads`` reads (``clock[0]``, seconds)."""
    from wsesparse import _threads
    clock = [1000.0]
    monkeypatch.setattr(_threads, "_monotonic", lambda: clock[0])
    monkeypatch.setattr(_threads, "available_cores", lambda: cores)
    monkeypatch.setattr(_threads._runtime, "max_threads", lambda: cores)
    monkeypatch.setattr(_threads, "runnable_threads", lambda: 1)
    monkeypatch.setattr(_threads, "LOAD_AWARE", True)
    monkeypatch.setattr(_threads, "_last_call", float("-inf"))
    monkeypatch.setattr(_threads, "_cold_since", float("-inf"))
    monkeypatch.setattr(_threads, "_last_team", 1)
    monkeypatch.setattr(_threads, "_wake_costs", [])
    monkeypatch.setattr(_threads, "_armed", None)
    return clock


def test_small_products_after_an_idle_spell_run_alone(monkeypatch):
    """After COLD_TEAM_SECONDS without a call that could take a team, products of fewer
    than cold_max_work(cores) multiply-adds run on one thread for COLD_RUN_SECONDS (a team woken
    then started milliseconds late on a shared VM); larger products, later calls of a loop,
    calls whose work is not a product's (idle_rule False: checks, transposes), an explicit
    n_threads and WSESPARSE_LOAD_AWARE=0 are not affected."""
    from wsesparse import _threads
    from wsesparse import _thresholds as th
    if not _threads._OPENMP:
        pytest.skip("wsesparse was built without OpenMP")
    clock = _idle_machine(monkeypatch, 4)
    small, large = _threads.cold_max_work(4) - 1, _threads.cold_max_work(4)
    assert 4 * th.MIN_WORK_PER_THREAD // th.TEAM_GROWTH < small  # a team of 4 otherwise

    def product(work, n_threads=None):
        return resolve_n_threads(n_threads, work, idle_rule=True)

    assert product(small) == 1  # the first product after the spell
    clock[0] += th.COLD_RUN_SECONDS / 2
    assert product(small) == 1
    assert resolve_n_threads(None, small) == 4  # not a product's work
    assert _threads._armed is None
    assert product(large) == 4
    assert _threads._last_team == 4
    assert _threads._armed[1:] == (large, 4)  # its kernel times the team's wake
    assert product(small) == 1 and _threads._last_team == 4  # (that team may still spin)
    assert product(small, 3) == 3
    clock[0] += th.COLD_RUN_SECONDS
    monkeypatch.setattr(_threads, "_armed", None)
    assert product(small) == 4  # a loop goes on: the team is awake now
    assert _threads._armed is None  # (and is not timed)

    clock[0] += 2 * th.COLD_TEAM_SECONDS  # another spell
    monkeypatch.setattr(_threads, "LOAD_AWARE", False)
    assert product(small) == 4
    clock[0] += 2 * th.COLD_TEAM_SECONDS
    monkeypatch.setattr(_threads, "LOAD_AWARE", True)
    assert product(large) == 4
    clock[0] += th.COLD_RUN_SECONDS / 2
    assert product(small) == 1
    # one-thread calls (below 2 * MIN_WORK_PER_THREAD) neither count nor end a spell
    clock[0] += 2 * th.COLD_TEAM_SECONDS
    assert product(th.MIN_WORK_PER_THREAD) == 1
    clock[0] += th.COLD_RUN_SECONDS * 2
    assert product(small) == 1
    # a smaller team: a larger product still runs alone (2 threads: up to COLD_MAX_WORK),
    # whether OpenMP's default or the cores make it 2
    for cores, omp in ((2, 4), (4, 2)):
        monkeypatch.setattr(_threads, "available_cores", lambda: cores)
        monkeypatch.setattr(_threads._runtime, "max_threads", lambda: omp)
        clock[0] += 2 * th.COLD_TEAM_SECONDS
        assert product(th.COLD_MAX_WORK - 1) == 1 and product(th.COLD_MAX_WORK) == 2


def test_the_cold_limit_grows_to_what_waking_the_team_was_measured_to_cost(monkeypatch):
    """A cold team call's kernel region is timed (_kernels/_team_wake.h); the next spell runs
    products alone that one thread finishes (at COLD_SECONDS_PER_WORK) before the team would:
    up to cost * n / (n - 1), for the largest cost of the last _WAKE_SAMPLES. Cheap wakes keep
    the fit (cold_max_work), and a probe that timed another kernel's region than the armed
    call's is not read."""
    from wsesparse import _threads
    from wsesparse import _thresholds as th
    s = th.COLD_SECONDS_PER_WORK
    monkeypatch.setattr(_threads, "_wake_costs", [])
    monkeypatch.setattr(_threads, "_armed", None)
    assert _threads._cold_limit(2) == _threads.cold_max_work(2)
    probe = [5, 0.0]
    monkeypatch.setattr(_threads._spmm, "wake_probe", lambda: (probe[0], probe[1]))
    work = 8_000_000

    def limit(cost, n=2):
        return int(cost * n / ((n - 1) * s))

    def probed(seconds, count=4):
        monkeypatch.setattr(_threads, "_armed", (count, work, 2))
        probe[1] = seconds
        return _threads._cold_limit(2)

    cost = 0.007 - work * s / 2  # the 2-thread call took 7 ms, its work spread over 2 less
    assert probed(0.007) == limit(cost) > _threads.cold_max_work(2)
    assert _threads._armed is None and _threads._wake_costs == [pytest.approx(cost)]
    assert _threads._cold_limit(4) == limit(cost, 4)
    assert probed(1.0, count=3) == limit(cost)  # 2 regions since: not this call's
    assert len(_threads._wake_costs) == 1
    quick = work * s / 2 + 1e-5  # wakes of 10 us: the 7 ms one counts until 4 came after it
    for _ in range(_threads._WAKE_SAMPLES - 1):
        assert probed(quick) == limit(cost)
    assert probed(quick) == _threads.cold_max_work(2)
    assert probed(0.0) == _threads.cold_max_work(2)  # (quicker than the estimate: no cost)
    assert _threads._wake_costs[-1] == 0.0

    if not _threads._OPENMP:
        return
    # the rule uses it: after a spell, a product under the measured limit runs alone
    clock = _idle_machine(monkeypatch, 2)
    monkeypatch.setattr(_threads, "_wake_costs", [0.005])
    assert resolve_n_threads(None, limit(0.005) - 1, idle_rule=True) == 1
    assert resolve_n_threads(None, limit(0.005), idle_rule=True) == 2
    clock[0] += 2 * th.COLD_RUN_SECONDS  # the spell's window is over
    assert resolve_n_threads(None, limit(0.005) - 1, idle_rule=True) == 2


@pytest.mark.parametrize("n", [None, 8])
def test_the_wake_probe_times_the_armed_region_only(big, n):
    """wake_probe_arm() makes the next parallel SpMV/SpMM sweep record its time (the same
    sums, the same errors); an unarmed region, or one starting more than a millisecond after
    the arming, is not probed."""
    from wsesparse._kernels import _spmm
    _really_parallel(big.nnz)
    P = CSR(big)
    X = np.random.default_rng(5).standard_normal(3000 if n is None else (3000, n))
    want = sparse_matmul(P, X, n_threads=2)
    for _ in range(20):  # (a call held up for over a millisecond, on a busy machine, drops it)
        count = _spmm.wake_probe()[0]
        assert _spmm.wake_probe_arm() == count
        start = time.perf_counter()
        got = sparse_matmul(P, X, n_threads=2)
        elapsed = time.perf_counter() - start
        probed, seconds = _spmm.wake_probe()
        np.testing.assert_array_equal(got, want)
        if probed == count + 1:
            break
    assert probed == count + 1 and 0.0 < seconds <= elapsed
    sparse_matmul(P, X, n_threads=2)
    assert _spmm.wake_probe()[0] == count + 1
    _spmm.wake_probe_arm()
    time.sleep(0.005)
    sparse_matmul(P, X, n_threads=2)
    assert _spmm.wake_probe()[0] == count + 1
    bad = big.copy()
    bad.indices[-1] = 3000
    for _ in range(20):
        count = _spmm.wake_probe()[0]
        _spmm.wake_probe_arm()
        with pytest.raises(ValueError, match="column index is negative or not below 3000"):
            sparse_matmul(bad, X, n_threads=2)
        if _spmm.wake_probe()[0] == count + 1:
            break
    assert _spmm.wake_probe()[0] == count + 1


def test_a_parallel_call_grows_its_team_at_a_quarter_of_the_entry_work(monkeypatch):
    """Below 2 * MIN_WORK_PER_THREAD a call runs on one thread; from there it takes a
    thread per MIN_WORK_PER_THREAD / TEAM_GROWTH multiply-adds (16 cores: the whole team
    from 4 * MIN_WORK_PER_THREAD, where 3-8 threads were slower; docs/tuning.md)."""
    from wsesparse import _threads
    from wsesparse import _thresholds as th
    monkeypatch.setattr(_threads, "available_cores", lambda: 16)
    monkeypatch.setattr(_threads._runtime, "max_threads", lambda: 16)
    monkeypatch.setattr(_threads, "LOAD_AWARE", False)
    if not _threads._OPENMP:
        pytest.skip("built without OpenMP: every call runs on one thread")
    step = th.MIN_WORK_PER_THREAD // th.TEAM_GROWTH
    assert resolve_n_threads(None, 2 * th.MIN_WORK_PER_THREAD - 1) == 1
    assert resolve_n_threads(None, 2 * th.MIN_WORK_PER_THREAD) == 2 * th.TEAM_GROWTH
    assert resolve_n_threads(None, 12 * step + step // 2) == 12
    assert resolve_n_threads(None, 4 * th.MIN_WORK_PER_THREAD) == 16
    assert resolve_n_threads(3, 4 * th.MIN_WORK_PER_THREAD) == 3


def test_runnable_threads_reads_the_machine():
    from wsesparse import _hardware
    n = _hardware.runnable_threads()
    assert n >= 1 or not os.path.exists("/proc/loadavg")  # this thread is runnable
    assert _hardware.runnable_threads() == n  # cached within LOAD_MAX_AGE


# -- concurrent and nested calls from Python threads -------------------------------------------
def test_concurrent_calls_from_8_python_threads():
    """8 Python threads call sparse_matmul (one-shot, shared prepared CSR, both sides,
    N = 1 and N > 1, float32 and float64 on one float64 operand) and TLR-MVM on one
    shared TLRMatrix at once: every result equals the serial one bit for bit and
    matches scipy/numpy."""
    rng = np.random.default_rng(11)
    A = sp.random(1500, 1200, density=0.02, format="csr", random_state=3)
    W = CSR(A)  # shared: its row-partition and cast caches fill concurrently
    D = rng.standard_normal((600, 500))
    T = TLRMatrix.from_dense(D, nb=128, tol=1e-4)
    Td = T.toarray()

    def case(k):
        kind = k % 5
        n = (1, 7, 33)[k % 3]
        dt = (np.float64, np.float32)[k % 2]
        if kind == 0:
            x = rng.standard_normal((1200, n)).astype(dt)
            return (lambda: sparse_matmul(A, x)), A @ x
        if kind == 1:
            x = rng.standard_normal(1200).astype(dt)
            return (lambda: W @ x), A @ x
        if kind == 2:
            x = rng.standard_normal((n, 1500)).astype(dt)
            return (lambda: x @ W), x @ A
        if kind == 3:
            x = rng.standard_normal((1200, n)).astype(dt)
            return (lambda: sparse_matmul(W, x, n_threads=2)), A @ x
        x = rng.standard_normal((500, n))
        return (lambda: T @ x), Td @ x

    cases = [case(k) for k in range(40)]
    serial = [f() for f, _ in cases]
    for got, (_, ref) in zip(serial, cases):
        tol = 1e-4 if got.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())
    start = threading.Barrier(8)

    def worker(w):
        start.wait()  # all 8 threads enter the kernels together
        out = []
        for _ in range(3):
            for k in range(w, len(cases), 8):
                out.append((k, cases[k][0]()))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = [r for rs in pool.map(worker, range(8)) for r in rs]
    assert len(results) == 3 * len(cases)
    for k, got in results:
        assert got.dtype == serial[k].dtype and got.tobytes() == serial[k].tobytes(), k


_NESTED = textwrap.dedent("""
    import json, os
    from concurrent.futures import ThreadPoolExecutor
    import numpy as np, scipy.sparse as sp
    from threadpoolctl import threadpool_limits
    from wsesparse import sparse_matmul
    from wsesparse._kernels import _runtime
    from wsesparse._threads import resolve_n_threads

    A = sp.random(2000, 2000, density=0.05, format="csr", random_state=0)  # 200k nnz
    X = np.ones((2000, 4))
    tids = lambda: set(os.listdir("/proc/self/task"))

    def call(mode):
        # OS threads this thread's kernel call starts (OpenMP team threads persist).
        before = tids()
        if mode == "limits":
            with threadpool_limits(limits=1):
                seen = (_runtime.max_threads(), resolve_n_threads(None, A.nnz * 4))
                sparse_matmul(A, X)
        elif mode == "n_threads":
            seen = (None, resolve_n_threads(1, A.nnz * 4))
            sparse_matmul(A, X, n_threads=1)
        else:
            seen = (_runtime.max_threads(), resolve_n_threads(None, A.nnz * 4))
            sparse_matmul(A, X)
        return seen, len(tids() - before)

    out = {}
    for mode in ("limits", "n_threads", "default"):  # default last: it starts a team
        with ThreadPoolExecutor(1) as pool:  # a fresh worker thread each time
            out[mode] = pool.submit(call, mode).result()
    with threadpool_limits(limits=1):  # an outer limit, set in the main thread
        with ThreadPoolExecutor(1) as pool:
            out["outer"] = pool.submit(lambda: _runtime.max_threads()).result()
    print(json.dumps(out))
""")


def test_nested_use_inside_a_thread_pool():
    """Kernels called from ThreadPoolExecutor workers under threadpool_limits(1) (set in
    the worker) or with n_threads=1 run on one thread: resolve_n_threads says 1 and the
    call starts no OpenMP thread (OS thread count of the process unchanged), while the
    default call does start one (the observable works). What an outer limit does is
    printed for the README's note (OpenMP's thread limit is per calling thread). The load
    rule is off in the child (WSESPARSE_LOAD_AWARE=0): on a busy machine it gives the default
    call one thread, as it should, and the observable would then say nothing (this failed
    once in CI beside other work)."""
    if not _runtime.openmp_enabled():
        pytest.skip("wsesparse was built without OpenMP")
    res = subprocess.run([sys.executable, "-c", _NESTED], capture_output=True, text=True,
                         timeout=60, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO),
                                                        WSESPARSE_LOAD_AWARE="0"))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    print(out)
    assert out["limits"] == [[1, 1], 0]
    assert out["n_threads"] == [[None, 1], 0]
    if _available_cores() >= 2 and "OMP_NUM_THREADS" not in os.environ:
        (max_t, resolved), started = out["default"]
        assert resolved >= 2 and started >= 1, out


_KERNELS_IN_A_FORKED_CHILD = """
import os, numpy as np, wsesparse
from wsesparse import _threads
from wsesparse.datasets import random_csr
A = random_csr(20_000, 20_000, 0.01, np.float64, seed=0)
x, X = np.ones(20_000), np.ones((20_000, 8))
y, Y = wsesparse.sparse_matmul(A, x, n_threads=2), wsesparse.sparse_matmul(A, X, n_threads=2)
pid = os.fork()
if pid == 0:
    ok = _threads.forked and _threads.resolve_n_threads(4, 1 << 40) == 1
    ok = ok and np.allclose(wsesparse.sparse_matmul(A, x, n_threads=2), y)
    ok = ok and np.allclose(wsesparse.sparse_matmul(A, X), Y)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), _threads.forked)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_kernels_in_a_forked_child_run_on_one_thread_and_finish():
    """GCC's OpenMP team does not survive a fork: a two-thread SpMV in a child forked after
    the parent's team had run never ended. A child runs every kernel on one thread, even
    with an explicit n_threads; the parent keeps its own counts."""
    res = subprocess.run([sys.executable, "-c", _KERNELS_IN_A_FORKED_CHILD],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.split() == ["0", "False"], (
        res.stdout, res.stderr[-2000:])


def test_n_threads_above_the_limit_is_an_error_not_a_crash():
    """n_threads=40000 made libgomp abort the process ("Thread creation failed") and 100000
    crashed it; explicit counts now stop at MAX_THREADS (4 per core, at least 64)."""
    from wsesparse import _threads
    assert _threads.MAX_THREADS >= 64 and _threads.MAX_THREADS >= 4 * (os.cpu_count() or 1)
    A = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    X = np.ones((200, 8))
    np.testing.assert_allclose(sparse_matmul(A, X, n_threads=_threads.MAX_THREADS), A @ X)
    for bad in (_threads.MAX_THREADS + 1, 100000):
        with pytest.raises(ValueError, match=rf"n_threads must be a positive int or None, at "
                                             rf"most {_threads.MAX_THREADS} .* got {bad}"):
            sparse_matmul(A, X, n_threads=bad)
        with pytest.raises(ValueError, match="n_threads must be"):
            sparse_matmul(CSR(A), np.ones(200), n_threads=bad)
