"""Ctrl-C and fork around the process-wide switches (``accelerated()``, the BLAS thread hold).

A review session found (session 34): a child forked while another thread was inside
``accelerated()`` or a BLAS-limited product hung on its first own block or product (the
locks stayed held in the child); a SIGINT at a random moment left scipy's classes hooked,
blocks raising AttributeError on exit, or BLAS on one thread for good. Here a SIGINT is sent
for real (``os.kill``), at random moments, and every state is checked after each one.
"""

import gc
import os
import random
import signal
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import wsesparse
from wsesparse import _blas, _blas_libs, accelerate, sparse_matmul

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "setitimer"),
                                reason="fork and setitimer (POSIX)")


def _blas_counts():
    from threadpoolctl import threadpool_info
    return tuple(d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas")


def _scipy_methods():
    from scipy.sparse._csc import _csc_base
    from scipy.sparse._csr import _csr_base
    return {(c, n): c.__dict__.get(n) for c in (_csr_base, _csc_base)
            for n in ("_matmul_vector", "_matmul_multivector")}


def _loop_until_interrupted(body, trials, seconds):
    """Run ``body`` in a loop; a SIGINT lands after a random delay; ``trials`` times.

    The garbage collector is off meanwhile: a KeyboardInterrupt raised while it finalizes
    an object left by an earlier test (a suspended generator's ``finally``) is ignored by
    Python, and the loop never ended (seen once in CI at trial 140 of 150, with every state
    of wsesparse._interrupts as a plain block leaves it). A trial still running after 10 s
    fails instead of hanging."""
    previous = signal.signal(signal.SIGALRM, lambda *a: os.kill(os.getpid(), signal.SIGINT))
    gc.collect()
    gc.disable()
    try:
        for trial in range(trials):
            deadline = time.monotonic() + 10.0
            try:   # (the timer armed inside: an early alarm stays in the trial)
                signal.setitimer(signal.ITIMER_REAL, random.uniform(*seconds))
                while time.monotonic() < deadline:
                    body()
                pytest.fail(f"trial {trial}: the SIGINT never arrived")
            except KeyboardInterrupt:
                pass
            yield
    finally:
        gc.enable()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("blas_threads", [None, 1])
def test_ctrl_c_inside_accelerated_blocks_leaves_no_state(blas_threads):
    random.seed(0)
    A = sp.random(50, 50, density=0.1, format="csr", random_state=0)
    x = np.ones(50)
    methods, counts = _scipy_methods(), _blas_counts()

    def body():
        with wsesparse.accelerated(blas_threads=blas_threads):
            A @ x

    for _ in _loop_until_interrupted(body, 150 if blas_threads is None else 60,
                                     (0.00005, 0.002 if blas_threads is None else 0.01)):
        assert _scipy_methods() == methods
        assert (accelerate.is_enabled(), accelerate._blocks) == (False, {})
        assert _blas.holders() == 0 and _blas_counts() == counts


def test_ctrl_c_inside_blas_limited_products_leaves_no_state():
    random.seed(1)
    A = sp.random(200, 200, density=0.6, format="csr", random_state=1)
    X = np.ones((200, 64))
    counts = _blas_counts()
    for _ in _loop_until_interrupted(
            lambda: sparse_matmul(A, X, method="dense", n_threads=1), 60, (0.0005, 0.01)):
        assert _blas.holders() == 0 and _blas._tokens == {} and _blas_counts() == counts


def _fork_and_wait(child, timeout=20.0):
    """Exit status of a forked child running ``child()`` (124: still running after
    ``timeout`` s, then killed)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            child()
            code = 0
        finally:
            os._exit(code)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return 124


def test_fork_while_other_threads_hold_the_switches():
    """Children forked while other threads open blocks and run BLAS-limited products finish
    their own (they hung on the locks those threads held), and drop those threads' holds."""
    A = sp.random(200, 200, density=0.5, format="csr", random_state=2)
    X = np.ones((200, 16))
    x = np.ones(200)
    stop = threading.Event()

    def blocks():
        while not stop.is_set():
            with wsesparse.accelerated(blas_threads=1):
                A @ x

    def dense():
        while not stop.is_set():
            sparse_matmul(A, X, method="dense", n_threads=1)

    def child():
        with wsesparse.accelerated(blas_threads=1):
            assert np.allclose(A @ x, A.toarray() @ x)
        assert np.allclose(sparse_matmul(A, X, method="dense", n_threads=1), A @ X)
        # the parent's other threads' holds were dropped: nothing is held now
        assert (accelerate._blocks, accelerate.is_enabled(), _blas.holders()) == ({}, False, 0)

    threads = [threading.Thread(target=f, daemon=True) for f in (blocks, dense)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.1)
        codes = [_fork_and_wait(child) for _ in range(8)]
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert codes == [0] * 8


def test_child_forked_from_a_thread_while_main_holds_ctrl_c_back_gets_it_back():
    """The main thread inside a deferral, another thread forks: in the child (whose only
    thread is the forking one) SIGINT raises again instead of being recorded for good."""
    from wsesparse import _interrupts

    def child():
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert _interrupts._depth == 0
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            return
        raise AssertionError("SIGINT did not raise in the child")

    codes = []
    with _interrupts.deferred():
        t = threading.Thread(target=lambda: codes.append(_fork_and_wait(child)))
        t.start()
        t.join()
    assert codes == [0]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_deferral_left_open_does_not_swallow_ctrl_c_for_good(monkeypatch):
    """An exception from another signal's handler can skip a deferral's end (nothing holds
    those back): SIGINT then stayed recorded for good. A deferral older than _STALE_S lets
    Ctrl-C through and puts the handler back."""
    from wsesparse import _interrupts
    monkeypatch.setattr(_interrupts, "_STALE_S", 0.05)
    _interrupts.deferred().__enter__()          # never exited, as after such an exception
    assert signal.getsignal(signal.SIGINT) is _interrupts._record
    time.sleep(0.1)
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert (_interrupts._depth, _interrupts._previous) == (0, None)


def test_child_forked_while_another_thread_sets_the_blas_limit_gets_the_counts_back(
        monkeypatch):
    """A child forked while another thread of the parent was half way through taking the
    first BLAS hold (inside a library's ``set_num_threads``) runs BLAS on its original
    counts: it kept them at 1 with nothing held (a review session found 2 children of 25)."""
    from threadpoolctl import threadpool_info
    original = _blas_counts()
    if not original or max(original) < 2:
        pytest.skip("BLAS already runs on one thread")
    libs = _blas_libs.controller().select(user_api="blas").lib_controllers  # (scanned
    # here: a scan in the thread below would find the patched classes)
    if all(getattr(lib, "threading_layer", None) == "openmp" for lib in libs):
        pytest.skip("every BLAS library keeps its count per thread")
    inside, go_on = threading.Event(), threading.Event()
    me, done = [], set()
    for kind in {type(lib) for lib in libs}:
        def pausing(self, n, _set=kind.set_num_threads):
            result = _set(self, n)
            if n == 1 and threading.current_thread() in me and not inside.is_set():
                done.add(id(self))
                if len(done) == len(libs):   # (every library is set: pause there, before
                    inside.set()             # the hold is counted)
                    go_on.wait(20)
            return result
        monkeypatch.setattr(kind, "set_num_threads", pausing)

    def take():
        with _blas.limited(1):
            pass

    thread = threading.Thread(target=take, daemon=True)
    me.append(thread)
    thread.start()
    try:
        assert inside.wait(20)
        # (the window: the libraries limited, no hold counted; a library whose count is
        # per thread, OpenMP's, shows it only in the thread that set it)
        assert _blas.holders() == 0
        assert 1 in [lib.get_num_threads() for lib in libs
                     if getattr(lib, "threading_layer", None) != "openmp"], threadpool_info()
        code = _fork_and_wait(lambda: os._exit(0 if (_blas_counts(), _blas.holders()) ==
                                                (original, 0) else 3))
    finally:
        go_on.set()
        thread.join()
    assert code == 0
    assert (_blas_counts(), _blas.holders()) == (original, 0)
