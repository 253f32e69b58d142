# Checks of the arrays handed to the kernel drivers (they read raw pointers),
# and the row partitions their parallel loops take: shared by _spmm, _scatter
# and _csr_tools.

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport malloc

from _types cimport index_t

cdef enum:
    # A row costs this many nonzeros' worth of work on top of its nonzeros
    # (writing its output tile) when rows are split among threads.
    _ROW_COST = 2


cdef inline int _value_type(cnp.ndarray data, tuple dense) except -1:
    """The numpy type number shared by ``data`` and the dense operands.

    The kernels read raw pointers (no buffer acquisition: it would cost more
    than a small product), so this re-checks what they rely on, cheaply: one
    kernel dtype for all, C-contiguous dense operands, a writeable output.
    """
    cdef int vt = cnp.PyArray_TYPE(data)
    cdef cnp.ndarray a
    if vt not in (cnp.NPY_FLOAT32, cnp.NPY_FLOAT64, cnp.NPY_COMPLEX64, cnp.NPY_COMPLEX128):
        raise TypeError(f"data has dtype {data.dtype}, not a kernel dtype")
    if not cnp.PyArray_IS_C_CONTIGUOUS(data):
        raise ValueError("data must be C-contiguous")
    for a in dense:
        if cnp.PyArray_TYPE(a) != vt or not cnp.PyArray_IS_C_CONTIGUOUS(a):
            raise ValueError(f"dense operands must be C-contiguous {data.dtype} arrays")
    if not cnp.PyArray_ISWRITEABLE(dense[len(dense) - 1]):
        raise ValueError("the output must be writeable")
    return vt


cdef inline int _index_type(cnp.ndarray indptr, cnp.ndarray indices,
                            Py_ssize_t n_rows) except -1:
    cdef int it = cnp.PyArray_TYPE(indptr)
    if it not in (cnp.NPY_INT32, cnp.NPY_INT64) or cnp.PyArray_TYPE(indices) != it:
        raise TypeError("indptr and indices must both be int32 or both int64")
    if not (cnp.PyArray_IS_C_CONTIGUOUS(indptr) and cnp.PyArray_IS_C_CONTIGUOUS(indices)):
        raise ValueError("indptr and indices must be C-contiguous")
    if cnp.PyArray_NDIM(indptr) != 1 or cnp.PyArray_DIM(indptr, 0) != n_rows + 1:
        raise ValueError("indptr must have one entry per output row, plus one")
    return it


cdef inline void _bounds_into(const index_t* indptr, Py_ssize_t n_rows,
                              Py_ssize_t n_parts, int64_t row_cost, int64_t* b) noexcept nogil:
    """b[0:n_parts+1]: ``balanced_bounds``. Always a nondecreasing partition of
    [0, n_rows], even for an indptr that is not nondecreasing (then unbalanced)."""
    cdef double total = <double>indptr[n_rows] + <double>row_cost * n_rows
    cdef double target
    cdef Py_ssize_t k, lo, hi, mid
    b[0] = 0
    for k in range(1, n_parts):
        target = total * k / n_parts
        lo = b[k - 1]
        hi = n_rows
        while lo < hi:  # first i with cost(i) >= target
            mid = (lo + hi) // 2
            if <double>indptr[mid] + <double>row_cost * mid < target:
                lo = mid + 1
            else:
                hi = mid
        b[k] = lo
    b[n_parts] = n_rows


cdef inline const int64_t* _parts(object row_bounds, int it, void* ip, Py_ssize_t n_rows,
                                  Py_ssize_t* n_parts, int64_t** owned) except NULL:
    """The row partition: ``row_bounds`` itself (a 1-D int64 array), or, for an
    int ``n``, ``balanced_bounds(indptr, n, ROW_COST)`` computed here into
    ``*owned`` (to be freed by the caller): a one-shot product skips making
    an array for it."""
    cdef cnp.ndarray arr
    if isinstance(row_bounds, cnp.ndarray):
        arr = row_bounds
        if (cnp.PyArray_TYPE(arr) != cnp.NPY_INT64 or cnp.PyArray_NDIM(arr) != 1
                or not cnp.PyArray_IS_C_CONTIGUOUS(arr)):
            raise TypeError("row_bounds must be a C-contiguous 1-D int64 array or an int")
        n_parts[0] = cnp.PyArray_DIM(arr, 0) - 1
        return <const int64_t*>cnp.PyArray_DATA(arr)
    if isinstance(row_bounds, bool) or not isinstance(row_bounds, int) or row_bounds < 1:
        raise TypeError("row_bounds must be a C-contiguous 1-D int64 array or an int >= 1")
    n_parts[0] = row_bounds
    owned[0] = <int64_t*>malloc((n_parts[0] + 1) * sizeof(int64_t))
    if owned[0] == NULL:
        raise MemoryError()
    if it == cnp.NPY_INT32:
        _bounds_into(<const int32_t*>ip, n_rows, n_parts[0], _ROW_COST, owned[0])
    else:
        _bounds_into(<const int64_t*>ip, n_rows, n_parts[0], _ROW_COST, owned[0])
    return owned[0]
