"""OpenBLAS's parallel calls on the kernels' OpenMP team, while held
(``wsesparse.accelerated(blas_threads="shared")``).

OpenBLAS built with pthreads runs each threaded call on server threads that busy-wait
about 0.1 s afterwards, on the cores the kernels' threads need next, so solver loops that
mix products with ``np.dot``/``norm`` (and ARPACK's BLAS-2 work) used to run BLAS on one
thread inside the block. OpenBLAS 0.3.27 and later can hand a call's jobs to a callback
(``openblas_set_threads_callback_function``); ``_kernels/_blas_pool.h`` runs them on the
kernels' own OpenMP team. One pool of threads then serves both libraries, and BLAS keeps
its thread count. Measured in docs/accelerate.md ("One team for BLAS and the kernels").

Libraries whose threads are GNU OpenMP's (MKL's "gnu" layer, OpenBLAS built with OpenMP
where libgomp is the only OpenMP runtime loaded) already share the kernels' pool and are
left alone. Among the others only libraries where it is known to be safe take part:
OpenBLAS with pthreads on Linux,
a version from 0.3.27 to 0.3.31 (the callback's signature and the slots it indexes were
read from those builds' code), with the callback setter, its ``blas_num_threads`` and
``openblas_threads_callback_`` exported, no other callback installed, and at least twice
as many slots (``MAX_THREADS``) as threads. :func:`share` says whether every BLAS library
threadpoolctl finds qualifies; if one does not, nothing is installed and the caller limits
BLAS threads instead.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import threading

from wsesparse import _threads
from wsesparse._kernels import _runtime

__all__ = ["share", "unshare", "sharing", "candidates"]

_SETTERS = ("openblas_set_threads_callback_function",
            "scipy_openblas_set_threads_callback_function64_")
_CONFIGS = ("openblas_get_config", "scipy_openblas_get_config",
            "scipy_openblas_get_config64_", "openblas_get_config64_")
_VERSIONS = ((0, 3, 27), (0, 3, 31))  # first and last tested, both included

_lock = threading.Lock()
_holders = 0
_installed: list = []  # the setters called while held


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


def candidates() -> tuple[list[_Library], list[str]]:
    """The BLAS libraries loaded in the process that may share the team, and why each
    other one may not (empty when all may)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return [], ["threadpoolctl is not installed"]
    libs, why = [], []
    if not sys.platform.startswith("linux"):
        why.append(f"not on Linux ({sys.platform})")
    if not _runtime.blas_pool_callback():
        why.append("the kernels were built without OpenMP")
    controller = ThreadpoolController()
    gomp_only = all(c.prefix == "libgomp" for c in
                    controller.select(user_api="openmp").lib_controllers)
    for ctl in controller.select(user_api="blas").lib_controllers:
        info = ctl.info()
        path = info.get("filepath", "?")
        layer = info.get("threading_layer")
        if layer == "gnu" or (layer == "openmp" and gomp_only):
            continue  # (its threads are GNU OpenMP's, the kernels' own pool already)
        if info.get("internal_api") != "openblas" or layer != "pthreads":
            why.append(f"{path}: {info.get('internal_api')} with {layer} threads")
            continue
        version = _version(info.get("version"))
        if not _VERSIONS[0] <= version <= _VERSIONS[1]:
            why.append(f"{path}: OpenBLAS {info.get('version')} (tested: 0.3.27-0.3.31)")
            continue
        lib = _probe(path, why)
        if lib is not None:
            libs.append(lib)
    return (libs, why) if not why else ([], why)


def _probe(path: str, why: list[str]) -> _Library | None:
    try:
        dll = ctypes.CDLL(path)
    except OSError as e:
        why.append(f"{path}: {e}")
        return None
    setter = next((getattr(dll, n) for n in _SETTERS if hasattr(dll, n)), None)
    config = next((getattr(dll, n) for n in _CONFIGS if hasattr(dll, n)), None)
    try:
        variable = ctypes.c_void_p.in_dll(dll, "openblas_threads_callback_")
        count = ctypes.addressof(ctypes.c_int.in_dll(dll, "blas_num_threads"))
    except ValueError:
        variable = count = None
    if setter is None or config is None or variable is None:
        why.append(f"{path}: no callback setter, configuration or thread count exported")
        return None
    config.restype = ctypes.c_char_p
    m = re.search(rb"MAX_THREADS=(\d+)", config() or b"")
    slots = int(m.group(1)) if m else 0
    n = ctypes.c_int.from_address(count).value
    if slots < 2 * max(n, 1):
        why.append(f"{path}: {n} threads and {slots} slots (needs twice as many slots)")
        return None
    if variable.value not in (None, 0, _runtime.blas_pool_callback()):
        why.append(f"{path}: another threads callback is installed")
        return None
    setter.argtypes = [ctypes.c_void_p]
    setter.restype = None
    return _Library(path, setter, variable, count, slots)


def share() -> bool:
    """Take a hold: the first holder installs the callback in every BLAS library (False,
    and nothing installed or held, unless all of them qualify: :func:`candidates`)."""
    global _holders
    with _lock:
        if _holders == 0:
            libs, why = candidates()
            if why or not libs:
                return False
            _runtime.blas_pool_register([lib.count_address for lib in libs],
                                        min(lib.slots for lib in libs))
            callback = _runtime.blas_pool_callback()
            for lib in libs:
                lib.setter(callback)
                _installed.append(lib.setter)
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
            _threads.blas_shared = False
            for setter in _installed:
                setter(None)
            _installed.clear()


def _after_fork_in_child() -> None:
    """A child forked while the callback is set gets OpenBLAS's own threads back: a
    threaded BLAS call there through the callback hung (a 700^2 matmul in a child forked
    inside a block), while OpenBLAS restarts its own threads after a fork. (No lock: the
    parent's other threads, which may hold it, do not exist in the child.)"""
    _threads.blas_shared = False
    for setter in _installed:
        setter(None)
    _installed.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def sharing() -> bool:
    """Whether OpenBLAS's calls run on the kernels' team now."""
    return bool(_installed)
