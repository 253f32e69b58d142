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

import os
import signal
import threading
import time

__all__ = ["deferred", "finish"]


_depth = 0          # deferrals open in the main thread (only it touches these)
_previous = None    # the SIGINT handler the outermost one replaced
_caught: list = []  # frames of the SIGINTs held back
_since = 0.0        # when the outermost one began (time.monotonic)
# No deferral lasts this long (the longest step, threadpoolctl's scan, takes milliseconds):
# older, it was left open by an exception from another signal's handler, which nothing here
# holds back, and Ctrl-C is delivered at once rather than recorded for good.
_STALE_S = 5.0


def _record(signum, frame) -> None:
    global _depth, _previous
    if _previous is not None and time.monotonic() - _since > _STALE_S:
        previous, _previous, _depth = _previous, None, 0
        _caught.clear()
        signal.signal(signal.SIGINT, previous)
        previous(signum, frame)
        return
    _caught.append(frame)


class _Deferred:
    """The context manager :func:`deferred` returns: the outermost one in the main thread
    swaps the handler (``getsignal`` and two ``signal.signal`` calls, about 8 us on the
    2-core VM under load), nested ones only count."""

    __slots__ = ("_on",)

    def __enter__(self) -> None:
        global _depth, _previous, _since
        self._on = threading.get_ident() == threading.main_thread().ident
        if not self._on:
            return
        if _depth == 0:
            _since = time.monotonic()
            _caught.clear()   # (one left by an interrupt at the end of the last one)
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):  # (SIG_IGN, SIG_DFL, set outside Python: nothing raises)
                _previous = previous   # (first: a fork or another signal's error between
                try:                   # the two steps finds what to put back)
                    signal.signal(signal.SIGINT, _record)
                except ValueError:  # (a subinterpreter: handlers cannot be set there)
                    _previous = None
                except BaseException:   # (another signal's handler raised first)
                    _previous = None
                    signal.signal(signal.SIGINT, previous)
                    raise
        _depth += 1

    def __exit__(self, *exc) -> bool:
        global _depth, _previous
        if self._on:
            _depth -= 1
            if _depth == 0 and _previous is not None:
                previous = _previous
                try:
                    signal.signal(signal.SIGINT, previous)
                except BaseException:
                    # (another signal's handler ran first and raised, before the swap: a
                    # review found Ctrl-C switched off for good after alarm timeouts)
                    signal.signal(signal.SIGINT, previous)
                    _previous = None
                    raise
                _previous = None
                if _caught:
                    frame = _caught[0]
                    _caught.clear()
                    previous(signal.SIGINT, frame)
        return False


def deferred() -> _Deferred:
    """A context manager that holds back SIGINT until it ends, then delivers it (its
    handler runs then); nested ones deliver at the outermost end.

    Examples
    --------
    >>> with deferred():
    ...     pass
    """
    return _Deferred()


def finish(fn, *args) -> None:
    """``fn(*args)`` with SIGINT held back (:func:`deferred`), run once even when an exception
    (a KeyboardInterrupt, or another signal handler's) lands before the deferral has begun:
    it is raised afterwards.

    Examples
    --------
    >>> done = []
    >>> finish(done.append, 1); done
    [1]
    """
    pending = None
    entered = False
    while not entered:
        try:
            with deferred():
                entered = True   # (inside the deferral: fn runs once, its own error propagates)
                fn(*args)
        except BaseException as exc:
            if entered:   # fn's, or one held back and delivered at the end
                raise
            pending = exc  # it came before the deferral took over: run fn, then raise it
    if pending is not None:
        raise pending


def _after_fork_in_child() -> None:
    """A child forked from another thread while the main thread held SIGINT back: the
    handler goes back (the child's only thread would otherwise record Ctrl-C for good)."""
    global _depth, _previous
    previous, _previous, _depth = _previous, None, 0
    _caught.clear()
    if previous is not None:
        try:
            signal.signal(signal.SIGINT, previous)
        except ValueError:  # (not the main thread of the main interpreter)
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
