# cython: language_level=3
"""Runtime queries and services of the kernels: OpenMP (compiled in or not,
thread limit, cores this process may use), a read-bandwidth probe (is L3
fast?), and the pool that recycles large output buffers (_out_pool.h).

_out_pool.h holds the pool's state, so it is included here only: a second
module including it would get a second pool.
"""

cimport numpy as cnp

from numpy import empty as _np_empty

cnp.import_array()

cdef extern from "_omp_compat.h" nogil:
    int omp_get_max_threads()
    int wsesparse_has_openmp()
    int wsesparse_available_cores()


cdef extern from "_cache_probe.h" nogil:
    double ws_read_gbps(size_t nbytes, int repeats)


def read_bandwidth(Py_ssize_t nbytes, int repeats=5):
    """GB/s at which one core reads a freshly touched buffer of ``nbytes``
    (best of ``repeats`` passes), or -1.0 if ``nbytes`` is under one 64-byte
    line or the buffer cannot be allocated. Used to tell whether data beyond
    L2 comes from a fast L3 (_hardware.probe_fast_l3, for _drivers.panel_width)."""
    if nbytes < 0:
        raise ValueError(f"nbytes must be nonnegative, got {nbytes}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    cdef double gbps
    with nogil:
        gbps = ws_read_gbps(<size_t>nbytes, repeats)
    return gbps


cdef extern from "_out_pool.h":
    object ws_pool_capsule()
    size_t ws_pool_release()
    size_t ws_pool_cached()
    size_t ws_pool_min

cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)

cdef object _POOL_HANDLER = ws_pool_capsule()
# Outputs from this many bytes on come from the pool (see _out_pool.h).
OUTPUT_POOL_MIN_BYTES = ws_pool_min


def empty_pooled(shape, dtype):
    """``numpy.empty(shape, dtype)`` whose buffer, once the array is freed,
    waits for reuse by the next output of the same size (_out_pool.h). For
    arrays of at least ``OUTPUT_POOL_MIN_BYTES``; smaller requests are plain
    allocations."""
    old = PyDataMem_SetHandler(_POOL_HANDLER)
    try:
        return _np_empty(shape, dtype)
    finally:
        PyDataMem_SetHandler(old)


def release_pooled():
    """Return the freed outputs waiting for reuse to the system; the bytes released."""
    return ws_pool_release()


def pooled_bytes():
    """Bytes of freed outputs waiting for reuse."""
    return ws_pool_cached()


def openmp_enabled():
    """Whether the kernels were compiled with OpenMP."""
    return bool(wsesparse_has_openmp())


def max_threads():
    """``omp_get_max_threads()``: honours OMP_NUM_THREADS and threadpoolctl."""
    return omp_get_max_threads()


def available_cores():
    """CPUs this process may run on (its affinity mask), or -1 if unknown."""
    return wsesparse_available_cores()
