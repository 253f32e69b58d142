/*
 * Register-blocked AXPY kernels for the sparse x dense products (_spmm.pyx,
 * _scatter.pyx).
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
 *
 * The code is in one header per job, included here in this order:
 * _tiles_base.h (tile macros), _tiles_complex.h (complex dots and scatter),
 * _tiles_spmm.h (SpMM rows), _tiles_kblock.h (column blocks), _tiles_spmv.h
 * (SpMV rows, with _tiles_spmv_row.h and _tiles_spmv_lanes.h), _tiles_scatter.h
 * (scatter), _tiles_spmv_coded.h (SpMV rows of value-coded matrices); this header
 * instantiates the real kernels for float and double with
 * int32 and int64 indices (WS_DEFINE_ALL).
 */
#ifndef WSESPARSE_AXPY_TILES_H
#define WSESPARSE_AXPY_TILES_H

#include "_tiles_base.h"
#include "_tiles_complex.h"
#include "_tiles_spmm.h"
#include "_tiles_kblock.h"
#include "_tiles_spmv.h"
#include "_tiles_scatter.h"
#include "_tiles_spmv_coded.h"

#define WS_DEFINE_ALL(T, VT, I, U)                                                \
    WS_DEFINE_SPMM_ROWS(T, I)                                                     \
    WS_DEFINE_SPMM_KB(T, I)                                                       \
    WS_DEFINE_SCATTER(T, VT, I)                                                   \
    WS_DEFINE_SPMV_ROWS(T, VT, I, U, 0, )                                         \
    WS_DEFINE_SPMV_ROWS(T, VT, I, U, 1, _chk)                                     \
    WS_DEFINE_SPMV_CODED(T, I)

WS_DEFINE_ALL(float, ws_vf, int32_t, uint32_t)
WS_DEFINE_ALL(float, ws_vf, int64_t, uint64_t)
WS_DEFINE_ALL(double, ws_vd, int32_t, uint32_t)
WS_DEFINE_ALL(double, ws_vd, int64_t, uint64_t)

#endif
