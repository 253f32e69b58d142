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
import threading

__all__ = ["hold", "release", "limited", "holders"]

_lock = threading.Lock()
_holders = 0
_limits = None  # threadpoolctl's limiter while held


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
    global _holders, _limits
    with _lock:
        if _holders == 0:
            from threadpoolctl import threadpool_limits
            _free_control()
            _limits = threadpool_limits(limits=n, user_api="blas")
            _free_control()
        _holders += 1


def release() -> None:
    """Let go of one hold; the last one puts the libraries' original counts back."""
    global _holders, _limits
    with _lock:
        if _holders <= 0:
            raise RuntimeError("wsesparse._blas.release() without a hold")
        _holders -= 1
        if _holders == 0:
            limits, _limits = _limits, None
            _free_control()
            limits.restore_original_limits()
            _free_control()


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
    hold(n)
    try:
        yield
    finally:
        release()


def holders() -> int:
    """Holds taken and not let go (0: the libraries have their own counts)."""
    return _holders
