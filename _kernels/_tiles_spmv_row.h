/*
 * SpMV rows shorter than WS_SPMV_VEC_NNZ_<T>: ws_spmv_row[_chk] (one scalar chain
 * each), and the macros of the index checks (WS_CHK_TYPES, WS_OOR). Part of
 * _tiles_spmv.h, moved here verbatim.
 */
#ifndef WSESPARSE_TILES_SPMV_ROW_H
#define WSESPARSE_TILES_SPMV_ROW_H

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

#endif
