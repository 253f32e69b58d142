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
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from _codes cimport WS_CSR_BAD_INDEX, WS_CSR_OK
from _csr_check cimport _csr_check, _index_span, _out_of_range
from _operands cimport _index_type, _parts, _value_type
from _tiles cimport *
from _types cimport index_t, value_t

cnp.import_array()

# Transposed products: token panels of WS_SCATTER_PANEL_BYTES (_tiles_scatter.h: 128
# with AVX, 64 without) per sweep over the matrix: one-shot products scatter one panel,
# or two (SCATTER_MAX_PANELS, wsesparse.matmul._scatter_ok).
cdef extern from "_axpy_tiles.h":
    const int WS_SCATTER_PANEL_BYTES

# Checked one-column real scatters compare each index in their loop for row chunks averaging
# at least this many nonzeros per row, and check blocks of indices first for the others
# (_tiles_base.h, WS_SCATTER1_CHK_LOOP_ROWS_MIN).
CHECK_LOOP_ROWS_MIN = _SCATTER1_CHK_LOOP_ROWS_MIN

cdef enum:
    _REDUCE_BLOCK = 8192  # elements per work item when the row chunks are added up


cdef struct _Zone:
    # A row chunk's exclusive zone (ws_zone_<T>, _tiles_scatter.h): rows j with
    # (size_t)(j - ex_lo) < ex_n go to Z, the others to s + (j - s_lo) * T.
    void* s
    Py_ssize_t s_lo, ex_lo
    size_t ex_n


cdef int _scatter_item(const index_t* indptr, const index_t* indices, const value_t* data,
                       const value_t* U, value_t* Z, Py_ssize_t k0, Py_ssize_t k1,
                       Py_ssize_t n_out, Py_ssize_t T, Py_ssize_t t0, Py_ssize_t w,
                       bint check_cols) noexcept nogil:
    """Z[:, t0:t0+w] = B[k0:k1].T @ U[k0:k1, t0:t0+w] (U is n_rows x T, Z n_out x T),
    checked as in ``_scatter_blocks``, or for one column index by index (complex values;
    real ones of rows averaging ``WS_SCATTER1_CHK_LOOP_ROWS_MIN`` or more)."""
    cdef Py_ssize_t j
    if w == T:
        memset(Z, 0, n_out * T * sizeof(value_t))
    else:
        for j in range(n_out):
            memset(Z + j * T + t0, 0, w * sizeof(value_t))
    if T == 1 and (value_t is cython.floatcomplex or value_t is cython.doublecomplex):
        # One complex column: ws_cscatter1, which checks each index as it goes (cheaper
        # than ws_cscatter's general loop with or without a block check; _tiles_complex.h).
        return _cscatter1(indptr + k0, indices, data, U + k0, Z, k1 - k0, n_out)
    if (T == 1 and check_cols
            and indptr[k1] - indptr[k0] >= <Py_ssize_t>_SCATTER1_CHK_LOOP_ROWS_MIN * (k1 - k0)):
        # One real column, checked, rows long enough: each index compared in the loop
        # (_tiles_base.h).
        return _rscatter1_chk(indptr + k0, indices, data, U + k0, Z, k1 - k0, n_out)
    return _scatter_blocks(indptr, indices, data, U, Z, k0, k1, n_out, T, t0, w, check_cols)


cdef int _scatter_blocks(const index_t* indptr, const index_t* indices, const value_t* data,
                         const value_t* U, value_t* Z, Py_ssize_t k0, Py_ssize_t k1,
                         Py_ssize_t n_out, Py_ssize_t T, Py_ssize_t t0, Py_ssize_t w,
                         bint check_cols, const _Zone* zone=NULL) noexcept nogil:
    """Z[:, t0:t0+w] += B[k0:k1].T @ U[k0:k1, t0:t0+w] (by ``zone``, if given) in
    blocks of about CHECK_BLOCK nonzeros (64 short rows for one column, as the
    SpMV's: _tiles_base.h); with ``check_cols`` each block's column indices are
    checked against n_out just before it is scattered: 1 at the first one out of
    range (Z then partly written), else 0. One copy of the scatter loop, checked
    or not (a second, inlined for the unchecked case, ran float32 x @ W 1.3-1.6x
    slower; scratch A/B)."""
    cdef Py_ssize_t j, i = k0
    while i < k1:
        j = _row_block_end(indptr, i, k1) if T == 1 else _block_end(indptr, i, k1)
        if check_cols and _out_of_range(indices, indptr[i], indptr[j], n_out):
            return 1
        _scatter_rows(indptr, indices, data, U, Z, i, j, T, t0, w, zone)
        i = j
    return 0


cdef int _rscatter1_chk(const index_t* indptr, const index_t* indices, const value_t* data,
                        const value_t* u, value_t* z, Py_ssize_t n_rows,
                        Py_ssize_t n_out) noexcept nogil:
    """z += B[rows].T @ u[rows] for one real column (``indptr`` at the first row), each
    column index checked before its update: 1 at the first one out of range, else 0 (the
    bits of ``ws_scatter1``). (Complex value types: unused, returns 1.)"""
    if value_t is float:
        if index_t is int32_t:
            return ws_rscatter1_chk_float_int32_t(indptr, indices, data, u, z, n_rows, n_out)
        else:
            return ws_rscatter1_chk_float_int64_t(indptr, indices, data, u, z, n_rows, n_out)
    elif value_t is double:
        if index_t is int32_t:
            return ws_rscatter1_chk_double_int32_t(indptr, indices, data, u, z, n_rows, n_out)
        else:
            return ws_rscatter1_chk_double_int64_t(indptr, indices, data, u, z, n_rows, n_out)
    else:
        return 1


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
                        Py_ssize_t T, Py_ssize_t t0, Py_ssize_t w,
                        const _Zone* zone=NULL) noexcept nogil:
    """Z[:, t0:t0+w] += B[k0:k1].T @ U[k0:k1, t0:t0+w]; with ``zone`` (real values,
    one panel), the rows outside its exclusive zone go to its copy instead."""
    cdef ws_zone_float zf = ws_no_zone_float()
    cdef ws_zone_double zd = ws_no_zone_double()
    cdef Py_ssize_t n = k1 - k0
    if zone != NULL:
        zf.s = <float*>zone.s
        zd.s = <double*>zone.s
        zf.s_lo = zd.s_lo = zone.s_lo
        zf.ex_lo = zd.ex_lo = zone.ex_lo
        zf.ex_n = zd.ex_n = zone.ex_n
    U = U + k0 * T + t0
    if value_t is float:
        if index_t is int32_t:
            if zone == NULL:
                ws_scatter_float_int32_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zf)
            else:
                ws_scatterz_float_int32_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zf)
        else:
            if zone == NULL:
                ws_scatter_float_int64_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zf)
            else:
                ws_scatterz_float_int64_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zf)
    elif value_t is double:
        if index_t is int32_t:
            if zone == NULL:
                ws_scatter_double_int32_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zd)
            else:
                ws_scatterz_double_int32_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zd)
        else:
            if zone == NULL:
                ws_scatter_double_int64_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zd)
            else:
                ws_scatterz_double_int64_t(indptr + k0, indices, data, U, T, Z + t0, T, n, w, zd)
    elif value_t is cython.floatcomplex:
        if index_t is int32_t:
            ws_cscatter_float_int32_t(indptr + k0, indices, <const float*>data,
                                      <const float*>U, T, <float*>(Z + t0), T, n, w)
        else:
            ws_cscatter_float_int64_t(indptr + k0, indices, <const float*>data,
                                      <const float*>U, T, <float*>(Z + t0), T, n, w)
    else:
        if index_t is int32_t:
            ws_cscatter_double_int32_t(indptr + k0, indices, <const double*>data,
                                       <const double*>U, T, <double*>(Z + t0), T, n, w)
        else:
            ws_cscatter_double_int64_t(indptr + k0, indices, <const double*>data,
                                       <const double*>U, T, <double*>(Z + t0), T, n, w)


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


cdef int _zone_chunk(const index_t* indptr, const index_t* indices, const value_t* data,
                     const value_t* U, value_t* Z, value_t* sc, Py_ssize_t k0, Py_ssize_t k1,
                     Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t exl, Py_ssize_t exh,
                     Py_ssize_t n_out, Py_ssize_t T) noexcept nogil:
    """One chunk of ``_scatter_zoned`` (rows k0:k1 of B, indices within [lo, hi],
    exclusive zone [exl, exh], its copy ``sc`` of rows lo..hi): clear the zone in Z
    and the rest of the copy, then scatter. Returns 1 if one of its blocks held an
    index out of range (none, once the spans are checked), else 0."""
    cdef _Zone zone
    if exl <= exh:
        memset(Z + exl * T, 0, (exh - exl + 1) * T * sizeof(value_t))
        memset(sc, 0, (exl - lo) * T * sizeof(value_t))
        memset(sc + (exh + 1 - lo) * T, 0, (hi - exh) * T * sizeof(value_t))
    else:
        memset(sc, 0, (hi - lo + 1) * T * sizeof(value_t))
    zone.s = sc
    zone.s_lo = lo
    zone.ex_lo = exl
    zone.ex_n = exh - exl + 1 if exl <= exh else 0
    # Checked blocks: each block's indices read just before it is scattered. Without
    # that read one thread took 1.3x the time (Poisson 1000^2; docs/tuning.md,
    # "Transposed products (scatter) and copies").
    return _scatter_blocks(indptr, indices, data, U, Z, k0, k1, n_out, T, 0, T, True, &zone)

cdef int _scatter_zoned(const index_t* indptr, const index_t* indices, const value_t* data,
                        const value_t* U, value_t* Z, const int64_t* b, Py_ssize_t K,
                        Py_ssize_t n_out, Py_ssize_t T, int n_threads, bint check_cols,
                        Py_ssize_t max_gap, Py_ssize_t max_scratch,
                        Py_ssize_t* gap_rows) noexcept nogil:
    """Z = B.T @ U (one panel, real values) in K row chunks b[c]:b[c+1] of B that add
    into Z itself where no other chunk writes ("zones", csr_spmm_t).

    Each chunk's column indices span [lo, hi]; its exclusive zone is the part of
    that span no other chunk's span meets. Its other rows (and only those) are
    summed into a copy of its own; the rows outside every exclusive zone (the
    gaps) are then the sum of the copies that hold them, in chunk order (0 where
    none does). The copies reserve each chunk's whole range of rows (address space:
    only the shared rows are written), at most ``max_scratch`` bytes in all.
    Returns 1 if a column index is out of range (checked whatever ``check_cols``
    says; Z untouched), -1 if the gaps would hold more than ``max_gap`` rows, the
    copies would pass ``max_scratch`` or they cannot be allocated (Z untouched, the
    indices checked), -2 if out of memory before the check, else 0; ``gap_rows``
    gets the gap rows."""
    cdef int64_t* lo = <int64_t*>malloc(6 * K * sizeof(int64_t))
    if lo == NULL:
        return -2
    cdef int64_t* hi = lo + K
    cdef int64_t* exl = lo + 2 * K
    cdef int64_t* exh = lo + 3 * K
    cdef int64_t* off = lo + 4 * K
    cdef int64_t* order = lo + 5 * K
    cdef Py_ssize_t c, c2, j, t, g, n_ex = 0, n_sorted = 0, total = 0
    cdef int64_t run, a, e, key
    cdef value_t acc
    cdef value_t* S = NULL
    cdef int bad = 0, touched = 0
    for c in prange(K, num_threads=n_threads, schedule="static"):
        _index_span(indices, indptr[b[c]], indptr[b[c + 1]], &lo[c], &hi[c])
    for c in range(K):
        if lo[c] <= hi[c] and (lo[c] < 0 or hi[c] >= n_out):
            bad = 1
    if bad:  # (reported with check_cols or not: nothing may be written out of bounds)
        free(lo)
        return 1
    run = -1  # the greatest index of the chunks before c
    for c in range(K):
        exl[c] = lo[c] if lo[c] > run + 1 else run + 1
        if hi[c] > run:
            run = hi[c]
    run = n_out  # the least index of the chunks after c
    for c in range(K - 1, -1, -1):
        exh[c] = hi[c] if hi[c] < run - 1 else run - 1
        if lo[c] <= hi[c] and lo[c] < run:
            run = lo[c]
    for c in range(K):
        if exl[c] <= exh[c]:
            n_ex += exh[c] - exl[c] + 1
        off[c] = total
        if lo[c] <= hi[c]:
            total += (hi[c] - lo[c] + 1) * T
    gap_rows[0] = n_out - n_ex
    if n_out - n_ex > max_gap or total * <Py_ssize_t>sizeof(value_t) > max_scratch:
        free(lo)
        return -1
    S = <value_t*>malloc((total if total > 0 else 1) * sizeof(value_t))
    if S == NULL:
        free(lo)
        return -1
    # Each chunk clears its zone of Z and the rest of its copy, then scatters.
    for c in prange(K, num_threads=n_threads, schedule="dynamic", chunksize=1):
        if lo[c] <= hi[c]:
            touched += _zone_chunk(indptr, indices, data, U, Z, S + off[c], b[c], b[c + 1],
                                   lo[c], hi[c], exl[c], exh[c], n_out, T)
    # The zones in row order (insertion sort; K is the core count), then the gaps
    # between them: [0, first zone), between zones, (last zone, n_out).
    for c in range(K):
        if exl[c] <= exh[c]:
            key = c
            c2 = n_sorted
            while c2 > 0 and exl[order[c2 - 1]] > exl[key]:
                order[c2] = order[c2 - 1]
                c2 = c2 - 1
            order[c2] = key
            n_sorted = n_sorted + 1
    for g in prange(n_sorted + 1, num_threads=n_threads, schedule="dynamic", chunksize=1):
        a = 0 if g == 0 else exh[order[g - 1]] + 1
        e = n_out if g == n_sorted else exl[order[g]]
        for j in range(a, e):
            for t in range(T):
                acc = 0
                for c2 in range(K):
                    if lo[c2] <= j <= hi[c2]:
                        acc = acc + S[off[c2] + (j - lo[c2]) * T + t]
                Z[j * T + t] = acc
    free(S)
    free(lo)
    return 1 if touched and check_cols else 0  # (none: the spans were checked)


cdef int _scatter_typed(const index_t* ip, const index_t* ix, int vt, void* d, void* u,
                        void* z, void* s, const int64_t* b, Py_ssize_t n_chunks,
                        Py_ssize_t n_rows, Py_ssize_t n_out, Py_ssize_t T, int n_threads,
                        bint check_cols, Py_ssize_t max_gap, Py_ssize_t max_scratch,
                        Py_ssize_t* gap_rows) noexcept nogil:
    """_scatter_parts by value type; with ``max_gap`` >= 0, zones in the
    ``n_chunks`` chunks of ``b`` first (real values), and where they do not run
    one chunk (``gap_rows`` then -1)."""
    cdef int r = -2
    cdef int64_t whole[2]
    if max_gap >= 0:
        if vt == cnp.NPY_FLOAT32:
            r = _scatter_zoned(ip, ix, <float*>d, <float*>u, <float*>z, b, n_chunks, n_out, T,
                               n_threads, check_cols, max_gap, max_scratch, gap_rows)
        elif vt == cnp.NPY_FLOAT64:
            r = _scatter_zoned(ip, ix, <double*>d, <double*>u, <double*>z, b, n_chunks, n_out,
                               T, n_threads, check_cols, max_gap, max_scratch, gap_rows)
        if r >= 0:
            return r
        gap_rows[0] = -1
        whole[0] = 0
        whole[1] = n_rows
        b = whole
        n_chunks = 1
        # (check_cols stays: the checked loop reads each block's indices just before
        # it scatters them, which made it faster than the unchecked one; one real
        # column of long enough rows compares each index instead
        # (WS_SCATTER1_CHK_LOOP_ROWS_MIN), not measured against the unchecked loop here)
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


def banded_sample(cnp.ndarray indptr, cnp.ndarray indices, Py_ssize_t window,
                  Py_ssize_t limit):
    """Whether 3 windows of ``window`` rows of the CSR arrays (at a quarter, half and
    three quarters of its rows; ``4 * window`` rows at least, else False) each hold
    column indices within a span of at most ``limit`` (``_drivers.scatter_zones``).
    ``indptr`` must be valid; reads 3 windows only (about a microsecond)."""
    if cnp.PyArray_NDIM(indptr) != 1 or cnp.PyArray_NDIM(indices) != 1:
        raise ValueError("indptr and indices must be 1-D")
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(indptr, 0) - 1
    cdef int it = _index_type(indptr, indices, n_rows)
    cdef Py_ssize_t q, r, p0, p1, n_ix = cnp.PyArray_DIM(indices, 0)
    cdef int64_t lo, hi
    if window < 1 or n_rows < 4 * window:
        return False
    for q in range(1, 4):
        r = n_rows * q // 4
        if it == cnp.NPY_INT32:
            p0 = (<int32_t*>cnp.PyArray_DATA(indptr))[r]
            p1 = (<int32_t*>cnp.PyArray_DATA(indptr))[r + window]
        else:
            p0 = (<int64_t*>cnp.PyArray_DATA(indptr))[r]
            p1 = (<int64_t*>cnp.PyArray_DATA(indptr))[r + window]
        if not 0 <= p0 <= p1 <= n_ix:
            raise ValueError("indptr must be valid (nondecreasing, within indices)")
        if it == cnp.NPY_INT32:
            _index_span(<int32_t*>cnp.PyArray_DATA(indices), p0, p1, &lo, &hi)
        else:
            _index_span(<int64_t*>cnp.PyArray_DATA(indices), p0, p1, &lo, &hi)
        if lo <= hi and hi - lo > limit:
            return False
    return True

def csr_spmm_t(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, cnp.ndarray U,
               cnp.ndarray Z, int n_threads, *, Py_ssize_t n_chunks=1, cnp.ndarray scratch=None,
               bint check_cols=False, Py_ssize_t zones=0, Py_ssize_t max_gap_rows=0,
               Py_ssize_t max_zone_bytes=1 << 26, cnp.ndarray gap_rows=None):
    """Z = B.T @ U for CSR ``B`` (n_rows x n_cols) whose ``indptr`` is valid.

    U is (n_rows,) or (n_rows, T), Z (n_cols,) or (n_cols, T): C-contiguous,
    of the dtype of ``data``, not overlapping. Every column index of B must be
    below Z's length: checked by the caller, or, with ``check_cols``, here,
    each block of rows just before it is scattered (one column: each index as
    it is used, for complex values and real ones of rows averaging
    ``CHECK_LOOP_ROWS_MIN`` or more). It returns ``CSR_BAD_INDEX``, ``csr_check``'s code 4,
    if one is out of range, Z then being garbage; else 0. Each
    nonzero (k, j) adds ``data * U[k]`` to ``Z[j]`` (a scatter), in storage
    order. Work items are panels of ``scatter_panel_width`` token columns
    times ``n_chunks`` ranges of rows of B (balanced by nonzeros); chunk c > 0
    sums into ``scratch[c - 1]`` (shape ``(n_chunks - 1,) + Z.shape``), added
    to Z in chunk order at the end. So every element is summed in an order
    fixed by B and ``n_chunks`` alone, whatever the thread count.

    ``zones`` K > 1 (with ``n_chunks`` 1; real values, one panel): K row chunks
    that need no whole copies of Z. Each chunk's column indices span a range of
    Z's rows; the rows of that range no other chunk's range meets are its
    exclusive zone, summed into Z directly, and only its other rows into a copy
    of its own; the rows outside every zone (the gaps) are added up from the
    copies in chunk order. This pays where chunks write narrow, nearly disjoint
    ranges (banded matrices), at the cost of one pass over the indices (which
    is also the check). Where the gaps would hold more than ``max_gap_rows``
    rows, or the copies (each chunk's whole range reserved, only the shared rows
    written) more than ``max_zone_bytes``, one chunk (as ``zones`` 0). The order of
    every sum is fixed by B, K and whether the zones ran. ``gap_rows`` (a 1-element
    int64 array, if given) receives the gap rows, or -1 where zones did not run.
    """
    if cnp.PyArray_NDIM(U) != cnp.PyArray_NDIM(Z) or not 1 <= cnp.PyArray_NDIM(U) <= 2:
        raise ValueError("U and Z must both be 1-D or both 2-D")
    if n_threads < 1:  # (OpenMP aborts on num_threads below 1)
        n_threads = 1
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(U, 0)
    cdef Py_ssize_t n_out = cnp.PyArray_DIM(Z, 0)
    cdef Py_ssize_t T = cnp.PyArray_DIM(U, 1) if cnp.PyArray_NDIM(U) == 2 else 1
    if cnp.PyArray_NDIM(U) == 2 and cnp.PyArray_DIM(Z, 1) != T:
        raise ValueError("U and Z must have the same number of columns")
    if n_chunks < 1:
        raise ValueError("n_chunks must be at least 1")
    if zones < 0 or (zones > 1 and n_chunks != 1):
        raise ValueError("zones must be 0, 1 or, with n_chunks 1, more")
    cdef Py_ssize_t pw = WS_SCATTER_PANEL_BYTES // cnp.PyArray_ITEMSIZE(data)
    cdef Py_ssize_t max_gap = max_gap_rows if zones > 1 and T <= pw else -1
    cdef Py_ssize_t gap = -1
    if gap_rows is not None and (cnp.PyArray_TYPE(gap_rows) != cnp.NPY_INT64
                                 or cnp.PyArray_SIZE(gap_rows) != 1):
        raise ValueError("gap_rows must be a 1-element int64 array")
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
    if max_gap >= 0:
        n_chunks = zones
    _parts(n_chunks, it, ip, n_rows, &n_parts, &b)
    with nogil:
        if it == cnp.NPY_INT32:
            bad = _scatter_typed(<int32_t*>ip, <int32_t*>ix, vt, d, u, z, sc, b, n_chunks,
                                 n_rows, n_out, T, n_threads, check_cols, max_gap,
                                 max_zone_bytes, &gap)
        else:
            bad = _scatter_typed(<int64_t*>ip, <int64_t*>ix, vt, d, u, z, sc, b, n_chunks,
                                 n_rows, n_out, T, n_threads, check_cols, max_gap,
                                 max_zone_bytes, &gap)
        free(b)
    if gap_rows is not None:  # (gap: -1 unless the zones ran)
        (<int64_t*>cnp.PyArray_DATA(gap_rows))[0] = gap if bad == 0 else -1
    return WS_CSR_BAD_INDEX if bad else WS_CSR_OK
