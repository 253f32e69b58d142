/*
 * Scatter: ws_scatter, Z = B.T @ U from the CSR arrays of B
 * (WS_DEFINE_SCATTER).
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels); moved here verbatim.
 */
#ifndef WSESPARSE_TILES_SCATTER_H
#define WSESPARSE_TILES_SCATTER_H

#include "_tiles_base.h"

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

#endif
