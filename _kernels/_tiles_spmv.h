/*
 * SpMV rows: ws_spmv_rows and its checked version (WS_DEFINE_SPMV_ROWS).
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels); moved here verbatim.
 */
#ifndef WSESPARSE_TILES_SPMV_H
#define WSESPARSE_TILES_SPMV_H

#include "_tiles_base.h"

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
 * block of rows (ws_row_block_end: WS_CHECK_ROWS rows, or about
 * WS_CHECK_BLOCK nonzeros) is checked (vectorized) just before use.
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
 * ws_spmv_rows[_chk]_<T>_<I>(indptr, indices, data, x, y, r0, r1, n_cols, blocks):
 *     y[i] = sum over the nonzeros p of row i of data[p] * x[indices[p]]
 * for rows r0 <= i < r1; returns 0, or (_chk only) 1 when an index is out of
 * range, y then being partly written. blocks: see below (plain) and
 * WS_CHK_IN_LOOPS, WS_SPMV_CHK_LOOP_ROWS_MIN (_chk: the matrix streams from
 * DRAM); the same sums either
 * way. Rows of at least WS_SPMV_VEC_NNZ_<T> nonzeros (three float32 vectors'
 * worth) take VL of them per step: their values loaded as one vector, the
 * x[indices[p]] put together lane by lane (scalar
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
/* Whether one of the int32 indices ix[0:16] (ix[0:8]) is out of range, one test and
 * branch (int64 indices take the scalar compares). AVX-512: an unsigned compare into a
 * mask per load (one-shot 4096^2 density 0.1 float32 SpMV on Zen 4, 1 / 2 threads:
 * 530 / 247 us against 545 / 256; -DWS_OOR_MAX for the AVX2 way in an A/B). AVX2:
 * unsigned v >= lim as max(v, lim) == v, 8 at a time. */
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
 * float64 keeps its gathers (0): its element loads lost from DRAM (docs/tuning.md, "Long
 * float32 rows with x in L1", session 31). */
#ifndef WS_SPMV_GATHER_LONG_X_BYTES_float
#define WS_SPMV_GATHER_LONG_X_BYTES_float 16384
#endif
#ifndef WS_SPMV_GATHER_LONG_X_BYTES_double
#define WS_SPMV_GATHER_LONG_X_BYTES_double 0
#endif
#ifndef WS_SPMV_GATHER_NEAR_ROW_MIN_float
#define WS_SPMV_GATHER_NEAR_ROW_MIN_float 512
#endif
#ifndef WS_SPMV_GATHER_NEAR_ROW_MIN_double
#define WS_SPMV_GATHER_NEAR_ROW_MIN_double WS_SPMV_GATHER_ROW_MIN_double
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
#define WS_SPMV_GATHER_ROW_MIN_float 0
#define WS_SPMV_GATHER_ROW_MIN_double 0
#endif
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
    ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t n_cols, int blocks)                     \
{                                                                                 \
    const U lim = ws_col_limit_##I(n_cols);                                       \
    const ptrdiff_t x_bytes = n_cols * (ptrdiff_t)sizeof(T);                      \
    const int far = !WS_SPMV_GATHER && x_bytes > WS_SPMV_FAR_X_BYTES;             \
    const ptrdiff_t vmin = WS_SPMV_GATHER && x_bytes > WS_SPMV_GATHER_X_BYTES     \
        ? WS_SPMV_GATHER_NNZ : far ? WS_SPMV_FAR_VEC_NNZ : WS_SPMV_VEC_NNZ_##T;   \
    /* (rows that gather in builds that gather long rows only) */                 \
    const ptrdiff_t gmin = x_bytes > WS_SPMV_GATHER_LONG_X_BYTES_##T              \
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
