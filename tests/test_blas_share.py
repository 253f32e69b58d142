"""OpenBLAS's parallel calls on the kernels' OpenMP team (wsesparse._blas_share,
_kernels/_blas_pool.h) inside ``accelerated()``: installed and removed, the same bits as
OpenBLAS's own threads, several Python threads at once, the fallback to a BLAS limit, and
the thread-count rule that counts the BLAS team."""

import os
import threading

import numpy as np
import pytest
import scipy.linalg.blas as fblas

import wsesparse
from wsesparse import _blas, _blas_share, _threads
from wsesparse._kernels import _runtime


def _libraries(parallel=True):
    """The libraries that share the team; with ``parallel``, also BLAS and OpenMP allowed
    two threads or more (the tests of threaded calls need them)."""
    libs, why = _blas_share.candidates()
    if not libs:  # (numpy's and scipy's wheels qualify; CI installs them)
        pytest.skip("the BLAS libraries here cannot share the team: " + "; ".join(why))
    if parallel and (min(lib.count for lib in libs) < 2 or _runtime.max_threads() < 2
                     or int(os.environ.get("OMP_THREAD_LIMIT", "2") or 2) < 2):
        pytest.skip("BLAS or OpenMP is limited to one thread here: no threaded calls")
    return libs


def _blas_calls():
    """Threaded calls into both of the wheels' OpenBLAS libraries: numpy's dgemm (a level-3
    call whose jobs wait for each other) and zgemm, and scipy's dgemv and ddot."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((700, 700))
    z = a[:300, :300] + 1j * a[300:600, :300]
    v, w = rng.standard_normal((200_000, 24)), rng.standard_normal(24)
    x = rng.standard_normal(3_000_000)
    return [lambda: a @ a, lambda: z @ z, lambda: fblas.dgemv(1.0, v, w),
            lambda: fblas.ddot(x, x)]


def test_only_openblas_versions_read_and_tested_qualify():
    """0.3.28 (the first with the callback) crashed through it; later untested versions
    may index their slots otherwise."""
    assert [_blas_share.tested_version(v) for v in
            ("0.3.27", "0.3.28", "0.3.29", "0.3.30", "0.3.31", "0.3.31.188.0", "0.3.32",
             "0.4.0", "", None)] == [False] * 3 + [True] * 3 + [False] * 4


def test_accelerated_installs_the_callback_and_takes_it_out():
    libs = _libraries(parallel=False)
    callback = _runtime.blas_pool_callback()
    assert callback != 0 and not _blas_share.sharing()
    with wsesparse.accelerated():
        assert _blas_share.sharing() and _threads.blas_shared
        assert [lib.variable.value for lib in libs] == [callback] * len(libs)
        assert _blas.holders() == 0  # (no thread limit: BLAS keeps its count)
        with wsesparse.accelerated():  # nested: one installation
            assert [lib.variable.value for lib in libs] == [callback] * len(libs)
        assert _blas_share.sharing()
    assert not _blas_share.sharing() and not _threads.blas_shared
    assert [lib.variable.value for lib in libs] == [None] * len(libs)
    wsesparse.accelerate.enable()
    try:
        assert [lib.variable.value for lib in libs] == [callback] * len(libs)
    finally:
        wsesparse.accelerate.disable()
    assert [lib.variable.value for lib in libs] == [None] * len(libs)


@pytest.mark.parametrize("own_threads", [False, True])
def test_blas_calls_on_the_team_give_openblas_own_bits(own_threads):
    """Every call's jobs ran through the callback (its count grows by one per call), on the
    OpenMP team or on threads created for the call (inside a parallel region), with the
    bits OpenBLAS's own threads give."""
    _libraries()
    calls = _blas_calls()
    expected = [f() for f in calls]
    with wsesparse.accelerated():
        _runtime._blas_pool_force_threads(own_threads)
        try:
            before, on_threads = _runtime.blas_pool_calls()
            got = [f() for f in calls]
            after, on_threads_after = _runtime.blas_pool_calls()
        finally:
            _runtime._blas_pool_force_threads(False)
    assert after - before >= len(calls)
    assert on_threads_after - on_threads == (after - before if own_threads else 0)
    for g, e in zip(got, expected):
        assert np.array_equal(g, e)


def test_blas_calls_from_several_python_threads_at_once():
    _libraries()
    calls = _blas_calls()
    expected = [f() for f in calls]
    errors = []

    def work(i):
        try:
            for _ in range(3):
                for f, e in zip(calls[i % 2::2], expected[i % 2::2]):
                    assert np.array_equal(f(), e)
        except BaseException as exc:  # (reported by the main thread)
            errors.append(exc)

    with wsesparse.accelerated():
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors


def test_a_library_that_cannot_share_gets_the_limit_instead(monkeypatch):
    from threadpoolctl import threadpool_info
    monkeypatch.setattr(_blas_share, "candidates", lambda: ([], ["MKL with OpenMP threads"]))
    with wsesparse.accelerated():
        assert not _blas_share.sharing() and _blas.holders() == 1
        assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {1}
    assert _blas.holders() == 0
    with wsesparse.accelerated(blas_threads=2):
        assert not _blas_share.sharing() and _blas.holders() == 1
    with wsesparse.accelerated(blas_threads=None):
        assert not _blas_share.sharing() and _blas.holders() == 0


@pytest.mark.parametrize("bad", ["Shared", "", 0, 1.5])
def test_blas_threads_must_be_shared_an_int_or_none(bad):
    with pytest.raises((ValueError, TypeError), match="blas_threads must be"):
        with wsesparse.accelerated(blas_threads=bad):
            pass
    assert not wsesparse.accelerate.is_enabled()


def test_the_thread_rule_counts_a_blas_team(monkeypatch):
    """After a BLAS call on the team, the team's threads (perhaps still spinning) are not
    taken for another process's: a product decided on one thread before gets the whole
    team again. Without the BLAS call's record it stays on one."""
    _libraries()
    if not _threads._OPENMP:
        pytest.skip("wsesparse was built without OpenMP")
    monkeypatch.setattr(_threads, "LOAD_AWARE", True)
    monkeypatch.setattr(_threads, "available_cores", lambda: 2)
    monkeypatch.setattr(_threads._runtime, "max_threads", lambda: 2)
    monkeypatch.setattr(_threads, "runnable_threads", lambda: 2)  # this one and a spinner
    big = 1 << 40
    x = np.random.default_rng(1).standard_normal(3_000_000)
    with wsesparse.accelerated():
        monkeypatch.setattr(_threads, "_last_team", 1)
        monkeypatch.setattr(_threads, "blas_shared", False)  # (as before the record)
        assert resolve(big) == 1
        monkeypatch.setattr(_threads, "blas_shared", True)
        fblas.ddot(x, x)  # (threaded: 3 M entries, on OpenBLAS's count of threads)
        team, when = _runtime.blas_pool_team()
        assert when > 0 and (team >= 2 or (os.cpu_count() or 1) < 2)
        assert resolve(big) == min(team, 2)


def resolve(work):
    return _threads.resolve_n_threads(None, work, idle_rule=True)


_CONCURRENT_LAPACK = """
import threading, numpy as np, scipy.linalg as sl, wsesparse
from wsesparse import _blas_share
rng = np.random.default_rng(0)
A = rng.standard_normal((400, 400)); b = rng.standard_normal(400); S = A @ A.T
calls = {"solve": lambda: np.linalg.solve(A, b), "inv": lambda: np.linalg.inv(A),
         "scipy solve": lambda: sl.solve(A, b), "lu": lambda: sl.lu_factor(A)[0],
         "cholesky": lambda: np.linalg.cholesky(S), "eigvalsh": lambda: np.linalg.eigvalsh(S),
         "gemm": lambda: A @ A}
expected = {k: f() for k, f in calls.items()}
wrong = []
def work(k):
    names = list(calls)
    for i in range(21):
        name = names[(k + i) % len(names)]
        if not np.allclose(calls[name](), expected[name], rtol=1e-10, atol=1e-10):
            wrong.append(name)
with wsesparse.accelerated():
    assert _blas_share.sharing(), _blas_share.candidates()[1]
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
assert not wrong, wrong
print("ok")
"""


def test_concurrent_lapack_calls_on_the_shared_team_finish():
    """Four Python threads in LU-based solves, inverses, Cholesky and eigvalsh at once,
    in a process of its own (a hang fails the test at the timeout). OpenBLAS's LU queues
    part of its jobs to its own threads (``exec_blas_async``); a callback whose jobs took
    those threads' slots cleared their queue entries, and the solves hung (session 19's
    attempt, docs/accelerate.md)."""
    import subprocess
    import sys
    _libraries()
    res = subprocess.run([sys.executable, "-c", _CONCURRENT_LAPACK], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_child_forked_inside_the_block_gets_openblas_threads_back():
    """In a child forked while the callback is set, a threaded BLAS call (the call hung
    through the callback) and a product finish, with OpenBLAS's own threads' bits."""
    import time
    from wsesparse.datasets import random_csr
    _libraries()
    a = np.random.default_rng(0).standard_normal((700, 700))
    expected = a @ a
    A = random_csr(20_000, 20_000, 0.001, np.float64, seed=0)
    x = np.ones(20_000)
    y = A @ x  # (scipy's)
    with wsesparse.accelerated():
        a @ a
        pid = os.fork()
        if pid == 0:  # (the child: report through the exit status only)
            ok = not _blas_share.sharing() and np.array_equal(a @ a, expected)
            ok = ok and np.allclose(A @ x, y)
            os._exit(0 if ok else 3)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        assert _blas_share.sharing()
    assert os.waitstatus_to_exitcode(status) == 0


_FORK_WHILE_ANOTHER_THREAD_CALLS = """
import os, threading, time, numpy as np, wsesparse
from wsesparse import _blas_share
a = np.random.default_rng(0).standard_normal((1500, 1500))
stop = False
def busy():  # another thread's BLAS calls, through the callback
    while not stop:
        a @ a
with wsesparse.accelerated():
    t = threading.Thread(target=busy); t.start(); time.sleep(0.3)
    pid = os.fork()
    if pid:
        stop = True; t.join()
if pid == 0:
    ok = not _blas_share.sharing()
    with wsesparse.accelerated():  # (no sharing in a child: the BLAS limit instead)
        ok = ok and not _blas_share.sharing() and np.allclose(a @ a, a @ a)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_child_forked_while_another_thread_calls_blas_opens_blocks():
    """The child inherits the callback's lock taken (the calling thread does not exist
    there), and a new block registered the libraries under that lock: it hung (found by a
    review session). Now the child gets a fresh lock and shares nothing: its blocks limit
    BLAS instead, and its BLAS calls finish."""
    import subprocess
    import sys
    _libraries()
    res = subprocess.run([sys.executable, "-c", _FORK_WHILE_ANOTHER_THREAD_CALLS],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "0", (res.stdout, res.stderr[-2000:])


def test_register_rejects_too_many_libraries_and_no_slots():
    """Both refused before the callback's registration changes."""
    with pytest.raises(ValueError, match=r"at most \d+ libraries, got 100"):
        _runtime.blas_pool_register([0] * 100, 64)
    with pytest.raises(ValueError, match="max_slots must be positive, got 0"):
        _runtime.blas_pool_register([], 0)
