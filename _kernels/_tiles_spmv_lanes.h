/*
 * The pieces of the SpMV vector steps (_tiles_spmv.h): x[indices[p]] put together
 * lane by lane (WS_XV_<T>), index checks 8-32 at a time (ws_oor_i32*, WS_OORV*), lane
 * sums as a tree (WS_HSUM_<T>) and, in AVX-512 builds, the gathers (ws_gx_*, ws_gdot_*)
 * with the rules for which rows take them. Moved here verbatim from _tiles_spmv.h.
 */
#ifndef WSESPARSE_TILES_SPMV_LANES_H
#define WSESPARSE_TILES_SPMV_LANES_H

#include "_tiles_base.h"

/* (included inside _tiles_spmv.h's #if WS_HAVE_VEC) */
#define WS_XV_float(x, ix, p) ((ws_vf){x[ix[p]], x[ix[p + 1]], x[ix[p + 2]], x[ix[p + 3]], \
                                       x[ix[p + 4]], x[ix[p + 5]], x[ix[p + 6]], x[ix[p + 7]]})
#define WS_XV_double(x, ix, p) ((ws_vd){x[ix[p]], x[ix[p + 1]], x[ix[p + 2]], x[ix[p + 3]]})
#if defined(__AVX2__)
#include <immintrin.h>
/* Whether one of the int32 indices ix[0:16] (ix[0:8]) is out of range, one test and
 * branch (int64 indices take the scalar compares). AVX-512: an unsigned compare into a
 * mask per load (one-shot 4096^2 density 0.1 float32 SpMV on Zen 4, 1 / 2 threads:
 * 530 / 247 us against 545 / 256; -DWS_OOR_MAX for the AVX2 way in an A/B). AVX2:
 * unsigned v >= lim as max(v, lim) == v. */
/* WS_OOR_TREE (AVX2 builds; 0 for the earlier way in an A/B): the largest index of 16 (32)
 * as a tree of unsigned maxima, then one compare with lim, where each vector of 8 took its
 * own max, compare and OR; and checked float32 rows four vector steps (32 indices) a check
 * and branch (WS_VROW_CHK32), as AVX-512 builds do. One-shot float32 SpMV on a 2-core Zen 3,
 * old and new _spmm side by side: rows of 164 took 0.72-0.81 the time, rows of 49 to 820
 * 0.84-1.00 (docs/tuning.md, "The check of long float32 rows on AVX2"). */
#ifndef WS_OOR_TREE
#define WS_OOR_TREE 1
#endif
#if defined(__AVX512F__) && defined(__AVX512VL__) && !defined(WS_OOR_MAX)
static inline int ws_oor_i32(const int32_t *ix, __m256i lim)  /* ix[0:16] */
{
    return _mm512_cmpge_epu32_mask(_mm512_loadu_si512((const void *)ix),
                                   _mm512_broadcastd_epi32(_mm256_castsi256_si128(lim))) != 0;
}
static inline int ws_oor_i32_8(const int32_t *ix, __m256i lim)  /* ix[0:8] */
{
    return _mm256_cmpge_epu32_mask(_mm256_loadu_si256((const __m256i *)ix), lim) != 0;
}
/* ix[0:32], for ws_spmv_vrow's checked rows of four steps a check (WS_VROW_CHK32): one
 * branch per 32 indices, not per 16. 2-core Zen 4, checked float32 SpMV, element loads
 * (x of 8-16 kB, rows of 205-820), 1 thread: 494-500 us against 528-533, 728 against 762
 * (docs/tuning.md, "Long float32 rows with x in L1"). */
static inline int ws_oor_i32_32(const int32_t *ix, __m256i lim)
{
    const __m512i l = _mm512_broadcastd_epi32(_mm256_castsi256_si128(lim));
    return (_mm512_cmpge_epu32_mask(_mm512_loadu_si512((const void *)ix), l)
            | _mm512_cmpge_epu32_mask(_mm512_loadu_si512((const void *)(ix + 16)), l)) != 0;
}
#define WS_HAVE_OOR_I32_32 1
#ifndef WS_VROW_CHK32
#define WS_VROW_CHK32 1
#endif
#elif WS_OOR_TREE
/* AVX2, WS_OOR_TREE: the unsigned maximum of the indices as a tree, one compare with lim
 * per check (some v >= lim, as max(v, lim) == v for a lane v of that maximum). */
static inline int ws_oor_max8(__m256i m, __m256i lim)
{
    const __m256i e = _mm256_cmpeq_epi32(_mm256_max_epu32(m, lim), m);
    return !_mm256_testz_si256(e, e);
}
#define WS_LD8(ix) _mm256_loadu_si256((const __m256i *)(ix))
static inline int ws_oor_i32(const int32_t *ix, __m256i lim)  /* ix[0:16] */
{
    return ws_oor_max8(_mm256_max_epu32(WS_LD8(ix), WS_LD8(ix + 8)), lim);
}
static inline int ws_oor_i32_8(const int32_t *ix, __m256i lim)  /* ix[0:8] */
{
    return ws_oor_max8(WS_LD8(ix), lim);
}
static inline int ws_oor_i32_32(const int32_t *ix, __m256i lim)  /* ix[0:32] */
{
    return ws_oor_max8(_mm256_max_epu32(_mm256_max_epu32(WS_LD8(ix), WS_LD8(ix + 8)),
                                        _mm256_max_epu32(WS_LD8(ix + 16), WS_LD8(ix + 24))),
                       lim);
}
#define WS_HAVE_OOR_I32_32 1
#ifndef WS_VROW_CHK32
#define WS_VROW_CHK32 1
#endif
#else
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
#endif
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
#ifndef WS_HAVE_OOR_I32_32  /* (no AVX-512 compare: 16 indices a check and branch) */
#undef WS_VROW_CHK32
#define WS_VROW_CHK32 0
#define ws_oor_i32_32(ix, lim) 0
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
 * Checked rows check each step's indices against lim (ws_gx_, below).
 *
 * ws_gx_<T>_<I>(m, ix, x, lim, chk, oor, imax): x[ix[k]] in the lanes k of mask m
 * (0 elsewhere); with chk, sets *oor and gathers nothing if one of those
 * indices is >= lim (unsigned: negative ones too). float32 with int32 indices
 * (WS_GX_CLAMPS_<T>_<I>) instead loads x[lim - 1] for such an index and keeps the
 * largest index in *imax, which the caller compares with lim once a row
 * (ws_gx_bad_int32_t): the gather then waits for a one-cycle min, not for a compare
 * and a branch. Checked / unchecked time of 4096^2 density 0.1 and 2048^2 density
 * 0.2 SpMV, 1 and 2 threads, 2-core Zen 4, three runs: 1.01-1.05 against 1.06-1.11 with
 * the compare; the other three types kept theirs (1.01-1.10 either way; docs/tuning.md,
 * "Checks"). */
/* (WS_SLOW_GATHER, AMD Zen: _tiles_base.h) Builds that gather slowly still gather rows of
 * WS_SPMV_GATHER_ROW_MIN_<T> nonzeros or more that reach ws_spmv_vrow (WS_SPMV_GATHER stays
 * 0 for them: the rules below that speak of builds that gather do not apply); other
 * AVX-512 builds gather every such row (0). 2-core AMD Zen 4, prepared and one-shot, 1 and
 * 2 threads, random rows, in-process A/B, gathers / element loads: float64 rows of 64-164
 * with x of 128 kB 0.87-1.01, rows of 48-256 with x of 1.6 MB 0.59-0.95; float32 rows of
 * 24-96 0.99-1.39 (x of 64 kB) and about 1.0 at 48-64 (800 kB), 128 0.94-1.08 (64 kB) and
 * 0.84-0.89 (800 kB), 164 0.91-1.01, 1638 0.84-0.86 (docs/tuning.md, "SpMV with x beyond
 * L2", session 28). */
#if WS_SLOW_GATHER
#ifndef WS_SPMV_GATHER_ROW_MIN_float
#define WS_SPMV_GATHER_ROW_MIN_float 160
#endif
#ifndef WS_SPMV_GATHER_ROW_MIN_double
#define WS_SPMV_GATHER_ROW_MIN_double 64
#endif
/* ... and where x has at most WS_SPMV_GATHER_LONG_X_BYTES_<T> bytes, only rows of
 * WS_SPMV_GATHER_NEAR_ROW_MIN_<T> nonzeros or more. A float32 x of up to 16 KiB stays in
 * L1, where Zen 4's element loads outran its gathers on rows of 160-511: prepared 4096^2
 * density 0.1 (410 a row) 440 / 224 us against 596 / 303 on 1 / 2 threads, from DRAM too.
 * Longer rows (4096 columns, density 0.22) kept that lead only while the matrix stayed in
 * cache (1.2-1.3x faster at 11 MB, 1.2-1.3x slower at 29 MB), so they keep their gathers.
 * float64 rows do so only where the whole matrix stays in cache as well
 * (WS_SPMV_GATHER_NEAR_ANY_MATRIX_double 0: not where the caller passes far_matrix):
 * with x of 32 KiB, rows of 100-410 took 0.70-0.93x the time of their gathers at 5-12 MB
 * of matrix, 0.86-0.96x at 16 MB, 0.88-1.07x at 20 MB and mostly more than 1 (up to
 * 1.66x) at 24-40 MB; rows of 900 took 1.00-1.05x at 5-12 MB. float32 rows take their
 * way whatever the matrix (1: they won from DRAM too). (docs/tuning.md, "Long float32
 * rows with x in L1", session 31, and "float64 rows with x in L1", session 46.) */
#ifndef WS_SPMV_GATHER_LONG_X_BYTES_float
#define WS_SPMV_GATHER_LONG_X_BYTES_float 16384
#endif
#ifndef WS_SPMV_GATHER_LONG_X_BYTES_double
#define WS_SPMV_GATHER_LONG_X_BYTES_double 32768
#endif
#ifndef WS_SPMV_GATHER_NEAR_ROW_MIN_float
#define WS_SPMV_GATHER_NEAR_ROW_MIN_float 512
#endif
#ifndef WS_SPMV_GATHER_NEAR_ROW_MIN_double
#define WS_SPMV_GATHER_NEAR_ROW_MIN_double 512
#endif
#ifndef WS_SPMV_GATHER_NEAR_ANY_MATRIX_float
#define WS_SPMV_GATHER_NEAR_ANY_MATRIX_float 1
#endif
#ifndef WS_SPMV_GATHER_NEAR_ANY_MATRIX_double
#define WS_SPMV_GATHER_NEAR_ANY_MATRIX_double 0
#endif
#if WS_SPMV_GATHER_NEAR_ROW_MIN_float < WS_SPMV_GATHER_ROW_MIN_float \
    || WS_SPMV_GATHER_NEAR_ROW_MIN_double < WS_SPMV_GATHER_ROW_MIN_double
#error "WS_SPMV_GATHER_NEAR_ROW_MIN_<T> must be at least WS_SPMV_GATHER_ROW_MIN_<T>"
#endif
#else
#define WS_SPMV_GATHER_LONG_X_BYTES_float 0
#define WS_SPMV_GATHER_LONG_X_BYTES_double 0
#define WS_SPMV_GATHER_NEAR_ROW_MIN_float 0
#define WS_SPMV_GATHER_NEAR_ROW_MIN_double 0
#define WS_SPMV_GATHER_NEAR_ANY_MATRIX_float 1
#define WS_SPMV_GATHER_NEAR_ANY_MATRIX_double 1
#define WS_SPMV_GATHER_ROW_MIN_float 0
#define WS_SPMV_GATHER_ROW_MIN_double 0
#endif
/* Software prefetch of a row's stream: dbytes of values from AHEAD bytes beyond data + p
 * and ibytes of indices as many elements beyond indices + p, a line at a time (the
 * gathered rows, ws_gdot, and the element-load rows, ws_spmv_vrow; WS_GDOT_PF and
 * WS_VROW_PF_<T> give AHEAD). A hint only: no fault, no change to any sum. */
#define WS_PREFETCH_AHEAD(data, indices, p, AHEAD, T, I, dbytes, ibytes)          \
    do {                                                                          \
        const char *pd_ = (const char *)((data) + (p)) + (AHEAD);                 \
        const char *pi_ = (const char *)((indices) + (p))                         \
            + (AHEAD) * (ptrdiff_t)sizeof(I) / (ptrdiff_t)sizeof(T);              \
        for (int k_ = 0; k_ < (int)(dbytes); k_ += 64)                            \
            __builtin_prefetch(pd_ + k_);                                         \
        for (int k_ = 0; k_ < (int)(ibytes); k_ += 64)                            \
            __builtin_prefetch(pi_ + k_);                                         \
    } while (0)
#if WS_HAVE_VEC && defined(__AVX512F__)
#define WS_SPMV_GATHER (!WS_SLOW_GATHER)
#define WS_GX_CLAMPS_float_int32_t 1
#define WS_GX_CLAMPS_float_int64_t 0
#define WS_GX_CLAMPS_double_int32_t 0
#define WS_GX_CLAMPS_double_int64_t 0
static inline ws_tvf ws_gx_float_int32_t(__mmask16 m, const int32_t *ix, const float *x,
                                         uint64_t lim, int chk, int *oor, __m512i *imax)
{
    __m512i i = _mm512_maskz_loadu_epi32(m, ix);
    (void)oor;
    if (chk) {
        *imax = _mm512_max_epu32(*imax, i);
        i = _mm512_min_epu32(i, _mm512_set1_epi32((int32_t)(lim - 1)));
    }
    return (ws_tvf)_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, i, x, 4);
}
static inline ws_tvf ws_gx_float_int64_t(__mmask16 m, const int64_t *ix, const float *x,
                                         uint64_t lim, int chk, int *oor, __m512i *imax)
{
    (void)imax;
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
                                          uint64_t lim, int chk, int *oor, __m512i *imax)
{
    (void)imax;
    const __m256i i = _mm256_maskz_loadu_epi32(m, ix);
    if (chk && _mm256_mask_cmpge_epu32_mask(m, i, _mm256_set1_epi32((int32_t)lim))) {
        *oor = 1;
        return (ws_tvd){0};
    }
    return (ws_tvd)_mm512_mask_i32gather_pd(_mm512_setzero_pd(), m, i, x, 8);
}
static inline ws_tvd ws_gx_double_int64_t(__mmask8 m, const int64_t *ix, const double *x,
                                          uint64_t lim, int chk, int *oor, __m512i *imax)
{
    (void)imax;
    const __m512i i = _mm512_maskz_loadu_epi64(m, ix);
    if (chk && _mm512_mask_cmpge_epu64_mask(m, i, _mm512_set1_epi64((int64_t)lim))) {
        *oor = 1;
        return (ws_tvd){0};
    }
    return (ws_tvd)_mm512_mask_i64gather_pd(_mm512_setzero_pd(), m, i, x, 8);
}
static inline int ws_gx_bad_int32_t(__m512i imax, uint64_t lim)
{
    return _mm512_cmpge_epu32_mask(imax, _mm512_set1_epi32((int32_t)lim)) != 0;
}
static inline int ws_gx_bad_int64_t(__m512i imax, uint64_t lim)
{
    return _mm512_cmpge_epu64_mask(imax, _mm512_set1_epi64((int64_t)lim)) != 0;
}
#define WS_G_MASK_float __mmask16
#define WS_G_MASK_double __mmask8
#define WS_G_MLOADZ_float(m, p) ((ws_tvf)_mm512_maskz_loadu_ps((m), (p)))
#define WS_G_MLOADZ_double(m, p) ((ws_tvd)_mm512_maskz_loadu_pd((m), (p)))
#define WS_G_REDUCE_float(v) _mm512_reduce_add_ps((__m512)(v))
#define WS_G_REDUCE_double(v) _mm512_reduce_add_pd((__m512d)(v))
/* WS_GDOT_PF: the gathered rows prefetch the values WS_GDOT_PF bytes ahead of the ones they
 * read (and the indices as many elements ahead); 0: no prefetch. 2-core Zen 4, one-shot
 * and prepared, 1 and 2 threads: long rows from DRAM (164-4900 nonzeros, 59-322 MB)
 * 0.86-0.93x the time at 512 bytes, 0.79-1.03x at 1024-4096; float32 rows of 164 (79 MB)
 * 0.97-0.99x at 512, 1.05-1.08x at 2048-4096; from cache 0.99-1.01x (docs/tuning.md,
 * "Prefetch in the gathered rows", session 46). Only where measured: builds that gather
 * long rows only (AMD); Intel's, which gather short rows too, keep 0 until timed there. */
#ifndef WS_GDOT_PF
#if WS_SLOW_GATHER
#define WS_GDOT_PF 512
#else
#define WS_GDOT_PF 0
#endif
#endif
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
    __m512i imax = _mm512_setzero_si512();                                        \
    for (; p + 2 * W <= p1; p += 2 * W) {                                         \
        if (WS_GDOT_PF)                                                           \
            WS_PREFETCH_AHEAD(d, ix, p, WS_GDOT_PF, T, I, 2 * W * sizeof(T),      \
                              2 * W * sizeof(I));                                 \
        const V g0 = ws_gx_##T##_##I(all, ix + p, x, lim, chk, &oor, &imax);      \
        const V g1 = ws_gx_##T##_##I(all, ix + p + W, x, lim, chk, &oor, &imax);  \
        if (chk && oor) goto out_of_range;                                        \
        a0 = WS_TILE_VFMA_##T(WS_G_MLOADZ_##T(all, d + p), g0, a0);               \
        a1 = WS_TILE_VFMA_##T(WS_G_MLOADZ_##T(all, d + p + W), g1, a1);           \
    }                                                                             \
    for (; p < p1; p += W) {                                                      \
        const M m = p1 - p >= W ? all : (M)((1u << (p1 - p)) - 1);                \
        const V g = ws_gx_##T##_##I(m, ix + p, x, lim, chk, &oor, &imax);         \
        if (chk && oor) goto out_of_range;                                        \
        a1 = WS_TILE_VFMA_##T(WS_G_MLOADZ_##T(m, d + p), g, a1);                  \
    }                                                                             \
    if (chk && WS_GX_CLAMPS_##T##_##I && ws_gx_bad_##I(imax, lim))                \
        goto out_of_range;                                                        \
    return WS_G_REDUCE_##T(a0 + a1);                                              \
out_of_range:                                                                     \
    *bad = 1;                                                                     \
    return 0;                                                                     \
}
WS_DEFINE_GDOT(float, int32_t)
WS_DEFINE_GDOT(float, int64_t)
WS_DEFINE_GDOT(double, int32_t)
WS_DEFINE_GDOT(double, int64_t)
#if WS_SLOW_GATHER
/* Builds that gather slowly take the gathers for long rows in the row loops
 * (WS_DEFINE_SPMV_ROWS_FN), through a function of their own: a branch to them inside
 * ws_spmv_vrow made its shorter rows (24 per row, float32, one thread) 1.10-1.16x slower. */
#define WS_SPMV_GATHER_LONG 1
#define WS_GDOT_FIRST(T, I, CHK)
#else
#define WS_SPMV_GATHER_LONG 0
#define WS_GDOT_FIRST(T, I, CHK)                                                  \
    return ws_gdot_##T##_##I(indices, data, x, p, p1, (uint64_t)lim, CHK, bad);
#endif
#else
#define WS_SPMV_GATHER 0
#define WS_SPMV_GATHER_LONG 0
#define WS_GDOT_FIRST(T, I, CHK)
#endif
/* With the gathers, rows from WS_SPMV_GATHER_NNZ nonzeros on take them once x
 * is larger than WS_SPMV_GATHER_X_BYTES: a gather's loads then miss L1 in
 * parallel where scalar loads queued (K = 16384, float32, 2 threads: 8
 * nonzeros per row 5.0 -> 7.4 GFLOP/s against rows from 8 on, 16 per row 6.5
 * -> 8.0 against rows from 16 on); with x in L1 the scalar loads kept rows
 * below 16 faster (K = 4096, 4 per row: 4.9 vs 3.8). */
#ifndef WS_SPMV_GATHER_NNZ
#define WS_SPMV_GATHER_NNZ 4
#endif
#ifndef WS_SPMV_GATHER_X_BYTES
#define WS_SPMV_GATHER_X_BYTES 32768
#endif

#endif
