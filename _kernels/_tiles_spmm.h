/*
 * SpMM rows: register tiles, row spans, the last columns, ws_spmm_rows and
 * its checked version (WS_DEFINE_SPMM_ROWS).
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels); moved here verbatim.
 */
#ifndef WSESPARSE_TILES_SPMM_H
#define WSESPARSE_TILES_SPMM_H

#include "_tiles_base.h"

/* Whether index v (of type I) is out of range: not below lim, where negative
 * values count as huge (one unsigned comparison). */
#define WS_UIDX_OOR(v, lim) ((sizeof(v) == 4 ? (uint64_t)(uint32_t)(v) : (uint64_t)(v)) >= (lim))

#if WS_HAVE_VEC

/* Rows of X are visited in the order of a row's column indices, which the
 * hardware prefetcher cannot guess. When the panel of X does not fit in L2,
 * the "_pf" tiles fetch the X row of the nonzero WS_PF_DIST places ahead
 * (within the same row) explicitly; when it fits, the plain tiles save those
 * instructions. */
#ifndef WS_PF_DIST
#define WS_PF_DIST 8
#endif

/* Each of the NV accumulator vectors of a tile depends on the previous
 * nonzero's update, so with few vectors per row the add latency and not the
 * FMA throughput bounds the row. WS_SETS(NV) independent accumulator sets
 * take the nonzeros in turn (set s gets p0 + s, p0 + s + S, ...) and are
 * added in a fixed tree at the end: the summation order depends only on the
 * row, never on the thread count. */
#define WS_SETS_1 4
#define WS_SETS_2 4
#define WS_SETS_4 2
#define WS_SETS_8 1

/* acc[s][0:NV] += data[q] * X[indices[q], 0:NV*VL] (constant s and NV, so the
 * accumulators stay in registers); with PF, also prefetch for q + WS_PF_DIST;
 * with CHK, first return 1 if indices[q] is out of range. */
#define WS_TILE_STEP(T, K, NV, s, q, PF, CHK)                                     \
    {                                                                             \
        if (CHK && WS_UIDX_OOR(indices[q], lim)) return 1;                        \
        const T *x_ = X + (ptrdiff_t)indices[q] * ldx;                            \
        const T w_ = data[q];                                                     \
        const V w = WS_##K##BCAST_##T(w_);                                        \
        if (PF) {                                                                 \
            const char *xp = (const char *)(X + (ptrdiff_t)indices[(q) + WS_PF_DIST] * ldx); \
            for (int c = 0; c < (int)(NV * sizeof(V)); c += 64) __builtin_prefetch(xp + c); \
        }                                                                         \
        _Pragma("GCC unroll 8")                                                   \
        for (int k = 0; k < NV; ++k)                                              \
            acc[s][k] = WS_##K##VFMA_##T(w, *(const V *)(x_ + k * VL), acc[s][k]); \
    }

/* The tiles return 0, or with CHK 1 as soon as a column index is out of range
 * (not below lim; y then not written). */
#define WS_DEFINE_TILE_PF(T, VT, K, I, NV, SUFFIX, PF, CHK)                       \
static inline int ws_tile##SUFFIX##_##T##_##I##_##NV(                             \
    const I *indices, const T *data, ptrdiff_t p0, ptrdiff_t p1,                  \
    const T *X, ptrdiff_t ldx, T *y, int nts, uint64_t lim)                       \
{                                                                                 \
    typedef VT V;                                                                 \
    (void)lim;                                                                    \
    enum { VL = WS_##K##VL_##T, S = WS_SETS_##NV };                               \
    V acc[S][NV];                                                                 \
    _Pragma("GCC unroll 8")                                                       \
    for (int s = 0; s < S; ++s)                                                   \
        _Pragma("GCC unroll 8")                                                   \
        for (int k = 0; k < NV; ++k) acc[s][k] = (V){0};                          \
    ptrdiff_t p = p0;                                                             \
    if (PF)                                                                       \
        for (; p + S + WS_PF_DIST <= p1; p += S) {                                \
            _Pragma("GCC unroll 8")                                               \
            for (int s = 0; s < S; ++s) WS_TILE_STEP(T, K, NV, s, p + s, PF, CHK) \
        }                                                                         \
    for (; p + S <= p1; p += S) {                                                 \
        _Pragma("GCC unroll 8")                                                   \
        for (int s = 0; s < S; ++s) WS_TILE_STEP(T, K, NV, s, p + s, 0, CHK)      \
    }                                                                             \
    /* The last p1 - p < S nonzeros, set by set. */                               \
    _Pragma("GCC unroll 8")                                                       \
    for (int s = 0; s < S - 1; ++s)                                               \
        if (p + s < p1) WS_TILE_STEP(T, K, NV, s, p + s, 0, CHK)                  \
    _Pragma("GCC unroll 8")                                                       \
    for (int k = 0; k < NV; ++k) {                                                \
        V r = acc[0][k];                                                          \
        if (S == 2) r = acc[0][k] + acc[S - 1][k];                                \
        if (S == 4) r = (acc[0][k] + acc[1 % S][k]) + (acc[2 % S][k] + acc[3 % S][k]); \
        if (nts)                                                                  \
            WS_##K##STREAM_##T(y + k * VL, r);                                    \
        else                                                                      \
            *(V *)(y + k * VL) = r;                                               \
    }                                                                             \
    return 0;                                                                     \
}

#else /* portable fallback */

#define WS_DEFINE_TILE_PF(T, VT, K, I, NV, SUFFIX, PF, CHK)                       \
static inline int ws_tile##SUFFIX##_##T##_##I##_##NV(                             \
    const I *indices, const T *data, ptrdiff_t p0, ptrdiff_t p1,                  \
    const T *X, ptrdiff_t ldx, T *y, int nts, uint64_t lim)                       \
{                                                                                 \
    enum { W = NV * WS_##K##VL_##T };                                             \
    T acc[W];                                                                     \
    (void)nts; (void)lim;                                                         \
    for (int t = 0; t < W; ++t) acc[t] = 0;                                       \
    for (ptrdiff_t p = p0; p < p1; ++p) {                                         \
        if (CHK && WS_UIDX_OOR(indices[p], lim)) return 1;                        \
        const T *x = X + (ptrdiff_t)indices[p] * ldx;                             \
        const T w = data[p];                                                      \
        for (int t = 0; t < W; ++t) acc[t] = WS_FMA_##T(w, x[t], acc[t]);         \
    }                                                                             \
    for (int t = 0; t < W; ++t) y[t] = acc[t];                                    \
    return 0;                                                                     \
}
typedef float ws_vf;
typedef double ws_vd;

#endif

/*
 * ws_span[_pf]_<T>_<I>(...): covers y[0 : nt] with as many whole-vector tiles as
 * fit (widest first) and returns how many columns it did; the caller finishes
 * the last (fewer than one vector) columns.
 */
#define WS_DEFINE_TILES(T, VT, I, SUFFIX, PF, CHK)                                \
WS_DEFINE_TILE_PF(T, VT, TILE_, I, 1, SUFFIX, PF, CHK)                            \
WS_DEFINE_TILE_PF(T, VT, TILE_, I, 2, SUFFIX, PF, CHK)                            \
WS_DEFINE_TILE_PF(T, VT, TILE_, I, 4, SUFFIX, PF, CHK)                            \
WS_DEFINE_TILE_PF(T, VT, TILE_, I, 8, SUFFIX, PF, CHK)
#define WS_DEFINE_SPAN(T, VT, I, SUFFIX, PF)                                      \
WS_DEFINE_TILES(T, VT, I, SUFFIX, PF, 0)                                          \
static inline ptrdiff_t ws_span##SUFFIX##_##T##_##I(                              \
    const I *indices, const T *data, ptrdiff_t p0, ptrdiff_t p1,                  \
    const T *X, ptrdiff_t ldx, T *y, ptrdiff_t nt, int nts)                       \
{                                                                                 \
    enum { VL = WS_TILE_VL_##T };                                                 \
    ptrdiff_t t = 0;                                                              \
    for (; t + 8 * VL <= nt; t += 8 * VL)                                         \
        ws_tile##SUFFIX##_##T##_##I##_8(indices, data, p0, p1, X + t, ldx, y + t, nts, 0); \
    if (t + 4 * VL <= nt) {                                                       \
        ws_tile##SUFFIX##_##T##_##I##_4(indices, data, p0, p1, X + t, ldx, y + t, nts, 0); \
        t += 4 * VL;                                                              \
    }                                                                             \
    if (t + 2 * VL <= nt) {                                                       \
        ws_tile##SUFFIX##_##T##_##I##_2(indices, data, p0, p1, X + t, ldx, y + t, nts, 0); \
        t += 2 * VL;                                                              \
    }                                                                             \
    if (t + VL <= nt) {                                                           \
        ws_tile##SUFFIX##_##T##_##I##_1(indices, data, p0, p1, X + t, ldx, y + t, nts, 0); \
        t += VL;                                                                  \
    }                                                                             \
    return t;                                                                     \
}

/*
 * ws_rest_<T>_<I>_<W>(indices, data, p0, p1, X, ldx, y): y[0:W] = the sum
 * over p0 <= p < p1 of data[p] * X[indices[p], 0:W], for the last W (fewer
 * than one vector) columns. W is a compile-time constant so that the
 * accumulators are registers: with a run-time width they lived in memory and
 * N = 4 float32 took 3x the time of N = 8 (K = 4096, density 0.001). C
 * chains per column (nonzero p goes to chain p % C, each summed in stored
 * order, then (c0 + c1) + (c2 + c3)): with one chain a nonzero cost an FMA
 * latency whatever W, and N = 2-7 float32 all took the time of N = 14
 * (docs/tuning.md, "Narrow products"). Four chains where W <= 3, two above
 * (W x C accumulators stay within the 16 vector registers).
 */
/* Nonzero q into the W accumulators a[] of its chain (in ws_rest). */
#define WS_REST_NZ(T, W, a, q)                                                    \
    {                                                                             \
        const T *x_ = X + (ptrdiff_t)indices[q] * ldx;                            \
        const T v_ = data[q];                                                     \
        _Pragma("GCC unroll 8")                                                   \
        for (int c = 0; c < W; ++c) (a)[c] = WS_FMA_##T(v_, x_[c], (a)[c]);      \
    }
#define WS_DEFINE_REST(T, I, W)                                                   \
static inline void ws_rest_##T##_##I##_##W(const I *indices, const T *data,       \
                                           ptrdiff_t p0, ptrdiff_t p1,            \
                                           const T *X, ptrdiff_t ldx, T *y)       \
{                                                                                 \
    enum { C = W <= 3 ? 4 : 2 };                                                  \
    T acc[C][W];                                                                  \
    _Pragma("GCC unroll 4")                                                       \
    for (int k = 0; k < C; ++k) {                                                 \
        _Pragma("GCC unroll 8")                                                   \
        for (int c = 0; c < W; ++c) acc[k][c] = 0;                                \
    }                                                                             \
    ptrdiff_t p = p0;                                                             \
    for (; p + C <= p1; p += C) {                                                 \
        _Pragma("GCC unroll 4")                                                   \
        for (int k = 0; k < C; ++k) WS_REST_NZ(T, W, acc[k], p + k)               \
    }                                                                             \
    /* The last < C nonzeros, chain k for p + k (k a constant once unrolled: */   \
    /* a run-time index would put the accumulators in memory). */                \
    _Pragma("GCC unroll 4")                                                       \
    for (int k = 0; k < C - 1; ++k) {                                             \
        if (p + k < p1) WS_REST_NZ(T, W, acc[k], p + k)                           \
    }                                                                             \
    _Pragma("GCC unroll 8")                                                       \
    for (int c = 0; c < W; ++c)                                                   \
        y[c] = C == 4 ? (acc[0][c] + acc[1][c]) + (acc[2][c] + acc[C - 1][c])     \
                      : acc[0][c] + acc[1][c];                                    \
}

/* Rows exactly one tile wide (nt = NV * VL: N = 8, 16, 32, 64 float32 with
 * 32-byte vectors) go through a row loop of their own, without ws_span's
 * dispatch and ws_rest's switch per row: those cost rows of a few nonzeros up
 * to 40 % (C harness, 2 threads, AVX2 Zen 3, float32 N = 8, Poisson rows: K =
 * 4096 mean 4 13.0 -> 7.8 us, K = 16384 mean 16 168 -> 140, mean 41 56 ->
 * 53, mean 164 unchanged). */
#define WS_TILE_ROWS(T, I, NV, SFX, ON_BAD)                                       \
    if (nt == NV * VL) {                                                          \
        if (pf) {                                                                 \
            for (ptrdiff_t i = r0; i < r1; ++i)                                   \
                if (ws_tile_pf##SFX##_##T##_##I##_##NV(indices, data, indptr[i],  \
                        indptr[i + 1], X, ldx, Y + i * ldy, nts, lim)) ON_BAD;    \
        } else {                                                                  \
            for (ptrdiff_t i = r0; i < r1; ++i)                                   \
                if (ws_tile##SFX##_##T##_##I##_##NV(indices, data, indptr[i],     \
                        indptr[i + 1], X, ldx, Y + i * ldy, nts, lim)) ON_BAD;    \
        }                                                                         \
        goto done;                                                                \
    }

/* One-shot products of rows averaging at least this many nonzeros, one tile
 * wide, compare each column index with the column count in the tile loop
 * (ws_spmm_rows_chk: one compare-and-branch per nonzero, never taken on valid
 * input) instead of checking blocks of them before the product (a pass that
 * waits on memory: the first touch of the index stream). C harness (not
 * committed; 2 threads, AVX2 Zen 3, Poisson rows, the three ways alternated in
 * one process, us unchecked / block / in the loop, two runs): float32 N = 8,
 * K = 4096 mean 410: 778 / 1028 / 799, 741 / 1024 / 781; mean 41: 76 / 90 /
 * 89, 77 / 94 / 89; K = 16384 mean 164: 2245 / 2465 / 2246; mean 48: 518 /
 * 567 / 497; float64 N = 4 K = 4096 mean 410: 842 / 982 / 845, 729 / 916 /
 * 688; N = 8 mean 41: 115 / 123 / 126, 90 / 97 / 93. Other widths keep the
 * block pass: a check in ws_span_rows' tiles would run once per tile. Rows of
 * one 32-byte vector in 64-byte-tile builds (float32 N = 8, float64 N = 4 with
 * AVX-512) check in the half tile's loop (docs/tuning.md, "Checks"). */
#ifndef WS_SPMM_CHK_LOOP_NNZ
#define WS_SPMM_CHK_LOOP_NNZ 32
#endif

/*
 * ws_spmm_rows_<T>_<I>(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf):
 *     Y[i, 0:nt] = sum over the nonzeros p of row i of data[p] * X[indices[p], 0:nt]
 * for rows r0 <= i < r1: whole vectors through the register tiles (with
 * software prefetch if pf & 1, streaming stores if pf & WS_STREAM_Y), with
 * AVX-512 one 32-byte tile for the last 32-63 bytes, the last (fewer than 32
 * bytes) columns through ws_rest. The row
 * loop is in C so that a row with a handful of nonzeros costs no call
 * overhead. Widths of one tile take WS_TILE_ROWS' loops, the others
 * ws_span_rows (out of line; the Python-level timings of N = 2-12 that were
 * measured with it so were unchanged, while C harness builds of those widths
 * moved by up to 25 % either way with the code layout alone).
 */
#define WS_DEFINE_SPMM_ROWS(T, I)                                                 \
WS_DEFINE_SPAN(T, WS_TV_##T, I, , 0)                                              \
WS_DEFINE_SPAN(T, WS_TV_##T, I, _pf, 1)                                           \
WS_DEFINE_TILE_PF(T, WS_V_##T, , I, 1, _half, 0, 0)                               \
WS_DEFINE_REST(T, I, 1)                                                           \
WS_DEFINE_REST(T, I, 2)                                                           \
WS_DEFINE_REST(T, I, 3)                                                           \
WS_DEFINE_REST(T, I, 4)                                                           \
WS_DEFINE_REST(T, I, 5)                                                           \
WS_DEFINE_REST(T, I, 6)                                                           \
WS_DEFINE_REST(T, I, 7)                                                           \
WS_NOINLINE static void ws_span_rows_##T##_##I(const I *indptr, const I *indices,  \
                                   const T *data, const T *X, ptrdiff_t ldx,      \
                                   T *Y, ptrdiff_t ldy, ptrdiff_t r0,             \
                                   ptrdiff_t r1, ptrdiff_t nt, int pf, int nts)   \
{                                                                                 \
    for (ptrdiff_t i = r0; i < r1; ++i) {                                         \
        const ptrdiff_t p0 = indptr[i], p1 = indptr[i + 1];                       \
        T *y = Y + i * ldy;                                                       \
        ptrdiff_t t = pf ? ws_span_pf_##T##_##I(indices, data, p0, p1, X, ldx, y, nt, nts) \
                         : ws_span_##T##_##I(indices, data, p0, p1, X, ldx, y, nt, nts); \
        if (WS_TILE_VBYTES > 32 && nt - t >= WS_VL_##T) {                         \
            ws_tile_half_##T##_##I##_1(indices, data, p0, p1, X + t, ldx, y + t, nts, 0); \
            t += WS_VL_##T;                                                       \
        }                                                                         \
        const T *x = X + t;                                                       \
        switch (nt - t) {  /* 0 <= nt - t < VL <= 8 */                            \
        case 1: ws_rest_##T##_##I##_1(indices, data, p0, p1, x, ldx, y + t); break; \
        case 2: ws_rest_##T##_##I##_2(indices, data, p0, p1, x, ldx, y + t); break; \
        case 3: ws_rest_##T##_##I##_3(indices, data, p0, p1, x, ldx, y + t); break; \
        case 4: ws_rest_##T##_##I##_4(indices, data, p0, p1, x, ldx, y + t); break; \
        case 5: ws_rest_##T##_##I##_5(indices, data, p0, p1, x, ldx, y + t); break; \
        case 6: ws_rest_##T##_##I##_6(indices, data, p0, p1, x, ldx, y + t); break; \
        case 7: ws_rest_##T##_##I##_7(indices, data, p0, p1, x, ldx, y + t); break; \
        default: break;                                                           \
        }                                                                         \
    }                                                                             \
}                                                                                 \
static void ws_spmm_rows_##T##_##I(const I *indptr, const I *indices,             \
                                   const T *data, const T *X, ptrdiff_t ldx,      \
                                   T *Y, ptrdiff_t ldy, ptrdiff_t r0,             \
                                   ptrdiff_t r1, ptrdiff_t nt, int pf)            \
{                                                                                 \
    enum { VL = WS_TILE_VL_##T };                                                 \
    const int nts = pf & WS_STREAM_Y;                                             \
    const uint64_t lim = 0;                                                       \
    pf &= 1;                                                                      \
    WS_TILE_ROWS(T, I, 1, , (void)0)                                              \
    WS_TILE_ROWS(T, I, 2, , (void)0)                                              \
    WS_TILE_ROWS(T, I, 4, , (void)0)                                              \
    WS_TILE_ROWS(T, I, 8, , (void)0)                                              \
    ws_span_rows_##T##_##I(indptr, indices, data, X, ldx, Y, ldy, r0, r1, nt, pf, nts); \
done:                                                                             \
    if (nts)                                                                      \
        WS_SFENCE();                                                              \
}                                                                                 \
WS_DEFINE_TILES(T, WS_TV_##T, I, _chk, 0, 1)                                      \
WS_DEFINE_TILES(T, WS_TV_##T, I, _pf_chk, 1, 1)                                   \
WS_DEFINE_TILE_PF(T, WS_V_##T, , I, 1, _half_chk, 0, 1)                           \
/* ws_spmm_rows_chk_<T>_<I>(..., n_cols): ws_spmm_rows for rows one tile wide */ \
/* (or one 32-byte vector in 64-byte-tile builds) averaging at least */          \
/* WS_SPMM_CHK_LOOP_NNZ nonzeros, each index compared with n_cols first: 0, */   \
/* or 1 at the first out of range; -1 (nothing done) for other rows or widths. */ \
static int ws_spmm_rows_chk_##T##_##I(const I *indptr, const I *indices,          \
                                      const T *data, const T *X, ptrdiff_t ldx,   \
                                      T *Y, ptrdiff_t ldy, ptrdiff_t r0,          \
                                      ptrdiff_t r1, ptrdiff_t nt, int pf,         \
                                      ptrdiff_t n_cols)                           \
{                                                                                 \
    enum { VL = WS_TILE_VL_##T };                                                 \
    const uint64_t lim = ws_col_limit_##I(n_cols);                                \
    if ((ptrdiff_t)(indptr[r1] - indptr[r0]) < WS_SPMM_CHK_LOOP_NNZ * (r1 - r0))  \
        return -1;                                                                \
    const int nts = pf & WS_STREAM_Y;                                             \
    pf &= 1;                                                                      \
    WS_TILE_ROWS(T, I, 1, _chk, return 1)                                         \
    WS_TILE_ROWS(T, I, 2, _chk, return 1)                                         \
    WS_TILE_ROWS(T, I, 4, _chk, return 1)                                         \
    WS_TILE_ROWS(T, I, 8, _chk, return 1)                                         \
    /* Rows one 32-byte vector wide in 64-byte-tile builds: ws_span_rows' */      \
    /* half tile, checked (the same sums as unchecked). */                        \
    if (WS_TILE_VBYTES > 32 && nt == WS_VL_##T) {                                 \
        for (ptrdiff_t i = r0; i < r1; ++i)                                       \
            if (ws_tile_half_chk_##T##_##I##_1(indices, data, indptr[i],          \
                    indptr[i + 1], X, ldx, Y + i * ldy, nts, lim)) return 1;      \
        goto done;                                                                \
    }                                                                             \
    return -1;                                                                    \
done:                                                                             \
    if (nts)                                                                      \
        WS_SFENCE();                                                              \
    return 0;                                                                     \
}

#endif
