/*
 * Complex kernels written with real arithmetic: dot products (ws_cdots, the
 * complex SpMV rows) and scatter (ws_cscatter, ws_cscatter1).
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels); moved here verbatim.
 */
#ifndef WSESPARSE_TILES_COMPLEX_H
#define WSESPARSE_TILES_COMPLEX_H

#include "_tiles_base.h"

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

/* ws_cscatter1_<T>_<I>(indptr, indices, data, u, z, n_rows, n_out): the
 * one-column ws_cscatter (vector @ CSR, CSC @ vector: w = 1, both strides 1),
 * each column index checked just before its update; the first one negative or
 * not below n_out returns 1 (z then partly updated), else 0. The same WS_CMAC
 * per nonzero as ws_cscatter's scalar column, so the bits agree. Checked or
 * not, one-column complex scatters take this loop: with the compare it ran
 * 1.4-1.9x faster than ws_cscatter's general loop for w = 1 after a block check
 * (TF-IDF 50000 x 20000 with 2.1 M nonzeros, and 200000 x 50000 with 2.2 M,
 * one and two threads; docs/tuning.md, "Transposed SpMV"). Checked real
 * columns take ws_rscatter1_chk below where WS_SCATTER1_CHK_LOOP_ROWS_MIN
 * (_tiles_base.h) says so. */
#define WS_DEFINE_CSCATTER1(T, I, U)                                              \
static int ws_cscatter1_##T##_##I(const I *indptr, const I *indices,              \
                                  const T *data, const T *u, T *z,                \
                                  ptrdiff_t n_rows, ptrdiff_t n_out)              \
{                                                                                 \
    const U lim = ws_col_limit_##I(n_out);                                        \
    for (ptrdiff_t k = 0; k < n_rows; ++k) {                                      \
        const T *uk = u + 2 * k;                                                  \
        const ptrdiff_t p1 = indptr[k + 1];                                       \
        for (ptrdiff_t p = indptr[k]; p < p1; ++p) {                              \
            const U j = (U)indices[p];                                            \
            if (j >= lim)                                                         \
                return 1;                                                         \
            const T d[2] = {data[2 * p], data[2 * p + 1]};                        \
            T re = z[2 * j], im = z[2 * j + 1];                                   \
            WS_CMAC(T, re, im, d, uk);                                            \
            z[2 * j] = re;                                                        \
            z[2 * j + 1] = im;                                                    \
        }                                                                         \
    }                                                                             \
    return 0;                                                                     \
}
/* ws_rscatter1_chk_<T>_<I>: the same for one real column, with ws_scatter1's FMA per
 * nonzero (so the bits agree): the checked one-column real scatter where
 * WS_SCATTER1_CHK_LOOP_ROWS_MIN (_tiles_base.h) says so. */
#define WS_DEFINE_RSCATTER1_CHK(T, I, U)                                          \
static int ws_rscatter1_chk_##T##_##I(const I *indptr, const I *indices,          \
                                      const T *data, const T *u, T *z,            \
                                      ptrdiff_t n_rows, ptrdiff_t n_out)          \
{                                                                                 \
    const U lim = ws_col_limit_##I(n_out);                                        \
    for (ptrdiff_t k = 0; k < n_rows; ++k) {                                      \
        const T uk = u[k];                                                        \
        const ptrdiff_t p1 = indptr[k + 1];                                       \
        for (ptrdiff_t p = indptr[k]; p < p1; ++p) {                              \
            const U j = (U)indices[p];                                            \
            if (j >= lim)                                                         \
                return 1;                                                         \
            z[j] = WS_FMA_##T(data[p], uk, z[j]);                                 \
        }                                                                         \
    }                                                                             \
    return 0;                                                                     \
}
WS_DEFINE_RSCATTER1_CHK(float, int32_t, uint32_t)
WS_DEFINE_RSCATTER1_CHK(double, int32_t, uint32_t)
WS_DEFINE_RSCATTER1_CHK(float, int64_t, uint64_t)
WS_DEFINE_RSCATTER1_CHK(double, int64_t, uint64_t)
WS_DEFINE_CSCATTER1(float, int32_t, uint32_t)
WS_DEFINE_CSCATTER1(float, int64_t, uint64_t)
WS_DEFINE_CSCATTER1(double, int32_t, uint32_t)
WS_DEFINE_CSCATTER1(double, int64_t, uint64_t)

#endif
