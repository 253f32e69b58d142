# cython: language_level=3
"""Transposed products Z = B.T @ U from the CSR arrays of B, by scatter
(dense @ CSR without transposing B, or a CSC operand @ dense): csr_spmm_t.

Arguments are validated as described in _spmm.pyx's docstring; bounds
checks are off (see setup.py). Every element of Z is summed in an order fixed
by B and ``n_chunks`` alone, whatever the thread count.
"""

cimport cython
cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free
from libc.string cimport memset

from _codes cimport WS_CSR_BAD_INDEX, WS_CSR_OK
from _csr_check cimport _csr_check, _out_of_range
from _operands cimport _index_type, _parts, _value_type
from _tiles cimport *
from _types cimport index_t, value_t

cnp.import_array()

# Transposed products: token panels of WS_SCATTER_PANEL_BYTES (_tiles_scatter.h: 128
# with AVX, 64 without) per sweep over the matrix, a whole token row wherever one-shot
# products scatter (SCATTER_MAX_BYTES).
cdef extern from "_axpy_tiles.h":
    const int WS_SCATTER_PANEL_BYTES

cdef enum:
    _REDUCE_BLOCK = 8192  # elements per work item when the row chunks are added up


cdef int _scatter_item(const index_t* indptr, const index_t* indices, const value_t* data,
                       const value_t* U, value_t* Z, Py_ssize_t k0, Py_ssize_t k1,
                       Py_ssize_t n_out, Py_ssize_t T, Py_ssize_t t0, Py_ssize_t w,
                       bint check_cols) noexcept nogil:
    """Z[:, t0:t0+w] = B[k0:k1].T @ U[k0:k1, t0:t0+w] (U is n_rows x T, Z n_out x T).
    With ``check_cols``, each block of rows has its column indices checked
    against n_out just before it is scattered; returns 1 at the first one out
    of range (Z then partly written), else 0."""
    cdef Py_ssize_t j, i = k0
    if w == T:
        memset(Z, 0, n_out * T * sizeof(value_t))
    else:
        for j in range(n_out):
            memset(Z + j * T + t0, 0, w * sizeof(value_t))
    if T == 1 and (value_t is cython.floatcomplex or value_t is cython.doublecomplex):
        # One complex column: ws_cscatter1, which checks each index as it goes (cheaper
        # than ws_cscatter's general loop with or without a block check; _tiles_complex.h).
        return _cscatter1(indptr + k0, indices, data, U + k0, Z, k1 - k0, n_out)
    # Blocks of about CHECK_BLOCK nonzeros (64 short rows for one column, as
    # the SpMV's: _tiles_base.h), checked or not: one copy of the scatter loop
    # (a second, inlined for the unchecked case, ran float32 x @ W 1.3-1.6x
    # slower; scratch A/B).
    while i < k1:
        j = _row_block_end(indptr, i, k1) if T == 1 else _block_end(indptr, i, k1)
        if check_cols and _out_of_range(indices, indptr[i], indptr[j], n_out):
            return 1
        _scatter_rows(indptr, indices, data, U, Z, i, j, T, t0, w)
        i = j
    return 0


cdef int _cscatter1(const index_t* indptr, const index_t* indices, const value_t* data,
                    const value_t* u, value_t* z, Py_ssize_t n_rows,
                    Py_ssize_t n_out) noexcept nogil:
    """z += B[rows].T @ u[rows] for one complex column (``indptr`` at the first row),
    each column index checked against n_out before its update: 1 at the first one
    out of range, else 0. (Real value types: unused, returns 1.)"""
    if value_t is cython.floatcomplex:
        if index_t is int32_t:
            return ws_cscatter1_float_int32_t(indptr, indices, <const float*>data,
                                              <const float*>u, <float*>z, n_rows, n_out)
        else:
            return ws_cscatter1_float_int64_t(indptr, indices, <const float*>data,
                                              <const float*>u, <float*>z, n_rows, n_out)
    elif value_t is cython.doublecomplex:
        if index_t is int32_t:
            return ws_cscatter1_double_int32_t(indptr, indices, <const double*>data,
                                               <const double*>u, <double*>z, n_rows, n_out)
        else:
            return ws_cscatter1_double_int64_t(indptr, indices, <const double*>data,
                                               <const double*>u, <double*>z, n_rows, n_out)
    else:
        return 1


cdef void _scatter_rows(const index_t* indptr, const index_t* indices, const value_t* data,
                        const value_t* U, value_t* Z, Py_ssize_t k0, Py_ssize_t k1,
                        Py_ssize_t T, Py_ssize_t t0, Py_ssize_t w) noexcept nogil:
    """Z[:, t0:t0+w] += B[k0:k1].T @ U[k0:k1, t0:t0+w]."""
    if value_t is float:
        if index_t is int32_t:
            ws_scatter_float_int32_t(indptr + k0, indices, data, U + k0 * T + t0, T, Z + t0, T,
                                     k1 - k0, w)
        else:
            ws_scatter_float_int64_t(indptr + k0, indices, data, U + k0 * T + t0, T, Z + t0, T,
                                     k1 - k0, w)
    elif value_t is double:
        if index_t is int32_t:
            ws_scatter_double_int32_t(indptr + k0, indices, data, U + k0 * T + t0, T, Z + t0, T,
                                      k1 - k0, w)
        else:
            ws_scatter_double_int64_t(indptr + k0, indices, data, U + k0 * T + t0, T, Z + t0, T,
                                      k1 - k0, w)
    elif value_t is cython.floatcomplex:
        if index_t is int32_t:
            ws_cscatter_float_int32_t(indptr + k0, indices, <const float*>data,
                                      <const float*>(U + k0 * T + t0), T, <float*>(Z + t0), T,
                                      k1 - k0, w)
        else:
            ws_cscatter_float_int64_t(indptr + k0, indices, <const float*>data,
                                      <const float*>(U + k0 * T + t0), T, <float*>(Z + t0), T,
                                      k1 - k0, w)
    else:
        if index_t is int32_t:
            ws_cscatter_double_int32_t(indptr + k0, indices, <const double*>data,
                                       <const double*>(U + k0 * T + t0), T,
                                       <double*>(Z + t0), T, k1 - k0, w)
        else:
            ws_cscatter_double_int64_t(indptr + k0, indices, <const double*>data,
                                       <const double*>(U + k0 * T + t0), T,
                                       <double*>(Z + t0), T, k1 - k0, w)


cdef inline int _scatter_work(const index_t* indptr, const index_t* indices,
                              const value_t* data, const value_t* U, value_t* Z, value_t* S,
                              const int64_t* b, Py_ssize_t item, Py_ssize_t n_panels,
                              Py_ssize_t pw, Py_ssize_t size, Py_ssize_t n_out, Py_ssize_t T,
                              bint check_cols) noexcept nogil:
    """Work item ``item`` of ``_scatter_parts``: token panel q, row chunk c."""
    cdef Py_ssize_t q = item % n_panels, c = item // n_panels
    return _scatter_item(indptr, indices, data, U, Z if c == 0 else S + (c - 1) * size,
                         b[c], b[c + 1], n_out, T, q * pw,
                         pw if (q + 1) * pw <= T else T - q * pw, check_cols)


cdef int _scatter_parts(const index_t* indptr, const index_t* indices, const value_t* data,
                        const value_t* U, value_t* Z, value_t* S, const int64_t* b,
                        Py_ssize_t n_chunks, Py_ssize_t n_out, Py_ssize_t T,
                        int n_threads, bint check_cols) noexcept nogil:
    """Work items: token panel q times row chunk c (rows b[c]:b[c+1]), chunk 0
    into Z, chunk c > 0 into S[c-1]; then Z += S[0] + ... in that order.
    Returns how many items found a column index out of range."""
    cdef Py_ssize_t pw = WS_SCATTER_PANEL_BYTES // sizeof(value_t)
    cdef Py_ssize_t n_panels = (T + pw - 1) // pw
    cdef Py_ssize_t n_items = n_panels * n_chunks
    cdef Py_ssize_t size = n_out * T
    cdef Py_ssize_t item, c, blk, e, e1
    cdef value_t acc
    cdef int bad = 0
    if n_items == 1 or n_threads <= 1:  # (no OpenMP team for a product this small)
        for item in range(n_items):
            bad += _scatter_work(indptr, indices, data, U, Z, S, b, item, n_panels, pw, size,
                                 n_out, T, check_cols)
    else:
        for item in prange(n_items, num_threads=n_threads, schedule="dynamic", chunksize=1):
            bad += _scatter_work(indptr, indices, data, U, Z, S, b, item, n_panels, pw, size,
                                 n_out, T, check_cols)
    if n_chunks == 1 or bad:
        return bad
    for blk in prange((size + _REDUCE_BLOCK - 1) // _REDUCE_BLOCK, num_threads=n_threads,
                      schedule="static"):
        e1 = (blk + 1) * _REDUCE_BLOCK
        if e1 > size:
            e1 = size
        for e in range(blk * _REDUCE_BLOCK, e1):
            acc = Z[e]
            for c in range(n_chunks - 1):
                acc = acc + S[c * size + e]
            Z[e] = acc
    return 0


cdef int _scatter_typed(const index_t* ip, const index_t* ix, int vt, void* d, void* u,
                        void* z, void* s, const int64_t* b, Py_ssize_t n_chunks,
                        Py_ssize_t n_out, Py_ssize_t T, int n_threads,
                        bint check_cols) noexcept nogil:
    if vt == cnp.NPY_FLOAT32:
        return _scatter_parts(ip, ix, <float*>d, <float*>u, <float*>z, <float*>s, b, n_chunks,
                              n_out, T, n_threads, check_cols)
    if vt == cnp.NPY_FLOAT64:
        return _scatter_parts(ip, ix, <double*>d, <double*>u, <double*>z, <double*>s, b,
                              n_chunks, n_out, T, n_threads, check_cols)
    if vt == cnp.NPY_COMPLEX64:
        return _scatter_parts(ip, ix, <float complex*>d, <float complex*>u, <float complex*>z,
                              <float complex*>s, b, n_chunks, n_out, T, n_threads, check_cols)
    return _scatter_parts(ip, ix, <double complex*>d, <double complex*>u, <double complex*>z,
                          <double complex*>s, b, n_chunks, n_out, T, n_threads, check_cols)


def scatter_panel_width(int itemsize):
    """Token columns per panel of ``csr_spmm_t`` for values of ``itemsize`` bytes
    (4, 8 or 16: the kernel dtypes)."""
    if itemsize not in (4, 8, 16):
        raise ValueError(f"itemsize must be 4, 8 or 16 (a kernel dtype's), got {itemsize}")
    return WS_SCATTER_PANEL_BYTES // itemsize


def csr_spmm_t(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, cnp.ndarray U,
               cnp.ndarray Z, int n_threads, *, Py_ssize_t n_chunks=1, cnp.ndarray scratch=None,
               bint check_cols=False):
    """Z = B.T @ U for CSR ``B`` (n_rows x n_cols) whose ``indptr`` is valid.

    U is (n_rows,) or (n_rows, T), Z (n_cols,) or (n_cols, T): C-contiguous,
    of the dtype of ``data``, not overlapping. Every column index of B must be
    below Z's length: checked by the caller, or, with ``check_cols``, here,
    each block of rows just before it is scattered (returns
    ``CSR_BAD_INDEX``, ``csr_check``'s code 4, if one is out of range, Z then
    being garbage; else 0). Each
    nonzero (k, j) adds ``data * U[k]`` to ``Z[j]`` (a scatter), in storage
    order. Work items are panels of ``scatter_panel_width`` token columns
    times ``n_chunks`` ranges of rows of B (balanced by nonzeros); chunk c > 0
    sums into ``scratch[c - 1]`` (shape ``(n_chunks - 1,) + Z.shape``), added
    to Z in chunk order at the end. So every element is summed in an order
    fixed by B and ``n_chunks`` alone, whatever the thread count.
    """
    if cnp.PyArray_NDIM(U) != cnp.PyArray_NDIM(Z) or not 1 <= cnp.PyArray_NDIM(U) <= 2:
        raise ValueError("U and Z must both be 1-D or both 2-D")
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(U, 0)
    cdef Py_ssize_t n_out = cnp.PyArray_DIM(Z, 0)
    cdef Py_ssize_t T = cnp.PyArray_DIM(U, 1) if cnp.PyArray_NDIM(U) == 2 else 1
    if cnp.PyArray_NDIM(U) == 2 and cnp.PyArray_DIM(Z, 1) != T:
        raise ValueError("U and Z must have the same number of columns")
    if n_chunks < 1:
        raise ValueError("n_chunks must be at least 1")
    cdef int vt
    if n_chunks > 1:
        if (scratch is None or cnp.PyArray_SIZE(scratch) != (n_chunks - 1) * n_out * T
                or not cnp.PyArray_ISWRITEABLE(scratch)):
            raise ValueError("scratch must be writeable and hold n_chunks - 1 arrays of Z's shape")
        vt = _value_type(data, (U, scratch, Z))
    else:
        vt = _value_type(data, (U, Z))
    cdef int it = _index_type(indptr, indices, n_rows)
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef void* ix = cnp.PyArray_DATA(indices)
    cdef void* d = cnp.PyArray_DATA(data)
    cdef void* u = cnp.PyArray_DATA(U)
    cdef void* z = cnp.PyArray_DATA(Z)
    cdef void* sc = cnp.PyArray_DATA(scratch) if n_chunks > 1 else NULL
    if T == 0 or n_out == 0:
        if check_cols and _csr_check(indptr, indices, n_out, 1, True):
            return WS_CSR_BAD_INDEX
        return WS_CSR_OK
    cdef int64_t* b = NULL
    cdef Py_ssize_t n_parts
    cdef int bad
    _parts(n_chunks, it, ip, n_rows, &n_parts, &b)
    with nogil:
        if it == cnp.NPY_INT32:
            bad = _scatter_typed(<int32_t*>ip, <int32_t*>ix, vt, d, u, z, sc, b, n_chunks, n_out,
                                 T, n_threads, check_cols)
        else:
            bad = _scatter_typed(<int64_t*>ip, <int64_t*>ix, vt, d, u, z, sc, b, n_chunks, n_out,
                                 T, n_threads, check_cols)
        free(b)
    return WS_CSR_BAD_INDEX if bad else WS_CSR_OK
