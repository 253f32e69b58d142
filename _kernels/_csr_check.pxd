# The CSR structure checks of _csr_check.h for either index type, and the
# whole of csr_check (``_csr_check``): shared by _csr_tools (csr_check itself),
# _spmm (plain_csr_nnz, empty products) and _scatter (empty products).

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t

from _codes cimport (WS_CSR_OK, WS_CSR_BAD_START, WS_CSR_DECREASING, WS_CSR_SHORT,
                     WS_CSR_BAD_INDEX)
from _types cimport index_t

cdef extern from "_csr_check.h" nogil:
    int ws_indptr_decreases_int32_t(const int32_t*, Py_ssize_t)
    int ws_indptr_decreases_int64_t(const int64_t*, Py_ssize_t)
    int ws_indices_out_of_range_int32_t(const int32_t*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_indices_out_of_range_int64_t(const int64_t*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    void ws_index_span_int32_t(const int32_t*, Py_ssize_t, Py_ssize_t, int64_t*, int64_t*)
    void ws_index_span_int64_t(const int64_t*, Py_ssize_t, Py_ssize_t, int64_t*, int64_t*)


# Rows from which _check looks at indptr with several threads (docs/tuning.md, "Checks").
cdef enum:
    PARALLEL_INDPTR_ROWS = 1 << 18


cdef inline int _decreases(const index_t* indptr, Py_ssize_t n) noexcept nogil:
    if index_t is int32_t:
        return ws_indptr_decreases_int32_t(indptr, n)
    else:
        return ws_indptr_decreases_int64_t(indptr, n)


cdef inline void _index_span(const index_t* indices, Py_ssize_t p0, Py_ssize_t p1,
                             int64_t* lo, int64_t* hi) noexcept nogil:
    if index_t is int32_t:
        ws_index_span_int32_t(indices, p0, p1, lo, hi)
    else:
        ws_index_span_int64_t(indices, p0, p1, lo, hi)


cdef inline int _out_of_range(const index_t* indices, Py_ssize_t p0, Py_ssize_t p1,
                              Py_ssize_t n_cols) noexcept nogil:
    if index_t is int32_t:
        return ws_indices_out_of_range_int32_t(indices, p0, p1, n_cols)
    else:
        return ws_indices_out_of_range_int64_t(indices, p0, p1, n_cols)


cdef inline int _check(const index_t* indptr, Py_ssize_t n_rows,
                       const index_t* indices, Py_ssize_t n_indices, Py_ssize_t n_cols,
                       int n_threads, bint check_indices) noexcept nogil:
    """csr_check on raw arrays (``indices`` unused without ``check_indices``)."""
    cdef Py_ssize_t k, nnz, chunk, lo, hi
    cdef int bad = 0
    if indptr[0] != 0:
        return WS_CSR_BAD_START
    if n_threads <= 1 or n_rows < PARALLEL_INDPTR_ROWS:
        bad = _decreases(indptr, n_rows)
    else:
        # Chunks of the pairs (indptr[i], indptr[i + 1]), i < n_rows, one per thread: a
        # serial pass over a 10^6-row indptr took 0.24 ms beside a 2.3 ms 2-thread SpMV.
        chunk = (n_rows + n_threads - 1) // n_threads
        for k in prange(n_threads, num_threads=n_threads, schedule="static"):
            lo = k * chunk
            hi = min(n_rows, lo + chunk)
            if lo < hi:
                bad |= _decreases(indptr + lo, hi - lo)
    if bad:
        return WS_CSR_DECREASING
    nnz = indptr[n_rows]
    if nnz > n_indices:
        return WS_CSR_SHORT
    if not check_indices:
        return WS_CSR_OK
    if n_threads <= 1:
        # No parallel region for small matrices: opening one costs more.
        bad = _out_of_range(indices, 0, nnz, n_cols)
    else:
        chunk = (nnz + n_threads - 1) // n_threads
        for k in prange(n_threads, num_threads=n_threads, schedule="static"):
            bad |= _out_of_range(indices, k * chunk, min(nnz, (k + 1) * chunk), n_cols)
    return WS_CSR_BAD_INDEX if bad else WS_CSR_OK


cdef inline int _csr_check(cnp.ndarray indptr, cnp.ndarray indices, Py_ssize_t n_cols,
                           int n_threads, bint check_indices) except -1:
    """``csr_check`` (see its docstring in _csr_tools.pyx)."""
    cdef int it = cnp.PyArray_TYPE(indptr)
    if (it not in (cnp.NPY_INT32, cnp.NPY_INT64) or cnp.PyArray_TYPE(indices) != it
            or cnp.PyArray_NDIM(indptr) != 1 or cnp.PyArray_NDIM(indices) != 1
            or not cnp.PyArray_IS_C_CONTIGUOUS(indptr)
            or not cnp.PyArray_IS_C_CONTIGUOUS(indices)):
        raise TypeError("indptr and indices must be C-contiguous 1-D arrays, "
                        "both int32 or both int64")
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(indptr, 0) - 1
    cdef Py_ssize_t n_indices = cnp.PyArray_DIM(indices, 0)
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef void* ix = cnp.PyArray_DATA(indices)
    cdef int code
    if n_rows < 0:
        raise ValueError("indptr must not be empty")
    with nogil:
        if it == cnp.NPY_INT32:
            code = _check(<int32_t*>ip, n_rows, <int32_t*>ix, n_indices, n_cols, n_threads,
                          check_indices)
        else:
            code = _check(<int64_t*>ip, n_rows, <int64_t*>ix, n_indices, n_cols, n_threads,
                          check_indices)
    return code
