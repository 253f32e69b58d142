"""Ctrl-C held back while process-wide state changes in several steps.

``accelerated()`` and the BLAS thread hold (``wsesparse._blas``) change several things one
after the other: scipy's class attributes and the bookkeeping that says they changed,
threadpoolctl's counts and the record of the originals, a hold and the ``try`` that lets go
of it. A KeyboardInterrupt between two such steps left the process half switched: hooks
in scipy with nothing to remove them, BLAS on one thread for good, a block that raised
AttributeError on every later exit (a review interrupted short blocks at random moments:
about 1,100 of 4,000 interrupts left such a state). Inside :func:`deferred`, a SIGINT is
recorded and raised when the block ends, once the steps are all done.

A KeyboardInterrupt can still land before :func:`deferred` has taken over (the review's
interrupts hit that gap in about one trial in 90): what a ``finally`` must undo goes through
:func:`finish`, which runs it again when the interrupt came first.

Only SIGINT with a handler installed from Python is deferred (the default one raises
KeyboardInterrupt), and only in the main thread: Python runs signal handlers there alone.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["deferred", "finish"]


@contextlib.contextmanager
def deferred():
    """Hold back SIGINT until the block ends, then deliver it (its handler runs then).

    Examples
    --------
    >>> with deferred():
    ...     pass
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.getsignal(signal.SIGINT)
    except ValueError:  # (not the main interpreter)
        previous = None
    if not callable(previous):   # SIG_IGN, SIG_DFL or set outside Python: nothing raises here
        yield
        return
    caught = []
    try:
        signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    except ValueError:  # (a subinterpreter's main thread: handlers cannot be set there)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            previous(signal.SIGINT, caught[0])


def finish(fn, *args) -> None:
    """``fn(*args)`` with SIGINT held back (:func:`deferred`), run to its end even when a
    KeyboardInterrupt lands before the deferral has begun (it is raised afterwards).

    Examples
    --------
    >>> done = []
    >>> finish(done.append, 1); done
    [1]
    """
    interrupt = None
    ran = False
    while not ran:
        try:
            with deferred():
                fn(*args)
                ran = True   # (inside the deferral: set if and only if fn returned)
        except KeyboardInterrupt as exc:
            if ran:      # delivered at the end of the deferral, fn done
                raise
            interrupt = exc
    if interrupt is not None:
        raise interrupt
