# cython: language_level=3
"""Sparse x dense products as one AXPY per nonzero (CSR operand): Y = A @ X
(csr_spmm), y = A @ x (csr_spmv), and the row partitions they take.

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
from cython.parallel cimport prange, threadid
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from _codes cimport WS_CSR_BAD_INDEX, WS_CSR_OK
from _csr_check cimport (PARALLEL_INDPTR_ROWS as _PARALLEL_INDPTR_ROWS, _check, _csr_check,
                         _out_of_range)
from _operands cimport _ROW_COST, _bounds_into, _index_type, _parts, _value_type
from _tiles cimport *
from _types cimport index_t, real_t, value_t

cnp.import_array()

from _part_queues cimport (WS_PARTS_SHARED, ws_part_count, ws_part_queue, ws_part_queues,
                           ws_part_queues_free)

# Whether the row parts go to the threads from one shared queue (-DWS_PARTS_SHARED=1, an A/B
# switch) instead of a queue per thread (_part_queues.h).
PARTS_SHARED = bool(WS_PARTS_SHARED)

from _part_trace cimport (WS_TRACE_HEAD, ws_part_step, ws_trace_arm, ws_trace_begin,
                          ws_trace_end, ws_trace_one)

include "_part_trace.pxi"


def part_takes(Py_ssize_t n_parts, int n_threads, Py_ssize_t spin=0):
    """One pass of the part queues of the SpMV and SpMM sweeps (_part_queues.h) over
    ``n_parts`` parts on ``n_threads`` threads, each part a loop of ``spin`` steps: the
    sweeps' own loop (``ws_part_step``, untraced) around a count instead of the rows.

    Returns ``(takes, taker)``, int64 arrays of ``n_parts``: how many times each part was
    taken (1 each, or the sweeps would skip or repeat rows) and which team thread took it
    last. With every thread on a core of its own, thread ``t`` takes the parts of queue
    ``t``, ``n_parts * t // n_threads`` to ``n_parts * (t + 1) // n_threads``; with one
    thread, thread 0 takes them all.
    """
    if n_parts < 0 or n_threads < 1 or spin < 0:
        raise ValueError("n_parts and spin must be >= 0 and n_threads >= 1")
    cdef cnp.ndarray takes = cnp.PyArray_ZEROS(1, [n_parts], cnp.NPY_INT64, 0)
    cdef cnp.ndarray taker = cnp.PyArray_ZEROS(1, [n_parts], cnp.NPY_INT64, 0)
    cdef int64_t* tk = <int64_t*>cnp.PyArray_DATA(takes)
    cdef int64_t* who = <int64_t*>cnp.PyArray_DATA(taker)
    cdef ws_part_queue one
    cdef ws_part_queue* q
    cdef int64_t n_queues, at, left, part, ts
    cdef Py_ssize_t t, k
    cdef volatile double sink = 0.0
    with nogil:
        q = ws_part_queues(n_parts, n_threads, &one, &n_queues)
        for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
            at, left, part, ts = t % n_queues, n_queues, -1, 0
            while True:
                part = ws_part_step(q, n_queues, &at, &left, NULL, 0, part, &ts, threadid())
                if part < 0:
                    break
                ws_part_count(tk + part)
                who[part] = threadid()
                for k in range(spin):
                    sink = sink + 1.0
        ws_part_queues_free(q, &one)
    return takes, taker


cdef extern from "_team_wake.h" nogil:
    long long ws_wake_region, ws_wake_count
    void ws_wake_arm()
    long long ws_wake_begin()
    void ws_wake_end(long long t0)


def wake_probe_arm():
    """Arm the team-wake probe (_team_wake.h): the next parallel SpMV or SpMM sweep, if it
    starts within a millisecond, records its time. Returns the count of probed regions
    so far: ``wake_probe()`` tells whether that region was probed."""
    ws_wake_arm()
    return ws_wake_count


def wake_probe():
    """``(count, seconds)``: the number of probed regions so far and the last one's time
    (-1.0 before the first)."""
    return ws_wake_count, (-1.0 if ws_wake_region < 0 else ws_wake_region * 1e-9)


# Token tile: the accumulator acc[0:T] of one output row (512 bytes: 8 AVX2 or
# 4 AVX-512 registers' worth) stays in L1/registers while the row's nonzeros
# stream past.
cdef enum:
    TILE_BYTES = 512
    TILE_MAX = 128   # TILE_BYTES // sizeof(float)

# The widest row tile in bytes (a complex tile; 8 AVX-512 vectors of a real one):
# tests pick token counts around it. Panels are sized in 64-byte lines (csr.py).
TILE_BYTES_PER_ROW = TILE_BYTES
# Bytes of one register of the SpMM tiles this build uses: 64 where the compiler
# targets AVX-512F, else 32 (matmul.py keeps dense-dispatch crossovers per width).
TILE_VECTOR_BYTES = _TILE_VBYTES

cdef extern from "_isa.h":
    const char *_WS_ISA "WS_ISA"

# The vector instructions this module was compiled for (_isa.h): "avx2+fma" for a native
# build on an AVX2 machine, "x86-64 baseline (sse2)" for WSESPARSE_NATIVE=0.
KERNEL_ISA = (<bytes>_WS_ISA).decode()
KBLOCK_TILE_VECTORS = _KB_NV

# Per row in balanced_bounds (_operands.pxd).
ROW_COST = _ROW_COST
# Rows from which plain_csr_nnz checks indptr with its n_threads (_csr_check.pxd).
PARALLEL_INDPTR_ROWS = _PARALLEL_INDPTR_ROWS
# One-shot products check the column indices of short rows in blocks of CHECK_BLOCK
# nonzeros (at least one row), one-vector products in blocks of CHECK_ROWS rows where
# those hold at most CHECK_BLOCK nonzeros (_tiles_base.h).
CHECK_BLOCK = _CHECK_BLOCK
CHECK_ROWS = _CHECK_ROWS
# SpMV with x over SPMV_FAR_X_BYTES sums rows shorter than SPMV_FAR_VEC_NNZ in one
# scalar chain (builds without gathers: SPMV_GATHER False; _tiles_spmv.h, _tiles_spmv_lanes.h).
SPMV_FAR_X_BYTES = _SPMV_FAR_X_BYTES
SPMV_FAR_VEC_NNZ = _SPMV_FAR_VEC_NNZ
SPMV_GATHER = bool(_SPMV_GATHER)
# AVX-512 builds that do not gather short rows (SPMV_GATHER False: AMD Zen) still gather
# rows of SPMV_GATHER_ROW_MIN[dtype] nonzeros or more that take the vector steps
# (SPMV_GATHER_LONG; _tiles_spmv_lanes.h) where x has more than SPMV_GATHER_LONG_X_BYTES[dtype]
# bytes, and rows of SPMV_GATHER_NEAR_ROW_MIN[dtype] or more where it has at most that
# (both 0 in other builds); with SPMV_GATHER every such row gathers (0); builds that never
# gather (no AVX-512): None.
SPMV_GATHER_LONG = bool(_SPMV_GATHER_LONG)
SPMV_GATHER_LONG_X_BYTES = ({"float32": _SPMV_GATHER_LONG_X_BYTES_float,
                             "float64": _SPMV_GATHER_LONG_X_BYTES_double}
                            if SPMV_GATHER_LONG else {"float32": 0, "float64": 0})
SPMV_GATHER_NEAR_ROW_MIN = ({"float32": _SPMV_GATHER_NEAR_ROW_MIN_float,
                             "float64": _SPMV_GATHER_NEAR_ROW_MIN_double}
                            if SPMV_GATHER_LONG else {"float32": 0, "float64": 0})
# Where x has at most SPMV_GATHER_LONG_X_BYTES, whether the rule of SPMV_GATHER_NEAR_ROW_MIN
# holds whatever the matrix (True) or only where it stays in cache (False: csr_spmv's
# far_matrix then gathers from SPMV_GATHER_ROW_MIN).
SPMV_GATHER_NEAR_ANY_MATRIX = ({"float32": bool(_SPMV_GATHER_NEAR_ANY_MATRIX_float),
                                "float64": bool(_SPMV_GATHER_NEAR_ANY_MATRIX_double)}
                               if SPMV_GATHER_LONG else {"float32": True, "float64": True})
SPMV_GATHER_ROW_MIN = ({"float32": _SPMV_GATHER_ROW_MIN_float,
                        "float64": _SPMV_GATHER_ROW_MIN_double}
                       if SPMV_GATHER or SPMV_GATHER_LONG else None)
# Builds that gather (SPMV_GATHER) sum a row of fewer than SPMV_VEC_NNZ[dtype] nonzeros by
# scalar loads where the two rows before it have as many (SPMV_RUN_SCALAR; _tiles_spmv.h);
# the other rows of 4 (WS_SPMV_GATHER_NNZ) or more are gathered where x exceeds
# SPMV_GATHER_X_BYTES. False elsewhere.
SPMV_RUN_SCALAR = bool(_SPMV_RUN_SCALAR)
SPMV_VEC_NNZ = {"float32": _SPMV_VEC_NNZ_float, "float64": _SPMV_VEC_NNZ_double}
SPMV_GATHER_X_BYTES = _SPMV_GATHER_X_BYTES
# Whether checked SpMV of int64 matrices streamed from DRAM (csr_spmv's streamed) compares
# each index in the row loops (builds without AVX-512; _tiles_base.h, WS_CHK_IN_LOOPS).
CHECK_IN_LOOPS = bool(_CHK_IN_LOOPS)
# Checked SpMV of matrices streamed from DRAM compares each index in the row loops, whatever
# the index width, where rows average fewer than SPMV_CHK_LOOP_ROWS_MAX nonzeros and either
# SPMV_CHK_LOOP_ROWS_MIN or more or read x at random (AVX-512 builds on AMD; MIN 0: never;
# _tiles_spmv.h).
SPMV_CHK_LOOP_ROWS_MIN = _SPMV_CHK_LOOP_ROWS_MIN
SPMV_CHK_LOOP_ROWS_MAX = _SPMV_CHK_LOOP_ROWS_MAX


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


cdef inline int _spmm_rows_chk(const index_t* indptr, const index_t* indices,
                               const value_t* data, const value_t* X, Py_ssize_t ldx,
                               value_t* Y, Py_ssize_t ldy, Py_ssize_t r0, Py_ssize_t r1,
                               Py_ssize_t nt, int pf, Py_ssize_t n_cols) noexcept nogil:
    """``ws_spmm_rows_chk``: rows of one tile (or of one 32-byte vector where tiles
    are 64 bytes), long on average, checked in the tile loop (0, or 1 for an index
    out of range); -1 for any other rows."""
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
    undone) on the first one out of range, or (rows one tile or one 32-byte vector
    wide, long on average) checks each index in the tile loop. ``kb`` > 0 asks for
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
    """Y[:, 0:width] = A @ X[:, 0:width], each thread taking its own row parts first, then
    what is left of the others' (_part_queues.h).

    Returns the number of parts that found an out-of-range column index
    (only when ``check_cols`` > 0; see ``_spmm_rows_checked``)."""
    cdef Py_ssize_t t
    cdef int bad = 0
    cdef long long t0
    cdef ws_part_queue one
    cdef int64_t n_queues, at, left, part, tt0 = 0, ts = 0
    cdef int64_t* tr = ws_trace_begin(n_parts, &tt0)  # (NULL unless armed: _part_trace.h)
    if n_parts == 1:
        # One part: no parallel region to open (a few microseconds).
        bad = _spmm_rows_checked(indptr, indices, data, X, ldx, Y, ldy, bounds[0], bounds[1],
                                 width, prefetch, check_cols, n_cols, kb)
        ws_trace_one(tr, tt0)
        return bad
    cdef ws_part_queue* q = ws_part_queues(n_parts, n_threads, &one, &n_queues)
    t0 = ws_wake_begin()  # (0 unless _threads armed the probe: see _team_wake.h)
    # (iteration t on thread t: its own queue first, _part_queues.h)
    for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
        # (ts assigned here, so that it is private: ws_part_step writes it through a pointer)
        at, left, part, ts = t % n_queues, n_queues, -1, 0
        while True:
            part = ws_part_step(q, n_queues, &at, &left, tr, tt0, part, &ts, threadid())
            if part < 0:
                break
            bad += _spmm_rows_checked(indptr, indices, data, X, ldx, Y, ldy, bounds[part],
                                      bounds[part + 1], width, prefetch, check_cols, n_cols,
                                      kb)
    if t0 != 0:
        ws_wake_end(t0)
    ws_trace_end(tr, n_parts, tt0)
    ws_part_queues_free(q, &one)
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


def csr_spmm(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray data, cnp.ndarray X,
             cnp.ndarray Y, object row_bounds, Py_ssize_t panel, int n_threads,
             bint prefetch, *, Py_ssize_t check_cols=0, bint pack=False, bint stream=False,
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
    rows (worth it when that panel does not fit in L2). Each thread takes the
    same parts first at every call (their rows of A may still be in its cache),
    then what the others left (a thread that lost its core to another process
    does not hold the others up; _part_queues.h); which thread computes a row
    never changes its value.
    ``stream`` asks for non-temporal stores of Y's tile vectors (for a Y too
    big to stay in cache); they are used only where Y's rows and panels start
    on ``TILE_VECTOR_BYTES`` boundaries, and change no value. ``kblock`` > 0
    sums panels one ``KBLOCK_TILE_VECTORS``-vector tile wide (float32/float64)
    by blocks of that many columns of A (``ws_spmm_rows_kb``: the same values,
    bit for bit, with a slice of X that stays in L2); other panels ignore it.

    With ``check_cols`` > 0 (the column count of A, whose ``indptr`` has been
    checked but whose ``indices`` have not), each block of rows has its column
    indices checked just before it is multiplied (rows one tile or one 32-byte
    vector wide and long on average: each index in the tile loop); returns ``CSR_BAD_INDEX`` (4,
    ``csr_check``'s code) if one is out of range, Y then being partly written,
    else 0.
    """
    if cnp.PyArray_NDIM(X) != 2 or cnp.PyArray_NDIM(Y) != 2:
        raise ValueError("X and Y must be 2-D")
    if n_threads < 1:  # (OpenMP aborts on num_threads below 1)
        n_threads = 1
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
        return _csr_check(indptr, indices, check_cols, 1, True) if check_cols > 0 else WS_CSR_OK
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


cdef enum:  # _spmv_rows's mode bits
    _CHECKED = 1
    _HINT = 2  # unchecked: short rows in blocks; checked: the matrix streams from DRAM
    _FAR_MATRIX = 4  # the matrix does not stay in cache (ws_spmv_rows' far_matrix)


cdef inline int _spmv_rows(const index_t* indptr, const index_t* indices,
                           const value_t* data, const value_t* x, value_t* y,
                           Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t n_cols,
                           int check) noexcept nogil:
    """y[r0:r1] = rows r0:r1 of A @ x (x of ``n_cols`` entries). ``check``: bit _CHECKED,
    the column indices are checked against ``n_cols`` on the way (returns 1 on
    the first one out of range, leaving later rows undone); bit _HINT, ws_spmv_rows'
    ``blocks`` (unchecked: short rows in blocks; checked: a matrix streamed from DRAM,
    WS_CHK_IN_LOOPS and WS_SPMV_CHK_LOOP_ROWS_MIN; real values only); bit _FAR_MATRIX,
    its ``far_matrix`` (real values only); 0 plain.
    ``indptr`` must already be valid. (The unchecked kernels get ``n_cols`` too: it
    picks how rows are summed, which must not depend on whether they were checked.)"""
    cdef Py_ssize_t i = r0, j
    cdef bint hint = (check & _HINT) != 0
    cdef bint far_matrix = (check & _FAR_MATRIX) != 0
    if value_t is float:
        if index_t is int32_t:
            if check & _CHECKED:
                return ws_spmv_rows_chk_float_int32_t(indptr, indices, data, x, y, r0, r1,
                                                      n_cols, hint, far_matrix)
            return ws_spmv_rows_float_int32_t(indptr, indices, data, x, y, r0, r1, n_cols,
                                              hint, far_matrix)
        else:
            if check & _CHECKED:
                return ws_spmv_rows_chk_float_int64_t(indptr, indices, data, x, y, r0, r1,
                                                      n_cols, hint, far_matrix)
            return ws_spmv_rows_float_int64_t(indptr, indices, data, x, y, r0, r1, n_cols,
                                              hint, far_matrix)
    elif value_t is double:
        if index_t is int32_t:
            if check & _CHECKED:
                return ws_spmv_rows_chk_double_int32_t(indptr, indices, data, x, y, r0, r1,
                                                       n_cols, hint, far_matrix)
            return ws_spmv_rows_double_int32_t(indptr, indices, data, x, y, r0, r1, n_cols,
                                               hint, far_matrix)
        else:
            if check & _CHECKED:
                return ws_spmv_rows_chk_double_int64_t(indptr, indices, data, x, y, r0, r1,
                                                       n_cols, hint, far_matrix)
            return ws_spmv_rows_double_int64_t(indptr, indices, data, x, y, r0, r1, n_cols,
                                               hint, far_matrix)
    else:
        if not check & _CHECKED:
            _complex_dots(indptr, indices, data, x, y, r0, r1)
            return 0
        # Complex: each block of rows checked just before it is used.
        while i < r1:
            j = _row_block_end(indptr, i, r1)
            if _out_of_range(indices, indptr[i], indptr[j], n_cols):
                return 1
            _complex_dots(indptr, indices, data, x, y, i, j)
            i = j
        return 0


cdef int _spmv_parts(const index_t* indptr, const index_t* indices, const value_t* data,
                     const value_t* x, value_t* y, const int64_t* bounds,
                     Py_ssize_t n_parts, int n_threads, Py_ssize_t n_cols,
                     int check) noexcept nogil:
    cdef Py_ssize_t t
    cdef int bad = 0
    cdef long long t0
    cdef ws_part_queue one
    cdef int64_t n_queues, at, left, part, tt0 = 0, ts = 0
    cdef int64_t* tr = ws_trace_begin(n_parts, &tt0)
    if n_parts == 1:
        bad = _spmv_rows(indptr, indices, data, x, y, bounds[0], bounds[1], n_cols, check)
        ws_trace_one(tr, tt0)
        return bad
    cdef ws_part_queue* q = ws_part_queues(n_parts, n_threads, &one, &n_queues)
    t0 = ws_wake_begin()
    for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
        # (ts assigned here, so that it is private: ws_part_step writes it through a pointer)
        at, left, part, ts = t % n_queues, n_queues, -1, 0
        while True:
            part = ws_part_step(q, n_queues, &at, &left, tr, tt0, part, &ts, threadid())
            if part < 0:
                break
            bad += _spmv_rows(indptr, indices, data, x, y, bounds[part], bounds[part + 1],
                              n_cols, check)
    if t0 != 0:
        ws_wake_end(t0)
    ws_trace_end(tr, n_parts, tt0)
    ws_part_queues_free(q, &one)
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
             cnp.ndarray y, object row_bounds, int n_threads, *, Py_ssize_t check_cols=0,
             bint blocks=False, bint streamed=False, bint far_matrix=False):
    """y = A @ x for CSR ``A`` (n_rows x n_cols); x has n_cols, y n_rows entries.

    ``row_bounds``, ``check_cols`` and the return value as in ``csr_spmm``.
    ``blocks`` (unchecked products only): short rows go in blocks of rows, each
    block's indices prefetched first (``ws_spmv_rows``' ``blocks``; the same sums).
    ``streamed`` (checked products only): the matrix is read from DRAM, so builds without
    AVX-512 check int64 indices of short rows in the row loops (``WS_CHK_IN_LOOPS``), and
    AVX-512 builds on AMD those of rows averaging ``SPMV_CHK_LOOP_ROWS_MIN`` to ``_MAX``
    nonzeros, or fewer that read x at random (the same sums, the same errors).
    ``far_matrix``: the whole matrix does not stay in cache between products, so AVX-512
    builds on AMD gather the float64 rows of ``SPMV_GATHER_ROW_MIN`` nonzeros or more even
    where x has at most ``SPMV_GATHER_LONG_X_BYTES`` (``SPMV_GATHER_NEAR_ANY_MATRIX``):
    other sums, so a caller passes the same for every part of one matrix's product.
    """
    if cnp.PyArray_NDIM(x) != 1 or cnp.PyArray_NDIM(y) != 1:
        raise ValueError("x and y must be 1-D")
    if n_threads < 1:  # (OpenMP aborts on num_threads below 1)
        n_threads = 1
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
    cdef int mode = ((_CHECKED | (_HINT if streamed else 0) if check_cols > 0
                      else (_HINT if blocks else 0)) | (_FAR_MATRIX if far_matrix else 0))
    cdef int64_t* owned = NULL
    cdef Py_ssize_t n_parts
    cdef const int64_t* b = _parts(row_bounds, it, ip, cnp.PyArray_DIM(y, 0), &n_parts, &owned)
    if n_parts <= 0:
        return 0
    with nogil:
        if it == cnp.NPY_INT32:
            bad = _spmv_typed(<int32_t*>ip, <int32_t*>ix, vt, d, xp, yp, b, n_parts, n_threads,
                              n_x, mode)
        else:
            bad = _spmv_typed(<int64_t*>ip, <int64_t*>ix, vt, d, xp, yp, b, n_parts, n_threads,
                              n_x, mode)
        free(owned)
    return WS_CSR_BAD_INDEX if bad else WS_CSR_OK


cdef void _coded_rows(const index_t* indptr, const index_t* indices, const uint8_t* codes,
                      const real_t* table, const real_t* x, real_t* y, Py_ssize_t r0,
                      Py_ssize_t r1) noexcept nogil:
    if real_t is float:
        if index_t is int32_t:
            ws_spmv_coded_rows_float_int32_t(indptr, indices, codes, table, x, y, r0, r1)
        else:
            ws_spmv_coded_rows_float_int64_t(indptr, indices, codes, table, x, y, r0, r1)
    else:
        if index_t is int32_t:
            ws_spmv_coded_rows_double_int32_t(indptr, indices, codes, table, x, y, r0, r1)
        else:
            ws_spmv_coded_rows_double_int64_t(indptr, indices, codes, table, x, y, r0, r1)


cdef void _coded_parts(const index_t* indptr, const index_t* indices, const uint8_t* codes,
                       const real_t* table, const real_t* x, real_t* y,
                       const int64_t* bounds, Py_ssize_t n_parts,
                       int n_threads) noexcept nogil:
    cdef Py_ssize_t t
    cdef ws_part_queue one
    cdef int64_t n_queues, at, left, part, tt0 = 0, ts = 0
    cdef int64_t* tr = ws_trace_begin(n_parts, &tt0)
    if n_parts == 1:
        _coded_rows(indptr, indices, codes, table, x, y, bounds[0], bounds[1])
        ws_trace_one(tr, tt0)
        return
    cdef ws_part_queue* q = ws_part_queues(n_parts, n_threads, &one, &n_queues)
    for t in prange(n_threads, num_threads=n_threads, schedule="static", chunksize=1):
        # (ts assigned here, so that it is private: ws_part_step writes it through a pointer)
        at, left, part, ts = t % n_queues, n_queues, -1, 0
        while True:
            part = ws_part_step(q, n_queues, &at, &left, tr, tt0, part, &ts, threadid())
            if part < 0:
                break
            _coded_rows(indptr, indices, codes, table, x, y, bounds[part], bounds[part + 1])
    ws_trace_end(tr, n_parts, tt0)
    ws_part_queues_free(q, &one)


cdef void _coded_typed(const index_t* ip, const index_t* ix, const uint8_t* codes, int vt,
                       void* table, void* x, void* y, const int64_t* b, Py_ssize_t n_parts,
                       int n_threads) noexcept nogil:
    if vt == cnp.NPY_FLOAT32:
        _coded_parts(ip, ix, codes, <float*>table, <float*>x, <float*>y, b, n_parts, n_threads)
    else:
        _coded_parts(ip, ix, codes, <double*>table, <double*>x, <double*>y, b, n_parts,
                     n_threads)


def csr_spmv_coded(cnp.ndarray indptr, cnp.ndarray indices, cnp.ndarray codes,
                   cnp.ndarray table, cnp.ndarray x, cnp.ndarray y, object row_bounds,
                   int n_threads):
    """y = A @ x for a checked CSR ``A`` whose value ``p`` is ``table[codes[p]]``.

    ``codes``: uint8, at least ``indptr[-1]`` of them; ``table``: the values, float32
    or float64, exactly 256 entries (so that no code reads past it), the dtype of x and
    y; ``row_bounds`` and ``n_threads`` as in ``csr_spmm``. The column indices are not
    checked. Each row is one FMA chain in storage order: the bits of ``csr_spmv`` where
    it sums every row so (``_tiles_spmv_coded.h``).
    """
    if cnp.PyArray_NDIM(x) != 1 or cnp.PyArray_NDIM(y) != 1:
        raise ValueError("x and y must be 1-D")
    if cnp.PyArray_TYPE(table) not in (cnp.NPY_FLOAT32, cnp.NPY_FLOAT64):
        raise TypeError(f"table has dtype {table.dtype}: float32 or float64 only")
    if cnp.PyArray_NDIM(table) != 1 or cnp.PyArray_DIM(table, 0) != 256:
        raise ValueError("table must have 256 entries")
    if not cnp.PyArray_IS_C_CONTIGUOUS(table):
        raise ValueError("table must be C-contiguous")
    cdef int vt = _value_type(table, (x, y))
    if n_threads < 1:
        n_threads = 1
    cdef int it = _index_type(indptr, indices, cnp.PyArray_DIM(y, 0))
    if (cnp.PyArray_TYPE(codes) != cnp.NPY_UINT8 or cnp.PyArray_NDIM(codes) != 1
            or not cnp.PyArray_IS_C_CONTIGUOUS(codes)):
        raise TypeError("codes must be a C-contiguous 1-D uint8 array")
    cdef void* ip = cnp.PyArray_DATA(indptr)
    cdef Py_ssize_t n_rows = cnp.PyArray_DIM(y, 0)
    cdef int64_t nnz = (<int32_t*>ip)[n_rows] if it == cnp.NPY_INT32 else (<int64_t*>ip)[n_rows]
    if cnp.PyArray_DIM(codes, 0) < nnz or cnp.PyArray_DIM(indices, 0) < nnz:
        raise ValueError("codes and indices must have indptr[-1] entries or more")
    cdef void* ix = cnp.PyArray_DATA(indices)
    cdef const uint8_t* cp = <const uint8_t*>cnp.PyArray_DATA(codes)
    cdef void* tp = cnp.PyArray_DATA(table)
    cdef void* xp = cnp.PyArray_DATA(x)
    cdef void* yp = cnp.PyArray_DATA(y)
    cdef int64_t* owned = NULL
    cdef Py_ssize_t n_parts
    cdef const int64_t* b = _parts(row_bounds, it, ip, n_rows, &n_parts, &owned)
    if n_parts <= 0:
        return
    with nogil:
        if it == cnp.NPY_INT32:
            _coded_typed(<int32_t*>ip, <int32_t*>ix, cp, vt, tp, xp, yp, b, n_parts, n_threads)
        else:
            _coded_typed(<int64_t*>ip, <int64_t*>ix, cp, vt, tp, xp, yp, b, n_parts, n_threads)
        free(owned)


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


cdef inline bint _plain(object a, int ndim) noexcept:
    """Whether ``a`` is exactly an ndarray, ``ndim``-D, C-contiguous, aligned, native order."""
    return (cnp.PyArray_CheckExact(a) and cnp.PyArray_NDIM(<cnp.ndarray>a) == ndim
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a))


def plain_csr_nnz(object indptr, object indices, object data, Py_ssize_t n_rows,
                  Py_ssize_t n_cols, int n_threads=1):
    """Stored entries of the CSR arrays of an (n_rows, n_cols) matrix, or -1.

    -1 unless the arrays are what the kernels take as they are (1-D,
    C-contiguous, aligned, native-order ndarrays; indices of one kernel index
    type; values of a kernel dtype), ``n_rows >= 0``, ``n_cols > 0`` and
    ``indptr`` is valid (one entry per row plus one, from 0, nondecreasing,
    ending within ``indices`` and ``data``). The column indices are not checked: a one-shot
    product has the kernel check them (``check_cols``). For ``sparse_matmul``'s
    fast path, which leaves everything else (conversions, error messages) to
    its general path. ``n_threads`` look at an ``indptr`` of at least
    ``PARALLEL_INDPTR_ROWS`` rows.
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
    cdef int code
    with nogil:
        if it == cnp.NPY_INT32:
            code = _check(<int32_t*>ip, n_rows, NULL, n_indices, n_cols, n_threads, False)
        else:
            code = _check(<int64_t*>ip, n_rows, NULL, n_indices, n_cols, n_threads, False)
    if code:
        return -1
    nnz = (<int32_t*>ip)[n_rows] if it == cnp.NPY_INT32 else (<int64_t*>ip)[n_rows]
    return nnz if nnz <= cnp.PyArray_DIM(<cnp.ndarray>data, 0) else -1
