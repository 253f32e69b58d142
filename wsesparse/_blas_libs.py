"""The BLAS and OpenMP libraries loaded in the process, as threadpoolctl finds them, scanned
again only when the process has loaded or unloaded a shared object since the last scan.

threadpoolctl's scan (``ThreadpoolController()``) walks every loaded object and opens each
BLAS/OpenMP library it recognises: about 0.6 ms on the 2-core development VM. Every
``accelerated()`` block and every BLAS-limited product used to pay it (``threadpool_limits``
scans on each call). The dynamic loader counts the objects it has added and removed
(``_runtime.loaded_objects``, glibc's counts, 0.1 us to read); while both are unchanged the
last scan still describes the process, also for libraries opened through ctypes without a
Python import. Where they cannot be read (not glibc), the number of imported modules stands
in, as in threadpoolctl's own ``get_cached_controller``.
"""

from __future__ import annotations

import sys

from wsesparse._kernels import _runtime

__all__ = ["controller", "generation"]

_cached = None   # (generation, ThreadpoolController)


def generation() -> tuple:
    """A value that changes whenever a shared object may have been loaded or unloaded.

    Examples
    --------
    >>> before = generation()
    >>> generation() == before
    True
    """
    counts = _runtime.loaded_objects()
    return ("objects",) + counts if counts is not None else ("modules", len(sys.modules))


def controller():
    """threadpoolctl's ``ThreadpoolController`` of the libraries loaded now (scanned again
    only when :func:`generation` has changed); raises ImportError without threadpoolctl.

    Examples
    --------
    >>> controller() is controller()
    True
    """
    global _cached
    from threadpoolctl import ThreadpoolController
    key = generation()
    cached = _cached
    if cached is None or cached[0] != key:
        # (the key read before the scan: an object loaded meanwhile makes the next call
        # scan again, never the reverse)
        cached = _cached = (key, ThreadpoolController())
    return cached[1]
