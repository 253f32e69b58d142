/*
 * Scatter: ws_scatter, Z = B.T @ U from the CSR arrays of B
 * (WS_DEFINE_SCATTER).
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels).
 */
#ifndef WSESPARSE_TILES_SCATTER_H
#define WSESPARSE_TILES_SCATTER_H

#include "_tiles_base.h"

/*
 * Transposed products (dense @ CSR, or a CSC operand @ dense): Z = B.T @ U for
 * the CSR arrays of B, by scatter, without transposing B.
 *
 * ws_scatter_<T>_<I>_<NV>(indptr, indices, data, U, ldu, Z, ldz, n_rows, rem, zn):
 *     Z[j, 0:w] += data[p] * U[k, 0:w] for every nonzero p = (k, j) of B (rows
 * k of one chunk), in storage order, on a panel of w = NV * VL + rem columns
 * (NV <= WS_SCATTER_NV_MAX, rem < VL, rem = 0 for NV = WS_SCATTER_NV_MAX; U and
 * Z point at the panel's first column). U's row stays in registers while its
 * nonzeros pass; each one is one vector FMA per VL columns into row j of Z.
 * ws_scatter1_<T>_<I>: the same for w = 1 (vector @ matrix).
 * ws_scatterz_*: the same kernels, row j by the zone zn (below); ws_scatter_*
 * ignore zn. Within a chunk every element is summed in storage order, whatever
 * the panel or thread; chunks' partial sums are added up in chunk order
 * (_scatter.pyx). U and Z must not overlap.
 */
/* Zones (ws_zone_<T>): a row chunk of a scatter whose output rows j with
 * (size_t)(j - ex_lo) < ex_n no other chunk writes (its exclusive zone) adds
 * into Z itself; its other rows go to its own copy s, row j at s + (j - s_lo)
 * * ldz. ws_no_zone: every row exclusive. Where the rows land is fixed by the
 * matrix and the chunks (_scatter.pyx, _scatter_zoned). */
#define WS_DEFINE_ZONE(T)                                                         \
typedef struct { T *s; ptrdiff_t s_lo, ex_lo; size_t ex_n; } ws_zone_##T;         \
static inline ws_zone_##T ws_no_zone_##T(void)                                    \
{                                                                                 \
    ws_zone_##T zn = {0, 0, 0, (size_t)-1};                                       \
    return zn;                                                                    \
}
WS_DEFINE_ZONE(float)
WS_DEFINE_ZONE(double)
#define WS_ZONE_ROW(zn, Z, ldz, j)                                                \
    ((size_t)((j) - (zn).ex_lo) < (zn).ex_n ? (Z) + (j) * (ldz)                   \
                                            : (zn).s + ((j) - (zn).s_lo) * (ldz))
#define WS_PLAIN_ROW(zn, Z, ldz, j) ((void)(zn), (Z) + (j) * (ldz))

#if WS_HAVE_VEC
/* The scatter's vectors: 32 bytes with AVX (AVX-512 builds too), up to four of them
 * per 128-byte panel; without AVX (the portable build) the 16-byte tile vectors, four
 * per 64-byte panel. A panel is a whole token row of 128 bytes or less: two 64-byte
 * panels swept the matrix twice, and on two threads they wrote the same cache lines of
 * Z wherever its rows were not on 64-byte lines (docs/tuning.md, "Transposed products
 * (scatter) and copies"; one-shot products scatter two panels only into Z on lines).
 * 32-byte generic vectors have no registers without AVX (_tiles_base.h, "Without
 * AVX"): dense @ CSR of 8 float64 tokens took 16.6 ns a nonzero against 3.4 native and
 * scipy's 5.9 (docs/tuning.md, "Portable build"). Every element of Z is summed in
 * storage order either way (within a chunk). */
#if defined(__AVX__)
#define WS_SV_float ws_vf
#define WS_SV_double ws_vd
#define WS_SVL_float WS_VL_float
#define WS_SVL_double WS_VL_double
#define WS_SBCAST_float WS_BCAST_float
#define WS_SBCAST_double WS_BCAST_double
#define WS_SVFMA_float WS_VFMA_float
#define WS_SVFMA_double WS_VFMA_double
#define WS_SCATTER_PANEL_BYTES 128
#else
#define WS_SV_float ws_tvf
#define WS_SV_double ws_tvd
#define WS_SVL_float WS_TILE_VL_float
#define WS_SVL_double WS_TILE_VL_double
#define WS_SBCAST_float WS_TILE_BCAST_float
#define WS_SBCAST_double WS_TILE_BCAST_double
#define WS_SVFMA_float WS_TILE_VFMA_float
#define WS_SVFMA_double WS_TILE_VFMA_double
#define WS_SCATTER_PANEL_BYTES 64
#endif
#define WS_SCATTER_NV_MAX 4
/* The last rem (< one vector) columns of a panel: 16-, 8- and 4-byte steps with
 * FMA builds (the same fused multiply-add per element as the scalar loop it
 * replaced, so the same bits), U's part loaded once per row of B. The scalar
 * loop took float32 dense @ CSR of 4 tokens 1.5-2x the time of 8 tokens
 * (docs/tuning.md, "Transposed products (scatter) and copies"). */
#if defined(__FMA__) && defined(__AVX__)
#define WS_SREM_DECL_float(NV)                                                    \
    __m128 r4 = _mm_setzero_ps(), r2 = _mm_setzero_ps(); float r1 = 0;           \
    {                                                                             \
        const float *ur = u + NV * VL;                                            \
        if (rem & 4) { r4 = _mm_loadu_ps(ur); ur += 4; }                          \
        if (rem & 2) { r2 = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)ur)); ur += 2; } \
        if (rem & 1) r1 = *ur;                                                    \
    }
#define WS_SREM_STEP_float(NV)                                                    \
    {                                                                             \
        float *zr = z + NV * VL;                                                  \
        const __m128 d4 = _mm_set1_ps(d);                                         \
        if (rem & 4) { _mm_storeu_ps(zr, _mm_fmadd_ps(d4, r4, _mm_loadu_ps(zr))); zr += 4; } \
        if (rem & 2) {                                                            \
            const __m128 z2 = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)zr)); \
            _mm_storel_epi64((__m128i *)zr, _mm_castps_si128(_mm_fmadd_ps(d4, r2, z2))); \
            zr += 2;                                                              \
        }                                                                         \
        if (rem & 1) *zr = WS_FMA_float(d, r1, *zr);                              \
    }
#define WS_SREM_DECL_double(NV)                                                   \
    __m128d r2 = _mm_setzero_pd(); double r1 = 0;                                 \
    {                                                                             \
        const double *ur = u + NV * VL;                                           \
        if (rem & 2) { r2 = _mm_loadu_pd(ur); ur += 2; }                          \
        if (rem & 1) r1 = *ur;                                                    \
    }
#define WS_SREM_STEP_double(NV)                                                   \
    {                                                                             \
        double *zr = z + NV * VL;                                                 \
        if (rem & 2) {                                                            \
            _mm_storeu_pd(zr, _mm_fmadd_pd(_mm_set1_pd(d), r2, _mm_loadu_pd(zr))); \
            zr += 2;                                                              \
        }                                                                         \
        if (rem & 1) *zr = WS_FMA_double(d, r1, *zr);                             \
    }
#else
#define WS_SREM_DECL_float(NV)
#define WS_SREM_DECL_double(NV)
#define WS_SREM_STEP_float(NV)                                                    \
    for (ptrdiff_t r = NV * VL; r < NV * VL + rem; ++r) z[r] = WS_FMA_float(d, u[r], z[r]);
#define WS_SREM_STEP_double(NV)                                                   \
    for (ptrdiff_t r = NV * VL; r < NV * VL + rem; ++r) z[r] = WS_FMA_double(d, u[r], z[r]);
#endif
#define WS_SCATTER_VSTEP(T, VT, NV, V)                                            \
    if (NV > V) *(VT *)(z + V * VL) = WS_SVFMA_##T(dv, u##V, *(const VT *)(z + V * VL));
#define WS_SCATTER_ULOAD(VT, NV, V) const VT u##V = NV > V ? *(const VT *)(u + V * VL) : zero;
#define WS_DEFINE_SCATTER_NV(T, I, NV, Z_, ROW)                                   \
static void ws_scatter##Z_##_##T##_##I##_##NV(const I *indptr, const I *indices,  \
                                        const T *data, const T *U, ptrdiff_t ldu, \
                                        T *Z, ptrdiff_t ldz, ptrdiff_t n_rows,    \
                                        ptrdiff_t rem, ws_zone_##T zn)            \
{                                                                                 \
    typedef WS_SV_##T VT;                                                         \
    enum { VL = WS_SVL_##T };                                                     \
    for (ptrdiff_t k = 0; k < n_rows; ++k) {                                      \
        const T *u = U + k * ldu;                                                 \
        const VT zero = (VT){0};                                                  \
        WS_SCATTER_ULOAD(VT, NV, 0) WS_SCATTER_ULOAD(VT, NV, 1)                   \
        WS_SCATTER_ULOAD(VT, NV, 2) WS_SCATTER_ULOAD(VT, NV, 3)                   \
        (void)u0; (void)u1; (void)u2; (void)u3;                                   \
        WS_SREM_DECL_##T(NV)                                                      \
        const ptrdiff_t p1 = indptr[k + 1];                                       \
        for (ptrdiff_t p = indptr[k]; p < p1; ++p) {                              \
            T *z = ROW(zn, Z, ldz, (ptrdiff_t)indices[p]);                        \
            const T d = data[p];                                                  \
            const VT dv = WS_SBCAST_##T(d);                                       \
            (void)dv;                                                             \
            WS_SCATTER_VSTEP(T, VT, NV, 0)                                        \
            WS_SCATTER_VSTEP(T, VT, NV, 1)                                        \
            WS_SCATTER_VSTEP(T, VT, NV, 2)                                        \
            WS_SCATTER_VSTEP(T, VT, NV, 3)                                        \
            WS_SREM_STEP_##T(NV)                                                  \
        }                                                                         \
    }                                                                             \
}
/* Each kernel twice: rows into Z (ws_scatter_*), and rows by zone (ws_scatterz_*);
 * a select per nonzero in the first cost it 5-13 % (random 200,000^2, 2 threads). */
#define WS_DEFINE_SCATTER(T, VT, I)                                               \
WS_DEFINE_SCATTER_Z(T, VT, I, , WS_PLAIN_ROW)                                     \
WS_DEFINE_SCATTER_Z(T, VT, I, z, WS_ZONE_ROW)
#define WS_DEFINE_SCATTER_Z(T, VT, I, Z_, ROW)                                    \
WS_DEFINE_SCATTER_NV(T, I, 0, Z_, ROW)                                            \
WS_DEFINE_SCATTER_NV(T, I, 1, Z_, ROW)                                            \
WS_DEFINE_SCATTER_NV(T, I, 2, Z_, ROW)                                            \
WS_DEFINE_SCATTER_NV(T, I, 3, Z_, ROW)                                            \
WS_DEFINE_SCATTER_NV(T, I, 4, Z_, ROW)                                            \
static void ws_scatter1##Z_##_##T##_##I(const I *indptr, const I *indices,         \
                                        const T *data, const T *u, T *z,          \
                                        ptrdiff_t n_rows, ws_zone_##T zn)         \
{                                                                                 \
    for (ptrdiff_t k = 0; k < n_rows; ++k) {                                      \
        const T uk = u[k];                                                        \
        const ptrdiff_t p1 = indptr[k + 1];                                       \
        for (ptrdiff_t p = indptr[k]; p < p1; ++p) {                              \
            T *zj = ROW(zn, z, 1, (ptrdiff_t)indices[p]);                         \
            *zj = WS_FMA_##T(data[p], uk, *zj);                                   \
        }                                                                         \
    }                                                                             \
}                                                                                 \
/* Panel of w <= WS_SCATTER_NV_MAX * VL columns (WS_SCATTER_PANEL_BYTES). */      \
static void ws_scatter##Z_##_##T##_##I(const I *indptr, const I *indices,          \
                                       const T *data, const T *U, ptrdiff_t ldu,  \
                                       T *Z, ptrdiff_t ldz, ptrdiff_t n_rows,     \
                                       ptrdiff_t w, ws_zone_##T zn)               \
{                                                                                 \
    const ptrdiff_t rem = w % WS_SVL_##T;                                         \
    switch (w / WS_SVL_##T) {                                                     \
    case 0:                                                                       \
        if (w == 1 && ldu == 1 && ldz == 1)                                       \
            ws_scatter1##Z_##_##T##_##I(indptr, indices, data, U, Z, n_rows, zn); \
        else                                                                      \
            WS_SCATTER_NV_CALL(T, I, Z_, 0, rem);                                 \
        break;                                                                    \
    case 1: WS_SCATTER_NV_CALL(T, I, Z_, 1, rem); break;                          \
    case 2: WS_SCATTER_NV_CALL(T, I, Z_, 2, rem); break;                          \
    case 3: WS_SCATTER_NV_CALL(T, I, Z_, 3, rem); break;                          \
    default: WS_SCATTER_NV_CALL(T, I, Z_, 4, 0); break;                           \
    }                                                                             \
}
#define WS_SCATTER_NV_CALL(T, I, Z_, NV, REM)                                     \
    ws_scatter##Z_##_##T##_##I##_##NV(indptr, indices, data, U, ldu, Z, ldz, n_rows, REM, zn)
#else
#define WS_SCATTER_PANEL_BYTES 64
#define WS_DEFINE_SCATTER(T, VT, I)                                               \
WS_DEFINE_SCATTER_Z(T, VT, I, , WS_PLAIN_ROW)                                     \
WS_DEFINE_SCATTER_Z(T, VT, I, z, WS_ZONE_ROW)
#define WS_DEFINE_SCATTER_Z(T, VT, I, Z_, ROW)                                    \
static void ws_scatter##Z_##_##T##_##I(const I *indptr, const I *indices,          \
                                       const T *data, const T *U, ptrdiff_t ldu,  \
                                       T *Z, ptrdiff_t ldz, ptrdiff_t n_rows,     \
                                       ptrdiff_t w, ws_zone_##T zn)               \
{                                                                                 \
    (void)zn;                                                                     \
    for (ptrdiff_t k = 0; k < n_rows; ++k)                                        \
        for (ptrdiff_t p = indptr[k]; p < indptr[k + 1]; ++p) {                   \
            T *z = ROW(zn, Z, ldz, (ptrdiff_t)indices[p]);                        \
            for (ptrdiff_t r = 0; r < w; ++r)                                     \
                z[r] = WS_FMA_##T(data[p], U[k * ldu + r], z[r]);                 \
        }                                                                         \
}
#endif

#endif
