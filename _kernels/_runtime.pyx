# cython: language_level=3
"""Runtime queries and services of the kernels: OpenMP (compiled in or not,
thread limit, cores this process may use), a read-bandwidth probe (is L3
fast?), and the pool that recycles large output buffers (_out_pool.h).

_out_pool.h holds the pool's state, so it is included here only: a second
module including it would get a second pool.
"""

cimport numpy as cnp
from libc.stdint cimport uintptr_t
from libc.stdlib cimport malloc, free

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


cdef extern from "_loaded_objects.h":
    int ws_loaded_objects(unsigned long long *out)


def loaded_objects():
    """``(added, removed)``: the shared objects the dynamic loader has added to and
    removed from the process so far (glibc's own counts), or None where they cannot be
    read. The walk runs with the GIL held, so no thread of this process forks during it.

    Examples
    --------
    >>> counts = loaded_objects()
    >>> counts is None or (counts[0] > 0 and counts[1] >= 0)
    True
    """
    cdef unsigned long long out[2]
    if not ws_loaded_objects(out):
        return None
    return (out[0], out[1])


cdef extern from "_blas_pool.h" nogil:
    ctypedef void (*ws_blas_dojob)(int, void*, int)
    void ws_blas_callback(int, ws_blas_dojob, int, size_t, void*, int)
    int ws_blas_register(const int **counts, int n, int max_slots)
    void ws_blas_after_fork_child()
    int WS_BLAS_LIBS
    int ws_blas_team
    double ws_blas_when
    long ws_blas_calls
    long ws_blas_thread_calls
    int ws_blas_force_threads


def blas_pool_callback():
    """Address of the callback that runs OpenBLAS's parallel calls on the kernels' OpenMP
    team (``_blas_pool.h``; for ``openblas_set_threads_callback_function``), or 0 in a
    build without OpenMP."""
    return <uintptr_t>&ws_blas_callback if wsesparse_has_openmp() else 0


def blas_pool_register(counts, int max_slots):
    """Tell the callback where each library sharing the team keeps its thread count
    (``counts``: addresses of their C ``int blas_num_threads``, at most ``WS_BLAS_LIBS``)
    and the smallest of their ``MAX_THREADS``."""
    cdef Py_ssize_t n = len(counts), k
    if n > WS_BLAS_LIBS:
        raise ValueError(f"at most {WS_BLAS_LIBS} libraries, got {n}")
    cdef const int **ptrs = <const int **>malloc(max(n, 1) * sizeof(int*))
    if ptrs == NULL:
        raise MemoryError()
    try:
        for k in range(n):
            ptrs[k] = <const int *><uintptr_t>counts[k]
        if ws_blas_register(ptrs, <int>n, max_slots) != 0:
            raise ValueError(f"max_slots must be positive, got {max_slots}")
    finally:
        free(ptrs)


def blas_pool_after_fork_child():
    """In a child process just forked: a fresh lock for the callback (another thread of the
    parent may have held it)."""
    ws_blas_after_fork_child()


def blas_pool_team():
    """``(threads, when)``: the team of the last OpenBLAS call run by the callback (1 where
    it did not run on the OpenMP team) and the ``time.monotonic()`` at its end (0.0: none
    yet)."""
    return ws_blas_team, ws_blas_when


def blas_pool_calls():
    """``(calls, on_threads)``: OpenBLAS calls the callback ran, and how many of them on
    threads created for the call instead of the OpenMP team."""
    return ws_blas_calls, ws_blas_thread_calls


def _blas_pool_force_threads(bint on):
    """(Tests.) Run every call on threads created for it, not on the OpenMP team."""
    global ws_blas_force_threads
    ws_blas_force_threads = on
