/*
 * Column blocks: ws_spmm_rows_kb, rows one tile wide by blocks of columns of A
 * (WS_DEFINE_SPMM_KB).
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels); moved here verbatim.
 */
#ifndef WSESPARSE_TILES_KBLOCK_H
#define WSESPARSE_TILES_KBLOCK_H

#include "_tiles_base.h"
#include "_tiles_spmm.h"

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

#endif
