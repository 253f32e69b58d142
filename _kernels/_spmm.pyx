# cython: language_level=3
"""Sparse x dense products as one AXPY per nonzero (CSR operand).

All arguments are validated by ``wsesparse._matmul`` before they get here:
``indptr`` has ``n_rows + 1`` nondecreasing entries starting at 0, every
``indices[p]`` for ``p < indptr[-1]`` lies in ``[0, n_cols)`` (unless the
caller passes ``check_cols``: then the kernels check them as they go), ``data`` has at
least ``indptr[-1]`` entries, dense operands are C-contiguous with the shapes
listed in each docstring, the output does not overlap any input, and
``row_bounds`` is a nondecreasing partition of ``[0, n_rows]``. Bounds checks
are therefore off (see setup.py).

Each output element is summed by exactly one thread, in an order fixed by its
row's stored nonzeros (for float32/float64 interleaved partial sums, see
_axpy_tiles.h), so results are bitwise identical for any thread count.
"""

cimport cython
cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from numpy import empty as _np_empty

from _codes cimport (WS_CSR_OK, WS_CSR_BAD_START, WS_CSR_DECREASING, WS_CSR_SHORT,
                     WS_CSR_BAD_INDEX)

cnp.import_array()

# Return codes (_codes.h) of csr_check, and of the products and densify_into
# when they find a column index out of range (wsesparse/_checks.py explains them).
CSR_OK = WS_CSR_OK
CSR_BAD_START = WS_CSR_BAD_START
CSR_DECREASING = WS_CSR_DECREASING
CSR_SHORT = WS_CSR_SHORT
CSR_BAD_INDEX = WS_CSR_BAD_INDEX

cdef extern from "_omp_compat.h" nogil:
    int omp_get_max_threads()
    int wsesparse_has_openmp()
    int wsesparse_available_cores()

cdef extern from "_axpy_tiles.h" nogil:
    void ws_spmm_rows_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                    Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, int)
    void ws_spmm_rows_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                    Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, int)
    void ws_spmm_rows_double_int32_t(const int32_t*, const int32_t*, const double*,
                                     const double*, Py_ssize_t, double*, Py_ssize_t,
                                     Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_double_int64_t(const int64_t*, const int64_t*, const double*,
                                     const double*, Py_ssize_t, double*, Py_ssize_t,
                                     Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    int ws_spmm_rows_chk_float_int32_t(const int32_t*, const int32_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    int ws_spmm_rows_chk_float_int64_t(const int64_t*, const int64_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    int ws_spmm_rows_chk_double_int32_t(const int32_t*, const int32_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    int ws_spmm_rows_chk_double_int64_t(const int64_t*, const int64_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    void ws_spmm_rows_kb_float_int32_t(const int32_t*, const int32_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_kb_float_int64_t(const int64_t*, const int64_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_kb_double_int32_t(const int32_t*, const int32_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_kb_double_int64_t(const int64_t*, const int64_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    int ws_spmv_rows_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                   float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_spmv_rows_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                   float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_spmv_rows_double_int32_t(const int32_t*, const int32_t*, const double*,
                                    const double*, double*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_spmv_rows_double_int64_t(const int64_t*, const int64_t*, const double*,
                                    const double*, double*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_spmv_rows_chk_float_int32_t(const int32_t*, const int32_t*, const float*,
                                       const float*, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_spmv_rows_chk_float_int64_t(const int64_t*, const int64_t*, const float*,
                                       const float*, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_spmv_rows_chk_double_int32_t(const int32_t*, const int32_t*, const double*,
                                        const double*, double*, Py_ssize_t, Py_ssize_t,
                                        Py_ssize_t)
    int ws_spmv_rows_chk_double_int64_t(const int64_t*, const int64_t*, const double*,
                                        const double*, double*, Py_ssize_t, Py_ssize_t,
                                        Py_ssize_t)

    void ws_scatter_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                  Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    void ws_scatter_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                  Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    void ws_scatter_double_int32_t(const int32_t*, const int32_t*, const double*,
                                   const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                   Py_ssize_t)
    void ws_scatter_double_int64_t(const int64_t*, const int64_t*, const double*,
                                   const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                   Py_ssize_t)

    void ws_cscatter_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                   Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    void ws_cscatter_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                   Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    void ws_cscatter_double_int32_t(const int32_t*, const int32_t*, const double*,
                                    const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t)
    void ws_cscatter_double_int64_t(const int64_t*, const int64_t*, const double*,
                                    const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t)

    void ws_cdots_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                float*, Py_ssize_t, Py_ssize_t)
    void ws_cdots_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                float*, Py_ssize_t, Py_ssize_t)
    void ws_cdots_double_int32_t(const int32_t*, const int32_t*, const double*,
                                 const double*, double*, Py_ssize_t, Py_ssize_t)
    void ws_cdots_double_int64_t(const int64_t*, const int64_t*, const double*,
                                 const double*, double*, Py_ssize_t, Py_ssize_t)

ctypedef fused index_t:
    int32_t
    int64_t

cdef extern from "_csr_check.h" nogil:
    int ws_indptr_decreases_int32_t(const int32_t*, Py_ssize_t)
    int ws_indptr_decreases_int64_t(const int64_t*, Py_ssize_t)
    int ws_indices_out_of_range_int32_t(const int32_t*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    int ws_indices_out_of_range_int64_t(const int64_t*, Py_ssize_t, Py_ssize_t, Py_ssize_t)


cdef inline int _decreases(const index_t* indptr, Py_ssize_t n) noexcept nogil:
    if index_t is int32_t:
        return ws_indptr_decreases_int32_t(indptr, n)
    else:
        return ws_indptr_decreases_int64_t(indptr, n)


cdef inline int _out_of_range(const index_t* indices, Py_ssize_t p0, Py_ssize_t p1,
                              Py_ssize_t n_cols) noexcept nogil:
    if index_t is int32_t:
        return ws_indices_out_of_range_int32_t(indices, p0, p1, n_cols)
    else:
        return ws_indices_out_of_range_int64_t(indices, p0, p1, n_cols)


ctypedef fused value_t:
    float
    double
    float complex
    double complex

# Token tile: the accumulator acc[0:T] of one output row (512 bytes: 8 AVX2 or
# 4 AVX-512 registers' worth) stays in L1/registers while the row's nonzeros
# stream past.
cdef enum:
    TILE_BYTES = 512
    TILE_MAX = 128   # TILE_BYTES // sizeof(float)

cdef extern from "_axpy_tiles.h" nogil:
    # Checked products validate the column indices of this many nonzeros (or
    # of one longer row) just before multiplying them, while they are in cache.
    enum: CHECK_BLOCK "WS_CHECK_BLOCK"
    enum: _TILE_VBYTES "WS_TILE_VBYTES"
    enum: _STREAM_Y "WS_STREAM_Y"
    enum: _KB_NV "WS_KB_NV"
    Py_ssize_t ws_block_end_int32_t(const int32_t*, Py_ssize_t, Py_ssize_t)
    Py_ssize_t ws_block_end_int64_t(const int64_t*, Py_ssize_t, Py_ssize_t)


# The widest row tile in bytes (a complex tile; 8 AVX-512 vectors of a real one):
# tests pick token counts around it. Panels are sized in 64-byte lines (csr.py).
TILE_BYTES_PER_ROW = TILE_BYTES
# Bytes of one register of the SpMM tiles this build uses: 64 where the compiler
# targets AVX-512F, else 32 (matmul.py keeps dense-dispatch crossovers per width).
TILE_VECTOR_BYTES = _TILE_VBYTES
KBLOCK_TILE_VECTORS = _KB_NV


cdef extern from "_cache_probe.h" nogil:
    double ws_read_gbps(size_t nbytes, int repeats)


def read_bandwidth(Py_ssize_t nbytes, int repeats=5):
    """GB/s at which one core reads a freshly touched buffer of ``nbytes``
    (best of ``repeats`` passes), or -1.0 if ``nbytes`` is under one 64-byte
    line or the buffer cannot be allocated. Used to tell whether data beyond
    L2 comes from a fast L3 (csr._panel_width)."""
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


cdef inline void _row_tile(const index_t* indices, const value_t* data,
                           Py_ssize_t p0, Py_ssize_t p1,
                           const value_t* X, Py_ssize_t ldx,
                           value_t* y, Py_ssize_t nt) noexcept nogil:
    """y[0:nt] = sum_p data[p] * X[indices[p], 0:nt] for p in [p0, p1)."""
    cdef value_t acc[TILE_MAX]
    cdef value_t w0, w1, w2, w3
    cdef const value_t* x0
    cdef const value_t* x1
    cdef const value_t* x2
    cdef const value_t* x3
    cdef Py_ssize_t t, p = p0
    for t in range(nt):
        acc[t] = 0
    # Four nonzeros per pass halve the accumulator's load/store traffic; the
    # per-element summation order stays the stored order.
    while p + 4 <= p1:
        w0 = data[p]
        w1 = data[p + 1]
        w2 = data[p + 2]
        w3 = data[p + 3]
        x0 = X + <Py_ssize_t>indices[p] * ldx
        x1 = X + <Py_ssize_t>indices[p + 1] * ldx
        x2 = X + <Py_ssize_t>indices[p + 2] * ldx
        x3 = X + <Py_ssize_t>indices[p + 3] * ldx
        for t in range(nt):
            acc[t] = acc[t] + w0 * x0[t]
            acc[t] = acc[t] + w1 * x1[t]
            acc[t] = acc[t] + w2 * x2[t]
            acc[t] = acc[t] + w3 * x3[t]
        p += 4
    while p < p1:
        w0 = data[p]
        x0 = X + <Py_ssize_t>indices[p] * ldx
        for t in range(nt):
            acc[t] = acc[t] + w0 * x0[t]
        p += 1
    for t in range(nt):
        y[t] = acc[t]


cdef inline void _complex_rows(const index_t* indptr, const index_t* indices,
                               const value_t* data, const value_t* X, Py_ssize_t ldx,
                               value_t* Y, Py_ssize_t ldy, Py_ssize_t r0, Py_ssize_t r1,
                               Py_ssize_t nt) noexcept nogil:
    """Rows r0:r1 of Y[:, 0:nt] = A @ X[:, 0:nt], tile by tile (complex types)."""
    cdef Py_ssize_t i, t
    cdef Py_ssize_t T = TILE_BYTES // sizeof(value_t)
    for i in range(r0, r1):
        t = 0
        while t < nt:
            _row_tile(indices, data, indptr[i], indptr[i + 1], X + t, ldx,
                      Y + i * ldy + t, T if t + T <= nt else nt - t)
            t = t + T


cdef inline void _spmm_rows(const index_t* indptr, const index_t* indices,
                            const value_t* data, const value_t* X, Py_ssize_t ldx,
                            value_t* Y, Py_ssize_t ldy, Py_ssize_t r0, Py_ssize_t r1,
                            Py_ssize_t nt, int pf) noexcept nogil:
    if value_t is float:
        if index_t is int32_t:
            ws_spmm_rows_float_int32_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf)
        else:
            ws_spmm_rows_float_int64_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf)
    elif value_t is double:
        if index_t is int32_t:
            ws_spmm_rows_double_int32_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf)
        else:
            ws_spmm_rows_double_int64_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf)
    else:
        _complex_rows(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt)


cdef inline void _spmm_rows_kb(const index_t* indptr, const index_t* indices,
                               const value_t* data, const value_t* X, Py_ssize_t ldx,
                               value_t* Y, Py_ssize_t ldy, Py_ssize_t r0, Py_ssize_t r1,
                               int pf, Py_ssize_t n_cols, Py_ssize_t kb) noexcept nogil:
    """``ws_spmm_rows_kb`` (blocks of ``kb`` columns of A, rows one
    ``KBLOCK_TILE_VECTORS``-vector tile wide) for float and double."""
    if value_t is float:
        if index_t is int32_t:
            ws_spmm_rows_kb_float_int32_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1,
                                          n_cols, kb, pf)
        else:
            ws_spmm_rows_kb_float_int64_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1,
                                          n_cols, kb, pf)
    elif value_t is double:
        if index_t is int32_t:
            ws_spmm_rows_kb_double_int32_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1,
                                           n_cols, kb, pf)
        else:
            ws_spmm_rows_kb_double_int64_t(indptr, indices, data, X, ldx, Y, ldy, r0, r1,
                                           n_cols, kb, pf)


cdef inline Py_ssize_t _block_end(const index_t* indptr, Py_ssize_t i,
                                  Py_ssize_t r1) noexcept nogil:
    """The end of the block of rows from ``i`` (before ``r1``) holding about
    CHECK_BLOCK nonzeros (at least one row): ``ws_block_end``, the one the
    SpMV kernels use."""
    if index_t is int32_t:
        return ws_block_end_int32_t(indptr, i, r1)
    else:
        return ws_block_end_int64_t(indptr, i, r1)


cdef inline int _spmm_rows_chk(const index_t* indptr, const index_t* indices,
                               const value_t* data, const value_t* X, Py_ssize_t ldx,
                               value_t* Y, Py_ssize_t ldy, Py_ssize_t r0, Py_ssize_t r1,
                               Py_ssize_t nt, int pf, Py_ssize_t n_cols) noexcept nogil:
    """``ws_spmm_rows_chk``: rows of one tile, long on average, checked in the
    tile loop (0, or 1 for an index out of range); -1 for any other rows."""
    if value_t is float:
        if index_t is int32_t:
            return ws_spmm_rows_chk_float_int32_t(indptr, indices, data, X, ldx, Y, ldy, r0,
                                                  r1, nt, pf, n_cols)
        else:
            return ws_spmm_rows_chk_float_int64_t(indptr, indices, data, X, ldx, Y, ldy, r0,
                                                  r1, nt, pf, n_cols)
    elif value_t is double:
        if index_t is int32_t:
            return ws_spmm_rows_chk_double_int32_t(indptr, indices, data, X, ldx, Y, ldy, r0,
                                                   r1, nt, pf, n_cols)
        else:
            return ws_spmm_rows_chk_double_int64_t(indptr, indices, data, X, ldx, Y, ldy, r0,
                                                   r1, nt, pf, n_cols)
    else:
        return -1


cdef int _spmm_rows_checked(const index_t* indptr, const index_t* indices,
                            const value_t* data, const value_t* X, Py_ssize_t ldx,
                            value_t* Y, Py_ssize_t ldy, Py_ssize_t r0, Py_ssize_t r1,
                            Py_ssize_t nt, int pf, Py_ssize_t check_cols,
                            Py_ssize_t n_cols, Py_ssize_t kb) noexcept nogil:
    """``_spmm_rows``; with ``check_cols`` > 0, first checks every block of rows'
    column indices against it and returns 1 (rows from that block on left
    undone) on the first one out of range, or (rows one tile wide, long on
    average) checks each index in the tile loop. ``kb`` > 0 asks for
    ``_spmm_rows_kb`` for real rows one tile of its width wide (their indices
    all checked first, once).
    ``indptr`` must already be valid."""
    cdef Py_ssize_t i = r0, j
    cdef int r
    if kb > 0 and nt * <Py_ssize_t>sizeof(value_t) == _KB_NV * _TILE_VBYTES:
        if value_t is float or value_t is double:
            if check_cols > 0 and _out_of_range(indices, indptr[r0], indptr[r1], check_cols):
                return 1
            _spmm_rows_kb(indptr, indices, data, X, ldx, Y, ldy, r0, r1, pf, n_cols, kb)
            return 0
    if check_cols <= 0:
        _spmm_rows(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf)
        return 0
    r = _spmm_rows_chk(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf, check_cols)
    if r >= 0:
        return r
    # Measured to cost about what a separate pass over all indices did
    # (4096^2, density 0.01, N = 8: +8 us vs 8.7 us); the float SpMV kernels
    # check in their loops in parts of long rows, which costs a third of that.
    while i < r1:
        j = _block_end(indptr, i, r1)
        if _out_of_range(indices, indptr[i], indptr[j], check_cols):
            return 1
        _spmm_rows(indptr, indices, data, X, ldx, Y, ldy, i, j, nt, pf)
        i = j
    return 0


cdef int _sweep(const index_t* indptr, const index_t* indices, const value_t* data,
                const value_t* X, Py_ssize_t ldx, value_t* Y, Py_ssize_t ldy,
                Py_ssize_t width, const int64_t* bounds, Py_ssize_t n_parts,
                int n_threads, int prefetch, Py_ssize_t check_cols, Py_ssize_t n_cols,
                Py_ssize_t kb) noexcept nogil:
    """Y[:, 0:width] = A @ X[:, 0:width], the row parts handed out dynamically.

    Returns the number of parts that found an out-of-range column index
    (only when ``check_cols`` > 0; see ``_spmm_rows_checked``)."""
    cdef Py_ssize_t part
    cdef int bad = 0
    if n_parts == 1:
        # One part: no parallel region to open (a few microseconds).
        return _spmm_rows_checked(indptr, indices, data, X, ldx, Y, ldy, bounds[0], bounds[1],
                                  width, prefetch, check_cols, n_cols, kb)
    for part in prange(n_parts, num_threads=n_threads, schedule="dynamic", chunksize=1):
        bad += _spmm_rows_checked(indptr, indices, data, X, ldx, Y, ldy, bounds[part],
                                  bounds[part + 1], width, prefetch, check_cols, n_cols, kb)
    return bad


cdef inline Py_ssize_t _packed_stride(Py_ssize_t w, Py_ssize_t itemsize) noexcept nogil:
    """Row stride, in values, of a packed (K, w) panel of X: whole 64-byte lines
    for rows of at least a line, else the next power of two of the row's bytes,
    so that no vector load of a row straddles two cache lines."""
    cdef Py_ssize_t nbytes = w * itemsize, s = itemsize
    if nbytes >= 64:
        return (nbytes + 63) // 64 * 64 // itemsize
    while s < nbytes:
        s = 2 * s
    return s // itemsize


cdef int _spmm_parts(const index_t* indptr, const index_t* indices, const value_t* data,
                     const value_t* X, value_t* Y, Py_ssize_t N, Py_ssize_t K,
                     const int64_t* bounds, Py_ssize_t n_parts, Py_ssize_t panel,
                     int n_threads, int prefetch, Py_ssize_t check_cols,
                     int pack, Py_ssize_t kb) noexcept nogil:
    """Returns nonzero when ``check_cols`` > 0 and a column index is out of range."""
    cdef Py_ssize_t c0, w, k, ld
    cdef char* raw = NULL
    cdef value_t* buf = NULL
    cdef int bad = 0
    if panel >= N and not pack:
        return _sweep(indptr, indices, data, X, N, Y, N, N, bounds, n_parts, n_threads,
                      prefetch, check_cols, K, kb)
    # Packed panels: each X[:, c0:c0+panel] is copied into a (K, panel) buffer
    # whose rows start on 64-byte lines (_packed_stride). Read in place, a panel
    # is a short piece of every long X row, and the kernel ran 1.7x slower
    # (K = 16384, float64, N = 256, 64-column panels: 10.5 vs 17.4 GFLOP/s with
    # the copy); and rows that straddle cache lines (numpy aligns arrays to 16
    # bytes) cost every vector load two accesses (K = 4096, density 0.1,
    # float32, N = 64, 2 threads, AVX-512: 141 GFLOP/s on 64-byte aligned rows,
    # 66 on rows 16 bytes off).
    if panel > N:
        panel = N
    ld = _packed_stride(panel, sizeof(value_t))
    raw = <char*>malloc(K * ld * sizeof(value_t) + 64)
    if raw != NULL:
        buf = <value_t*>(raw + (64 - <uintptr_t>raw % 64) % 64)
    c0 = 0
    while c0 < N:
        w = min(panel, N - c0)
        if buf == NULL:  # no memory for the copy: read X in place
            bad = _sweep(indptr, indices, data, X + c0, N, Y + c0, N, w, bounds, n_parts,
                         n_threads, prefetch, check_cols, K, kb)
        else:
            for k in prange(K, num_threads=n_threads, schedule="static"):
                memcpy(buf + k * ld, X + k * N + c0, w * sizeof(value_t))
            bad = _sweep(indptr, indices, data, buf, ld, Y + c0, N, w, bounds, n_parts,
                         n_threads, prefetch, check_cols, K, kb)
        if bad:
            break
        check_cols = 0  # the first panel's sweep checked every row
        c0 = c0 + w
    free(raw)
    return bad


cdef int _spmm_typed(const index_t* ip, const index_t* ix, int vt, void* d, void* x, void* y,
                     Py_ssize_t N, Py_ssize_t K, const int64_t* b, Py_ssize_t n_parts,
                     Py_ssize_t panel, int n_threads, int prefetch,
                     Py_ssize_t check_cols, int pack, Py_ssize_t kb) noexcept nogil:
    """``_spmm_parts`` for the numpy value type ``vt`` (checked by ``_value_type``)."""
    if vt == cnp.NPY_FLOAT32:
        return _spmm_parts(ip, ix, <float*>d, <float*>x, <float*>y, N, K, b, n_parts, panel,
                           n_threads, prefetch, check_cols, pack, kb)
    if vt == cnp.NPY_FLOAT64:
        return _spmm_parts(ip, ix, <double*>d, <double*>x, <double*>y, N, K, b, n_parts, panel,
                           n_threads, prefetch, check_cols, pack, kb)
    if vt == cnp.NPY_COMPLEX64:
        return _spmm_parts(ip, ix, <float complex*>d, <float complex*>x, <float complex*>y, N, K,
                           b, n_parts, panel, n_threads, prefetch, check_cols, pack, kb)
    return _spmm_parts(ip, ix, <double complex*>d, <double complex*>x, <double complex*>y, N, K,
                       b, n_parts, panel, n_threads, prefetch, check_cols, pack, kb)


cdef int _value_type(cnp.ndarray data, tuple dense) except -1:
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


cdef int _index_type(cnp.ndarray indptr, cnp.ndarray indices, Py_ssize_t n_rows) except -1:
    cdef int it = cnp.PyArray_TYPE(indptr)
    if it not in (cnp.NPY_INT32, cnp.NPY_INT64) or cnp.PyArray_TYPE(indices) != it:
        raise TypeError("indptr and indices must both be int32 or both int64")
    if not (cnp.PyArray_IS_C_CONTIGUOUS(indptr) and cnp.PyArray_IS_C_CONTIGUOUS(indices)):
        raise ValueError("indptr and indices must be C-contiguous")
    if cnp.PyArray_NDIM(indptr) != 1 or cnp.PyArray_DIM(indptr, 0) != n_rows + 1:
        raise ValueError("indptr must have one entry per output row, plus one")
    return it


def csr_spmm(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, cnp.ndarray X,
             cnp.ndarray Y, object row_bounds, Py_ssize_t panel, int n_threads,
             bint prefetch, Py_ssize_t check_cols=0, bint pack=False, bint stream=False,
             Py_ssize_t kblock=0):
    """Y = A @ X for CSR ``A`` (n_rows x n_cols).

    X is (n_cols, N) and Y is (n_rows, N), both C-contiguous, of the dtype of
    ``data``. Part ``k`` is rows ``row_bounds[k]:row_bounds[k+1]``; an int
    ``row_bounds`` asks for ``balanced_bounds(indptr, row_bounds, ROW_COST)``,
    computed here (a one-shot product then makes no array for it). ``panel``
    is the number of token columns processed per sweep over the rows, chosen
    so that ``X[:, panel]`` stays in cache; each panel narrower than N, and
    with ``pack`` also a single one, is first copied into a buffer whose rows
    start on 64-byte cache lines. ``prefetch`` turns on software prefetch of X
    rows (worth it when that panel does not fit in L2). Parts are handed out
    dynamically (a thread that lost its core to another process does not hold
    the others up); which thread computes a row never changes its value.
    ``stream`` asks for non-temporal stores of Y's tile vectors (for a Y too
    big to stay in cache); they are used only where Y's rows and panels start
    on ``TILE_VECTOR_BYTES`` boundaries, and change no value. ``kblock`` > 0
    sums panels one ``KBLOCK_TILE_VECTORS``-vector tile wide (float32/float64)
    by blocks of that many columns of A (``ws_spmm_rows_kb``: the same values,
    bit for bit, with a slice of X that stays in L2); other panels ignore it.

    With ``check_cols`` > 0 (the column count of A, whose ``indptr`` has been
    checked but whose ``indices`` have not), each block of rows has its column
    indices checked just before it is multiplied (rows one tile wide and long
    on average: each index in the tile loop); returns ``CSR_BAD_INDEX`` (4,
    ``csr_check``'s code) if one is out of range, Y then being partly written,
    else 0.
    """
    if cnp.PyArray_NDIM(X) != 2 or cnp.PyArray_NDIM(Y) != 2:
        raise ValueError("X and Y must be 2-D")
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(Y, 0)
    cdef Py_ssize_t N = cnp.PyArray_DIM(X, 1)
    cdef Py_ssize_t K = cnp.PyArray_DIM(X, 0)
    if cnp.PyArray_DIM(Y, 1) != N:
        raise ValueError("X and Y must have the same number of columns")
    cdef int vt = _value_type(data, (X, Y))
    cdef int it = _index_type(indptr, indices, n_rows)
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef void* ix = cnp.PyArray_DATA(indices)
    cdef void* d = cnp.PyArray_DATA(data)
    cdef void* x = cnp.PyArray_DATA(X)
    cdef void* y = cnp.PyArray_DATA(Y)
    cdef int bad = 0
    if check_cols > 0 and cnp.PyArray_DIM(X, 0) != check_cols:
        raise ValueError("check_cols must be the number of rows of X")
    cdef int64_t* owned = NULL
    cdef Py_ssize_t n_parts
    cdef const int64_t* b = _parts(row_bounds, it, ip, n_rows, &n_parts, &owned)
    if N == 0 or n_parts <= 0:
        free(owned)
        return csr_check(indptr, indices, check_cols, 1) if check_cols > 0 else 0
    if panel < 1:
        panel = N
    cdef int pf = 1 if prefetch else 0
    cdef Py_ssize_t size = cnp.PyArray_ITEMSIZE(Y)
    if (stream and vt in (cnp.NPY_FLOAT32, cnp.NPY_FLOAT64)
            and <uintptr_t>y % _TILE_VBYTES == 0 and (N * size) % _TILE_VBYTES == 0
            and (panel >= N or (panel * size) % _TILE_VBYTES == 0)):
        pf |= _STREAM_Y
    with nogil:
        if it == cnp.NPY_INT32:
            bad = _spmm_typed(<int32_t*>ip, <int32_t*>ix, vt, d, x, y, N, K, b, n_parts, panel,
                              n_threads, pf, check_cols, pack, kblock)
        else:
            bad = _spmm_typed(<int64_t*>ip, <int64_t*>ix, vt, d, x, y, N, K, b, n_parts, panel,
                              n_threads, pf, check_cols, pack, kblock)
        free(owned)
    return WS_CSR_BAD_INDEX if bad else WS_CSR_OK


cdef inline void _complex_dots(const index_t* indptr, const index_t* indices,
                               const value_t* data, const value_t* x, value_t* y,
                               Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    """y[i] = sum_p data[p] * x[indices[p]] for rows r0:r1 (complex types: ws_cdots)."""
    if value_t is cython.floatcomplex:
        if index_t is int32_t:
            ws_cdots_float_int32_t(indptr, indices, <const float*>data, <const float*>x,
                                   <float*>y, r0, r1)
        else:
            ws_cdots_float_int64_t(indptr, indices, <const float*>data, <const float*>x,
                                   <float*>y, r0, r1)
    else:
        if index_t is int32_t:
            ws_cdots_double_int32_t(indptr, indices, <const double*>data, <const double*>x,
                                    <double*>y, r0, r1)
        else:
            ws_cdots_double_int64_t(indptr, indices, <const double*>data, <const double*>x,
                                    <double*>y, r0, r1)


cdef inline int _spmv_rows(const index_t* indptr, const index_t* indices,
                           const value_t* data, const value_t* x, value_t* y,
                           Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t n_cols,
                           int check) noexcept nogil:
    """y[r0:r1] = rows r0:r1 of A @ x (x of ``n_cols`` entries); with ``check``,
    the column indices are checked against ``n_cols`` on the way (returns 1 on
    the first one out of range, leaving later rows undone). ``indptr`` must
    already be valid. (The unchecked kernels get ``n_cols`` too: it picks how
    rows are summed, which must not depend on whether they were checked.)"""
    cdef Py_ssize_t i = r0, j
    if value_t is float:
        if index_t is int32_t:
            if check:
                return ws_spmv_rows_chk_float_int32_t(indptr, indices, data, x, y, r0, r1,
                                                      n_cols)
            return ws_spmv_rows_float_int32_t(indptr, indices, data, x, y, r0, r1, n_cols)
        else:
            if check:
                return ws_spmv_rows_chk_float_int64_t(indptr, indices, data, x, y, r0, r1,
                                                      n_cols)
            return ws_spmv_rows_float_int64_t(indptr, indices, data, x, y, r0, r1, n_cols)
    elif value_t is double:
        if index_t is int32_t:
            if check:
                return ws_spmv_rows_chk_double_int32_t(indptr, indices, data, x, y, r0, r1,
                                                       n_cols)
            return ws_spmv_rows_double_int32_t(indptr, indices, data, x, y, r0, r1, n_cols)
        else:
            if check:
                return ws_spmv_rows_chk_double_int64_t(indptr, indices, data, x, y, r0, r1,
                                                       n_cols)
            return ws_spmv_rows_double_int64_t(indptr, indices, data, x, y, r0, r1, n_cols)
    else:
        if not check:
            _complex_dots(indptr, indices, data, x, y, r0, r1)
            return 0
        # Complex: each block of rows checked just before it is used.
        while i < r1:
            j = _block_end(indptr, i, r1)
            if _out_of_range(indices, indptr[i], indptr[j], n_cols):
                return 1
            _complex_dots(indptr, indices, data, x, y, i, j)
            i = j
        return 0


cdef int _spmv_parts(const index_t* indptr, const index_t* indices, const value_t* data,
                     const value_t* x, value_t* y, const int64_t* bounds,
                     Py_ssize_t n_parts, int n_threads, Py_ssize_t n_cols,
                     int check) noexcept nogil:
    cdef Py_ssize_t part
    cdef int bad = 0
    if n_parts == 1:
        return _spmv_rows(indptr, indices, data, x, y, bounds[0], bounds[1], n_cols, check)
    for part in prange(n_parts, num_threads=n_threads, schedule="dynamic", chunksize=1):
        bad += _spmv_rows(indptr, indices, data, x, y, bounds[part], bounds[part + 1],
                          n_cols, check)
    return bad


cdef int _spmv_typed(const index_t* ip, const index_t* ix, int vt, void* d, void* x, void* y,
                     const int64_t* b, Py_ssize_t n_parts, int n_threads,
                     Py_ssize_t n_cols, int check) noexcept nogil:
    """``_spmv_parts`` for the numpy value type ``vt`` (checked by ``_value_type``)."""
    if vt == cnp.NPY_FLOAT32:
        return _spmv_parts(ip, ix, <float*>d, <float*>x, <float*>y, b, n_parts, n_threads,
                           n_cols, check)
    if vt == cnp.NPY_FLOAT64:
        return _spmv_parts(ip, ix, <double*>d, <double*>x, <double*>y, b, n_parts, n_threads,
                           n_cols, check)
    if vt == cnp.NPY_COMPLEX64:
        return _spmv_parts(ip, ix, <float complex*>d, <float complex*>x, <float complex*>y, b,
                           n_parts, n_threads, n_cols, check)
    return _spmv_parts(ip, ix, <double complex*>d, <double complex*>x, <double complex*>y, b,
                       n_parts, n_threads, n_cols, check)


def csr_spmv(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, cnp.ndarray x,
             cnp.ndarray y, object row_bounds, int n_threads, Py_ssize_t check_cols=0):
    """y = A @ x for CSR ``A`` (n_rows x n_cols); x has n_cols, y n_rows entries.

    ``row_bounds``, ``check_cols`` and the return value as in ``csr_spmm``.
    """
    if cnp.PyArray_NDIM(x) != 1 or cnp.PyArray_NDIM(y) != 1:
        raise ValueError("x and y must be 1-D")
    cdef int vt = _value_type(data, (x, y))
    cdef int it = _index_type(indptr, indices, cnp.PyArray_DIM(y, 0))
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef void* ix = cnp.PyArray_DATA(indices)
    cdef void* d = cnp.PyArray_DATA(data)
    cdef void* xp = cnp.PyArray_DATA(x)
    cdef void* yp = cnp.PyArray_DATA(y)
    cdef int bad = 0
    cdef Py_ssize_t n_x = cnp.PyArray_DIM(x, 0)
    if check_cols > 0 and n_x != check_cols:
        raise ValueError("check_cols must be the length of x")
    cdef int64_t* owned = NULL
    cdef Py_ssize_t n_parts
    cdef const int64_t* b = _parts(row_bounds, it, ip, cnp.PyArray_DIM(y, 0), &n_parts, &owned)
    if n_parts <= 0:
        return 0
    with nogil:
        if it == cnp.NPY_INT32:
            bad = _spmv_typed(<int32_t*>ip, <int32_t*>ix, vt, d, xp, yp, b, n_parts, n_threads,
                              n_x, check_cols > 0)
        else:
            bad = _spmv_typed(<int64_t*>ip, <int64_t*>ix, vt, d, xp, yp, b, n_parts, n_threads,
                              n_x, check_cols > 0)
        free(owned)
    return WS_CSR_BAD_INDEX if bad else WS_CSR_OK


cdef enum:
    # A row costs this many nonzeros' worth of work on top of its nonzeros
    # (writing its output tile) when rows are split among threads.
    _ROW_COST = 2

ROW_COST = _ROW_COST


cdef void _bounds_into(const index_t* indptr, Py_ssize_t n_rows, Py_ssize_t n_parts,
                       int64_t row_cost, int64_t* b) noexcept nogil:
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


def balanced_bounds(const index_t[::1] indptr, Py_ssize_t n_parts, int64_t row_cost):
    """Cut rows into ``n_parts`` ranges of about equal ``nnz + row_cost * rows``.

    Returns an int64 array of ``n_parts + 1`` nondecreasing boundaries from 0
    to ``n_rows``; O(n_parts * log(n_rows)) by bisection on the cumulative
    cost ``indptr[i] + row_cost * i`` (nondecreasing once indptr is valid).
    """
    import numpy as np
    if n_parts < 1 or indptr.shape[0] < 1:
        raise ValueError("need n_parts >= 1 and a non-empty indptr")
    out = np.empty(n_parts + 1, dtype=np.int64)
    cdef int64_t[::1] b = out
    _bounds_into(&indptr[0], indptr.shape[0] - 1, n_parts, row_cost, &b[0])
    return out


cdef const int64_t* _parts(object row_bounds, int it, void* ip, Py_ssize_t n_rows,
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


cdef inline bint _plain(object a, int ndim) noexcept:
    """Whether ``a`` is exactly an ndarray, ``ndim``-D, C-contiguous, aligned, native order."""
    return (cnp.PyArray_CheckExact(a) and cnp.PyArray_NDIM(<cnp.ndarray>a) == ndim
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a))


def plain_csr_nnz(object indptr, object indices, object data, Py_ssize_t n_rows,
                  Py_ssize_t n_cols):
    """Stored entries of the CSR arrays of an (n_rows, n_cols) matrix, or -1.

    -1 unless the arrays are what the kernels take as they are (1-D,
    C-contiguous, aligned, native-order ndarrays; indices of one kernel index
    type; values of a kernel dtype), ``n_rows >= 0``, ``n_cols > 0`` and
    ``indptr`` is valid (one entry per row plus one, from 0, nondecreasing,
    ending within ``indices`` and ``data``). The column indices are not checked: a one-shot
    product has the kernel check them (``check_cols``). For ``sparse_matmul``'s
    fast path, which leaves everything else (conversions, error messages) to
    its general path.
    """
    if (not (_plain(indptr, 1) and _plain(indices, 1) and _plain(data, 1))
            or n_rows < 0 or n_cols <= 0):  # n_rows = -1 would read indptr[0] of an empty array
        return -1
    cdef int it = cnp.PyArray_TYPE(<cnp.ndarray>indptr)
    cdef int vt = cnp.PyArray_TYPE(<cnp.ndarray>data)
    if (it not in (cnp.NPY_INT32, cnp.NPY_INT64) or cnp.PyArray_TYPE(<cnp.ndarray>indices) != it
            or vt not in (cnp.NPY_FLOAT32, cnp.NPY_FLOAT64, cnp.NPY_COMPLEX64,
                          cnp.NPY_COMPLEX128)
            or cnp.PyArray_DIM(<cnp.ndarray>indptr, 0) != n_rows + 1):
        return -1
    cdef void* ip = cnp.PyArray_DATA(<cnp.ndarray>indptr)
    cdef Py_ssize_t n_indices = cnp.PyArray_DIM(<cnp.ndarray>indices, 0)
    cdef Py_ssize_t nnz
    if it == cnp.NPY_INT32:
        if _check(<int32_t*>ip, n_rows, NULL, n_indices, n_cols, 1, False):
            return -1
        nnz = (<int32_t*>ip)[n_rows]
    else:
        if _check(<int64_t*>ip, n_rows, NULL, n_indices, n_cols, 1, False):
            return -1
        nnz = (<int64_t*>ip)[n_rows]
    return nnz if nnz <= cnp.PyArray_DIM(<cnp.ndarray>data, 0) else -1


cdef int _check(const index_t* indptr, Py_ssize_t n_rows, const index_t* indices,
                Py_ssize_t n_indices, Py_ssize_t n_cols, int n_threads,
                bint check_indices) noexcept nogil:
    cdef Py_ssize_t k, nnz, chunk
    cdef int bad = 0
    if indptr[0] != 0:
        return WS_CSR_BAD_START
    if _decreases(indptr, n_rows):
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


def csr_check(cnp.ndarray indptr, cnp.ndarray indices, Py_ssize_t n_cols, int n_threads,
              bint check_indices=True):
    """Check a CSR structure in O(nnz).

    Returns ``CSR_OK`` (0) when ``indptr`` is nondecreasing from 0 and every
    stored column index lies in ``[0, n_cols)``; ``CSR_BAD_START`` (1) when
    ``indptr[0] != 0``; ``CSR_DECREASING`` (2) when ``indptr`` decreases
    somewhere; ``CSR_SHORT`` (3) when ``indptr[-1]`` exceeds ``len(indices)``;
    ``CSR_BAD_INDEX`` (4) when a column index is out of range (_codes.h).
    ``indptr`` and ``indices`` are 1-D, C-contiguous, both int32 or both int64.
    Without ``check_indices``, only ``indptr`` is checked (codes 1 to 3): for
    a product that checks the indices itself (``check_cols``).
    """
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


# Transposed products: token panels of this many bytes (2 AVX2 vectors, the
# most ws_scatter takes) per sweep over the matrix. M = K = 4096, density 0.1,
# 64 float32 tokens, 2 threads (scratch timing): 128-byte panels 18.4 ms,
# 64-byte 13.5 ms (a thread's panel of Z stays in L2), 32-byte 37 ms (twice
# the sweeps).
cdef enum:
    _SCATTER_PANEL_BYTES = 64
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
    # Blocks of about CHECK_BLOCK nonzeros, checked or not: one copy of the
    # scatter loop (a second, inlined for the unchecked case, ran float32
    # x @ W 1.3-1.6x slower; scratch A/B).
    while i < k1:
        j = _block_end(indptr, i, k1)
        if check_cols and _out_of_range(indices, indptr[i], indptr[j], n_out):
            return 1
        _scatter_rows(indptr, indices, data, U, Z, i, j, T, t0, w)
        i = j
    return 0


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
    cdef Py_ssize_t pw = _SCATTER_PANEL_BYTES // sizeof(value_t)
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
    return _SCATTER_PANEL_BYTES // itemsize


def csr_spmm_t(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, cnp.ndarray U,
               cnp.ndarray Z, int n_threads, Py_ssize_t n_chunks=1, cnp.ndarray scratch=None,
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
        if check_cols and csr_check(indptr, indices, n_out, 1):
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


# Values are moved, not computed with, by the transposition: any dtype, as
# elements of its size.
ctypedef fused elem_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    double complex


cdef void _transpose_typed(const index_t* indptr, const index_t* indices, const elem_t* data,
                           Py_ssize_t n_cols, index_t* tptr, index_t* tind, elem_t* tdata,
                           int64_t* counts, const int64_t* b, Py_ssize_t n_parts) noexcept nogil:
    """Counting sort by column, rows cut into ``n_parts`` ranges ``b``: part t
    counts its columns into ``counts[t]`` (zeroed), which then become its
    write positions; placing in row order within each part keeps the result
    stable (each column's entries by row, duplicates in storage order)."""
    cdef Py_ssize_t part, k, p, j
    cdef int64_t pos = 0, c, q
    cdef int64_t* cnt
    for part in prange(n_parts, num_threads=n_parts, schedule="static", chunksize=1):
        cnt = counts + part * n_cols
        for k in range(b[part], b[part + 1]):
            for p in range(indptr[k], indptr[k + 1]):
                cnt[indices[p]] += 1
    for j in range(n_cols):
        tptr[j] = <index_t>pos
        for part in range(n_parts):
            c = counts[part * n_cols + j]
            counts[part * n_cols + j] = pos
            pos = pos + c
    tptr[n_cols] = <index_t>pos
    for part in prange(n_parts, num_threads=n_parts, schedule="static", chunksize=1):
        cnt = counts + part * n_cols
        for k in range(b[part], b[part + 1]):
            for p in range(indptr[k], indptr[k + 1]):
                j = indices[p]
                q = cnt[j]
                cnt[j] = q + 1
                tind[q] = <index_t>k
                tdata[q] = data[p]


cdef void _transpose_elems(const index_t* indptr, const index_t* indices, void* data,
                           Py_ssize_t itemsize, Py_ssize_t n_cols, index_t* tptr, index_t* tind,
                           void* tdata, int64_t* counts, const int64_t* b,
                           Py_ssize_t n_parts) noexcept nogil:
    if itemsize == 1:
        _transpose_typed(indptr, indices, <uint8_t*>data, n_cols, tptr, tind, <uint8_t*>tdata,
                         counts, b, n_parts)
    elif itemsize == 2:
        _transpose_typed(indptr, indices, <uint16_t*>data, n_cols, tptr, tind,
                         <uint16_t*>tdata, counts, b, n_parts)
    elif itemsize == 4:
        _transpose_typed(indptr, indices, <uint32_t*>data, n_cols, tptr, tind,
                         <uint32_t*>tdata, counts, b, n_parts)
    elif itemsize == 8:
        _transpose_typed(indptr, indices, <uint64_t*>data, n_cols, tptr, tind,
                         <uint64_t*>tdata, counts, b, n_parts)
    else:
        _transpose_typed(indptr, indices, <double complex*>data, n_cols, tptr, tind,
                         <double complex*>tdata, counts, b, n_parts)


cdef int64_t _stored_nnz(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, int it,
                         Py_ssize_t n_rows) except? -1:
    """``indptr[n_rows]`` (``it`` its numpy type), after checking that ``indices`` and
    ``data`` hold that many entries."""
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef int64_t nnz = (<int32_t*>ip)[n_rows] if it == cnp.NPY_INT32 else (<int64_t*>ip)[n_rows]
    if cnp.PyArray_DIM(indices, 0) < nnz or cnp.PyArray_DIM(data, 0) < nnz:
        raise ValueError("indptr[-1] exceeds the stored indices or values")
    return nnz


def csr_transpose(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, Py_ssize_t n_cols,
                  int n_threads):
    """The CSR arrays ``(indptr, indices, data)`` of B.T for a valid CSR ``B``
    with ``n_cols`` columns (every index in ``[0, n_cols)``, as checked by
    ``csr_check``), with B's index dtype; values of any dtype of 1, 2, 4, 8 or
    16 bytes, moved bit for bit. The same arrays as scipy's ``B.T.tocsr()``
    (each row of B.T in ascending column order, duplicates kept in storage
    order), whatever ``n_threads``: threads take ranges of B's rows, each
    with a count array of ``n_cols`` entries (fewer threads when those would
    outweigh the nonzeros).
    """
    import numpy as np
    cdef int it = _index_type(indptr, indices, cnp.PyArray_DIM(indptr, 0) - 1)
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(indptr, 0) - 1
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(data)
    if itemsize not in (1, 2, 4, 8, 16):
        raise TypeError(f"data has {itemsize}-byte values; 1, 2, 4, 8 or 16 expected")
    if not cnp.PyArray_IS_C_CONTIGUOUS(data):
        raise ValueError("data must be C-contiguous")
    if n_cols < 0:
        raise ValueError("n_cols must be nonnegative")
    if it == cnp.NPY_INT32 and n_rows > 2147483647:
        raise ValueError("B has too many rows for int32 column indices of B.T")
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef int64_t nnz = _stored_nnz(indptr, indices, data, it, n_rows)
    itype = np.int32 if it == cnp.NPY_INT32 else np.int64
    cdef cnp.ndarray tptr = np.empty(n_cols + 1, dtype=itype)
    cdef cnp.ndarray tind = np.empty(nnz, dtype=itype)
    cdef cnp.ndarray tdata = np.empty(nnz, dtype=data.dtype)
    cdef Py_ssize_t n_parts = n_threads if n_threads > 1 else 1
    if n_parts > 1 and nnz < 4 * n_cols * n_parts:
        n_parts = 1
    cdef int64_t* counts = <int64_t*>calloc(n_parts * n_cols + 1, sizeof(int64_t))
    if counts == NULL:
        raise MemoryError()
    cdef int64_t* b = NULL
    try:
        _parts(n_parts, it, ip, n_rows, &n_parts, &b)
    except BaseException:
        free(counts)
        raise
    cdef void* ix = cnp.PyArray_DATA(indices)
    cdef void* d = cnp.PyArray_DATA(data)
    cdef void* tp = cnp.PyArray_DATA(tptr)
    cdef void* ti = cnp.PyArray_DATA(tind)
    cdef void* td = cnp.PyArray_DATA(tdata)
    with nogil:
        if it == cnp.NPY_INT32:
            _transpose_elems(<int32_t*>ip, <int32_t*>ix, d, itemsize, n_cols, <int32_t*>tp,
                             <int32_t*>ti, td, counts, b, n_parts)
        else:
            _transpose_elems(<int64_t*>ip, <int64_t*>ix, d, itemsize, n_cols, <int64_t*>tp,
                             <int64_t*>ti, td, counts, b, n_parts)
        free(counts)
        free(b)
    return tptr, tind, tdata


cdef enum:
    _T_ROWS = 8      # source rows per block: 8 lines live per column block (8-way L1 sets)
    _T_COLS = 256    # source columns per work item (their destination rows stay in cache)


cdef void _transpose_cols(const elem_t* src, elem_t* dst, Py_ssize_t R, Py_ssize_t C,
                          Py_ssize_t c0, Py_ssize_t c1) noexcept nogil:
    """dst[c, r] = src[r, c] for c0 <= c < c1 and every r (src R x C, dst C x R)."""
    cdef Py_ssize_t r0 = 0, r1, r, c
    while r0 < R:
        r1 = r0 + _T_ROWS if r0 + _T_ROWS < R else R
        for c in range(c0, c1):
            for r in range(r0, r1):
                dst[c * R + r] = src[r * C + c]
        r0 = r1


cdef void _transpose_all(const elem_t* src, elem_t* dst, Py_ssize_t R, Py_ssize_t C,
                         int n_threads) noexcept nogil:
    cdef Py_ssize_t blk, c1, n_blk = (C + _T_COLS - 1) // _T_COLS
    for blk in prange(n_blk, num_threads=n_threads, schedule="static"):
        c1 = (blk + 1) * _T_COLS if (blk + 1) * _T_COLS < C else C
        _transpose_cols(src, dst, R, C, blk * _T_COLS, c1)


def transpose_into(cnp.ndarray src, cnp.ndarray dst, int n_threads):
    """dst = src.T for a C-contiguous 2-D ``src`` (R x C) and ``dst`` (C x R) of one
    dtype of 1, 2, 4, 8 or 16 bytes, copied in cache blocks: numpy's own strided copy
    (``np.ascontiguousarray(src.T)``) misses the cache on every element when C is a
    multiple of a large power of two (64 x 4096 float32: 1.05 ms)."""
    if (cnp.PyArray_NDIM(src) != 2 or cnp.PyArray_NDIM(dst) != 2
            or not cnp.PyArray_IS_C_CONTIGUOUS(src) or not cnp.PyArray_IS_C_CONTIGUOUS(dst)):
        raise ValueError("src and dst must be C-contiguous 2-D arrays")
    cdef Py_ssize_t R = cnp.PyArray_DIM(src, 0), C = cnp.PyArray_DIM(src, 1)
    if cnp.PyArray_DIM(dst, 0) != C or cnp.PyArray_DIM(dst, 1) != R:
        raise ValueError("dst must have the shape of src.T")
    if src.dtype != dst.dtype:
        raise ValueError("src and dst must have the same dtype")
    if not cnp.PyArray_ISWRITEABLE(dst):
        raise ValueError("dst must be writeable")
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(src)
    if itemsize not in (1, 2, 4, 8, 16):
        raise TypeError(f"{itemsize}-byte values; 1, 2, 4, 8 or 16 expected")
    cdef void* s = cnp.PyArray_DATA(src)
    cdef void* d = cnp.PyArray_DATA(dst)
    if n_threads < 1:
        n_threads = 1
    with nogil:
        if itemsize == 1:
            _transpose_all(<const uint8_t*>s, <uint8_t*>d, R, C, n_threads)
        elif itemsize == 2:
            _transpose_all(<const uint16_t*>s, <uint16_t*>d, R, C, n_threads)
        elif itemsize == 4:
            _transpose_all(<const uint32_t*>s, <uint32_t*>d, R, C, n_threads)
        elif itemsize == 8:
            _transpose_all(<const uint64_t*>s, <uint64_t*>d, R, C, n_threads)
        else:
            _transpose_all(<const double complex*>s, <double complex*>d, R, C, n_threads)


cdef int _densify_rows(const index_t* indptr, const index_t* indices, const value_t* data,
                       value_t* D, Py_ssize_t n_rows, Py_ssize_t n_cols,
                       int n_threads) noexcept nogil:
    """D = the dense (n_rows, n_cols) matrix: each row zeroed, then its nonzeros added
    in storage order (scipy's ``toarray`` order: duplicates sum alike). Returns 1 if a
    column index is out of range (D then partly written), else 0."""
    cdef Py_ssize_t i, p, j
    cdef value_t* row
    cdef int bad = 0
    for i in prange(n_rows, num_threads=n_threads, schedule="static"):
        row = D + i * n_cols
        memset(row, 0, n_cols * sizeof(value_t))
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            # One compare per nonzero next to a scattered store: nearly free, and a
            # mutated index array cannot write outside D.
            if <size_t>j >= <size_t>n_cols:
                bad |= 1  # (a reduction: a plain assignment in prange is lastprivate)
                break
            row[j] = row[j] + data[p]
    return bad


cdef int _densify_typed(const index_t* ip, const index_t* ix, int vt, void* d, void* D,
                        Py_ssize_t n_rows, Py_ssize_t n_cols, int n_threads) noexcept nogil:
    """``_densify_rows`` for the numpy value type ``vt`` (checked by ``_value_type``)."""
    if vt == cnp.NPY_FLOAT32:
        return _densify_rows(ip, ix, <float*>d, <float*>D, n_rows, n_cols, n_threads)
    if vt == cnp.NPY_FLOAT64:
        return _densify_rows(ip, ix, <double*>d, <double*>D, n_rows, n_cols, n_threads)
    if vt == cnp.NPY_COMPLEX64:
        return _densify_rows(ip, ix, <float complex*>d, <float complex*>D, n_rows, n_cols,
                             n_threads)
    return _densify_rows(ip, ix, <double complex*>d, <double complex*>D, n_rows, n_cols,
                         n_threads)


def densify_into(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, cnp.ndarray D,
                 int n_threads):
    """D = the CSR matrix (indptr, indices, data) as a dense array, by row ranges on
    ``n_threads`` threads; what ``scipy.sparse.csr_array(...).toarray()`` gives, bit
    for bit (each row zeroed, then its values added in storage order).

    D is C-contiguous, writeable, (n_rows, n_cols), of the dtype of ``data``.
    ``indptr`` must be valid (see the module docstring); column indices are
    checked as they are used. Returns ``CSR_OK``, or ``CSR_BAD_INDEX``
    (``csr_error_message``'s code 4: an index out of range) with D partly written.
    """
    if cnp.PyArray_NDIM(D) != 2:
        raise ValueError("D must be 2-D")
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(D, 0), n_cols = cnp.PyArray_DIM(D, 1)
    cdef int vt = _value_type(data, (D,))
    cdef int it = _index_type(indptr, indices, n_rows)
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef int64_t nnz = _stored_nnz(indptr, indices, data, it, n_rows)
    cdef void* ix = cnp.PyArray_DATA(indices)
    cdef void* d = cnp.PyArray_DATA(data)
    cdef void* Dp = cnp.PyArray_DATA(D)
    cdef int bad
    if n_threads < 1:
        n_threads = 1
    with nogil:
        if it == cnp.NPY_INT32:
            bad = _densify_typed(<int32_t*>ip, <int32_t*>ix, vt, d, Dp, n_rows, n_cols,
                                 n_threads)
        else:
            bad = _densify_typed(<int64_t*>ip, <int64_t*>ix, vt, d, Dp, n_rows, n_cols,
                                 n_threads)
    return WS_CSR_BAD_INDEX if bad else WS_CSR_OK
