/*
 * SpMV rows: ws_spmv_rows and its checked version (WS_DEFINE_SPMV_ROWS).
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels). Its parts: _tiles_spmv_row.h (rows shorter than
 * WS_SPMV_VEC_NNZ_<T>, one scalar chain each, and the index checks' macros),
 * _tiles_spmv_lanes.h (the vector steps' pieces: x's lanes, index checks 8-32
 * at a time, lane sums, AVX-512 gathers); here the vector rows and the row loops.
 */
#ifndef WSESPARSE_TILES_SPMV_H
#define WSESPARSE_TILES_SPMV_H

#include "_tiles_base.h"
#include "_tiles_spmv_row.h"


/*
 * ws_spmv_rows[_chk]_<T>_<I>(indptr, indices, data, x, y, r0, r1, n_cols, blocks,
 *                            far_matrix):
 *     y[i] = sum over the nonzeros p of row i of data[p] * x[indices[p]]
 * for rows r0 <= i < r1; returns 0, or (_chk only) 1 when an index is out of
 * range, y then being partly written. blocks: see below (plain) and
 * WS_CHK_IN_LOOPS, WS_SPMV_CHK_LOOP_ROWS_MIN (_chk: the matrix streams from
 * DRAM); the same sums either
 * way. far_matrix: the caller says the whole matrix does not stay in cache between
 * products (WS_SPMV_GATHER_NEAR_ANY_MATRIX_<T>, _tiles_spmv_lanes.h: which rows
 * gather, so other sums; the same for every part of a product). Rows of at least
 * WS_SPMV_VEC_NNZ_<T> nonzeros (three float32 vectors' worth) take VL of them per
 * step: their values loaded as one vector, the x[indices[p]] put together lane by
 * lane (scalar loads inserted into a vector, not a gather instruction: gathers are slower
 * on Zen), one vector FMA into one of two accumulators; about 2 loads per
 * nonzero instead of 3 (K = 4096, density 0.1, float32: 1.3x the scalar loop
 * on one thread). The lanes are summed as a tree, the last (< VL) nonzeros in
 * two chains. Shorter rows take ws_spmv_row. float32 rows of 16-23 went the
 * vector way until a C harness (2 threads, AVX2 Zen 3, random rows of
 * Poisson-distributed length) put 24 ahead: mean 16 per row, K = 16384: 4.02
 * -> 4.34 GFLOP/s (1 thread 1.81 -> 2.04), mean 41 and 164: unchanged (+-2
 * %); near the threshold a row's way is a coin toss for the branch
 * predictor. float64 keeps 16 (not measured again; not two of its 4-lane
 * vectors, 8: rows of 8-15 gain little from the vector steps, and parts of
 * short rows then meet a long one less often, see ws_spmv_scalar_rows).
 */
#ifndef WS_SPMV_VEC_NNZ_float
#define WS_SPMV_VEC_NNZ_float 24
#endif
#ifndef WS_SPMV_VEC_NNZ_double
#define WS_SPMV_VEC_NNZ_double 16
#endif
/* WS_VROW_PF_<T>: the element-load rows (ws_spmv_vrow) prefetch the values that many bytes
 * ahead of each step of two vectors (the indices as many elements ahead); 0: none. AMD
 * AVX-512 builds (2-core Zen 4, one-shot and prepared, 1 and 2 threads): float64 rows of
 * 33-49 from DRAM (35-79 MB) 0.81-0.92x the time, 10 MB 0.85-0.97x, rows of 40 in 1 MB
 * 1.03-1.04x; float32 one-shot 1.01-1.25x and prepared 0.92-1.14x, so 0 there; other
 * builds not measured (docs/tuning.md, "Prefetch in the gathered rows", session 46). */
#if defined(__AVX512F__) && WS_SLOW_GATHER
#ifndef WS_VROW_PF_double
#define WS_VROW_PF_double 512
#endif
#endif
#ifndef WS_VROW_PF_float
#define WS_VROW_PF_float 0
#endif
#ifndef WS_VROW_PF_double
#define WS_VROW_PF_double 0
#endif
#if WS_HAVE_VEC
#include "_tiles_spmv_lanes.h"  /* (in builds with vector types; the #if closes below) */
/* ws_spmv_vrow[_chk]_<T>_<I>: ws_spmv_row for rows of at least
 * WS_SPMV_VEC_NNZ_<T> nonzeros, VL of them per step. */
#define WS_DEFINE_SPMV_VROW(T, VT, I, U, CHK, SFX)                                \
WS_SCALAR_LOOP WS_ALWAYS_INLINE static inline T ws_spmv_vrow##SFX##_##T##_##I(    \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    enum { VL = WS_VL_##T };                                                      \
    WS_GDOT_FIRST(T, I, CHK)                                                      \
    WS_CHK_TYPES(U, CHK)                                                          \
    WS_LIMV                                                                       \
    VT a0 = (VT){0}, a1 = (VT){0};                                                \
    (void)lim;                                                                    \
    /* (checked int32 with AVX-512: four steps a check and branch; the same sums) */ \
    if (WS_VROW_CHK32 && ws_chk_ && sizeof(ws_u_) == 4 && VL == 8)                \
        for (; p + 4 * VL <= p1; p += 4 * VL) {                                   \
            if (ws_oor_i32_32((const int32_t *)indices + p, limv))                \
                goto out_of_range;                                                \
            for (int h = 0; h < 4 * VL; h += 2 * VL) {                            \
                a0 = WS_VFMA_##T(*(const VT *)(data + p + h),                     \
                                 WS_XV_##T(x, indices, p + h), a0);               \
                a1 = WS_VFMA_##T(*(const VT *)(data + p + h + VL),                \
                                 WS_XV_##T(x, indices, p + h + VL), a1);          \
            }                                                                     \
        }                                                                         \
    for (; p + 2 * VL <= p1; p += 2 * VL) {                                       \
        if (WS_VROW_PF_##T) /* (a line of each per step) */                       \
            WS_PREFETCH_AHEAD(data, indices, p, WS_VROW_PF_##T, T, I, 64, 64);    \
        if (WS_OORV2(p)) goto out_of_range;                                       \
        a0 = WS_VFMA_##T(*(const VT *)(data + p), WS_XV_##T(x, indices, p), a0);  \
        a1 = WS_VFMA_##T(*(const VT *)(data + p + VL), WS_XV_##T(x, indices, p + VL), a1); \
    }                                                                             \
    if (p + VL <= p1) {                                                           \
        if (WS_OORV1(p)) goto out_of_range;                                       \
        a1 = WS_VFMA_##T(*(const VT *)(data + p), WS_XV_##T(x, indices, p), a1);  \
        p += VL;                                                                  \
    }                                                                             \
    T s = WS_HSUM_##T(a0 + a1), t = 0;                                            \
    for (; p + 2 <= p1; p += 2) {                                                 \
        if (WS_OOR(p) || WS_OOR(p + 1)) goto out_of_range;                        \
        s = WS_FMA_##T(data[p], x[indices[p]], s);                                \
        t = WS_FMA_##T(data[p + 1], x[indices[p + 1]], t);                        \
    }                                                                             \
    if (p < p1) {                                                                 \
        if (WS_OOR(p)) goto out_of_range;                                         \
        s = WS_FMA_##T(data[p], x[indices[p]], s);                                \
    }                                                                             \
    return s + t;                                                                 \
out_of_range:                                                                     \
    *bad = 1;                                                                     \
    return 0;                                                                     \
}
#else
#define WS_DEFINE_SPMV_VROW(T, VT, I, U, CHK, SFX)                                \
WS_SCALAR_LOOP WS_ALWAYS_INLINE static inline T ws_spmv_vrow##SFX##_##T##_##I(    \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    return ws_spmv_row##SFX##_##T##_##I(indices, data, x, p, p1, lim, bad);       \
}
#endif
/* Checked (one-shot) parts of rows averaging fewer than
 * WS_SPMV_CHK_LOOP_NNZ_<T> nonzeros per row are the "short rows" of the SpMV
 * comment above (block pass, then the unchecked product: K = 4096, density
 * 0.001, +0.8 us on a 12 us product where the compares cost +5); the others
 * compare in the loop. The switch sat at WS_SPMV_VEC_NNZ_<T> until a C harness (2
 * threads, K = 16384, Poisson rows, AVX2 Zen 3, checked us, in-loop -> block)
 * showed float64 mean 16 134 -> 98-110, mean 20 148-188 -> 125-135, mean 24
 * 162 both, 28 179 -> 185; float32 mean 24 166 -> 121, 28 176-184 -> 137,
 * 32 195 -> 182, 36 210 -> 207, 41 234 both. */
#ifndef WS_SPMV_CHK_LOOP_NNZ_float
#define WS_SPMV_CHK_LOOP_NNZ_float 40
#endif
#ifndef WS_SPMV_CHK_LOOP_NNZ_double
#define WS_SPMV_CHK_LOOP_NNZ_double 24
#endif
/* WS_SPMV_CHK_LOOP_ROWS_MIN, _MAX (AVX-512 builds without gathers, i.e. AMD Zen): a
 * checked part of short rows that streams from DRAM (ws_spmv_rows_chk's blocks) and
 * averages fewer than MAX nonzeros per row compares each index in its row loop, for
 * either index width, where its rows average MIN or more or its first rows read x at
 * random (ws_spmv_x_at_random); MIN 0: never (other builds decide by index width alone,
 * WS_CHK_IN_LOOPS). 2-core AMD Zen 4, old and new _spmm side by side in one process,
 * new / old time, 1 and 2 threads: lsqr's 200000 x 50000 (11 per row) 0.78-0.89,
 * other rows of 11 (x of 400 kB to 8 MB) 0.73-0.97, random rows of 5-8 0.71-0.96. Rows
 * of 5-9 whose x runs along a band (Poisson 2-D and 3-D, stencils) took mostly 1.1-1.6x
 * the time that way, float64 rows of 21-32 with x beyond L2 (the workflows' Laplacian)
 * 1.03-1.22x, rows of 16 about the same: they keep the block check (docs/tuning.md,
 * "Checks in the row loops with AVX-512"). */
#ifndef WS_SPMV_CHK_LOOP_ROWS_MIN
#if defined(__AVX512F__) && !WS_SPMV_GATHER
#define WS_SPMV_CHK_LOOP_ROWS_MIN 10
#else
#define WS_SPMV_CHK_LOOP_ROWS_MIN 0
#endif
#endif
#ifndef WS_SPMV_CHK_LOOP_ROWS_MAX
#define WS_SPMV_CHK_LOOP_ROWS_MAX 16
#endif
/* ws_spmv_grow[_chk]_<T>_<I>: a row of WS_SPMV_GATHER_ROW_MIN_<T> nonzeros or more in a
 * build that gathers slowly (WS_SPMV_GATHER_LONG), by the gathers, out of line; elsewhere
 * never called. */
#if WS_SPMV_GATHER_LONG
#define WS_DEFINE_SPMV_GROW(T, I, U, CHK, SFX)                                    \
__attribute__((noinline)) static T ws_spmv_grow##SFX##_##T##_##I(                 \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    return ws_gdot_##T##_##I(indices, data, x, p, p1, (uint64_t)lim, CHK, bad);   \
}
#else
#define WS_DEFINE_SPMV_GROW(T, I, U, CHK, SFX)                                    \
WS_MAYBE_UNUSED static inline T ws_spmv_grow##SFX##_##T##_##I(                    \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    return ws_spmv_vrow##SFX##_##T##_##I(indices, data, x, p, p1, lim, bad);      \
}
#endif
/* Builds that gather (WS_SPMV_GATHER: Intel AVX-512) sum a row shorter than
 * WS_SPMV_VEC_NNZ_<T> by scalar loads, not gathers, when the two rows before it have as
 * many nonzeros (runs of one length, as stencils and fixed-degree rows have): the scalar
 * loop's exit branch is then guessed right, and it beat the gathers. Rows of varying
 * length keep the gathers, which need no such branch. The rule reads the rows before a
 * part's first, so a row's way never depends on the partition (the thread count).
 * 16-core Xeon, session 29 (docs/tuning.md, "Intel: scalar loads for runs of one row
 * length"; benchmarks/kernel_ab.py --set rows, prepared, 1 / 16 threads): scalar loads
 * for every row of 4-16 took 0.49-0.95x the gathers' time where all rows had one length,
 * 1.3-2x where the lengths were Poisson-distributed; a rule on one row before gained
 * up to 1.85x on rows of one length (Poisson 2-D 1.11-1.22x, lsqr's 1.18-1.57x) but lost
 * 5-20 % on Poisson-distributed lengths, where about 1 row in 10 matches the one before
 * (1 in 100 matches two). */
#ifndef WS_SPMV_RUN_SCALAR
#define WS_SPMV_RUN_SCALAR WS_SPMV_GATHER
#endif
/* NAME(indptr, indices, data, x, y, r0, r1, lim): rows r0:r1, each through
 * VROW if it has at least vmin nonzeros and is not in a run (WS_SPMV_RUN_SCALAR), else
 * ROW. */
#define WS_DEFINE_SPMV_ROWS_FN(T, I, U, NAME, VROW, ROW, GROW)                    \
WS_SCALAR_LOOP WS_MAYBE_UNUSED static int NAME(                                   \
    const I *indptr, const I *indices, const T *data, const T *x, T *y,           \
    ptrdiff_t r0, ptrdiff_t r1, U lim, ptrdiff_t vmin, ptrdiff_t gmin)            \
{                                                                                 \
    int bad = 0;                                                                  \
    /* (the lengths of the two rows before; -1: none) */                          \
    ptrdiff_t d1 = -1, d2 = -1;                                                   \
    if (WS_SPMV_RUN_SCALAR && r0 > 0)                                             \
        d1 = (ptrdiff_t)(indptr[r0] - indptr[r0 - 1]);                            \
    if (WS_SPMV_RUN_SCALAR && r0 > 1)                                             \
        d2 = (ptrdiff_t)(indptr[r0 - 1] - indptr[r0 - 2]);                        \
    for (ptrdiff_t i = r0; i < r1 && !bad; ++i) {                                 \
        const ptrdiff_t p = indptr[i], p1 = indptr[i + 1], n = p1 - p;            \
        /* (& not &&: one branch, taken about as rarely as runs occur) */         \
        const int run = WS_SPMV_RUN_SCALAR                                        \
            & (n < WS_SPMV_VEC_NNZ_##T) & (n == d1) & (n == d2);                  \
        d2 = d1;                                                                  \
        d1 = n;                                                                   \
        y[i] = (n < vmin) | run ? ROW(indices, data, x, p, p1, lim, &bad)         \
             : __builtin_expect(WS_SPMV_GATHER_LONG && n >= gmin, 0)              \
                 ? GROW(indices, data, x, p, p1, lim, &bad)                        \
                 : VROW(indices, data, x, p, p1, lim, &bad);                       \
    }                                                                             \
    return bad;                                                                   \
}
/* ws_spmv_srow[_chk]_<T>_<I>: one scalar FMA chain in storage order, any length
 * (the same loop as ws_spmv_row's short rows; ws_spmv_row calling it instead
 * gave the same bytes but one-shot float32 Poisson SpMV 1.09-1.10x slower in two
 * A/B runs, so the loop is written twice). When x is larger than
 * WS_SPMV_FAR_X_BYTES (and the build does not gather), rows shorter than
 * WS_SPMV_FAR_VEC_NNZ take it instead of the vector steps: most x loads then
 * miss L2, and the fewer instructions per nonzero keep more rows' loads in
 * flight (the FMA chain's latency hides behind them). In-process A/B, 2-core
 * AMD Zen 3 (512 KiB L2), prepared CSR, about 4 M random nonzeros, rows of
 * Poisson length (mean 6 to 100), vector steps -> one chain: x of 1.6 MB
 * (float64, 200,000 columns) 0.86-0.95x on one thread, 0.87-0.93x on two;
 * 800 kB (float32) 0.85-0.98x for means up to 40, 1.04x at 100 (so rows of 64
 * and more keep the vector steps); 1 MB float64 0.96-0.98x; 512 kB float64
 * 1.03-1.10x at means 20-100, so the switch sits above that. The
 * 200,000-node Laplacian of the workflows (degree 20): 6.16 -> 5.33 ms, scipy
 * 6.84 ms. */
#ifndef WS_SPMV_FAR_X_BYTES
#define WS_SPMV_FAR_X_BYTES (512 * 1024)
#endif
#ifndef WS_SPMV_FAR_VEC_NNZ
#define WS_SPMV_FAR_VEC_NNZ 64
#endif
#define WS_DEFINE_SPMV_SROW(T, I, U, CHK, SFX)                                    \
WS_SCALAR_LOOP static inline T ws_spmv_srow##SFX##_##T##_##I(                     \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    WS_CHK_TYPES(U, CHK)                                                          \
    T s = 0;                                                                      \
    (void)lim;                                                                    \
    for (; p < p1; ++p) {                                                         \
        if (WS_OOR(p)) {                                                          \
            *bad = 1;                                                             \
            return 0;                                                             \
        }                                                                         \
        s = WS_FMA_##T(data[p], x[indices[p]], s);                                \
    }                                                                             \
    return s;                                                                     \
}
/* ws_spmv_x_at_random_<I>(indptr, indices, r0, r1, n_cols): whether the first
 * WS_CHECK_ROWS rows of r0:r1 read x at random rather than along a band: their column
 * indices span more than a quarter of x (unchecked indices: only a decision, the span
 * unsigned so that it cannot overflow; rows without entries: no). */
#define WS_DEFINE_SPMV_X_AT_RANDOM(I)                                             \
WS_MAYBE_UNUSED static int ws_spmv_x_at_random_##I(const I *indptr, const I *indices, \
                                                   ptrdiff_t r0, ptrdiff_t r1,    \
                                                   ptrdiff_t n_cols)              \
{                                                                                 \
    int64_t lo, hi;                                                               \
    const ptrdiff_t r = r1 - r0 < WS_CHECK_ROWS ? r1 : r0 + WS_CHECK_ROWS;        \
    ws_index_span_##I(indices, indptr[r0], indptr[r], &lo, &hi);                  \
    return hi > lo && (uint64_t)hi - (uint64_t)lo > (uint64_t)n_cols / 4;         \
}
WS_DEFINE_SPMV_X_AT_RANDOM(int32_t)
WS_DEFINE_SPMV_X_AT_RANDOM(int64_t)
/* ws_spmv_rows_<T>_<I>(..., blocks) with blocks (unchecked; for _chk see below): parts of
 * short rows go in blocks of ws_row_block_end rows, each block's index lines
 * prefetched just before its product, as the checked version reads them for its
 * check; the same sums. For prepared matrices streamed from DRAM whose rows read
 * x in runs (the host decides; docs/tuning.md, "Prepared short rows in
 * blocks"): Poisson 1000^2 0.67-0.80x the time on one thread, 0.74-0.96x on two;
 * where x is read at random it cost 1-12 %. */
/* Every row of at least vmin nonzeros is summed by ws_spmv_vrow (or
 * ws_spmv_grow from WS_SPMV_GATHER_ROW_MIN_<T>), every shorter one by ws_spmv_row
 * (ws_spmv_srow where x is far: vmin is WS_SPMV_FAR_VEC_NNZ then), and so is a short row
 * in a run of one length (WS_SPMV_RUN_SCALAR, read from the rows before it), whichever rows
 * function (chosen per part, i.e. per thread count) runs it: the rows function only
 * decides whether the long-row code is inlined (vector_rows, far_vector_rows) or
 * called (scalar_rows and far_rows, whose short rows ran 12 % slower beside the
 * inlined copy). Until session 28 a part of long rows took ws_spmv_row for its
 * short rows where x was far, and far_rows ws_spmv_srow: rows of 8-63 then had
 * other bits on another thread count. */
#define WS_DEFINE_SPMV_ROWS(T, VT, I, U, CHK, SFX)                                \
WS_DEFINE_SPMV_ROW(T, I, U, CHK, SFX)                                             \
WS_DEFINE_SPMV_SROW(T, I, U, CHK, SFX)                                            \
WS_DEFINE_SPMV_VROW(T, VT, I, U, CHK, SFX)                                        \
WS_SCALAR_LOOP __attribute__((noinline)) static T ws_spmv_vrow_call##SFX##_##T##_##I( \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    return ws_spmv_vrow##SFX##_##T##_##I(indices, data, x, p, p1, lim, bad);      \
}                                                                                 \
WS_DEFINE_SPMV_GROW(T, I, U, CHK, SFX)                                            \
WS_DEFINE_SPMV_ROWS_FN(T, I, U, ws_spmv_scalar_rows##SFX##_##T##_##I,             \
                       ws_spmv_vrow_call##SFX##_##T##_##I, ws_spmv_row##SFX##_##T##_##I, \
                       ws_spmv_grow##SFX##_##T##_##I)                             \
WS_DEFINE_SPMV_ROWS_FN(T, I, U, ws_spmv_vector_rows##SFX##_##T##_##I,             \
                       ws_spmv_vrow##SFX##_##T##_##I, ws_spmv_row##SFX##_##T##_##I, \
                       ws_spmv_grow##SFX##_##T##_##I)                             \
WS_DEFINE_SPMV_ROWS_FN(T, I, U, ws_spmv_far_rows##SFX##_##T##_##I,                \
                       ws_spmv_vrow_call##SFX##_##T##_##I, ws_spmv_srow##SFX##_##T##_##I, \
                       ws_spmv_grow##SFX##_##T##_##I)                             \
WS_DEFINE_SPMV_ROWS_FN(T, I, U, ws_spmv_far_vector_rows##SFX##_##T##_##I,         \
                       ws_spmv_vrow##SFX##_##T##_##I, ws_spmv_srow##SFX##_##T##_##I, \
                       ws_spmv_grow##SFX##_##T##_##I)                             \
WS_MAYBE_UNUSED static int ws_spmv_rows##SFX##_##T##_##I(                         \
    const I *indptr, const I *indices, const T *data, const T *x, T *y,           \
    ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t n_cols, int blocks, int far_matrix)     \
{                                                                                 \
    const U lim = ws_col_limit_##I(n_cols);                                       \
    const ptrdiff_t x_bytes = n_cols * (ptrdiff_t)sizeof(T);                      \
    const int far = !WS_SPMV_GATHER && x_bytes > WS_SPMV_FAR_X_BYTES;             \
    const ptrdiff_t vmin = WS_SPMV_GATHER && x_bytes > WS_SPMV_GATHER_X_BYTES     \
        ? WS_SPMV_GATHER_NNZ : far ? WS_SPMV_FAR_VEC_NNZ : WS_SPMV_VEC_NNZ_##T;   \
    /* (rows that gather in builds that gather long rows only) */                 \
    const ptrdiff_t gmin = x_bytes > WS_SPMV_GATHER_LONG_X_BYTES_##T              \
            || (!WS_SPMV_GATHER_NEAR_ANY_MATRIX_##T && far_matrix)                \
        ? WS_SPMV_GATHER_ROW_MIN_##T : WS_SPMV_GATHER_NEAR_ROW_MIN_##T;           \
    const ptrdiff_t nnz = indptr[r1] - indptr[r0];                                \
    const int vec = nnz >= vmin * (r1 - r0);                                      \
    /* (far: vmin >= WS_SPMV_CHK_LOOP_NNZ_<T>, so vec parts check in the loop) */ \
    if (vec && (!CHK || nnz >= WS_SPMV_CHK_LOOP_NNZ_##T * (r1 - r0)))             \
        return (far ? ws_spmv_far_vector_rows##SFX##_##T##_##I                    \
                    : ws_spmv_vector_rows##SFX##_##T##_##I)(                      \
            indptr, indices, data, x, y, r0, r1, lim, vmin, gmin);                \
    if (!CHK && !blocks)                                                          \
        return (far ? ws_spmv_far_rows_##T##_##I : ws_spmv_scalar_rows_##T##_##I)( \
            indptr, indices, data, x, y, r0, r1, lim, vmin, gmin);                \
    /* _chk with blocks = 1: the caller says the matrix streams from DRAM. Short    \
     * rows with int64 indices then compare each index in the row loops, where    \
     * WS_CHK_IN_LOOPS (_tiles_base.h) says so: without AVX-512 there is no       \
     * unsigned 64-bit vector max, and the block pass below cost more than it     \
     * saved on such matrices (less on cache-resident ones). int32 indices keep   \
     * the pass there: it also prefetches a banded matrix's indices               \
     * (docs/tuning.md, "Checks"). AVX-512 builds on AMD compare in the loops      \
     * where the rows average WS_SPMV_CHK_LOOP_ROWS_MIN to _MAX nonzeros, or      \
     * fewer than _MAX and read x at random. */                                    \
    if (CHK && blocks && !vec                                                     \
        && ((sizeof(I) == 8 && WS_CHK_IN_LOOPS)                                   \
            || (WS_SPMV_CHK_LOOP_ROWS_MIN > 0                                     \
                && nnz < (ptrdiff_t)WS_SPMV_CHK_LOOP_ROWS_MAX * (r1 - r0)         \
                && (nnz >= (ptrdiff_t)WS_SPMV_CHK_LOOP_ROWS_MIN * (r1 - r0)       \
                    || ws_spmv_x_at_random_##I(indptr, indices, r0, r1, n_cols)))))  \
        return (far ? ws_spmv_far_rows##SFX##_##T##_##I                           \
                    : ws_spmv_scalar_rows##SFX##_##T##_##I)(                      \
            indptr, indices, data, x, y, r0, r1, lim, vmin, gmin);                \
    /* Short rows in blocks of rows, each block's indices read just before its    \
     * product: by the check (see WS_SPMV_CHK_LOOP_NNZ_<T>) or, unchecked, by a   \
     * prefetch of their lines (blocks; a lone long row: its first                \
     * WS_CHECK_BLOCK). */                                                        \
    for (ptrdiff_t i = r0, j; i < r1; i = j) {                                    \
        j = ws_row_block_end_##I(indptr, i, r1);                                  \
        if (CHK) {                                                                \
            if (ws_indices_out_of_range_##I(indices, indptr[i], indptr[j], n_cols)) \
                return 1;                                                         \
        } else {                                                                  \
            const ptrdiff_t p1 = indptr[j] - indptr[i] < WS_CHECK_BLOCK           \
                ? indptr[j] : indptr[i] + WS_CHECK_BLOCK;                         \
            const char *end = (const char *)(indices + p1);                       \
            for (const char *q = (const char *)((uintptr_t)(indices + indptr[i])  \
                                                & ~(uintptr_t)63);                \
                 q < end; q += 64)                                                \
                __builtin_prefetch(q);                                            \
        }                                                                         \
        if (vec)                                                                  \
            (far ? ws_spmv_far_vector_rows_##T##_##I : ws_spmv_vector_rows_##T##_##I)( \
                indptr, indices, data, x, y, i, j, lim, vmin, gmin);              \
        else if (far)                                                             \
            ws_spmv_far_rows_##T##_##I(indptr, indices, data, x, y, i, j, lim, vmin, gmin); \
        else                                                                      \
            ws_spmv_scalar_rows_##T##_##I(indptr, indices, data, x, y, i, j, lim, vmin, gmin); \
    }                                                                             \
    return 0;                                                                     \
}

#endif
