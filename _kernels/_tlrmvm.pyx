# cython: language_level=3
"""Tile low-rank matrix-vector products in three phases (TLR-MVM).

A (m x n) is cut into tiles; tile (i, j) of shape (h_i, w_j) is approximated by
U_ij @ V_ij.T with rank k_ij. The bases are stored for the kernel
(``wsesparse.tlr.TLRMatrix`` builds and validates them):

``V``      all tile columns one after the other; tile column j is the row-major
           block ``Vs_j = [V_0j, V_1j, ...]`` of shape (w_j, Kc_j) starting at
           ``v_off[j]``, Kc_j = sum_i k_ij = kcol_ptr[j+1] - kcol_ptr[j].
``U``      all tile rows one after the other; tile row i is the row-major block
           ``Us_i.T`` of shape (Kr_i, h_i) (that is ``[U_i0, U_i1, ...]`` in
           column-major order) starting at ``u_off[i]``,
           Kr_i = krow_ptr[i+1] - krow_ptr[i].
``perm``   length K = sum k_ij; ``yu[p] = yv[perm[p]]`` turns the phase-1 output
           (tile-column order) into the phase-3 input (tile-row order).
``row_ptr``/``col_ptr``  tile boundaries in the matrix (n_tile_rows + 1, n_tile_cols + 1).

Vectors are passed as ``s`` right-hand sides stored one after the other
(C-contiguous (s, n) for inputs, (s, m) for outputs, (s, K) work arrays).

Forward (Y = A X):  phase 1 yv_j = Vs_j.T x_j   (one pass over the rows of Vs_j)
                    phase 2 yu = yv[perm]
                    phase 3 y_i = Us_i yu_i     (one pass over the rows of Us_i.T)
Adjoint (X = A^H Y): phase 1 yu_i = conj(Us_i).T y_i  (dot products over the rows of Us_i.T)
                     phase 2 yv[perm] = yu
                     phase 3 x_j = conj(Vs_j) yv_j   (dot products over the rows of Vs_j)

The adjoint reads the same stored bases, row by row in the same order as the
forward product (no transposed or conjugated copy). The block kernels live in
``_tiles_tlr.h``: they take all s right-hand sides in one pass over a basis,
with register tiles of several vectors, and do the complex arithmetic as real
FMAs.

Everything is checked in Python before it gets here; bounds checks are off
(see setup.py). Each output element is written by exactly one thread in a
fixed order, so results are bitwise identical for any thread count.
"""

cimport cython
cimport numpy as cnp
from cython.parallel cimport parallel, prange, threadid
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

cnp.import_array()

cdef extern from "_omp_compat.h" nogil:
    int omp_get_max_threads()
    int wsesparse_has_openmp()
    void wsesparse_barrier()

from _part_queues cimport (WS_PARTS_SHARED, ws_part_queue, ws_part_queues,
                           ws_part_queues_by_work, ws_part_queues_free)
from _part_trace cimport (WS_TRACE_HEAD, ws_part_step, ws_trace_arm, ws_trace_begin,
                          ws_trace_end3, ws_trace_shift)

# Whether each phase's work items go to the threads from one shared queue
# (-DWS_PARTS_SHARED=1, an A/B switch) instead of a queue per thread (_part_queues.h).
PARTS_SHARED = bool(WS_PARTS_SHARED)

include "_part_trace.pxi"

ctypedef fused value_t:
    float
    double
    float complex
    double complex


def openmp_enabled():
    """Whether the kernels were compiled with OpenMP."""
    return bool(wsesparse_has_openmp())


cdef extern from "_isa.h":
    const char *_WS_ISA "WS_ISA"

# The vector instructions this module was compiled for (_isa.h): "avx2+fma" for a native
# build on an AVX2 machine, "x86-64 baseline (sse2)" for WSESPARSE_NATIVE=0.
KERNEL_ISA = (<bytes>_WS_ISA).decode()


cdef extern from "_tiles_tlr.h" nogil:
    void tlr_forward_f(const float* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                       const float* a, Py_ssize_t lda, float* out, Py_ssize_t ldo, Py_ssize_t s,
                       int cx, int pf)
    void tlr_forward_d(const double* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                       const double* a, Py_ssize_t lda, double* out, Py_ssize_t ldo,
                       Py_ssize_t s, int cx, int pf)
    void tlr_cn_f(const float* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                  const float* a, Py_ssize_t lda, float* out, Py_ssize_t ldo, Py_ssize_t s,
                  int cx, int pf)
    void tlr_cn_d(const double* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                  const double* a, Py_ssize_t lda, double* out, Py_ssize_t ldo, Py_ssize_t s,
                  int cx, int pf)
    int _NN_ROWS_MAX "TLR_NN_ROWS_MAX"
    int _NN_MROWS_S "TLR_NN_MROWS_S"
    long long _NN_MROWS_BYTES "TLR_NN_MROWS_BYTES"
    int _NN_ZMM "TLR_ZMM"
    int _NN_ZMM_TILES "TLR_NN_ZMM_TILES"
    int _NN_ROWS_PF "TLR_NN_ROWS_PF"

# How the forward kernel (tlr_nn, _tiles_tlr_nn.h) takes its blocks; they differ between builds,
# so tests read them here. Rows of at most FORWARD_ROWS_MAX reals are streamed in address
# order: one right-hand side at a time, or FORWARD_ROWS_GROUP complex (twice as many real)
# ones per pass (0: none, the register tiles take s > 1). More right-hand sides than a group
# take several passes where the block has at most FORWARD_ROWS_GROUP_BYTES (so the passes
# after the first read it from L2) and its rows are short enough for a group's sums to stay in
# L1, else the register tiles. Every path sums each output element in the same order: the bits
# do not depend on the path.
FORWARD_ROWS_MAX = _NN_ROWS_MAX
FORWARD_ROWS_GROUP = _NN_MROWS_S
FORWARD_ROWS_GROUP_BYTES = _NN_MROWS_BYTES
# One right-hand side's rows go 64 bytes at a time where AVX-512F builds have them
# (FORWARD_ROWS_ZMM; else 32), then a masked partial vector, except where they prefetch the
# next rows (32 bytes then): from the prefetch level FORWARD_ROWS_PREFETCH on (1: bases beyond
# L2, 2: beyond a third of L3; wsesparse/tlr/matrix.py).
FORWARD_ROWS_ZMM = bool(_NN_ZMM)
FORWARD_ROWS_PREFETCH = _NN_ROWS_PF
# Several right-hand sides (register tiles and streamed rows) go 64 bytes at a time in
# AVX-512VL builds (else 32; _tiles_tlr_nn.h): the same bits either way.
FORWARD_TILES_ZMM = bool(_NN_ZMM_TILES)


cdef inline void _nn(const value_t* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                     const value_t* a, Py_ssize_t lda, value_t* out, Py_ssize_t ldo,
                     Py_ssize_t s, int pf) noexcept nogil:
    # out[c, 0:ncols] = sum_t a[c, t] * B[t, 0:ncols] (B row-major, nrows x ncols of a
    # block with rows of ldb)
    if value_t is float:
        tlr_forward_f(B, nrows, ncols, ldb, a, lda, out, ldo, s, 0, pf)
    elif value_t is double:
        tlr_forward_d(B, nrows, ncols, ldb, a, lda, out, ldo, s, 0, pf)
    elif sizeof(value_t) == 8:  # float complex
        tlr_forward_f(<const float*>B, nrows, ncols, ldb, <const float*>a, lda, <float*>out,
                      ldo, s, 1, pf)
    else:
        tlr_forward_d(<const double*>B, nrows, ncols, ldb, <const double*>a, lda,
                      <double*>out, ldo, s, 1, pf)


cdef inline void _cn(const value_t* B, Py_ssize_t nrows, Py_ssize_t ncols,
                     const value_t* a, Py_ssize_t lda, value_t* out, Py_ssize_t ldo,
                     Py_ssize_t s, int pf) noexcept nogil:
    # out[c, r] = sum_l conj(B[r, l]) * a[c, l] (dot products over the rows of B)
    if value_t is float:
        tlr_cn_f(B, nrows, ncols, ncols, a, lda, out, ldo, s, 0, pf)
    elif value_t is double:
        tlr_cn_d(B, nrows, ncols, ncols, a, lda, out, ldo, s, 0, pf)
    elif sizeof(value_t) == 8:  # float complex
        tlr_cn_f(<const float*>B, nrows, ncols, ncols, <const float*>a, lda, <float*>out,
                 ldo, s, 1, pf)
    else:
        tlr_cn_d(<const double*>B, nrows, ncols, ncols, <const double*>a, lda, <double*>out,
                 ldo, s, 1, pf)


cdef int _need(cnp.ndarray a, int typenum, int ndim, bint out, str name) except -1:
    """Raise unless ``a`` is a C-contiguous ``ndim``-D array of ``typenum`` in native byte
    order (and writeable if ``out``): the kernels then take its data pointer as it is. (Typed
    memoryviews checked the same, but a fused def function with 15 of them cost about
    2 us more per call: docs/tuning.md, "TLR tiles".)"""
    if (cnp.PyArray_TYPE(a) != typenum or cnp.PyArray_NDIM(a) != ndim
            or not cnp.PyArray_IS_C_CONTIGUOUS(a) or not cnp.PyArray_ISNOTSWAPPED(a)):
        raise ValueError(f"{name} must be a C-contiguous {ndim}-D array of "
                         f"{cnp.PyArray_DescrFromType(typenum)} (native byte order)")
    if out and not cnp.PyArray_ISWRITEABLE(a):
        raise ValueError(f"{name} must be writeable")
    return 0


cdef tuple _INDEX_NAMES = ("row_ptr", "col_ptr", "u_off", "v_off", "krow_ptr", "kcol_ptr",
                           "perm")


cdef int _check_operator(cnp.ndarray U, cnp.ndarray V, tuple index_arrays,
                         cnp.ndarray items1, cnp.ndarray items3) except -1:
    """The checks of the operator's arrays (``Plan``'s, once per plan; ``tlr_matmat`` makes
    one per call); returns the value typenum."""
    cdef int vt = cnp.PyArray_TYPE(U)
    if vt not in (cnp.NPY_FLOAT32, cnp.NPY_FLOAT64, cnp.NPY_COMPLEX64, cnp.NPY_COMPLEX128):
        raise ValueError(f"U must be float32, float64, complex64 or complex128, got {U.dtype}")
    _need(U, vt, 1, False, "U")
    _need(V, vt, 1, False, "V")
    if len(index_arrays) != 7:
        raise ValueError(f"need the 7 index arrays {_INDEX_NAMES}, got {len(index_arrays)}")
    cdef int q
    for q in range(7):  # (a C loop: zip(names, arrays) made Python objects for every pair)
        _need(<cnp.ndarray?>index_arrays[q], cnp.NPY_INT64, 1, False, _INDEX_NAMES[q])
    _need_items(items1, "the first phase's items")
    _need_items(items3, "the last phase's items")
    return vt


cdef int _need_items(cnp.ndarray a, str name) except -1:
    _need(a, cnp.NPY_INT64, 2, False, name)
    if cnp.PyArray_DIM(a, 1) != 3:
        raise ValueError(f"{name} must have 3 columns (tile, start, stop)")
    return 0


cdef inline const int64_t* _i64(cnp.ndarray a) noexcept:
    return <const int64_t*>cnp.PyArray_DATA(a)


cdef inline Py_ssize_t _shuffle_block(Py_ssize_t K, int n_threads) noexcept nogil:
    """Positions per block of phase 2: about 4 blocks a thread (taken as phase 1's items
    are, from a queue per thread), of whole 16s. Phase 2 used to walk the positions p
    outermost and the s vectors innermost, each step touching s rows of yu and yv K values
    apart (2 s pages a step); block by block, vector after vector, it reads and writes runs;
    at most 512 positions, so that the block's perm stays in L1
    (9801^2 operator, s = 64, complex64, 2-core Zen 4, one thread: 1355 -> 1041 us;
    docs/tuning.md, "Phase 2 in blocks")."""
    cdef Py_ssize_t b = (K + 4 * n_threads - 1) // (4 * n_threads)
    b = (b + 15) // 16 * 16
    return 16 if b <= 0 else 512 if b > 512 else b


cdef int64_t* _work_cum(const int64_t* items, Py_ssize_t n, const int64_t* ptr,
                       int n_threads) noexcept nogil:
    """The running work of a phase's items ``(tile, start, stop)``: (stop - start) times the
    tile's other dimension, ``ptr[tile + 1] - ptr[tile]`` (at least 1), for the queues by work
    (_part_queues.h); NULL on one thread, with one shared queue or if malloc fails (queues by
    count)."""
    cdef int64_t* cum
    cdef int64_t acc = 0, t, d
    cdef Py_ssize_t q
    if n_threads <= 1 or n <= 0 or WS_PARTS_SHARED:
        return NULL
    cum = <int64_t*>malloc(n * sizeof(int64_t))
    if cum != NULL:
        for q in range(n):
            t = items[3 * q]
            d = ptr[t + 1] - ptr[t]
            acc += (items[3 * q + 2] - items[3 * q + 1]) * (d if d > 1 else 1)
            cum[q] = acc
    return cum


cdef inline const int64_t* _phase_ptr(bint adjoint, int phase, const int64_t* row_ptr,
                                     const int64_t* col_ptr, const int64_t* krow_ptr,
                                     const int64_t* kcol_ptr) noexcept nogil:
    """The pointers whose steps are the other dimension of phase 1 or 3's blocks: forward
    phase 1 the tile column's width (col_ptr), phase 3 the tile row's ranks (krow_ptr);
    adjoint phase 1 the tile row's height (row_ptr), phase 3 the tile column's ranks
    (kcol_ptr)."""
    if adjoint:
        return row_ptr if phase == 1 else kcol_ptr
    return col_ptr if phase == 1 else krow_ptr


cdef int64_t* _phase_cum(bint adjoint, int phase, const int64_t* items, Py_ssize_t n,
                         const int64_t** ptrs, int n_threads) noexcept nogil:
    """The running work of phase 1 or 3's items (``_work_cum``), for the queues by work
    (ws_part_queues_by_work): an item's work is its range times the rows of its block
    (``_phase_ptr``; ``ptrs`` as ``_run`` takes them). Each thread takes the items of its own
    queue first: the same blocks of the bases at every call, which may still be in its cache;
    then what is left of the others'. Computed once per plan (``Plan``); the caller frees
    it."""
    return _work_cum(items, n, _phase_ptr(adjoint, phase, ptrs[0], ptrs[1], ptrs[4], ptrs[5]),
                     n_threads)


include "_tlrmvm_hooks.pxi"


cdef void _forward(const value_t* U, const value_t* V, const int64_t* row_ptr,
                   const int64_t* col_ptr, const int64_t* u_off, const int64_t* v_off,
                   const int64_t* krow_ptr, const int64_t* kcol_ptr, const int64_t* perm,
                   Py_ssize_t K, const value_t* X, Py_ssize_t n, value_t* Y, Py_ssize_t m,
                   value_t* yv, value_t* yu, Py_ssize_t s,
                   const int64_t* col_items, Py_ssize_t n_col_items,
                   const int64_t* row_items, Py_ssize_t n_row_items,
                   const int64_t* cum1, const int64_t* cum3, int n_threads,
                   int pf) noexcept nogil:
    """Y = A X (see tlr_matmat), on the arrays' data: X (s, n), Y (s, m), yv/yu (s, K)."""
    cdef Py_ssize_t a, b, i, j, c, p, c0, w, k0, kc, r0, h, p0, p1
    cdef Py_ssize_t B2 = _shuffle_block(K, n_threads), nb2 = (K + B2 - 1) // B2
    cdef ws_part_queue one1, one2, one3
    cdef int64_t n1, n2, n3, at, left, q, tid = 0, ts = 0, tt0 = 0
    # (queues by work, as wrap_items cut the items: wsesparse/tlr/_split.py; phase 2's
    # blocks, all of one size, by count: a thread that loses its core mid-phase has its
    # blocks taken by the others, as its items in phases 1 and 3)
    cdef ws_part_queue* q2 = ws_part_queues(nb2, n_threads, &one2, &n2)
    cdef ws_part_queue* q1 = ws_part_queues_by_work(n_col_items, n_threads, cum1, &one1, &n1)
    cdef ws_part_queue* q3 = ws_part_queues_by_work(n_row_items, n_threads, cum3, &one3, &n3)
    # (NULL unless armed, _part_trace.h: phase 1's items, phase 2's blocks, phase 3's items)
    cdef int64_t* tr = ws_trace_begin(n_col_items + nb2 + n_row_items, &tt0)
    cdef int64_t* tr2 = ws_trace_shift(tr, n_col_items)
    cdef int64_t* tr3 = ws_trace_shift(tr, n_col_items + nb2)
    # One team for the three phases, a barrier between them, not a fork and join each:
    # about 1.5 us less a call on 2 threads.
    with parallel(num_threads=n_threads):
        # Phase 1: per tile column, yv_j = Vs_j.T x_j for all s vectors in one
        # pass over Vs_j (register tiles of s vectors times a chunk of a row).
        tid = threadid()
        at, left, q, ts = tid % n1, n1, -1, 0
        while True:
            q = ws_part_step(q1, n1, &at, &left, tr, tt0, q, &ts, tid)
            if q < 0:
                break
            j = col_items[3 * q]
            a = col_items[3 * q + 1]
            b = col_items[3 * q + 2]
            c0 = col_ptr[j]
            w = col_ptr[j + 1] - c0
            k0 = kcol_ptr[j]
            kc = kcol_ptr[j + 1] - k0
            _nn(V + v_off[j] + a, w, b - a, kc, X + c0, n, yv + k0 + a, K, s, pf)
        wsesparse_barrier()
        # Phase 2: reshuffle from tile-column order to tile-row order, a block of
        # positions at a time, vector after vector (_shuffle_block).
        at, left, q, ts = tid % n2, n2, -1, 0
        while True:
            q = ws_part_step(q2, n2, &at, &left, tr2, tt0, q, &ts, tid)
            if q < 0:
                break
            p0 = q * B2
            p1 = min(p0 + B2, K)
            for c in range(s):
                for p in range(p0, p1):
                    yu[c * K + p] = yv[c * K + perm[p]]
        wsesparse_barrier()
        # Phase 3: per tile row, y_i = Us_i yu_i (rows of Us_i.T, same kernel).
        at, left, q, ts = tid % n3, n3, -1, 0
        while True:
            q = ws_part_step(q3, n3, &at, &left, tr3, tt0, q, &ts, tid)
            if q < 0:
                break
            i = row_items[3 * q]
            a = row_items[3 * q + 1]
            b = row_items[3 * q + 2]
            r0 = row_ptr[i]
            h = row_ptr[i + 1] - r0
            k0 = krow_ptr[i]
            kc = krow_ptr[i + 1] - k0
            # (kc == 0: a tile row of rank 0 everywhere; the kernel writes zeros)
            _nn(U + u_off[i] + a, kc, b - a, h, yu + k0, K, Y + r0 + a, m, s, pf)
    ws_trace_end3(tr, n_col_items + nb2 + n_row_items, tt0, n_col_items, n_col_items + nb2)
    ws_part_queues_free(q1, &one1)
    ws_part_queues_free(q2, &one2)
    ws_part_queues_free(q3, &one3)


cdef void _adjoint(const value_t* U, const value_t* V, const int64_t* row_ptr,
                   const int64_t* col_ptr, const int64_t* u_off, const int64_t* v_off,
                   const int64_t* krow_ptr, const int64_t* kcol_ptr, const int64_t* perm,
                   Py_ssize_t K, const value_t* Y, Py_ssize_t m, value_t* X, Py_ssize_t n,
                   value_t* yv, value_t* yu, Py_ssize_t s,
                   const int64_t* row_items, Py_ssize_t n_row_items,
                   const int64_t* col_items, Py_ssize_t n_col_items,
                   const int64_t* cum1, const int64_t* cum3, int n_threads,
                   int pf) noexcept nogil:
    """X = A^H Y (see tlr_rmatmat), on the arrays' data: Y (s, m), X (s, n), yv/yu (s, K)."""
    cdef Py_ssize_t a, b, i, j, c, p, c0, k0, kc, r0, h, p0, p1
    cdef Py_ssize_t B2 = _shuffle_block(K, n_threads), nb2 = (K + B2 - 1) // B2
    cdef ws_part_queue one1, one2, one3
    cdef int64_t n1, n2, n3, at, left, q, tid = 0, ts = 0, tt0 = 0
    cdef ws_part_queue* q2 = ws_part_queues(nb2, n_threads, &one2, &n2)
    cdef ws_part_queue* q1 = ws_part_queues_by_work(n_row_items, n_threads, cum1, &one1, &n1)
    cdef ws_part_queue* q3 = ws_part_queues_by_work(n_col_items, n_threads, cum3, &one3, &n3)
    cdef int64_t* tr = ws_trace_begin(n_row_items + nb2 + n_col_items, &tt0)
    cdef int64_t* tr2 = ws_trace_shift(tr, n_row_items)
    cdef int64_t* tr3 = ws_trace_shift(tr, n_row_items + nb2)
    with parallel(num_threads=n_threads):  # (one team, queues and trace, as in _forward)
        # Phase 1: per tile row, yu_i = Us_i^H y_i: dot products over the
        # contiguous rows of Us_i.T (the rows the forward phase 3 reads).
        tid = threadid()
        at, left, q, ts = tid % n1, n1, -1, 0
        while True:
            q = ws_part_step(q1, n1, &at, &left, tr, tt0, q, &ts, tid)
            if q < 0:
                break
            i = row_items[3 * q]
            a = row_items[3 * q + 1]
            b = row_items[3 * q + 2]
            r0 = row_ptr[i]
            h = row_ptr[i + 1] - r0
            k0 = krow_ptr[i]
            _cn(U + u_off[i] + a * h, b - a, h, Y + r0, m, yu + k0 + a, K, s, pf)
        wsesparse_barrier()
        # Phase 2: inverse reshuffle (perm is a bijection, so no write conflicts).
        at, left, q, ts = tid % n2, n2, -1, 0
        while True:
            q = ws_part_step(q2, n2, &at, &left, tr2, tt0, q, &ts, tid)
            if q < 0:
                break
            p0 = q * B2
            p1 = min(p0 + B2, K)
            for c in range(s):
                for p in range(p0, p1):
                    yv[c * K + perm[p]] = yu[c * K + p]
        wsesparse_barrier()
        # Phase 3: per tile column, x_j = conj(Vs_j) yv_j: dot products over the
        # contiguous rows of Vs_j (the rows the forward phase 1 reads).
        at, left, q, ts = tid % n3, n3, -1, 0
        while True:
            q = ws_part_step(q3, n3, &at, &left, tr3, tt0, q, &ts, tid)
            if q < 0:
                break
            j = col_items[3 * q]
            a = col_items[3 * q + 1]
            b = col_items[3 * q + 2]
            c0 = col_ptr[j]
            k0 = kcol_ptr[j]
            kc = kcol_ptr[j + 1] - k0
            # (kc == 0: dot products of length 0, the kernel writes zeros)
            _cn(V + v_off[j] + a * kc, b - a, kc, yv + k0, K, X + c0 + a, n, s, pf)
    ws_trace_end3(tr, n_row_items + nb2 + n_col_items, tt0, n_row_items, n_row_items + nb2)
    ws_part_queues_free(q1, &one1)
    ws_part_queues_free(q2, &one2)
    ws_part_queues_free(q3, &one3)


cdef void _product(bint adjoint, const value_t* U, const value_t* V, const int64_t** ptrs,
                   const int64_t* cum1, const int64_t* cum3, Py_ssize_t K, const value_t* inp,
                   Py_ssize_t n_in, value_t* outp, Py_ssize_t n_out, value_t* yv, value_t* yu,
                   Py_ssize_t s, Py_ssize_t n1, Py_ssize_t n3, int n_threads,
                   int pf) noexcept nogil:
    if adjoint:
        _adjoint(U, V, ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], K, inp,
                 n_in, outp, n_out, yv, yu, s, ptrs[7], n1, ptrs[8], n3, cum1, cum3,
                 n_threads, pf)
    else:
        _forward(U, V, ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], K, inp,
                 n_in, outp, n_out, yv, yu, s, ptrs[7], n1, ptrs[8], n3, cum1, cum3,
                 n_threads, pf)


cdef int _run(bint adjoint, int vt, const void* u, const void* v, const int64_t** ptrs,
              const int64_t* cum1, const int64_t* cum3, Py_ssize_t K, Py_ssize_t n1,
              Py_ssize_t n3, const void* x, Py_ssize_t n_in, void* y, Py_ssize_t n_out,
              Py_ssize_t s, int n_threads, int pf) except -1:
    """The product on checked data: ``ptrs`` the seven index arrays then the first and last
    phase's items (n1, n3 of them), ``cum1``/``cum3`` their running work (``_phase_cum``, or
    NULL: queues by count), ``x`` (s, n_in), ``y`` (s, n_out). The two (s, K) work arrays yv,
    yu come from malloc (two numpy arrays cost about 1 us of a 60 us call: docs/tuning.md,
    "The call")."""
    if s == 0:
        return 0
    cdef Py_ssize_t itemsize = (4 if vt == cnp.NPY_FLOAT32 else
                                16 if vt == cnp.NPY_COMPLEX128 else 8)
    if K and s > (PY_SSIZE_T_MAX // 2) // (K * itemsize):
        raise MemoryError(f"the two work arrays of {s} x {K} values are too large")
    cdef size_t work = <size_t>(s * K * itemsize)
    cdef char* owned = <char*>malloc(2 * work if work else 1)
    if owned == NULL:
        raise MemoryError(f"no memory for the two work arrays of {s} x {K} values")
    cdef void* wv = owned
    cdef void* wu = owned + work
    with nogil:
        if vt == cnp.NPY_FLOAT32:
            _product(adjoint, <const float*>u, <const float*>v, ptrs, cum1, cum3, K,
                     <const float*>x, n_in, <float*>y, n_out, <float*>wv, <float*>wu, s, n1,
                     n3, n_threads, pf)
        elif vt == cnp.NPY_FLOAT64:
            _product(adjoint, <const double*>u, <const double*>v, ptrs, cum1, cum3, K,
                     <const double*>x, n_in, <double*>y, n_out, <double*>wv, <double*>wu, s,
                     n1, n3, n_threads, pf)
        elif vt == cnp.NPY_COMPLEX64:
            _product(adjoint, <const float complex*>u, <const float complex*>v, ptrs, cum1,
                     cum3, K, <const float complex*>x, n_in, <float complex*>y, n_out,
                     <float complex*>wv, <float complex*>wu, s, n1, n3, n_threads, pf)
        else:
            _product(adjoint, <const double complex*>u, <const double complex*>v, ptrs, cum1,
                     cum3, K, <const double complex*>x, n_in, <double complex*>y, n_out,
                     <double complex*>wv, <double complex*>wu, s, n1, n3, n_threads, pf)
        free(owned)
    return 0


cdef int _level(int prefetch) except -1:
    if prefetch < 0 or prefetch > 2:
        raise ValueError(f"prefetch must be 0, 1 or 2, got {prefetch}")
    return prefetch


def tlr_matmat(cnp.ndarray U not None, cnp.ndarray V not None,
               cnp.ndarray row_ptr not None, cnp.ndarray col_ptr not None,
               cnp.ndarray u_off not None, cnp.ndarray v_off not None,
               cnp.ndarray krow_ptr not None, cnp.ndarray kcol_ptr not None,
               cnp.ndarray perm not None, cnp.ndarray X not None, cnp.ndarray Y not None,
               cnp.ndarray col_items not None, cnp.ndarray row_items not None,
               int n_threads, int prefetch=1):
    """Y = A X for s right-hand sides.

    U, V: the bases (1-D, one kernel dtype); the pointer and offset arrays and ``perm``:
    1-D int64; X: (s, n), Y: (s, m) output (overwritten), all C-contiguous of U's dtype
    (the (s, K) work arrays are allocated here). col_items / row_items: (tile, start, stop)
    int64 rows, the ranges of the outputs of each tile column's phase-1 block (of its kc)
    and each tile row's phase-3 block (of its h), covering them all
    (wsesparse/tlr/_split.py). Types,
    layouts, writeability and the shapes of X and Y are checked here (ValueError, through
    a ``Plan`` of this call); offsets and items were checked by the caller (``TLRMatrix``). prefetch: software prefetch of the bases
    (0 none; 1 for bases from L3: the one-vector kernels, except the forward's rows in
    zmm builds, FORWARD_ROWS_PREFETCH; 2 for bases beyond a third of L3: those too and the
    adjoint's tiles of several vectors). Neither the items nor prefetch changes the result.
    """
    # (a plan for this one call: the checks, pointers and items' work of TLRMatrix's; OpenMP
    # aborts on num_threads below 1)
    Plan(False, U, V, (row_ptr, col_ptr, u_off, v_off, krow_ptr, kcol_ptr, perm), col_items,
         row_items, n_threads if n_threads > 1 else 1, prefetch, 0)(X, Y)


def tlr_rmatmat(cnp.ndarray U not None, cnp.ndarray V not None,
                cnp.ndarray row_ptr not None, cnp.ndarray col_ptr not None,
                cnp.ndarray u_off not None, cnp.ndarray v_off not None,
                cnp.ndarray krow_ptr not None, cnp.ndarray kcol_ptr not None,
                cnp.ndarray perm not None, cnp.ndarray Y not None, cnp.ndarray X not None,
                cnp.ndarray row_items not None, cnp.ndarray col_items not None,
                int n_threads, int prefetch=1):
    """X = A^H Y for s right-hand sides, reading the same bases in the same order.

    Y: (s, m), X: (s, n) output (overwritten); the other arrays, the work arrays and the
    checks as in ``tlr_matmat``. row_items / col_items: (tile, start,
    stop) ranges of the rows of each tile row's phase-1 block (of its kc) and each tile
    column's phase-3 block (of its w), covering them all; they do not change the result.
    prefetch: as in ``tlr_matmat``; it does not change the result.
    """
    Plan(True, U, V, (row_ptr, col_ptr, u_off, v_off, krow_ptr, kcol_ptr, perm), row_items,
         col_items, n_threads if n_threads > 1 else 1, prefetch, 0)(Y, X)


cdef class Plan:
    """``Y = A X`` (or ``X = A^H Y``) of one operator, dtype and team size, its arrays
    checked once.

    ``TLRMatrix`` keeps one per thread count, direction and dtype and calls it for every
    product: the checks of the arrays, their pointers and the running work of the items
    (``_phase_cum``) are done here once, not at every call (with :meth:`vector`, 1.2 us less
    a call, 2-core Zen 4: docs/tuning.md, "The call").

    Parameters: ``adjoint``; the bases ``U``, ``V`` and the 7 index arrays as
    ``tlr_matmat`` takes them; the first and last phase's items; ``n_threads`` (the team
    asked for, >= 1) and ``prefetch`` (0, 1 or 2); ``vector_bytes``: :meth:`vector` takes
    products whose input, output and work arrays have fewer bytes than this (larger ones
    go through the caller's allocation check). Types and layouts are checked here
    (ValueError); offsets and items are trusted, as ``tlr_matmat`` trusts them.
    """
    cdef tuple _arrays          # (keeps the data alive)
    cdef const void* _u
    cdef const void* _v
    cdef const int64_t* _ptrs[9]
    cdef int64_t* _cum1
    cdef int64_t* _cum3
    cdef int _vt, _pf
    cdef Py_ssize_t _K, _n1, _n3
    cdef bint _small
    cdef readonly bint adjoint
    cdef readonly int n_threads
    cdef readonly Py_ssize_t n_in, n_out

    def __cinit__(self, bint adjoint, cnp.ndarray U not None, cnp.ndarray V not None,
                  tuple index_arrays not None, cnp.ndarray items1 not None,
                  cnp.ndarray items3 not None, int n_threads, int prefetch,
                  Py_ssize_t vector_bytes):
        self._vt = _check_operator(U, V, index_arrays, items1, items3)
        self._pf = _level(prefetch)
        if n_threads < 1:
            raise ValueError(f"n_threads must be >= 1, got {n_threads}")
        cdef cnp.ndarray row_ptr = index_arrays[0], col_ptr = index_arrays[1]
        if cnp.PyArray_DIM(row_ptr, 0) < 1 or cnp.PyArray_DIM(col_ptr, 0) < 1:
            raise ValueError("row_ptr and col_ptr must not be empty")
        self._arrays = (U, V, index_arrays, items1, items3)
        self._u = cnp.PyArray_DATA(U)
        self._v = cnp.PyArray_DATA(V)
        cdef int q
        for q in range(7):
            self._ptrs[q] = _i64(<cnp.ndarray>index_arrays[q])
        self._ptrs[7] = _i64(items1)
        self._ptrs[8] = _i64(items3)
        self._K = cnp.PyArray_DIM(index_arrays[6], 0)
        self._n1 = cnp.PyArray_DIM(items1, 0)
        self._n3 = cnp.PyArray_DIM(items3, 0)
        cdef Py_ssize_t m = self._ptrs[0][cnp.PyArray_DIM(row_ptr, 0) - 1]
        cdef Py_ssize_t n = self._ptrs[1][cnp.PyArray_DIM(col_ptr, 0) - 1]
        self.adjoint = adjoint
        self.n_threads = n_threads
        self.n_in, self.n_out = (m, n) if adjoint else (n, m)
        self._small = ((self.n_in + self.n_out + 2 * self._K) * cnp.PyArray_ITEMSIZE(U)
                       < vector_bytes)
        # (NULL on one thread, or where malloc fails: queues by count)
        self._cum1 = _phase_cum(adjoint, 1, self._ptrs[7], self._n1, self._ptrs, n_threads)
        self._cum3 = _phase_cum(adjoint, 3, self._ptrs[8], self._n3, self._ptrs, n_threads)

    def __dealloc__(self):
        free(self._cum1)
        free(self._cum3)

    def __call__(self, cnp.ndarray X not None, cnp.ndarray Y not None):
        """Overwrite ``Y`` (s, n_out) with the product of ``X`` (s, n_in): C-contiguous
        arrays of the plan's dtype, ``Y`` writeable."""
        _need(X, self._vt, 2, False, "the input")
        _need(Y, self._vt, 2, True, "the output")
        cdef Py_ssize_t s = cnp.PyArray_DIM(X, 0)
        if (cnp.PyArray_DIM(X, 1) != self.n_in or cnp.PyArray_DIM(Y, 1) != self.n_out
                or cnp.PyArray_DIM(Y, 0) != s):
            raise ValueError(f"need the input (s, {self.n_in}) and the output "
                             f"(s, {self.n_out}), got {(<object>X).shape} and {(<object>Y).shape}")
        self._product(cnp.PyArray_DATA(X), cnp.PyArray_DATA(Y), s)

    def vector(self, x):
        """The product of a 1-D ``x`` as a new 1-D array, or None where ``x`` is not a plain
        ndarray of the plan's dtype (native byte order) and length n_in, or where the
        product's arrays reach ``vector_bytes`` (the caller's general path then checks and
        converts it). Any strides: a strided ``x`` is copied."""
        if (type(x) is not cnp.ndarray or not self._small
                or cnp.PyArray_NDIM(<cnp.ndarray>x) != 1
                or cnp.PyArray_DIM(<cnp.ndarray>x, 0) != self.n_in
                or cnp.PyArray_TYPE(<cnp.ndarray>x) != self._vt
                or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x)):
            return None
        cdef cnp.ndarray xc = cnp.PyArray_GETCONTIGUOUS(<cnp.ndarray>x)
        cdef cnp.npy_intp dim = self.n_out
        cdef cnp.ndarray y = cnp.PyArray_EMPTY(1, &dim, self._vt, 0)
        self._product(cnp.PyArray_DATA(xc), cnp.PyArray_DATA(y), 1)
        return y

    cdef int _product(self, const void* x, void* y, Py_ssize_t s) except -1:
        return _run(self.adjoint, self._vt, self._u, self._v, self._ptrs, self._cum1,
                    self._cum3, self._K, self._n1, self._n3, x, self.n_in, y, self.n_out, s,
                    self.n_threads, self._pf)


@cython.boundscheck(False)
@cython.wraparound(False)
def stream_triad(double[::1] a, const double[::1] b, const double[::1] c, double scalar,
                 int n_threads):
    """STREAM triad ``a = b + scalar * c`` (benchmarks compare TLR-MVM bandwidth to it).

    All three arrays have the same length; counts 24 bytes per element.
    """
    if n_threads < 1:  # (OpenMP aborts on num_threads below 1)
        n_threads = 1
    cdef Py_ssize_t i, n = a.shape[0]
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="static"):
            a[i] = b[i] + scalar * c[i]


@cython.boundscheck(False)
@cython.wraparound(False)
def stream_read(const unsigned long long[::1] a, int n_threads):
    """The sum of ``a`` (mod 2**64), read once by ``n_threads`` OpenMP threads: the rate at
    which the caches deliver bytes that a product reads, for a buffer of their size
    (``wsesparse bench --tlr`` compares the cache-resident TLR-MVM with it). An integer
    sum, so that the compiler vectorizes it and the loads, not the adds, set the pace.
    """
    if n_threads < 1:  # (OpenMP aborts on num_threads below 1)
        n_threads = 1
    cdef Py_ssize_t i, n = a.shape[0]
    cdef unsigned long long s = 0
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="static"):
            s += a[i]
    return s
