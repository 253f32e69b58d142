/*
 * Register-blocked AXPY kernels for the sparse x dense products (_spmm.pyx).
 *
 * ws_spmm_rows_<T>_<I>: rows of Y = A @ X for CSR A. Each output row is cut
 * into tiles of NV vectors (NV = 8, 4, 2, 1; 64-byte vectors with AVX-512,
 * else 32-byte), the tile's accumulators are named vector variables held in
 * registers while the row's nonzeros stream past, and the last (< 32 bytes)
 * columns use scalar accumulators.
 * ws_spmv_rows_<T>_<I>: rows of y = A @ x (vector steps for long rows, with
 * gather instructions on AVX-512; scalar partial sums for short ones).
 * ws_scatter_<T>_<I>: Z = B.T @ U from B's CSR arrays (dense @ CSR without a
 * transpose), one token panel at a time.
 *
 * Every output element is summed in an order fixed by its row alone (never
 * by the thread count). Pointers need no alignment (except for streaming
 * stores, see WS_STREAM_Y). Arguments are validated by the Python layer.
 * Without GCC/Clang vector extensions the tiles are plain loops.
 */
#ifndef WSESPARSE_AXPY_TILES_H
#define WSESPARSE_AXPY_TILES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_csr_check.h"

/* Checked products validate the column indices of this many nonzeros (or of
 * one longer row) just before multiplying them, while they are in cache. */
#ifndef WS_CHECK_BLOCK
#define WS_CHECK_BLOCK 2048
#endif

/* The end of the block of rows from i (before r1) holding about
 * WS_CHECK_BLOCK nonzeros, at least one row: the first j > i with
 * indptr[j] - indptr[i] >= WS_CHECK_BLOCK, or r1. By bisection (a walk row
 * by row cost a short-row product more than the check itself). */
#define WS_DEFINE_BLOCK_END(I)                                                    \
static inline ptrdiff_t ws_block_end_##I(const I *indptr, ptrdiff_t i, ptrdiff_t r1) \
{                                                                                 \
    const ptrdiff_t target = (ptrdiff_t)indptr[i] + WS_CHECK_BLOCK;               \
    ptrdiff_t lo = i + 1, hi = r1;                                                \
    while (lo < hi) {                                                             \
        const ptrdiff_t mid = lo + (hi - lo) / 2;                                 \
        if ((ptrdiff_t)indptr[mid] < target) lo = mid + 1; else hi = mid;         \
    }                                                                             \
    return lo;                                                                    \
}
WS_DEFINE_BLOCK_END(int32_t)
WS_DEFINE_BLOCK_END(int64_t)

#if defined(__GNUC__) || defined(__clang__)
#define WS_MAYBE_UNUSED __attribute__((unused))
#define WS_NOINLINE __attribute__((noinline))
#else
#define WS_MAYBE_UNUSED
#define WS_NOINLINE
#endif

#if defined(__GNUC__) || defined(__clang__)
#define WS_HAVE_VEC 1
typedef float ws_vf __attribute__((vector_size(32), aligned(4)));
typedef double ws_vd __attribute__((vector_size(32), aligned(8)));
#else
#define WS_HAVE_VEC 0
#endif

#define WS_VL_float 8
#define WS_VL_double 4
/* A vector of copies of one value (one vbroadcastss/sd from memory). */
#define WS_BCAST_float(v) ((ws_vf){v, v, v, v, v, v, v, v})
#define WS_BCAST_double(v) ((ws_vd){v, v, v, v})

/* a * b + c. Written out, never left to the compiler's contraction (the
 * extension is built with -ffp-contract=off): whether GCC fuses a multiply
 * and an add depends on the code around it, and it fused the same source
 * line in one inlined copy and not in another, so the same row came out
 * differently from the checked and unchecked SpMV. Fused where the target
 * has FMA instructions, two roundings elsewhere; the same for every row. */
#if defined(__FMA__) && defined(__AVX__) && WS_HAVE_VEC
#include <immintrin.h>
#define WS_FMA_float(a, b, c) __builtin_fmaf((a), (b), (c))
#define WS_FMA_double(a, b, c) __builtin_fma((a), (b), (c))
#define WS_VFMA_float(a, b, c) ((ws_vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define WS_VFMA_double(a, b, c)                                                   \
    ((ws_vd)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#else
#define WS_FMA_float(a, b, c) ((a) * (b) + (c))
#define WS_FMA_double(a, b, c) ((a) * (b) + (c))
#define WS_VFMA_float(a, b, c) ((a) * (b) + (c))
#define WS_VFMA_double(a, b, c) ((a) * (b) + (c))
#endif

/* The SpMM's register tiles (ws_spmm_rows) use the widest vectors the target
 * has: 64-byte AVX-512 vectors where the compiler targets AVX-512F (a tile of
 * 8 of them holds 128 float32 columns in 8 of its 32 registers, and each
 * vector FMA does twice an AVX2 one's work), else the 32-byte ones above; the
 * last (< 64-byte) columns take one 32-byte tile and then ws_rest (masked
 * 64-byte loads there ran N = 8 at half the speed). Kernel A/B, 2 threads,
 * X rows on 64-byte lines, float32, K = 4096, N = 64: density 0.1 106 -> 141
 * GFLOP/s, density 0.01 88 -> 129. Rows off the lines lose most of that (a
 * 64-byte load then touches two lines): the products read X from an aligned
 * copy (_spmm.pyx, _spmm_parts). The other kernels keep 32-byte vectors. */
#if WS_HAVE_VEC && defined(__AVX512F__)
#define WS_TILE_VBYTES 64
typedef float ws_tvf __attribute__((vector_size(64), aligned(4)));
typedef double ws_tvd __attribute__((vector_size(64), aligned(8)));
#define WS_TILE_BCAST_float(v) ((ws_tvf)_mm512_set1_ps(v))
#define WS_TILE_BCAST_double(v) ((ws_tvd)_mm512_set1_pd(v))
#define WS_TILE_VFMA_float(a, b, c) ((ws_tvf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define WS_TILE_VFMA_double(a, b, c)                                              \
    ((ws_tvd)_mm512_fmadd_pd((__m512d)(a), (__m512d)(b), (__m512d)(c)))
#else
#define WS_TILE_VBYTES 32
#define ws_tvf ws_vf
#define ws_tvd ws_vd
#define WS_TILE_BCAST_float WS_BCAST_float
#define WS_TILE_BCAST_double WS_BCAST_double
#define WS_TILE_VFMA_float WS_VFMA_float
#define WS_TILE_VFMA_double WS_VFMA_double
#endif
#define WS_TV_float ws_tvf
#define WS_TV_double ws_tvd

/* Non-temporal (streaming) stores of whole tile vectors, for results too big
 * to stay in cache: they skip reading each line of Y before writing it. Set
 * WS_STREAM_Y in ws_spmm_rows' pf only for Y, ldy and the panel's first
 * column on WS_TILE_VBYTES boundaries (the Python layer checks). */
#define WS_STREAM_Y 2
#if WS_HAVE_VEC && defined(__AVX512F__)
#define WS_TILE_STREAM_float(p, v) _mm512_stream_ps((float *)(p), (__m512)(v))
#define WS_TILE_STREAM_double(p, v) _mm512_stream_pd((double *)(p), (__m512d)(v))
#endif
#if WS_HAVE_VEC && defined(__AVX__)
#include <immintrin.h>
#define WS_STREAM_float(p, v) _mm256_stream_ps((float *)(p), (__m256)(v))
#define WS_STREAM_double(p, v) _mm256_stream_pd((double *)(p), (__m256d)(v))
#define WS_SFENCE() _mm_sfence()
#else
#define WS_STREAM_float(p, v) (*(ws_vf *)(p) = (v))
#define WS_STREAM_double(p, v) (*(ws_vd *)(p) = (v))
#define WS_SFENCE() ((void)0)
#endif
#ifndef WS_TILE_STREAM_float
#define WS_TILE_STREAM_float WS_STREAM_float
#define WS_TILE_STREAM_double WS_STREAM_double
#endif
#define WS_V_float ws_vf
#define WS_V_double ws_vd
#define WS_TILE_VL_float (WS_TILE_VBYTES / 4)
#define WS_TILE_VL_double (WS_TILE_VBYTES / 8)

/* Complex dot products y[i] = sum_p data[p] * x[indices[p]] for rows r0:r1,
 * complex values stored as (re, im) pairs of T. Written with real arithmetic
 * and WS_FMA: with C complex types GCC's complex-multiply vector patterns
 * emitted fmaddsub (fused) in spite of -ffp-contract=off, in the inlined copy
 * of the unchecked SpMV and not in the checked one, so a one-shot and a
 * prepared complex SpMV differed in the last bit. Four partial sums hide the
 * latency; how they are combined is fixed. Kernel A/B against the complex
 * version (K = 4096, 2 threads, density 0.5-0.001): complex64 1.1-3x faster,
 * complex128 0.83-0.99x; accumulating each product computed apart (one FMA
 * and one multiply, then an add) was slower for both. */
#define WS_CMAC(T, re, im, a, b)                                                  \
    do {                                                                          \
        re = WS_FMA_##T((a)[0], (b)[0], re);                                      \
        re = WS_FMA_##T(-(a)[1], (b)[1], re);                                     \
        im = WS_FMA_##T((a)[0], (b)[1], im);                                      \
        im = WS_FMA_##T((a)[1], (b)[0], im);                                      \
    } while (0)
#define WS_DEFINE_CDOTS(T, I)                                                     \
static void ws_cdots_##T##_##I(const I *indptr, const I *indices, const T *data,  \
                               const T *x, T *y, ptrdiff_t r0, ptrdiff_t r1)      \
{                                                                                 \
    for (ptrdiff_t i = r0; i < r1; i++) {                                         \
        T re0 = 0, re1 = 0, re2 = 0, re3 = 0, im0 = 0, im1 = 0, im2 = 0, im3 = 0; \
        ptrdiff_t p = indptr[i];                                                  \
        const ptrdiff_t p1 = indptr[i + 1];                                       \
        for (; p + 4 <= p1; p += 4) {                                             \
            WS_CMAC(T, re0, im0, data + 2 * p, x + 2 * (ptrdiff_t)indices[p]);    \
            WS_CMAC(T, re1, im1, data + 2 * p + 2, x + 2 * (ptrdiff_t)indices[p + 1]); \
            WS_CMAC(T, re2, im2, data + 2 * p + 4, x + 2 * (ptrdiff_t)indices[p + 2]); \
            WS_CMAC(T, re3, im3, data + 2 * p + 6, x + 2 * (ptrdiff_t)indices[p + 3]); \
        }                                                                         \
        for (; p < p1; p++)                                                       \
            WS_CMAC(T, re0, im0, data + 2 * p, x + 2 * (ptrdiff_t)indices[p]);    \
        y[2 * i] = (re0 + re1) + (re2 + re3);                                     \
        y[2 * i + 1] = (im0 + im1) + (im2 + im3);                                 \
    }                                                                             \
}
WS_DEFINE_CDOTS(float, int32_t)
WS_DEFINE_CDOTS(float, int64_t)
WS_DEFINE_CDOTS(double, int32_t)
WS_DEFINE_CDOTS(double, int64_t)

/* ws_cscatter_<T>_<I>(indptr, indices, data, U, ldu, Z, ldz, n_rows, w): the
 * complex ws_scatter (below), with WS_CMAC's operations in WS_CMAC's order,
 * fixed by the source for the same reason as ws_cdots (the checked and
 * unchecked copies must agree). With AVX, VL / 2 complex values per vector:
 * z += d.re * u, then z += (-d.im, d.im) * (u with re/im swapped), lane for
 * lane the same two FMAs as WS_CMAC, so vector and scalar columns agree too.
 * Strides and the panel width count complex values. */
#if defined(__AVX__) && WS_HAVE_VEC
#define WS_CSWAP_float(v) ((ws_vf)_mm256_permute_ps((__m256)(v), 0xB1))
#define WS_CSWAP_double(v) ((ws_vd)_mm256_permute_pd((__m256d)(v), 0x5))
#define WS_CSIGN_float ((ws_vf){-1, 1, -1, 1, -1, 1, -1, 1})
#define WS_CSIGN_double ((ws_vd){-1, 1, -1, 1})
#define WS_CVEC_STEPS(T, VT)                                                      \
    const VT dr = WS_BCAST_##T(d[0]), dis = WS_BCAST_##T(d[1]) * WS_CSIGN_##T;    \
    for (; 2 * t + WS_VL_##T <= 2 * w; t += WS_VL_##T / 2) {                      \
        const VT uv = *(const VT *)(u + 2 * t);                                   \
        VT zv = WS_VFMA_##T(dr, uv, *(const VT *)(z + 2 * t));                    \
        *(VT *)(z + 2 * t) = WS_VFMA_##T(dis, WS_CSWAP_##T(uv), zv);              \
    }
#else
#define WS_CVEC_STEPS(T, VT)
#endif
#define WS_DEFINE_CSCATTER(T, VT, I)                                              \
static void ws_cscatter_##T##_##I(const I *indptr, const I *indices, const T *data, \
                                  const T *U, ptrdiff_t ldu, T *Z, ptrdiff_t ldz, \
                                  ptrdiff_t n_rows, ptrdiff_t w)                  \
{                                                                                 \
    for (ptrdiff_t k = 0; k < n_rows; ++k) {                                      \
        const T *restrict u = U + 2 * k * ldu;                                    \
        const ptrdiff_t p1 = indptr[k + 1];                                       \
        for (ptrdiff_t p = indptr[k]; p < p1; ++p) {                              \
            T *restrict z = Z + 2 * (ptrdiff_t)indices[p] * ldz;                  \
            const T d[2] = {data[2 * p], data[2 * p + 1]};                        \
            ptrdiff_t t = 0;                                                      \
            if (w >= WS_VL_##T / 2) { /* (the vector set-up costs narrow panels) */ \
                WS_CVEC_STEPS(T, VT)                                              \
            }                                                                     \
            for (; t < w; ++t) {                                                  \
                T re = z[2 * t], im = z[2 * t + 1];                               \
                WS_CMAC(T, re, im, d, u + 2 * t);                                 \
                z[2 * t] = re;                                                    \
                z[2 * t + 1] = im;                                                \
            }                                                                     \
        }                                                                         \
    }                                                                             \
}
WS_DEFINE_CSCATTER(float, ws_vf, int32_t)
WS_DEFINE_CSCATTER(float, ws_vf, int64_t)
WS_DEFINE_CSCATTER(double, ws_vd, int32_t)
WS_DEFINE_CSCATTER(double, ws_vd, int64_t)

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
 * than one vector) columns; one chain per column, in stored order. W is a
 * compile-time constant so that the accumulators are registers: with a
 * run-time width they lived in memory and N = 4 float32 took 3x the time of
 * N = 8 (K = 4096, density 0.001).
 */
#define WS_DEFINE_REST(T, I, W)                                                   \
static inline void ws_rest_##T##_##I##_##W(const I *indices, const T *data,       \
                                           ptrdiff_t p0, ptrdiff_t p1,            \
                                           const T *X, ptrdiff_t ldx, T *y)       \
{                                                                                 \
    T acc[W];                                                                     \
    _Pragma("GCC unroll 8")                                                       \
    for (int c = 0; c < W; ++c) acc[c] = 0;                                       \
    for (ptrdiff_t p = p0; p < p1; ++p) {                                         \
        const T *x = X + (ptrdiff_t)indices[p] * ldx;                             \
        const T v = data[p];                                                      \
        _Pragma("GCC unroll 8")                                                   \
        for (int c = 0; c < W; ++c) acc[c] = WS_FMA_##T(v, x[c], acc[c]);         \
    }                                                                             \
    _Pragma("GCC unroll 8")                                                       \
    for (int c = 0; c < W; ++c) y[c] = acc[c];                                    \
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
 * block pass: a check in ws_span_rows' tiles would run once per tile. */
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
/* ws_spmm_rows_chk_<T>_<I>(..., n_cols): ws_spmm_rows for rows one tile wide */ \
/* averaging at least WS_SPMM_CHK_LOOP_NNZ nonzeros, each index compared with */ \
/* n_cols first: 0, or 1 at the first out of range; -1 (nothing done) for */     \
/* other rows or widths. */                                                       \
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
    return -1;                                                                    \
done:                                                                             \
    if (nts)                                                                      \
        WS_SFENCE();                                                              \
    return 0;                                                                     \
}

/*
 * ws_spmm_rows_kb_<T>_<I>(indptr, indices, data, X, ldx, Y, ldy, r0, r1, n_cols,
 *                         kb, pf): ws_spmm_rows for rows one tile of
 * WS_KB_NV vectors wide (nt = WS_KB_NV * WS_TILE_VL_<T>), by blocks of kb
 * columns of A: rows go in groups of WS_KB_ROWS, and for each block of columns
 * every row of the group goes on from where it stopped, through its nonzeros
 * with column indices below the block's end, into its tile (loaded from Y after
 * the first block, stored back after each). The slice of X that a block reads,
 * kb x nt, stays in L2, where a sweep over all K columns (one tile wide: K = 4096,
 * float32, 1 MiB) streams it from L3. The cursor only moves forward, so each
 * row's nonzeros are summed in storage order, as ws_spmm_rows sums them (sorted
 * or not: an index at or beyond the block's end waits for a later block; the
 * last block takes all that remain), and the result is the same bit for bit:
 * one accumulator per vector (WS_SETS_8 = 1), and a tile stored and loaded back
 * is unchanged. Column indices must be valid (checked before). C harness (not
 * committed; 1 thread, AVX2 Zen 3, float32 N = 64, sorted random rows, GFLOP/s
 * all K at once / blocks of 512 or 1024 columns, the two alternated, noisy): K =
 * 4096 density 0.5 12-20 / 21-29; density 0.1 15-24 / 20-27; K = 16384 density
 * 0.5 10-16 / 19-27; density 0.1 12-18 / 21-27.
 */
#define WS_KB_NV 8
#define WS_KB_ROWS 64
#define WS_KB_SIGNATURE(T, I)                                                     \
static void ws_spmm_rows_kb_##T##_##I(const I *indptr, const I *indices,          \
                                      const T *data, const T *X, ptrdiff_t ldx,   \
                                      T *Y, ptrdiff_t ldy, ptrdiff_t r0,          \
                                      ptrdiff_t r1, ptrdiff_t n_cols,             \
                                      ptrdiff_t kb, int pf)
#if WS_HAVE_VEC
#define WS_DEFINE_SPMM_KB(T, I)                                                   \
WS_KB_SIGNATURE(T, I)                                                             \
{                                                                                 \
    typedef WS_TV_##T V;                                                          \
    enum { VL = WS_TILE_VL_##T, NV = WS_KB_NV };                                  \
    ptrdiff_t cur[WS_KB_ROWS];                                                    \
    const ptrdiff_t pend = indptr[r1];                                            \
    pf &= 1; /* (streaming stores: not here) */                                   \
    for (ptrdiff_t i0 = r0; i0 < r1; i0 += WS_KB_ROWS) {                          \
        const ptrdiff_t i1 = i0 + WS_KB_ROWS < r1 ? i0 + WS_KB_ROWS : r1;         \
        for (ptrdiff_t i = i0; i < i1; ++i) cur[i - i0] = indptr[i];              \
        for (ptrdiff_t k0 = 0; k0 < n_cols; k0 += kb) {                           \
            const uint64_t kend = k0 + kb >= n_cols ? UINT64_MAX : (uint64_t)(k0 + kb); \
            for (ptrdiff_t i = i0; i < i1; ++i) {                                 \
                T *y = Y + i * ldy;                                               \
                V acc[NV];                                                        \
                _Pragma("GCC unroll 8")                                           \
                for (int k = 0; k < NV; ++k)                                      \
                    acc[k] = k0 == 0 ? (V){0} : *(const V *)(y + k * VL);         \
                ptrdiff_t p = cur[i - i0];                                        \
                const ptrdiff_t p1 = indptr[i + 1];                               \
                for (; p < p1 && !WS_UIDX_OOR(indices[p], kend); ++p) {           \
                    if (pf && p + WS_PF_DIST < pend) {                            \
                        const char *xp = (const char *)(X + (ptrdiff_t)indices[p + WS_PF_DIST] * ldx); \
                        for (int c = 0; c < (int)(NV * sizeof(V)); c += 64)       \
                            __builtin_prefetch(xp + c);                           \
                    }                                                             \
                    const T *x = X + (ptrdiff_t)indices[p] * ldx;                 \
                    const V w = WS_TILE_BCAST_##T(data[p]);                       \
                    _Pragma("GCC unroll 8")                                       \
                    for (int k = 0; k < NV; ++k)                                  \
                        acc[k] = WS_TILE_VFMA_##T(w, *(const V *)(x + k * VL), acc[k]); \
                }                                                                 \
                cur[i - i0] = p;                                                  \
                _Pragma("GCC unroll 8")                                           \
                for (int k = 0; k < NV; ++k) *(V *)(y + k * VL) = acc[k];         \
            }                                                                     \
        }                                                                         \
    }                                                                             \
}
#else /* the portable tiles are one vector of one value: no blocks */
#define WS_DEFINE_SPMM_KB(T, I)                                                   \
WS_KB_SIGNATURE(T, I)                                                             \
{                                                                                 \
    (void)n_cols; (void)kb;                                                       \
    ws_spmm_rows_##T##_##I(indptr, indices, data, X, ldx, Y, ldy, r0, r1,         \
                           WS_KB_NV * WS_TILE_VL_##T, pf & 1);                    \
}
#endif

/*
 * SpMV. Every function comes twice: plain, and "_chk" for one-shot products
 * whose column indices nobody has checked yet; both sum every row the same
 * way. In parts of long rows the _chk ones compare each index with the
 * column count just before using it (one fused compare-and-branch, never
 * taken on valid input) and stop with *bad = 1 on the first one out of
 * range: a separate pass over all indices before the product cost one-shot
 * SpMV 20-25 % at K = 4096, density 0.1 (the pass is memory-bound, the
 * compares in the loop are nearly free). In parts of short rows the compares
 * cost more than the product's few instructions per row save, so there each
 * block of WS_CHECK_BLOCK nonzeros is checked (vectorized) just before use.
 *
 * ws_spmv_row[_chk]_<T>_<I>(indices, data, x, p0, p1, lim, bad): the sum
 * over p0 <= p < p1 of data[p] * x[indices[p]] for rows shorter than
 * WS_SPMV_VEC_NNZ_<T> (see ws_spmv_rows), in a fixed order. Kept out of the
 * auto-vectorizer (WS_SCALAR_LOOP): it would turn
 * the x[indices[p]] loads into gather instructions, slower than scalar loads
 * on many x86 cores (AMD Zen in particular). GCC does not inline a function
 * with its own optimize attribute into one without, so its callers carry the
 * attribute too.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define WS_SCALAR_LOOP __attribute__((optimize("no-tree-vectorize")))
#else
#define WS_SCALAR_LOOP
#endif
#if defined(__GNUC__) || defined(__clang__)
#define WS_ALWAYS_INLINE __attribute__((always_inline))
#else
#define WS_ALWAYS_INLINE
#endif
/* Index q out of range (only in the _chk functions; ws_u_ is I made unsigned,
 * so one comparison also catches negative indices). Functions using it declare
 * WS_CHK_TYPES(U, CHK) first. */
#define WS_CHK_TYPES(U, CHK) typedef U ws_u_; enum { ws_chk_ = CHK };
#define WS_OOR(q) (ws_chk_ && (ws_u_)indices[q] >= lim)
#define WS_OOR8(q) (WS_OOR(q) || WS_OOR((q) + 1) || WS_OOR((q) + 2) || WS_OOR((q) + 3) || \
                    WS_OOR((q) + 4) || WS_OOR((q) + 5) || WS_OOR((q) + 6) || WS_OOR((q) + 7))
#if WS_HAVE_VEC
/* Rows of fewer than WS_SPMV_HMIN_<T> (8) nonzeros: one scalar chain. Longer
 * ones: 16-byte vectors of H values (4 float32, 2 float64) times their
 * x[indices[p]] (lanes filled by scalar loads), two accumulators, one more
 * 16-byte step if H are left, the last < H scalar. This replaced eight scalar
 * partial sums, the same arrangement as MKL's CSR SpMV kernel (which torch
 * calls, and which ran 16384^2 density 0.001 float32 in 84 us against our
 * 116): fewer loads per nonzero and a tail of at most 3 instead of 7. C
 * harness (not committed; Poisson row lengths, K = 16384, 2 threads, AVX2 Zen
 * 3, nonzeros per ns, old -> new): float32 mean 12 2.36 -> 3.39, 16 2.37 ->
 * 3.65, 24 2.72 -> 3.66, means 4-8 unchanged (2.75, 3.14); float64 mean 16
 * 2.42 -> 2.97 in one run, 2.49 -> 2.46 in the next, means 4-8 unchanged.
 * The vector steps from 4 nonzeros on (HMIN 4) lost at mean 4 (2.78 -> 2.44)
 * and gained less at 16 (2.57). */
typedef float ws_hf __attribute__((vector_size(16), aligned(4)));
typedef double ws_hd __attribute__((vector_size(16), aligned(8)));
#define WS_HV_float ws_hf
#define WS_HV_double ws_hd
#define WS_XH_float(x, ix, p) ((ws_hf){x[ix[p]], x[ix[p + 1]], x[ix[p + 2]], x[ix[p + 3]]})
#define WS_XH_double(x, ix, p) ((ws_hd){x[ix[p]], x[ix[p + 1]]})
#define WS_HSUMH_float(h) (((h)[0] + (h)[2]) + ((h)[1] + (h)[3]))
#define WS_HSUMH_double(h) ((h)[0] + (h)[1])
#if defined(__FMA__) && defined(__AVX__)
#define WS_HFMA_float(a, b, c) ((ws_hf)_mm_fmadd_ps((__m128)(a), (__m128)(b), (__m128)(c)))
#define WS_HFMA_double(a, b, c) ((ws_hd)_mm_fmadd_pd((__m128d)(a), (__m128d)(b), (__m128d)(c)))
#else
#define WS_HFMA_float(a, b, c) ((a) * (b) + (c))
#define WS_HFMA_double(a, b, c) ((a) * (b) + (c))
#endif
#define WS_OORH(q) (H == 4 ? (WS_OOR(q) || WS_OOR((q) + 1) || WS_OOR((q) + 2) ||     \
                              WS_OOR((q) + 3)) : (WS_OOR(q) || WS_OOR((q) + 1)))
#ifndef WS_SPMV_HMIN_float
#define WS_SPMV_HMIN_float 8
#endif
#ifndef WS_SPMV_HMIN_double
#define WS_SPMV_HMIN_double 8
#endif
#define WS_DEFINE_SPMV_ROW(T, I, U, CHK, SFX)                                     \
WS_SCALAR_LOOP static inline T ws_spmv_row##SFX##_##T##_##I(                      \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    typedef WS_HV_##T HV;                                                         \
    enum { H = 16 / sizeof(T) };                                                  \
    WS_CHK_TYPES(U, CHK)                                                          \
    T s = 0;                                                                      \
    (void)lim;                                                                    \
    if (p + WS_SPMV_HMIN_##T > p1) {                                              \
        /* A loop of its own, not the tail loop below: sharing that one cost */   \
        /* rows of ~4 nonzeros 20-50 % (C harness, K = 16384, 2 threads). */      \
        for (; p < p1; ++p) {                                                     \
            if (WS_OOR(p)) goto out_of_range;                                     \
            s = WS_FMA_##T(data[p], x[indices[p]], s);                            \
        }                                                                         \
        return s;                                                                 \
    }                                                                             \
    HV a0 = (HV){0}, a1 = (HV){0};                                                \
    for (; p + 2 * H <= p1; p += 2 * H) {                                         \
        if (WS_OORH(p) || WS_OORH(p + H)) goto out_of_range;                      \
        a0 = WS_HFMA_##T(*(const HV *)(data + p), WS_XH_##T(x, indices, p), a0);  \
        a1 = WS_HFMA_##T(*(const HV *)(data + p + H), WS_XH_##T(x, indices, p + H), a1); \
    }                                                                             \
    if (p + H <= p1) {                                                            \
        if (WS_OORH(p)) goto out_of_range;                                        \
        a0 = WS_HFMA_##T(*(const HV *)(data + p), WS_XH_##T(x, indices, p), a0);  \
        p += H;                                                                   \
    }                                                                             \
    a0 += a1;                                                                     \
    s = WS_HSUMH_##T(a0);                                                         \
    for (; p < p1; ++p) {                                                         \
        if (WS_OOR(p)) goto out_of_range;                                         \
        s = WS_FMA_##T(data[p], x[indices[p]], s);                                \
    }                                                                             \
    return s;                                                                     \
out_of_range:                                                                     \
    *bad = 1;                                                                     \
    return 0;                                                                     \
}
#else /* without vector extensions: eight scalar partial sums hide the add latency */
#define WS_DEFINE_SPMV_ROW(T, I, U, CHK, SFX)                                     \
WS_SCALAR_LOOP static inline T ws_spmv_row##SFX##_##T##_##I(                      \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    WS_CHK_TYPES(U, CHK)                                                          \
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                             \
    (void)lim;                                                                    \
    if (p + 8 > p1) {                                                             \
        /* Short rows: one loop, one loop-exit branch to mispredict; the */       \
        /* out-of-order core overlaps consecutive rows' sums. */                  \
        for (; p < p1; ++p) {                                                     \
            if (WS_OOR(p)) goto out_of_range;                                     \
            s0 = WS_FMA_##T(data[p], x[indices[p]], s0);                          \
        }                                                                         \
        return s0;                                                                \
    }                                                                             \
    /* Longer rows: eight partial sums (the add latency bounds one). */           \
    T s4 = 0, s5 = 0, s6 = 0, s7 = 0;                                             \
    for (; p + 8 <= p1; p += 8) {                                                 \
        if (WS_OOR8(p)) goto out_of_range;                                        \
        s0 = WS_FMA_##T(data[p], x[indices[p]], s0);                              \
        s1 = WS_FMA_##T(data[p + 1], x[indices[p + 1]], s1);                      \
        s2 = WS_FMA_##T(data[p + 2], x[indices[p + 2]], s2);                      \
        s3 = WS_FMA_##T(data[p + 3], x[indices[p + 3]], s3);                      \
        s4 = WS_FMA_##T(data[p + 4], x[indices[p + 4]], s4);                      \
        s5 = WS_FMA_##T(data[p + 5], x[indices[p + 5]], s5);                      \
        s6 = WS_FMA_##T(data[p + 6], x[indices[p + 6]], s6);                      \
        s7 = WS_FMA_##T(data[p + 7], x[indices[p + 7]], s7);                      \
    }                                                                             \
    for (; p < p1; ++p) {                                                         \
        if (WS_OOR(p)) goto out_of_range;                                         \
        s4 = WS_FMA_##T(data[p], x[indices[p]], s4);                              \
    }                                                                             \
    s0 += s4; s1 += s5; s2 += s6; s3 += s7;                                       \
    return (s0 + s1) + (s2 + s3);                                                 \
out_of_range:                                                                     \
    *bad = 1;                                                                     \
    return 0;                                                                     \
}
#endif

/*
 * ws_spmv_rows[_chk]_<T>_<I>(indptr, indices, data, x, y, r0, r1, n_cols):
 *     y[i] = sum over the nonzeros p of row i of data[p] * x[indices[p]]
 * for rows r0 <= i < r1; returns 0, or (_chk only) 1 when an index is out of
 * range, y then being partly written. Rows of at least WS_SPMV_VEC_NNZ_<T>
 * nonzeros (three float32 vectors' worth) take VL of them per step: their values
 * loaded as one vector, the x[indices[p]] put together lane by lane (scalar
 * loads inserted into a vector, not a gather instruction: gathers are slower
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
#if WS_HAVE_VEC
#define WS_XV_float(x, ix, p) ((ws_vf){x[ix[p]], x[ix[p + 1]], x[ix[p + 2]], x[ix[p + 3]], \
                                       x[ix[p + 4]], x[ix[p + 5]], x[ix[p + 6]], x[ix[p + 7]]})
#define WS_XV_double(x, ix, p) ((ws_vd){x[ix[p]], x[ix[p + 1]], x[ix[p + 2]], x[ix[p + 3]]})
#if defined(__AVX2__)
#include <immintrin.h>
/* Whether one of the int32 indices ix[0:16] (ix[0:8]) is out of range:
 * unsigned v >= lim as max(v, lim) == v, 8 at a time, one test and branch
 * (int64 indices take the scalar compares). */
static inline int ws_oor_i32(const int32_t *ix, __m256i lim)  /* ix[0:16] */
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)ix);
    const __m256i b = _mm256_loadu_si256((const __m256i *)(ix + 8));
    const __m256i m = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(a, lim), a),
                                      _mm256_cmpeq_epi32(_mm256_max_epu32(b, lim), b));
    return !_mm256_testz_si256(m, m);
}
static inline int ws_oor_i32_8(const int32_t *ix, __m256i lim)  /* ix[0:8] */
{
    const __m256i a = _mm256_loadu_si256((const __m256i *)ix);
    const __m256i m = _mm256_cmpeq_epi32(_mm256_max_epu32(a, lim), a);
    return !_mm256_testz_si256(m, m);
}
#define WS_OORV2(q) (ws_chk_ && (sizeof(ws_u_) == 4                               \
    ? (VL == 8 ? ws_oor_i32((const int32_t *)indices + (q), limv)                 \
               : ws_oor_i32_8((const int32_t *)indices + (q), limv))              \
    : (WS_OOR_VL(q) || WS_OOR_VL((q) + VL))))
#define WS_OORV1(q) (ws_chk_ && (sizeof(ws_u_) == 4 && VL == 8                    \
    ? ws_oor_i32_8((const int32_t *)indices + (q), limv) : WS_OOR_VL(q)))
#define WS_LIMV __m256i limv = _mm256_set1_epi32((int32_t)lim); (void)limv;
#else
#define WS_OORV2(q) (WS_OOR_VL(q) || WS_OOR_VL((q) + VL))
#define WS_OORV1(q) WS_OOR_VL(q)
#define WS_LIMV
#endif
#define WS_OOR_VL(q) (VL == 8 ? WS_OOR8(q) : (WS_OOR(q) || WS_OOR((q) + 1) ||     \
                                            WS_OOR((q) + 2) || WS_OOR((q) + 3)))
/* Sum of a vector's lanes as a tree: log2(VL) add latencies, not VL. */
typedef float ws_vf4 __attribute__((vector_size(16)));
typedef double ws_vd2 __attribute__((vector_size(16)));
static inline float WS_HSUM_float(ws_vf a)
{
    ws_vf4 h = (ws_vf4){a[0], a[1], a[2], a[3]} + (ws_vf4){a[4], a[5], a[6], a[7]};
    return (h[0] + h[2]) + (h[1] + h[3]);
}
static inline double WS_HSUM_double(ws_vd a)
{
    ws_vd2 h = (ws_vd2){a[0], a[1]} + (ws_vd2){a[2], a[3]};
    return h[0] + h[1];
}
/* With AVX-512, ws_spmv_vrow takes 64 bytes of values per step and their
 * x[indices[p]] with gather instructions (ws_gdot_<T>_<I>; int64 indices the
 * same way, so that they give int32's bits), the last (< 64 bytes) through
 * masked gathers; the lanes are summed by _mm512_reduce_add (a fixed tree).
 * Checked rows compare each step's indices with lim before gathering.
 *
 * ws_gx_<T>_<I>(m, ix, x, lim, chk, oor): x[ix[k]] in the lanes k of mask m
 * (0 elsewhere); with chk, sets *oor and gathers nothing if one of those
 * indices is >= lim (unsigned: negative ones too). */
#if WS_HAVE_VEC && defined(__AVX512F__)
#define WS_SPMV_GATHER 1
static inline ws_tvf ws_gx_float_int32_t(__mmask16 m, const int32_t *ix, const float *x,
                                         uint64_t lim, int chk, int *oor)
{
    const __m512i i = _mm512_maskz_loadu_epi32(m, ix);
    if (chk && _mm512_mask_cmpge_epu32_mask(m, i, _mm512_set1_epi32((int32_t)lim))) {
        *oor = 1;
        return (ws_tvf){0};
    }
    return (ws_tvf)_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, i, x, 4);
}
static inline ws_tvf ws_gx_float_int64_t(__mmask16 m, const int64_t *ix, const float *x,
                                         uint64_t lim, int chk, int *oor)
{
    const __mmask8 lo = (__mmask8)m, hi = (__mmask8)(m >> 8);
    const __m512i i0 = _mm512_maskz_loadu_epi64(lo, ix), i1 = _mm512_maskz_loadu_epi64(hi, ix + 8);
    const __m512i lv = _mm512_set1_epi64((int64_t)lim);
    if (chk && (_mm512_mask_cmpge_epu64_mask(lo, i0, lv) | _mm512_mask_cmpge_epu64_mask(hi, i1, lv))) {
        *oor = 1;
        return (ws_tvf){0};
    }
    const __m256 g0 = _mm512_mask_i64gather_ps(_mm256_setzero_ps(), lo, i0, x, 4);
    const __m256 g1 = _mm512_mask_i64gather_ps(_mm256_setzero_ps(), hi, i1, x, 4);
    return (ws_tvf)_mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(g0)),
                                                       _mm256_castps_pd(g1), 1));
}
static inline ws_tvd ws_gx_double_int32_t(__mmask8 m, const int32_t *ix, const double *x,
                                          uint64_t lim, int chk, int *oor)
{
    const __m256i i = _mm256_maskz_loadu_epi32(m, ix);
    if (chk && _mm256_mask_cmpge_epu32_mask(m, i, _mm256_set1_epi32((int32_t)lim))) {
        *oor = 1;
        return (ws_tvd){0};
    }
    return (ws_tvd)_mm512_mask_i32gather_pd(_mm512_setzero_pd(), m, i, x, 8);
}
static inline ws_tvd ws_gx_double_int64_t(__mmask8 m, const int64_t *ix, const double *x,
                                          uint64_t lim, int chk, int *oor)
{
    const __m512i i = _mm512_maskz_loadu_epi64(m, ix);
    if (chk && _mm512_mask_cmpge_epu64_mask(m, i, _mm512_set1_epi64((int64_t)lim))) {
        *oor = 1;
        return (ws_tvd){0};
    }
    return (ws_tvd)_mm512_mask_i64gather_pd(_mm512_setzero_pd(), m, i, x, 8);
}
#define WS_G_MASK_float __mmask16
#define WS_G_MASK_double __mmask8
#define WS_G_MLOADZ_float(m, p) ((ws_tvf)_mm512_maskz_loadu_ps((m), (p)))
#define WS_G_MLOADZ_double(m, p) ((ws_tvd)_mm512_maskz_loadu_pd((m), (p)))
#define WS_G_REDUCE_float(v) _mm512_reduce_add_ps((__m512)(v))
#define WS_G_REDUCE_double(v) _mm512_reduce_add_pd((__m512d)(v))
#define WS_DEFINE_GDOT(T, I)                                                      \
static inline T ws_gdot_##T##_##I(const I *ix, const T *d, const T *x,            \
                                  ptrdiff_t p, ptrdiff_t p1, uint64_t lim,        \
                                  int chk, int *bad)                              \
{                                                                                 \
    typedef WS_TV_##T V;                                                          \
    typedef WS_G_MASK_##T M;                                                      \
    enum { W = WS_TILE_VL_##T };                                                  \
    const M all = (M)~(M)0;                                                       \
    V a0 = (V){0}, a1 = (V){0};                                                   \
    int oor = 0;                                                                  \
    for (; p + 2 * W <= p1; p += 2 * W) {                                         \
        const V g0 = ws_gx_##T##_##I(all, ix + p, x, lim, chk, &oor);             \
        const V g1 = ws_gx_##T##_##I(all, ix + p + W, x, lim, chk, &oor);         \
        if (chk && oor) goto out_of_range;                                        \
        a0 = WS_TILE_VFMA_##T(WS_G_MLOADZ_##T(all, d + p), g0, a0);               \
        a1 = WS_TILE_VFMA_##T(WS_G_MLOADZ_##T(all, d + p + W), g1, a1);           \
    }                                                                             \
    for (; p < p1; p += W) {                                                      \
        const M m = p1 - p >= W ? all : (M)((1u << (p1 - p)) - 1);                \
        const V g = ws_gx_##T##_##I(m, ix + p, x, lim, chk, &oor);                \
        if (chk && oor) goto out_of_range;                                        \
        a1 = WS_TILE_VFMA_##T(WS_G_MLOADZ_##T(m, d + p), g, a1);                  \
    }                                                                             \
    return WS_G_REDUCE_##T(a0 + a1);                                              \
out_of_range:                                                                     \
    *bad = 1;                                                                     \
    return 0;                                                                     \
}
WS_DEFINE_GDOT(float, int32_t)
WS_DEFINE_GDOT(float, int64_t)
WS_DEFINE_GDOT(double, int32_t)
WS_DEFINE_GDOT(double, int64_t)
#define WS_GDOT_FIRST(T, I, CHK)                                                  \
    return ws_gdot_##T##_##I(indices, data, x, p, p1, (uint64_t)lim, CHK, bad);
#else
#define WS_SPMV_GATHER 0
#define WS_GDOT_FIRST(T, I, CHK)
#endif
/* With the gathers, rows from WS_SPMV_GATHER_NNZ nonzeros on take them once x
 * is larger than WS_SPMV_GATHER_X_BYTES: a gather's loads then miss L1 in
 * parallel where scalar loads queued (K = 16384, float32, 2 threads: 8
 * nonzeros per row 5.0 -> 7.4 GFLOP/s against rows from 8 on, 16 per row 6.5
 * -> 8.0 against rows from 16 on); with x in L1 the scalar loads kept rows
 * below 16 faster (K = 4096, 4 per row: 4.9 vs 3.8). */
#define WS_SPMV_GATHER_NNZ 4
#define WS_SPMV_GATHER_X_BYTES 32768
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
    for (; p + 2 * VL <= p1; p += 2 * VL) {                                       \
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
/* NAME(indptr, indices, data, x, y, r0, r1, lim): rows r0:r1, each through
 * VROW if it has at least vmin nonzeros, else ROW. */
#define WS_DEFINE_SPMV_ROWS_FN(T, I, U, NAME, VROW, ROW)                          \
WS_SCALAR_LOOP WS_MAYBE_UNUSED static int NAME(                                   \
    const I *indptr, const I *indices, const T *data, const T *x, T *y,           \
    ptrdiff_t r0, ptrdiff_t r1, U lim, ptrdiff_t vmin)                            \
{                                                                                 \
    int bad = 0;                                                                  \
    for (ptrdiff_t i = r0; i < r1 && !bad; ++i) {                                 \
        const ptrdiff_t p = indptr[i], p1 = indptr[i + 1];                        \
        y[i] = p1 - p >= vmin ? VROW(indices, data, x, p, p1, lim, &bad)          \
                              : ROW(indices, data, x, p, p1, lim, &bad);          \
    }                                                                             \
    return bad;                                                                   \
}
/* Every row of at least WS_SPMV_VEC_NNZ_<T> nonzeros is summed by
 * ws_spmv_vrow, every shorter one by ws_spmv_row, whichever rows function
 * (chosen per part, i.e. per thread count) runs it: the rows function only
 * decides whether the long-row code is inlined (vector_rows) or called
 * (scalar_rows, whose short rows ran 12 % slower beside the inlined copy). */
#define WS_DEFINE_SPMV_ROWS(T, VT, I, U, CHK, SFX)                                \
WS_DEFINE_SPMV_ROW(T, I, U, CHK, SFX)                                             \
WS_DEFINE_SPMV_VROW(T, VT, I, U, CHK, SFX)                                        \
WS_SCALAR_LOOP __attribute__((noinline)) static T ws_spmv_vrow_call##SFX##_##T##_##I( \
    const I *indices, const T *data, const T *x, ptrdiff_t p, ptrdiff_t p1,       \
    U lim, int *bad)                                                              \
{                                                                                 \
    return ws_spmv_vrow##SFX##_##T##_##I(indices, data, x, p, p1, lim, bad);      \
}                                                                                 \
WS_DEFINE_SPMV_ROWS_FN(T, I, U, ws_spmv_scalar_rows##SFX##_##T##_##I,             \
                       ws_spmv_vrow_call##SFX##_##T##_##I, ws_spmv_row##SFX##_##T##_##I) \
WS_DEFINE_SPMV_ROWS_FN(T, I, U, ws_spmv_vector_rows##SFX##_##T##_##I,             \
                       ws_spmv_vrow##SFX##_##T##_##I, ws_spmv_row##SFX##_##T##_##I) \
static int ws_spmv_rows##SFX##_##T##_##I(const I *indptr, const I *indices,       \
                                         const T *data, const T *x, T *y,         \
                                         ptrdiff_t r0, ptrdiff_t r1,              \
                                         ptrdiff_t n_cols)                        \
{                                                                                 \
    const U lim = ws_col_limit_##I(n_cols);                                       \
    const ptrdiff_t vmin = WS_SPMV_GATHER                                         \
        && n_cols * (ptrdiff_t)sizeof(T) > WS_SPMV_GATHER_X_BYTES                 \
        ? WS_SPMV_GATHER_NNZ : WS_SPMV_VEC_NNZ_##T;                               \
    const ptrdiff_t nnz = indptr[r1] - indptr[r0];                                \
    const int vec = nnz >= vmin * (r1 - r0);                                      \
    if (vec && (!CHK || nnz >= WS_SPMV_CHK_LOOP_NNZ_##T * (r1 - r0)))             \
        return ws_spmv_vector_rows##SFX##_##T##_##I(indptr, indices, data, x, y, r0, r1, lim, vmin); \
    if (!CHK)                                                                     \
        return ws_spmv_scalar_rows_##T##_##I(indptr, indices, data, x, y, r0, r1, lim, vmin); \
    /* Short rows: see WS_SPMV_CHK_LOOP_NNZ_<T>. */                               \
    for (ptrdiff_t i = r0, j; i < r1; i = j) {                                    \
        j = ws_block_end_##I(indptr, i, r1);                                      \
        if (ws_indices_out_of_range_##I(indices, indptr[i], indptr[j], n_cols))   \
            return 1;                                                             \
        if (vec)                                                                  \
            ws_spmv_vector_rows_##T##_##I(indptr, indices, data, x, y, i, j, lim, vmin); \
        else                                                                      \
            ws_spmv_scalar_rows_##T##_##I(indptr, indices, data, x, y, i, j, lim, vmin); \
    }                                                                             \
    return 0;                                                                     \
}

/*
 * Transposed products (dense @ CSR, or a CSC operand @ dense): Z = B.T @ U for
 * the CSR arrays of B, by scatter, without transposing B.
 *
 * ws_scatter_<T>_<I>_<NV>(indptr, indices, data, U, ldu, Z, ldz, n_rows, rem):
 *     Z[j, 0:w] += data[p] * U[k, 0:w] for every nonzero p = (k, j) of B, in
 * storage order, on a panel of w = NV * VL + rem columns (NV <= 2, rem < VL,
 * rem = 0 for NV = 2; U and Z point at the panel's first column). U's row stays in registers while its
 * nonzeros pass; each one is one vector FMA per VL columns into row j of Z.
 * Every element of Z is summed in storage order, whatever the panel or thread.
 * ws_scatter1_<T>_<I>: the same for w = 1 (vector @ matrix).
 * U and Z must not overlap.
 */
#if WS_HAVE_VEC
#define WS_SCATTER_VSTEP(T, VT, NV, V)                                            \
    if (NV > V) *(VT *)(z + V * VL) = WS_VFMA_##T(dv, u##V, *(const VT *)(z + V * VL));
#define WS_DEFINE_SCATTER_NV(T, VT, I, NV)                                        \
static void ws_scatter_##T##_##I##_##NV(const I *indptr, const I *indices,        \
                                        const T *data, const T *U, ptrdiff_t ldu, \
                                        T *Z, ptrdiff_t ldz, ptrdiff_t n_rows,    \
                                        ptrdiff_t rem)                            \
{                                                                                 \
    enum { VL = WS_VL_##T };                                                      \
    for (ptrdiff_t k = 0; k < n_rows; ++k) {                                      \
        const T *u = U + k * ldu;                                                 \
        const VT zero = (VT){0};                                                  \
        const VT u0 = NV > 0 ? *(const VT *)u : zero;                             \
        const VT u1 = NV > 1 ? *(const VT *)(u + VL) : zero;                      \
        (void)u0; (void)u1;                                                       \
        const ptrdiff_t p1 = indptr[k + 1];                                       \
        for (ptrdiff_t p = indptr[k]; p < p1; ++p) {                              \
            T *z = Z + (ptrdiff_t)indices[p] * ldz;                               \
            const T d = data[p];                                                  \
            const VT dv = WS_BCAST_##T(d);                                        \
            (void)dv;                                                             \
            WS_SCATTER_VSTEP(T, VT, NV, 0)                                        \
            WS_SCATTER_VSTEP(T, VT, NV, 1)                                        \
            for (ptrdiff_t r = NV * VL; r < NV * VL + rem; ++r)                   \
                z[r] = WS_FMA_##T(d, u[r], z[r]);                                 \
        }                                                                         \
    }                                                                             \
}
#define WS_DEFINE_SCATTER(T, VT, I)                                               \
WS_DEFINE_SCATTER_NV(T, VT, I, 0)                                                 \
WS_DEFINE_SCATTER_NV(T, VT, I, 1)                                                 \
WS_DEFINE_SCATTER_NV(T, VT, I, 2)                                                 \
static void ws_scatter1_##T##_##I(const I *indptr, const I *indices, const T *data, \
                                  const T *u, T *z, ptrdiff_t n_rows)             \
{                                                                                 \
    for (ptrdiff_t k = 0; k < n_rows; ++k) {                                      \
        const T uk = u[k];                                                        \
        const ptrdiff_t p1 = indptr[k + 1];                                       \
        for (ptrdiff_t p = indptr[k]; p < p1; ++p)                                \
            z[indices[p]] = WS_FMA_##T(data[p], uk, z[indices[p]]);               \
    }                                                                             \
}                                                                                 \
/* Panel of w <= 2 * VL columns. */                                               \
static void ws_scatter_##T##_##I(const I *indptr, const I *indices, const T *data, \
                                 const T *U, ptrdiff_t ldu, T *Z, ptrdiff_t ldz,  \
                                 ptrdiff_t n_rows, ptrdiff_t w)                   \
{                                                                                 \
    const ptrdiff_t rem = w % WS_VL_##T;                                          \
    switch (w / WS_VL_##T) {                                                      \
    case 0:                                                                       \
        if (w == 1 && ldu == 1 && ldz == 1)                                       \
            ws_scatter1_##T##_##I(indptr, indices, data, U, Z, n_rows);           \
        else                                                                      \
            ws_scatter_##T##_##I##_0(indptr, indices, data, U, ldu, Z, ldz, n_rows, rem); \
        break;                                                                    \
    case 1: ws_scatter_##T##_##I##_1(indptr, indices, data, U, ldu, Z, ldz, n_rows, rem); break; \
    default: ws_scatter_##T##_##I##_2(indptr, indices, data, U, ldu, Z, ldz, n_rows, 0); break; \
    }                                                                             \
}
#else
#define WS_DEFINE_SCATTER(T, VT, I)                                               \
static void ws_scatter_##T##_##I(const I *indptr, const I *indices, const T *data, \
                                 const T *U, ptrdiff_t ldu, T *Z, ptrdiff_t ldz,  \
                                 ptrdiff_t n_rows, ptrdiff_t w)                   \
{                                                                                 \
    for (ptrdiff_t k = 0; k < n_rows; ++k)                                        \
        for (ptrdiff_t p = indptr[k]; p < indptr[k + 1]; ++p)                     \
            for (ptrdiff_t r = 0; r < w; ++r)                                     \
                Z[(ptrdiff_t)indices[p] * ldz + r] =                              \
                    WS_FMA_##T(data[p], U[k * ldu + r], Z[(ptrdiff_t)indices[p] * ldz + r]); \
}
#endif

#define WS_DEFINE_ALL(T, VT, I, U)                                                \
    WS_DEFINE_SPMM_ROWS(T, I)                                                     \
    WS_DEFINE_SPMM_KB(T, I)                                                       \
    WS_DEFINE_SCATTER(T, VT, I)                                                   \
    WS_DEFINE_SPMV_ROWS(T, VT, I, U, 0, )                                         \
    WS_DEFINE_SPMV_ROWS(T, VT, I, U, 1, _chk)

WS_DEFINE_ALL(float, ws_vf, int32_t, uint32_t)
WS_DEFINE_ALL(float, ws_vf, int64_t, uint64_t)
WS_DEFINE_ALL(double, ws_vd, int32_t, uint32_t)
WS_DEFINE_ALL(double, ws_vd, int64_t, uint64_t)

#endif
