"""OpenBLAS's parallel calls on the kernels' OpenMP team, while held
(``wsesparse.accelerated(blas_threads="shared")``).

OpenBLAS built with pthreads runs each threaded call on server threads that busy-wait
about 0.1 s afterwards, on the cores the kernels' threads need next, so solver loops that
mix products with ``np.dot``/``norm`` (and ARPACK's BLAS-2 work) used to run BLAS on one
thread inside the block. OpenBLAS 0.3.28 and later can hand a call's jobs to a callback
(``openblas_set_threads_callback_function``); ``_kernels/_blas_pool.h`` runs them on the
kernels' own OpenMP team. One pool of threads then serves both libraries, and BLAS keeps
its thread count. Measured in docs/accelerate.md ("One team for BLAS and the kernels").

Libraries whose threads are GNU OpenMP's (MKL's "gnu" layer, OpenBLAS built with OpenMP
where libgomp is the only OpenMP runtime loaded) spin only briefly after a call, as the
kernels' own threads do: they need no callback and are left as they are (where they are the
only BLAS libraries, nothing is shared and the caller limits BLAS threads). Among the
others only libraries where it is known to be safe take part: OpenBLAS with pthreads on
Linux, version 0.3.30 or 0.3.31 (numpy's and scipy's wheels; the callback's signature and
the slots it indexes were read from their code: 0.3.28 crashes, see ``_blas_pool.h``), with
the callback setter, its ``blas_num_threads`` and ``openblas_threads_callback_`` exported,
no other callback installed, and together at least twice as many slots (``MAX_THREADS``)
as the largest thread count. :func:`share` says whether every BLAS library threadpoolctl
finds qualifies; if one does not, nothing is installed and the caller limits BLAS threads
instead. Do not raise a BLAS thread count while a block is open (from any thread): the
callback numbers its jobs above the count it reads at the start of a call.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import threading

from wsesparse import _blas_libs, _threads
from wsesparse._kernels import _runtime

__all__ = ["share", "unshare", "sharing", "candidates", "tested_version", "settle_after_fork"]

_SETTERS = ("openblas_set_threads_callback_function",
            "scipy_openblas_set_threads_callback_function64_")
_CONFIGS = ("openblas_get_config", "scipy_openblas_get_config",
            "scipy_openblas_get_config64_", "openblas_get_config64_")
_VERSIONS = ((0, 3, 30), (0, 3, 31))  # first and last read and tested, both included

_lock = threading.Lock()
_holders = 0
_installed: list = []  # the setters called while held
# _probe's libraries (or why each cannot share) by path, for the scan _opened_for
# (wsesparse._blas_libs): opening each took most of a block's 0.1 ms.
_opened: dict = {}
_opened_for = None


class _Library:
    """One OpenBLAS library that may share the team."""

    def __init__(self, path: str, setter, variable, count_address: int, slots: int):
        self.path, self.setter, self.variable = path, setter, variable
        self.count_address, self.slots = count_address, slots

    @property
    def count(self) -> int:
        return ctypes.c_int.from_address(self.count_address).value


def _version(text: str) -> tuple[int, ...]:
    """``(0, 3, 30)`` from ``"0.3.30"`` or ``"0.3.31.188.0"``; () if unreadable.

    Examples
    --------
    >>> _version("0.3.31.188.0"), _version("0.3.30"), _version("x")
    ((0, 3, 31), (0, 3, 30), ())
    """
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(g) for g in m.groups()) if m else ()


def tested_version(text: str) -> bool:
    """Whether an OpenBLAS version string is one the callback was read and tested with
    (builds past the 0.3.31 tag, like numpy 2.4's 0.3.31.188.0, count as 0.3.31).

    Examples
    --------
    >>> [tested_version(v) for v in ("0.3.28", "0.3.30", "0.3.31.188.0", "0.3.32", "?")]
    [False, True, True, False, False]
    """
    return _VERSIONS[0] <= _version(text) <= _VERSIONS[1]


def candidates() -> tuple[list[_Library], list[str]]:
    """The BLAS libraries loaded in the process that may share the team, and why each
    other one may not: ``(libraries, [])`` where sharing is possible, ``([], reasons)``
    where it is not (``([], [])``: no library needs it)."""
    try:
        controller = _blas_libs.controller()
    except ImportError:
        return [], ["threadpoolctl is not installed"]
    global _opened_for
    if controller is not _opened_for:   # (a new scan: libraries may have moved)
        _opened.clear()
        _opened_for = controller
    libs, why = [], []
    if not sys.platform.startswith("linux"):
        why.append(f"not on Linux ({sys.platform})")
    if not _runtime.blas_pool_callback():
        why.append("the kernels were built without OpenMP")
    gomp_only = all(c.prefix == "libgomp" for c in
                    controller.select(user_api="openmp").lib_controllers)
    for ctl in controller.select(user_api="blas").lib_controllers:
        info = ctl.info()
        path = info.get("filepath", "?")
        layer = info.get("threading_layer")
        if layer == "gnu" or (layer == "openmp" and gomp_only):
            continue  # (GNU OpenMP's threads: they spin only briefly after a call)
        if info.get("internal_api") != "openblas" or layer != "pthreads":
            why.append(f"{path}: {info.get('internal_api')} with {layer} threads")
            continue
        if not tested_version(info.get("version")):
            why.append(f"{path}: OpenBLAS {info.get('version')} (tested: 0.3.30-0.3.31)")
            continue
        lib = _probe(path, why)
        if lib is not None:
            libs.append(lib)
    if libs and 2 * max(lib.count for lib in libs) > min(lib.slots for lib in libs):
        why.append(f"{max(lib.count for lib in libs)} BLAS threads need twice as many "
                   f"slots, {min(lib.slots for lib in libs)} there")
    return (libs, why) if not why else ([], why)


def _probe(path: str, why: list[str]) -> _Library | None:
    lib = _opened.get(path)
    if lib is None:
        lib = _opened[path] = _open(path)
    if isinstance(lib, str):
        why.append(lib)
        return None
    n = lib.count
    if lib.slots < 2 * max(n, 1):
        why.append(f"{path}: {n} threads and {lib.slots} slots (needs twice as many slots)")
        return None
    if lib.variable.value not in (None, 0, _runtime.blas_pool_callback()):
        why.append(f"{path}: another threads callback is installed")
        return None
    return lib


def _open(path: str) -> _Library | str:
    """What does not change while the library stays loaded: its setter, callback variable,
    count and slots (a reason it cannot share, as text, if one is missing)."""
    try:
        dll = ctypes.CDLL(path)
    except OSError as e:
        return f"{path}: {e}"
    setter = next((getattr(dll, n) for n in _SETTERS if hasattr(dll, n)), None)
    config = next((getattr(dll, n) for n in _CONFIGS if hasattr(dll, n)), None)
    try:
        variable = ctypes.c_void_p.in_dll(dll, "openblas_threads_callback_")
        count = ctypes.addressof(ctypes.c_int.in_dll(dll, "blas_num_threads"))
    except ValueError:
        variable = count = None
    if setter is None or config is None or variable is None:
        return f"{path}: no callback setter, configuration or thread count exported"
    config.restype = ctypes.c_char_p
    m = re.search(rb"MAX_THREADS=(\d+)", config() or b"")
    setter.argtypes = [ctypes.c_void_p]
    setter.restype = None
    return _Library(path, setter, variable, count, int(m.group(1)) if m else 0)


def share() -> bool:
    """Take a hold: the first holder installs the callback in every BLAS library (False,
    and nothing installed or held, unless all of them qualify: :func:`candidates`)."""
    global _holders
    if _threads.forked:
        return False  # (GCC's OpenMP team does not survive a fork: see wsesparse._threads)
    with _lock:
        if _holders == 0:
            libs, _ = candidates()
            if not libs:
                return False
            _runtime.blas_pool_register([lib.count_address for lib in libs],
                                        min(lib.slots for lib in libs))
            callback = _runtime.blas_pool_callback()
            for lib in libs:
                _installed.append(lib.setter)  # (first: an interrupt leaves it tracked)
                lib.setter(callback)
            _threads.blas_shared = True
        _holders += 1
        return True


def unshare() -> None:
    """Let go of one hold; the last one removes the callback (OpenBLAS's own threads run
    its calls again)."""
    global _holders
    with _lock:
        if _holders <= 0:
            raise RuntimeError("wsesparse._blas_share.unshare() without a hold")
        _holders -= 1
        if _holders == 0:
            _remove_callbacks()


def _remove_callbacks() -> None:
    """OpenBLAS's own threads run its calls again: the callback out of every library it
    was installed in."""
    _threads.blas_shared = False
    for setter in _installed:
        setter(None)
    _installed.clear()


def _after_fork_in_child() -> None:
    """A child forked while the callback is set gets OpenBLAS's own threads back: a
    threaded BLAS call there through the callback hung (a 700^2 matmul in a child forked
    inside a block), while OpenBLAS restarts its own threads after a fork. Nothing is
    shared in the child again: GCC's OpenMP team does not survive a fork, and blocks
    limit BLAS threads there (``share`` returns False). (No lock is taken, and both are
    replaced: the parent's other threads, which may hold them, do not exist in the
    child.)"""
    global _lock
    _lock = threading.Lock()
    _runtime.blas_pool_after_fork_child()
    _remove_callbacks()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def settle_after_fork(holders: int) -> None:
    """In a forked child: the holds its own thread has (``wsesparse.accelerate`` counts
    them; another thread of the parent may have been half way through taking one)."""
    global _holders
    _holders = holders


def sharing() -> bool:
    """Whether OpenBLAS's calls run on the kernels' team now."""
    return bool(_installed)
