"""One process-wide hold on the thread count of the BLAS libraries (numpy's and scipy's
OpenBLAS, MKL, BLIS: whatever threadpoolctl finds under ``user_api="blas"``).

A thread count set through threadpoolctl on OpenBLAS built with pthreads (what numpy's and
scipy's wheels ship) is the library's, shared by every thread of the process. Two calls that
each set it for a while and put back what they found corrupt it when they overlap: the second
one saves the first's temporary value and restores that, last (a review session found BLAS left
on one thread for good after four threads' dense products). So every such limit in wsesparse is
a hold here: the first holder sets the count, later holders share it (the first one's count
applies), and the last to let go puts the original counts back. ``wsesparse.accelerated()``
holds it while a block is open, and the dense products of ``sparse_matmul(..., n_threads=n)``
for the length of the call.

MKL and OpenBLAS built with OpenMP keep the count per thread (OpenMP's own setting), not per
process: there the hold's count applies to the thread that took it, and the restore to the
thread that lets go (a test found the main thread's MKL at 2 inside another thread's hold).
"""

from __future__ import annotations

import contextlib
import os
import threading

from wsesparse import _blas_libs
from wsesparse._interrupts import deferred, finish

__all__ = ["hold", "release", "limited", "holders", "settle_after_fork"]

_lock = threading.Lock()
_holders = 0
# While held (and while the first holder sets the counts): [(threadpoolctl's controller of one
# BLAS library, its count before the hold)]. Recorded before any count changes, so that a
# child forked half way through the change puts them back (settle_after_fork).
_originals = None
# The limited() holds taken and not let go: token -> thread (a child process keeps only its
# own thread's: below).
_tokens: dict[object, int] = {}


def _free_control() -> None:
    """Let any thread set OpenBLAS's thread count next.

    threadpoolctl 3.8 lets one Python thread at a time (the first to set it) change the
    count of a pthreads OpenBLAS and silently ignores the others, until that thread leaves
    a ``with threadpool_limits`` block. The hold is process-wide: one thread may take it
    and another restore it, and it uses no ``with``. So it takes control for each change
    and gives it back at once (before, a restore from the second thread was dropped and
    BLAS stayed on one thread, found by a review session)."""
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:  # (threadpoolctl before 3.0: no such rule)
        return
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


def hold(n: int) -> None:
    """Take a hold on the BLAS limit: the first holder sets ``n`` threads; while holders
    remain, later ones share the count already set."""
    _hold(n)


def _hold(n: int, token: object = None) -> None:
    """:func:`hold`, recorded under ``token`` for the calling thread where one is given
    (``limited``)."""
    global _holders, _originals
    with deferred(), _lock:   # (a Ctrl-C between the steps left BLAS limited for good)
        if _holders == 0:
            libs = _blas_libs.controller().select(user_api="blas").lib_controllers
            _originals = [(lib, lib.get_num_threads()) for lib in libs]
            _set_counts([(lib, n) for lib, _ in _originals])
        _holders += 1
        if token is not None:
            _tokens[token] = threading.get_ident()


def release() -> None:
    """Let go of one hold; the last one puts the libraries' original counts back."""
    _release()


def _release(token: object = None) -> None:
    global _holders
    with deferred(), _lock:
        if token is not None:
            if _tokens.pop(token, None) is None:
                return   # (let go already, or never taken: the hold was interrupted)
        if _holders <= 0:
            raise RuntimeError("wsesparse._blas.release() without a hold")
        _holders -= 1
        if _holders == 0:
            _restore()


def _set_counts(counts) -> None:
    """Set each library's count (threadpoolctl's controllers; None: it reported none)."""
    _free_control()
    for lib, n in counts:
        if n is not None:
            lib.set_num_threads(n)
    _free_control()


def _restore() -> None:
    """The counts from before the first hold back (forgotten only once all are set)."""
    global _originals
    if _originals is not None:
        _set_counts(_originals)
        _originals = None


@contextlib.contextmanager
def limited(n: int):
    """A hold for the length of a ``with`` block.

    Examples
    --------
    >>> import numpy as np
    >>> with limited(1):
    ...     holders()
    1
    >>> holders()
    0
    """
    token = object()
    try:   # (the try first: a Ctrl-C deferred while taking is raised inside it)
        _hold(n, token)
        yield
    finally:
        try:
            finish(_release, token)
        except BaseException:
            if token in _tokens:   # (it landed before finish took over: let go now)
                finish(_release, token)
            raise


def holders() -> int:
    """Holds taken and not let go (0: the libraries have their own counts)."""
    return _holders


def _after_fork_in_child() -> None:
    """A child forked while other threads held the limit: the lock, which one of them may
    have held, is replaced (the child's first hold waited on it for ever: a review), and
    their ``limited()`` holds are dropped, as those threads do not exist here. The count
    is rebuilt from what the forking thread holds, as another thread may have been half
    way through a change: here from its ``limited()`` holds, then
    ``wsesparse.accelerate``'s handler (registered after this one) adds its blocks' and
    ``enable()``'s and settles (:func:`settle_after_fork`)."""
    global _lock, _holders
    _lock = threading.Lock()
    me = threading.get_ident()
    for token in [t for t, thread in _tokens.items() if thread != me]:
        del _tokens[token]
    _holders = len(_tokens)


def settle_after_fork(more: int) -> None:
    """In a forked child: ``more`` holds besides the ``limited()`` ones; with none at all,
    the original counts go back."""
    global _holders
    _holders = len(_tokens) + more   # (set, not added: a second handler would count twice)
    if _holders == 0:
        _restore()   # (also where another thread of the parent was half way through setting)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
