/*
 * Tile macros: the check block (ws_block_end), vector types, FMA, the SpMM
 * tile width (WS_TILE_VBYTES) and streaming stores.
 * Part of _axpy_tiles.h (which includes every part and instantiates the
 * kernels); moved here verbatim.
 */
#ifndef WSESPARSE_TILES_BASE_H
#define WSESPARSE_TILES_BASE_H

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
 * indptr[j] - indptr[i] >= WS_CHECK_BLOCK, or r1. By galloping from i (steps
 * 1, 2, 4, ...) and then bisection within the last step: a walk row by row
 * cost a short-row product more than the check itself, and a bisection over
 * all of i:r1 read indptr far from i, a cache miss per probe (one-shot SpMV
 * of a 1000^2-grid Poisson matrix, one thread, medians: 5.3 -> 4.85 ms; unchecked
 * 3.6, scipy 3.95). */
#define WS_DEFINE_BLOCK_END(I)                                                    \
static inline ptrdiff_t ws_block_end_##I(const I *indptr, ptrdiff_t i, ptrdiff_t r1) \
{                                                                                 \
    const ptrdiff_t target = (ptrdiff_t)indptr[i] + WS_CHECK_BLOCK;               \
    ptrdiff_t lo = i + 1, hi = r1, step = 1;                                      \
    while (lo + step < hi && (ptrdiff_t)indptr[lo + step] < target) {             \
        lo += step;                                                               \
        step *= 2;                                                                \
    }                                                                             \
    if (lo + step < hi)                                                           \
        hi = lo + step + 1;                                                       \
    while (lo < hi) {                                                             \
        const ptrdiff_t mid = lo + (hi - lo) / 2;                                 \
        if ((ptrdiff_t)indptr[mid] < target) lo = mid + 1; else hi = mid;         \
    }                                                                             \
    return lo;                                                                    \
}
WS_DEFINE_BLOCK_END(int32_t)
WS_DEFINE_BLOCK_END(int64_t)

/* ws_row_block_end_<I>: the same for one-vector products (SpMV, one-column
 * scatter), whose short-row parts check blocks of WS_CHECK_ROWS rows instead
 * when those hold at most WS_CHECK_BLOCK nonzeros: one indptr probe instead
 * of the gallop, and smaller blocks. One-shot products, one thread, 2-core
 * AMD Zen 3, block of 2048 nonzeros -> 64 rows (in-process A/B, medians):
 * 10^6-row Poisson float64 SpMV 4.96 -> 4.06 ms, float32 4.64 -> 3.84,
 * complex128 8.72 -> 7.88, CSC @ x 6.15 -> 5.20; random rows of 16 (131072
 * and 524288 columns, float32) 0.97-0.99x; 2048 -> 256 nonzeros (gallop
 * kept) gave the Poisson gains but cost the random rows 1.07-1.16x. SpMM
 * keeps ws_block_end: 64 rows cost Poisson @ X (8 columns) 1.08x. */
#ifndef WS_CHECK_ROWS
#define WS_CHECK_ROWS 64
#endif
#define WS_DEFINE_ROW_BLOCK_END(I)                                                \
static inline ptrdiff_t ws_row_block_end_##I(const I *indptr, ptrdiff_t i, ptrdiff_t r1) \
{                                                                                 \
    if (i + WS_CHECK_ROWS < r1                                                    \
        && indptr[i + WS_CHECK_ROWS] - indptr[i] <= WS_CHECK_BLOCK)               \
        return i + WS_CHECK_ROWS;                                                 \
    return ws_block_end_##I(indptr, i, r1);                                       \
}
WS_DEFINE_ROW_BLOCK_END(int32_t)
WS_DEFINE_ROW_BLOCK_END(int64_t)

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
#elif WS_HAVE_VEC && !defined(__AVX__)
/* Without AVX (the portable build, WSESPARSE_NATIVE=0: SSE2 only) a 32-byte generic
 * vector has no register to live in: GCC kept the tiles' accumulators and every
 * broadcast in stack memory, and each broadcast's 16-byte reload of two 8-byte stores
 * missed store forwarding. Rows one tile wide ran at about 16 ns a nonzero, 2.7-3.5x
 * scipy's time (float64 N >= 8, float32 N >= 16; 2-core Zen 3). 16-byte tiles, the
 * registers SSE2 has: about 1.7 ns (docs/tuning.md, "Portable build"). */
#define WS_TILE_VBYTES 16
typedef float ws_tvf __attribute__((vector_size(16), aligned(4)));
typedef double ws_tvd __attribute__((vector_size(16), aligned(8)));
#define WS_TILE_BCAST_float(v) ((ws_tvf){v, v, v, v})
#define WS_TILE_BCAST_double(v) ((ws_tvd){v, v})
#define WS_TILE_VFMA_float(a, b, c) ((a) * (b) + (c))
#define WS_TILE_VFMA_double(a, b, c) ((a) * (b) + (c))
#define WS_TILE_STREAM_float(p, v) (*(ws_tvf *)(p) = (v))
#define WS_TILE_STREAM_double(p, v) (*(ws_tvd *)(p) = (v))
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

/* WS_CHK_IN_LOOPS: whether checked SpMV of int64 matrices streamed from DRAM compares each
 * column index in its row loop instead of checking a block of indices first (a vector max)
 * and then using them. On a 2-core AMD EPYC with AVX2 only (session 25) the loop's compare
 * was the faster (0.75-0.95x the time); on the AVX-512 Zen 4 (session 27) it won on rows of
 * 10-15 nonzeros and on shorter ones read at random (WS_SPMV_CHK_LOOP_ROWS_MIN, _tiles_spmv.h)
 * but lost on Poisson's (1.2-1.6x the time on one thread). So: builds without AVX-512, the
 * portable SSE2 build too (not measured there); Intel not measured (docs/tuning.md,
 * "Checks"). */
#ifndef WS_CHK_IN_LOOPS
#if defined(__AVX512F__)
#define WS_CHK_IN_LOOPS 0
#else
#define WS_CHK_IN_LOOPS 1
#endif
#endif

/* AMD Zen cores (GCC's -march=native names them __znverN__; GCC 12 calls Zen 4 znver3)
 * gather slowly: on a 2-core Zen 4 (AVX-512) the gathers made prepared SpMV 1.4-4.1x slower
 * on one thread than scalar loads (Poisson 5 per row, random 8-32 per row), and 0.92-1.28x
 * at 20 per row with x beyond L2; docs/tuning.md, "SpMV with x beyond L2". */
#ifndef WS_SLOW_GATHER
#if defined(__znver1__) || defined(__znver2__) || defined(__znver3__) || \
    defined(__znver4__) || defined(__znver5__)
#define WS_SLOW_GATHER 1
#else
#define WS_SLOW_GATHER 0
#endif
#endif

/* WS_SCATTER1_CHK_LOOP_ROWS_MIN: the checked one-column real scatter (vector @ CSR, CSC @
 * vector) compares each index in its loop (ws_rscatter1_chk, _tiles_complex.h) for row
 * chunks averaging at least this many nonzeros per row, and checks blocks of indices first
 * for the others. The loop was the faster everywhere on a 2-core AMD EPYC with AVX2 (session
 * 25: int64 0.73-0.94x the time, int32 0.87-1.01x, Poisson included): 0 there. On the AVX-512
 * Zen 4 (session 27, where sessions 22 and 24 had found the block check ahead) it took
 * 0.71-0.95x the time from 8 per row (lsqr's 11, TF-IDF-like 42, random and banded rows of
 * 8-16), about the same at the Laplacian's 21, but 1.10-1.36x on banded rows of 5-7
 * (Poisson 2-D and 3-D, a 7-point stencil): 8 on AMD (WS_SLOW_GATHER). Intel AVX-512 was
 * not measured and keeps the block check it had (docs/tuning.md, "Transposed SpMV"). */
#ifndef WS_SCATTER1_CHK_LOOP_ROWS_MIN
#if !defined(__AVX512F__)
#define WS_SCATTER1_CHK_LOOP_ROWS_MIN 0
#elif WS_SLOW_GATHER
#define WS_SCATTER1_CHK_LOOP_ROWS_MIN 8
#else
#define WS_SCATTER1_CHK_LOOP_ROWS_MIN (1 << 30)
#endif
#endif

#endif
