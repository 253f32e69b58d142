/* The forward block kernel of the TLR-MVM, tlr_nn (see _tiles_tlr.h), instantiated there by
 * TLR_DEFINE_NN. */
#ifndef WSESPARSE_TILES_TLR_NN_H
#define WSESPARSE_TILES_TLR_NN_H

#include "_tiles_tlr_ops.h"

/* 64-byte vectors for tlr_nn_rows's single right-hand side (TLR_ZMM, _tiles_tlr_ops.h) */
#if TLR_ZMM
#define TLR_ZMM_FN(R, W, sfx)                                                                  \
TLR_INLINE void tlr_nn_mrbz1_##sfx(const R *B, ptrdiff_t lr, R *out, R *q, const tlr_zv_##sfx *ar, \
                                   const tlr_zv_##sfx *ai, ptrdiff_t n, const int RB,          \
                                   const int CX, const int PART)                               \
{                                                                                              \
    /* one zmm (2 W reals; PART: the first n) of RB rows into out and q, as tlr_nn_mrb1 with  \
       REG */                                                                                 \
    tlr_zv_##sfx b[TLR_NN_BC], p, qq;                                                          \
    int r;                                                                                     \
    p = PART ? tlr_ldm_##sfx##z(out, n) : tlr_ld_##sfx##z(out);                                \
    qq = !CX ? p : PART ? tlr_ldm_##sfx##z(q, n) : tlr_ld_##sfx##z(q);                         \
    for (r = 0; r < RB; r++) {                                                                 \
        b[r] = PART ? tlr_ldm_##sfx##z(B + r * lr, n) : tlr_ld_##sfx##z(B + r * lr);           \
        TLR_IN_REG(b[r]);                                                                      \
    }                                                                                          \
    for (r = 0; r < RB; r++) {                                                                 \
        p = tlr_fma_##sfx##z(ar[r], b[r], p);                                                  \
        if (CX) qq = tlr_fma_##sfx##z(ai[r], b[r], qq);                                        \
    }                                                                                          \
    if (PART) {                                                                                \
        tlr_stm_##sfx##z(out, p, n);                                                           \
        if (CX) tlr_stm_##sfx##z(q, qq, n);                                                    \
    } else {                                                                                   \
        tlr_st_##sfx##z(out, p);                                                               \
        if (CX) tlr_st_##sfx##z(q, qq);                                                        \
    }                                                                                          \
}                                                                                              \
                                                                                               \
TLR_INLINE void tlr_nn_mrbz_##sfx(const R *B, ptrdiff_t lr, ptrdiff_t L, R *out, R *q,        \
                                  const R *a, const int RB, const int CX)                      \
{                                                                                              \
    /* s == 1 with AVX-512, rows not prefetched: the L reals of RB rows, one zmm of each a     \
       step, the last (partial) one masked. The same FMA per element as tlr_nn_mrb1, so the   \
       same bits. */                                                                          \
    const ptrdiff_t Lz = L - L % (2 * W);                                                      \
    tlr_zv_##sfx ar[TLR_NN_BC], ai[TLR_NN_BC];                                                 \
    ptrdiff_t l; int r;                                                                        \
    for (r = 0; r < RB; r++) {                                                                 \
        ar[r] = tlr_bc_##sfx##z(a[CX ? 2 * r : r]);                                            \
        ai[r] = CX ? tlr_bc_##sfx##z(a[2 * r + 1]) : ar[r];                                    \
    }                                                                                          \
    for (l = 0; l < Lz; l += 2 * W)                                                            \
        tlr_nn_mrbz1_##sfx(B + l, lr, out + l, q + l, ar, ai, 0, RB, CX, 0);                   \
    if (Lz < L)                                                                                \
        tlr_nn_mrbz1_##sfx(B + Lz, lr, out + Lz, q + Lz, ar, ai, L - Lz, RB, CX, 1);           \
}
/* tlr_nn_mrb's shortcut to it: 1 where taken (TLR_DEFINE_NN's ZROWS for the 32-byte kernels;
 * TLR_NN_NO_MRBZ for the 64-byte ones, whose rows are all zmm already) */
#define TLR_NN_MRBZ(take, sfx, B, lr, L, out, q, a, RB, CX)                                    \
    ((take) ? (tlr_nn_mrbz_##sfx(B, lr, L, out, q, a, RB, CX), 1) : 0)
#else
#define TLR_ZMM_FN(R, W, sfx)
#define TLR_NN_MRBZ(take, sfx, B, lr, L, out, q, a, RB, CX) 0
#endif
#define TLR_NN_NO_MRBZ(take, sfx, B, lr, L, out, q, a, RB, CX) 0

/* ------------------------------------------------------------ the kernels
 * Instantiated for (float, 8 lanes) and (double, 4 lanes); CX = 1 for the
 * complex dtype of that precision (2 reals per element).
 *
 * nn: panels of TLR_NN_TB rows; per panel, chunks of NV vectors (NV*W reals)
 * of each row times S right-hand sides: S*NV accumulators, which continue
 * from the values stored in out after the previous panel (the same FMA chain
 * over t, so the panel height does not change the result).
 * cn: RR rows of B times S right-hand sides, one vector per row and step.
 */
#define TLR_NN_NVMAX 4
/* Rows of B per panel: the accumulators are stored to out and reloaded between
 * panels, so the pass over B streams through consecutive rows. */
#ifndef TLR_NN_TB
#define TLR_NN_TB 32
#endif
/* One right-hand side: rows of B added TLR_NN_RB at a time (tlr_nn_rows) where a row has at
 * most TLR_NN_ROWS_MAX reals (its accumulators, out and a copy on the stack, stay in L1).
 * 8 where AVX-512VL gives 32 vector registers (2 x 8 broadcasts stay in registers): on a
 * 2-core Zen 4 the DRAM-resident 9801^2 forward took 11-13 % less time than with 4 (the same
 * bits; docs/tuning.md, "One right-hand side"); 4 with AVX2's 16 registers. */
#ifndef TLR_NN_RB
#if defined(__AVX512VL__)
#define TLR_NN_RB 8
#else
#define TLR_NN_RB 4
#endif
#endif
/* Several right-hand sides streamed too (tlr_nn_rows_m): TLR_NN_MROWS_S complex (twice as many
 * real) right-hand sides per pass over the rows, TLR_NN_MRB rows at a time, with their 2 x 4 x 3
 * broadcast coefficients in registers: only with AVX-512VL's 32 (0 elsewhere: register tiles).
 * The register tiles walk panels of 32 strided rows, which from DRAM keep too few lines in
 * flight: with 2-6 vectors the streamed rows took 0.68-0.95x their time on a 2-core Zen 4, the
 * same bits (docs/tuning.md, "Several right-hand sides streamed"). More right-hand sides than
 * a group take a pass per group where the block has at most TLR_NN_MROWS_BYTES (the later
 * passes find it in L2) and a group's sums at most TLR_NN_MROWS_L1 bytes (they stay in L1:
 * complex128 rows of 512 doubles, 24 KB of sums, were up to 13 % slower from L3); else the
 * register tiles. */
#ifndef TLR_NN_MROWS_S
#if defined(__AVX512VL__)
#define TLR_NN_MROWS_S 3
#else
#define TLR_NN_MROWS_S 0
#endif
#endif
#ifndef TLR_NN_MRB
#define TLR_NN_MRB 4
#endif
/* broadcast registers of tlr_nn_mrb: RB rows x S right-hand sides (s == 1: TLR_NN_RB rows) */
#define TLR_NN_BC (2 * TLR_NN_MROWS_S * TLR_NN_MRB > TLR_NN_RB ? 2 * TLR_NN_MROWS_S * TLR_NN_MRB \
                                                              : TLR_NN_RB)
#ifndef TLR_NN_MROWS_L1
#define TLR_NN_MROWS_L1 20480
#endif
#ifndef TLR_NN_MROWS_BYTES
#define TLR_NN_MROWS_BYTES 786432
#endif
/* The prefetch level (tlr_nn's pf) from which tlr_nn_rows prefetches the next rows (in
 * 32-byte vectors); below it, AVX-512F builds read them in zmm. 1 (bases beyond L2) without
 * zmm; 2 (beyond a third of L3) with: the zmm loop without prefetch ran the 2499^2 complex64
 * forward 10 % faster, and the 32-byte loop with prefetch operators of 11-24 MB 3-12 % faster
 * than the zmm loop with it (2-core Zen 4; docs/tuning.md, "One right-hand side in zmm"). */
#ifndef TLR_NN_ROWS_PF
#define TLR_NN_ROWS_PF (TLR_ZMM ? 2 : 1)
#endif
#ifndef TLR_NN_ROWS_MAX
#define TLR_NN_ROWS_MAX 2048
#endif
/* Register tiles with several right-hand sides. tlr_nn: TLR_NN_NV vectors of each row times
 * TLR_NN_SB_CX complex (P and Q each) or TLR_NN_SB_RE real right-hand sides (2 x 3 x 2
 * accumulators, 2 row vectors and 2 broadcasts fill AVX2's 16 registers). tlr_cn: rows x
 * right-hand sides, complex and real; 2 x 2 and 3 x 3 with AVX2. AVX-512VL's 32 registers
 * take 4 vectors in tlr_nn and 4 x 3 and 6 x 4 in tlr_cn: on a 2-core Zen 4, 4-64 vectors,
 * forward 0.78-1.0x and adjoint 0.49-0.93x the time (the same bits: the tile shape does not
 * change any output's chain; docs/tuning.md, "TLR tiles"). */
#ifndef TLR_NN_NV
#define TLR_NN_NV (TLR_WIDE_DEFAULT ? 4 : 2)
#endif
#ifndef TLR_NN_SB_CX
#define TLR_NN_SB_CX 3
#endif
/* Several right-hand sides (register tiles and streamed rows) in 64-byte vectors where AVX-512
 * gives them and 32 registers (tlr_forward, _tiles_tlr.h): each output element is the same
 * chain of FMAs, so the same bits. A core with two 512-bit FMA units (Intel's server parts;
 * the lent 16-core Xeon's float32 GEMM ran 64 flops a cycle) issues two zmm FMAs a cycle, as
 * many as ymm ones, so 32-byte tiles reach half of its GEMM rate at most: a thread of that
 * Xeon ran 64 complex64 vectors at 44 % of its float32 GEMM. Zen 4 splits a zmm FMA in two:
 * there both widths took the same time (0.91-1.12x, noise). Intel's gain is not measured yet
 * (docs/tuning.md, "Several right-hand sides in zmm"). */
#ifndef TLR_NN_ZMM_TILES
#define TLR_NN_ZMM_TILES (TLR_ZMM && TLR_WIDE_DEFAULT)
#endif
#if TLR_NN_ZMM_TILES && !TLR_ZMM
#error "TLR_NN_ZMM_TILES needs 64-byte vectors (AVX-512F, without TLR_NO_ZMM)"
#endif
#ifndef TLR_NN_SB_RE
#define TLR_NN_SB_RE 6
#endif

/* tlr_nn_rows's cases of 5-8 rows at a time (complex: key 8 + rows), only where TLR_NN_RB
 * allows them: unreachable otherwise, and GCC warned about their arrays of TLR_NN_RB. */
#if TLR_NN_RB > 4
#define TLR_NN_RB_HI(sfx, K, CX)                                                               \
    case K + 5: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 5, CX); break;                \
    case K + 6: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 6, CX); break;                \
    case K + 7: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 7, CX); break;                \
    case K + 8: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 8, CX); break;
#else
#define TLR_NN_RB_HI(sfx, K, CX)
#endif

/* the switch cases below cover these tiles only */
#if (TLR_NN_NV != 2 && TLR_NN_NV != 4) || TLR_NN_SB_CX > 3 || TLR_NN_SB_RE > 6
#error "tlr_nn has no register tile of this shape (TLR_NN_NV, TLR_NN_SB_CX, TLR_NN_SB_RE)"
#endif
#if TLR_NN_MRB < 1 || TLR_NN_MRB > 4 || TLR_NN_MROWS_S < 0 || TLR_NN_MROWS_S > 3
#error "tlr_nn_rows_m has no case for this shape (TLR_NN_MRB in 1..4, TLR_NN_MROWS_S in 0..3)"
#endif

#define TLR_DEFINE_NN(R, V, W, sfx, ZROWS)                                                     \
TLR_INLINE void tlr_nn_blk_##sfx(const R *B, ptrdiff_t nrows, ptrdiff_t ldr,                   \
                                 const R *a, ptrdiff_t ldar, R *out, ptrdiff_t ldor,           \
                                 int first, const char *pf, ptrdiff_t pfn, ptrdiff_t rem,      \
                                 const int S, const int NV, const int CX, const int PART)      \
{                                                                                              \
    /* One panel, NV full vectors of each row: B at the chunk start of the panel's first      \
       row, a at the panel's first column, out at the chunk start; strides in reals.          \
       P continues from out (0 in the first panel), Q (complex) starts at 0 per panel:        \
       P += Re(a) row, Q += Im(a) row, out = P + (-1, 1, ...) swap(Q). PART (with NV = 1):    \
       the last rem (< W) reals of each row through masked loads and stores, the same        \
       operations per element as the full vectors (so as tlr_nn_tail does them). */           \
    V P[6][TLR_NN_NVMAX], Q[6][TLR_NN_NVMAX];                                                  \
    const V sg = tlr_sign_##sfx();                                                             \
    const ptrdiff_t pfper = nrows > 0 ? (pfn + nrows - 1) / nrows : 0;                         \
    ptrdiff_t t; int c, v;                                                                     \
    for (c = 0; c < S; c++)                                                                    \
        for (v = 0; v < NV; v++) {                                                             \
            P[c][v] = first ? tlr_zero_##sfx()                                                 \
                      : PART ? tlr_ldm_##sfx(out + c * ldor, rem)                              \
                      : tlr_ld_##sfx(out + c * ldor + v * W);                                  \
            Q[c][v] = tlr_zero_##sfx();                                                        \
        }                                                                                      \
    for (t = 0; t < nrows; t++) {                                                              \
        const R *row = B + t * ldr;                                                            \
        V b[TLR_NN_NVMAX];                                                                     \
        /* this call's share of the next panel, in address order, spread over the rows */     \
        if (pfn > 0) {                                                                         \
            ptrdiff_t k;                                                                       \
            for (k = t * pfper; k < (t + 1) * pfper && k < pfn; k++) TLR_PREFETCH(pf + 64 * k); \
        }                                                                                      \
        for (v = 0; v < NV; v++)                                                               \
            b[v] = PART ? tlr_ldm_##sfx(row, rem) : tlr_ld_##sfx(row + v * W);                 \
        for (c = 0; c < S; c++) {                                                              \
            const R *ac = a + c * ldar + (CX ? 2 * t : t);                                     \
            const V ar = tlr_bc_##sfx(ac[0]);                                                  \
            for (v = 0; v < NV; v++) P[c][v] = tlr_fma_##sfx(ar, b[v], P[c][v]);               \
            if (CX) {                                                                          \
                const V ai = tlr_bc_##sfx(ac[1]);                                              \
                for (v = 0; v < NV; v++) Q[c][v] = tlr_fma_##sfx(ai, b[v], Q[c][v]);           \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* Q holds Im(a) row unswapped: its lanes are swapped once here, not per row (the */      \
    /* same products in the same chains, so the same bits as swapping each row). */           \
    for (c = 0; c < S; c++)                                                                    \
        for (v = 0; v < NV; v++) {                                                             \
            const V o = CX ? P[c][v] + sg * tlr_swap_##sfx(Q[c][v]) : P[c][v];                 \
            if (PART) tlr_stm_##sfx(out + c * ldor, o, rem);                                   \
            else tlr_st_##sfx(out + c * ldor + v * W, o);                                      \
        }                                                                                      \
}                                                                                              \
                                                                                               \
static void tlr_nn_tail_##sfx(const R *B, ptrdiff_t nrows, ptrdiff_t ldr, const R *a,          \
                              ptrdiff_t ldar, R *out, ptrdiff_t ldor, ptrdiff_t rem,           \
                              ptrdiff_t s, int first, int cx)                                  \
{                                                                                              \
    /* The last rem (< W) reals of each row, one element at a time, with the operations      \
       a vector lane does (so an element's bits do not depend on where it falls). */          \
    R P[TLR_NN_NVMAX * 8], Q[TLR_NN_NVMAX * 8];                                                \
    ptrdiff_t c, t, e;                                                                         \
    for (c = 0; c < s; c++) {                                                                  \
        R *oc = out + c * ldor;                                                                \
        for (e = 0; e < rem; e++) { P[e] = first ? (R)0 : oc[e]; Q[e] = 0; }                   \
        for (t = 0; t < nrows; t++) {                                                          \
            const R *row = B + t * ldr, *ac = a + c * ldar + (cx ? 2 * t : t);                 \
            for (e = 0; e < rem; e++) {                                                        \
                P[e] = TLR_FMAS_##sfx(ac[0], row[e], P[e]);                                    \
                if (cx) Q[e] = TLR_FMAS_##sfx(ac[1], row[e ^ 1], Q[e]);                        \
            }                                                                                  \
        }                                                                                      \
        for (e = 0; e < rem; e++) oc[e] = cx ? P[e] + ((e & 1) ? Q[e] : -Q[e]) : P[e];         \
    }                                                                                          \
}                                                                                              \
                                                                                               \
TLR_INLINE void tlr_nn_mrb1_##sfx(const R *B, ptrdiff_t lr, R *out, R *q, ptrdiff_t so,        \
                                  const V *ar, const V *ai, ptrdiff_t rem, const int RB,       \
                                  const int S, const int CX, const int PART, const int REG)    \
{                                                                                              \
    /* one vector of RB rows into S columns of out (P) and q (Q, complex), so reals apart;     \
       PART: the first rem reals (masked). Each column's chain runs over the rows in order.    \
       REG (rows from cache, not prefetched): each row vector loaded into a register once,    \
       not as a memory operand of each of its FMAs (docs/tuning.md, "One right-hand side in   \
       zmm"). */                                                                              \
    V b[TLR_NN_BC];                                                                            \
    int r, c;                                                                                  \
    for (r = 0; r < RB; r++) {                                                                 \
        b[r] = PART ? tlr_ldm_##sfx(B + r * lr, rem) : tlr_ld_##sfx(B + r * lr);               \
        if (REG) TLR_IN_REG(b[r]);                                                             \
    }                                                                                          \
    for (c = 0; c < S; c++) {                                                                  \
        V p = tlr_ld_##sfx(out + c * so), qq = CX ? tlr_ld_##sfx(q + c * so) : p;              \
        for (r = 0; r < RB; r++) {                                                             \
            p = tlr_fma_##sfx(ar[c * RB + r], b[r], p);                                        \
            if (CX) qq = tlr_fma_##sfx(ai[c * RB + r], b[r], qq);                              \
        }                                                                                      \
        tlr_st_##sfx(out + c * so, p);                                                         \
        if (CX) tlr_st_##sfx(q + c * so, qq);                                                  \
    }                                                                                          \
}                                                                                              \
                                                                                               \
TLR_INLINE void tlr_nn_mrb_##sfx(const R *B, ptrdiff_t lr, ptrdiff_t Lv, ptrdiff_t rem,        \
                                 const R *a, ptrdiff_t la, R *out, R *q, ptrdiff_t so,         \
                                 const R *pf, const int RB, const int S, const int CX)         \
{                                                                                              \
    /* RB consecutive rows of B (a: their coefficients, S right-hand sides la reals apart)     \
       added into S columns of out (P) and q (Q, unswapped; complex) one vector at a time,     \
       each row read in address order */                                                       \
    V ar[TLR_NN_BC], ai[TLR_NN_BC];                                                            \
    ptrdiff_t l = 0; int r, c;                                                                 \
    /* (all of each row: it leaves nothing to tlr_nn_rtail) */                                 \
    if (ZROWS(S == 1 && !pf, sfx, B, lr, Lv + rem, out, q, a, RB, CX)) return;                 \
    for (c = 0; c < S; c++)                                                                    \
        for (r = 0; r < RB; r++) {                                                             \
            ar[c * RB + r] = tlr_bc_##sfx(a[c * la + (CX ? 2 * r : r)]);                       \
            ai[c * RB + r] = CX ? tlr_bc_##sfx(a[c * la + 2 * r + 1]) : ar[c * RB + r];        \
        }                                                                                      \
    if (pf)                                                                                    \
        for (; l < Lv; l += W) {                                                               \
            /* a cache line of each of the next RB rows per 64 bytes (two 32-byte vectors) */  \
            if (W * (ptrdiff_t)sizeof(R) >= 64 || !(l & W))                                    \
                for (r = 0; r < RB; r++) TLR_PREFETCH(pf + r * lr + l);                        \
            tlr_nn_mrb1_##sfx(B + l, lr, out + l, q + l, so, ar, ai, 0, RB, S, CX, 0, 0);      \
        }                                                                                      \
    else                                                                                       \
        for (; l < Lv; l += W)                                                                 \
            tlr_nn_mrb1_##sfx(B + l, lr, out + l, q + l, so, ar, ai, 0, RB, S, CX, 0, 1);      \
    if (TLR_MASKED_TAIL && rem) /* the partial vector: zeros beyond the row's end */           \
        tlr_nn_mrb1_##sfx(B + Lv, lr, out + Lv, q + Lv, so, ar, ai, rem, RB, S, CX, 1, 0);     \
}                                                                                              \
                                                                                               \
TLR_INLINE void tlr_nn_rb_##sfx(const R *B, ptrdiff_t lr, ptrdiff_t Lv, ptrdiff_t rem,         \
                                const R *a, R *out, R *q, const R *pf, const int RB,           \
                                const int CX)                                                  \
{                                                                                              \
    tlr_nn_mrb_##sfx(B, lr, Lv, rem, a, 0, out, q, 0, pf, RB, 1, CX); /* s == 1 */             \
}                                                                                              \
                                                                                               \
TLR_INLINE void tlr_nn_rtail_##sfx(const R *Bt, ptrdiff_t lr, const R *at, ptrdiff_t rb,       \
                                  R *out, R *q, ptrdiff_t Ls, ptrdiff_t L, int cx)             \
{                                                                                              \
    /* the reals from Ls to L (< W; none where masked loads took them) of rb rows, as          \
       tlr_nn_tail does them (Q of the swapped row) */                                         \
    const ptrdiff_t f = cx ? 2 : 1;                                                            \
    ptrdiff_t e, r;                                                                            \
    for (e = Ls; e < L; e++) {                                                                 \
        R P = out[e], Q = cx ? q[e] : (R)0;                                                    \
        for (r = 0; r < rb; r++) {                                                             \
            P = TLR_FMAS_##sfx(at[r * f], Bt[r * lr + e], P);                                  \
            if (cx) Q = TLR_FMAS_##sfx(at[r * f + 1], Bt[r * lr + (e ^ 1)], Q);                \
        }                                                                                      \
        out[e] = P;                                                                            \
        if (cx) q[e] = Q;                                                                      \
    }                                                                                          \
}                                                                                              \
                                                                                               \
TLR_INLINE void tlr_nn_fold_##sfx(R *out, const R *q, ptrdiff_t Lm, ptrdiff_t Ls, ptrdiff_t L) \
{                                                                                              \
    /* complex: out += (-1, 1, ...) * swap(q), the imaginary sums folded in (vectors to Lm,    \
       then the reals from Ls to L) */                                                         \
    const V sg = tlr_sign_##sfx();                                                             \
    ptrdiff_t l, e;                                                                            \
    for (l = 0; l < Lm; l += W)                                                                \
        tlr_st_##sfx(out + l, tlr_ld_##sfx(out + l) + sg * tlr_swap_##sfx(tlr_ld_##sfx(q + l)));\
    for (e = Ls; e < L; e++) out[e] = out[e] + ((e & 1) ? q[e] : -q[e]);                       \
}                                                                                              \
                                                                                               \
TLR_NOINLINE void tlr_nn_rows_##sfx(const R *B, ptrdiff_t nrows, ptrdiff_t L, ptrdiff_t lr,    \
                                   const R *a, R *dst, int cx, int pf)                         \
{                                                                                              \
    /* s == 1, rows of at most TLR_NN_ROWS_MAX reals: B streamed row after row, TLR_NN_RB     \
       rows at a time, with the accumulators in out and q (in L1) instead of registers. The   \
       same FMA chains over t and the same folds of Q into out after every TLR_NN_TB rows as  \
       tlr_nn_blk and tlr_nn_tail, so the same bits as the register tiles (which re-walk a    \
       panel of rows once per chunk of columns). The sums are kept on the stack and copied   \
       to dst at the end: dst may share cache lines with another thread's range (wsesparse/   \
       tlr/_split.py), and accumulating in place made those lines bounce between cores.       \
       docs/tuning.md, "TLR tiles". */                                                        \
    TLR_ALIGNED R out[TLR_NN_ROWS_MAX + W], q[TLR_NN_ROWS_MAX + W];                            \
    const ptrdiff_t f = cx ? 2 : 1, Lv = L - L % W, rem = L - Lv;                              \
    /* with masked loads the last partial vector goes through the vector code (lanes past L  \
       sum zeros and are never copied out; a complex pair never straddles L), else the       \
       scalar tail (tlr_nn_rtail); both are the same operations per element */                \
    const ptrdiff_t Lm = TLR_MASKED_TAIL && rem ? Lv + W : Lv, Ls = TLR_MASKED_TAIL ? L : Lv; \
    ptrdiff_t t0 = 0, t;                                                                       \
    memset(out, 0, (size_t)(Lm > L ? Lm : L) * sizeof(R));                                     \
    do { /* nrows == 0: zeros */                                                               \
        const ptrdiff_t tb = nrows - t0 < TLR_NN_TB ? nrows - t0 : TLR_NN_TB;                  \
        if (cx) memset(q, 0, (size_t)(Lm > L ? Lm : L) * sizeof(R));                           \
        for (t = t0; t < t0 + tb; ) {                                                          \
            const ptrdiff_t rb = t0 + tb - t < TLR_NN_RB ? t0 + tb - t : TLR_NN_RB;            \
            const R *Bt = B + t * lr, *at = a + t * f;                                         \
            const R *pn = pf >= TLR_NN_ROWS_PF ? Bt + rb * lr : NULL;                          \
            switch ((cx ? 8 : 0) + (int)rb) { /* rb <= TLR_NN_RB <= 8 */                       \
            case 1: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 1, 0); break;             \
            case 2: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 2, 0); break;             \
            case 3: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 3, 0); break;             \
            case 4: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 4, 0); break;             \
            TLR_NN_RB_HI(sfx, 0, 0)                                                            \
            case 9: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 1, 1); break;             \
            case 10: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 2, 1); break;            \
            case 11: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 3, 1); break;            \
            case 12: tlr_nn_rb_##sfx(Bt, lr, Lv, rem, at, out, q, pn, 4, 1); break;            \
            TLR_NN_RB_HI(sfx, 8, 1)                                                            \
            default: break;                                                                    \
            }                                                                                  \
            tlr_nn_rtail_##sfx(Bt, lr, at, rb, out, q, Ls, L, cx);                             \
            t += rb;                                                                           \
        }                                                                                      \
        if (cx) tlr_nn_fold_##sfx(out, q, Lm, Ls, L);                                          \
        t0 += tb;                                                                              \
    } while (t0 < nrows);                                                                      \
    memcpy(dst, out, (size_t)L * sizeof(R));                                                   \
}                                                                                              \
                                                                                               \
TLR_INLINE ptrdiff_t tlr_nn_mrows_so_##sfx(ptrdiff_t L)                                       \
{                                                                                              \
    /* tlr_nn_rows_m's column stride: whole vectors, two more (rows of 2 KB would            \
       put every column in the same L1 sets) */                                                \
    return (L + W - 1) / W * W + 2 * W;                                                        \
}                                                                                              \
                                                                                               \
TLR_NOINLINE void tlr_nn_rows_m_##sfx(const R *B, ptrdiff_t nrows, ptrdiff_t L, ptrdiff_t lr,  \
                                     const R *a, ptrdiff_t la, R *dst, ptrdiff_t lo,           \
                                     ptrdiff_t s, int cx, int pf, R *buf)                      \
{                                                                                              \
    /* 2 <= s <= TLR_NN_MROWS_S complex (twice as many real) right-hand sides (a: la reals    \
       apart; dst: lo reals apart), rows of at most TLR_NN_ROWS_MAX reals: tlr_nn_rows for    \
       s vectors at once, TLR_NN_MRB rows at a time, each row read once. The same FMA chains  \
       and folds of Q as tlr_nn_rows and the register tiles, so the same bits. buf: room for  \
       (complex: 2) * s * tlr_nn_mrows_so(L) reals, 64-byte aligned (the caller's: up to 99 KB,\
       more than a thread's stack should hold). */                                            \
    const ptrdiff_t f = cx ? 2 : 1, Lv = L - L % W, rem = L - Lv;                              \
    const ptrdiff_t Lm = TLR_MASKED_TAIL && rem ? Lv + W : Lv, Ls = TLR_MASKED_TAIL ? L : Lv;  \
    const ptrdiff_t so = tlr_nn_mrows_so_##sfx(L);                                             \
    R *out = buf, *q = cx ? buf + s * so : buf; /* (real: q is not used) */                    \
    ptrdiff_t t0 = 0, t, c;                                                                    \
    memset(out, 0, (size_t)(s * so) * sizeof(R));                                              \
    do {                                                                                       \
        const ptrdiff_t tb = nrows - t0 < TLR_NN_TB ? nrows - t0 : TLR_NN_TB;                  \
        if (cx) memset(q, 0, (size_t)(s * so) * sizeof(R));                                    \
        for (t = t0; t < t0 + tb; ) {                                                          \
            const ptrdiff_t rb = t0 + tb - t < TLR_NN_MRB ? t0 + tb - t : TLR_NN_MRB;          \
            const R *Bt = B + t * lr, *at = a + t * f, *pn = pf ? Bt + rb * lr : NULL;         \
            switch ((cx ? 64 : 0) + (int)rb * 8 + (int)s) {                                    \
            TLR_NN_MCASES(sfx)                                                                 \
            default: break;                                                                    \
            }                                                                                  \
            for (c = 0; c < s; c++)                                                            \
                tlr_nn_rtail_##sfx(Bt, lr, at + c * la, rb, out + c * so, q + c * so, Ls, L, cx);  \
            t += rb;                                                                           \
        }                                                                                      \
        if (cx)                                                                                \
            for (c = 0; c < s; c++) tlr_nn_fold_##sfx(out + c * so, q + c * so, Lm, Ls, L);     \
        t0 += tb;                                                                              \
    } while (t0 < nrows);                                                                      \
    for (c = 0; c < s; c++) memcpy(dst + c * lo, out + c * so, (size_t)L * sizeof(R));         \
}                                                                                              \
                                                                                               \
static void tlr_nn_##sfx(const R *B, ptrdiff_t nrows, ptrdiff_t ncols, ptrdiff_t ldb,          \
                         const R *a, ptrdiff_t lda, R *out, ptrdiff_t ldo, ptrdiff_t s, int cx, \
                         int pf)                                                               \
{                                                                                              \
    /* pf: the streamed rows (tlr_nn_rows, tlr_nn_rows_m) software-prefetch the next rows of  \
       B (worth it from L3 and DRAM, not within L2: the caller decides by the size of all the \
       bases); a hint only, the results do not depend on it. The register tiles prefetch     \
       blocks of whole rows (ldb == ncols) whatever pf says. */                               \
    const ptrdiff_t f = cx ? 2 : 1, L = ncols * f;                                             \
    const ptrdiff_t lr = ldb * f, la = lda * f, lo = ldo * f;                                  \
    if (s == 1 && L <= TLR_NN_ROWS_MAX) {                                                      \
        tlr_nn_rows_##sfx(B, nrows, L, lr, a, out, cx, pf);                                    \
        return;                                                                                \
    }                                                                                          \
    const ptrdiff_t g = (cx ? 1 : 2) * TLR_NN_MROWS_S; /* right-hand sides per row pass */   \
    if (g > 0 && L <= TLR_NN_ROWS_MAX                                                          \
        && (s <= g || (nrows * L * (ptrdiff_t)sizeof(R) <= TLR_NN_MROWS_BYTES                   \
                       && 2 * TLR_NN_MROWS_S * L * (ptrdiff_t)sizeof(R) <= TLR_NN_MROWS_L1))) { \
        const ptrdiff_t gs = s < g ? s : g;                                                    \
        void *mem = malloc((size_t)(f * gs * tlr_nn_mrows_so_##sfx(L)) * sizeof(R) + 64);       \
        if (mem) { /* (else the register tiles) */                                             \
            R *buf = (R *)((char *)mem + (64 - (uintptr_t)mem % 64) % 64);                     \
            ptrdiff_t c;                                                                       \
            for (c = 0; c < s; c += g) { /* a pass over B per group of g */                    \
                const ptrdiff_t sc = s - c < g ? s - c : g;                                    \
                if (sc == 1)                                                                   \
                    tlr_nn_rows_##sfx(B, nrows, L, lr, a + c * la, out + c * lo, cx, pf);      \
                else                                                                           \
                    tlr_nn_rows_m_##sfx(B, nrows, L, lr, a + c * la, la, out + c * lo, lo, sc, \
                                        cx, pf, buf);                                          \
            }                                                                                  \
            free(mem);                                                                         \
            return;                                                                            \
        }                                                                                      \
    }                                                                                          \
    /* one right-hand side: chunks of 4 vectors (8 or 4 independent FMA chains);              \
       several: TLR_NN_NV vectors times up to TLR_NN_SB_CX (complex) or TLR_NN_SB_RE (real)   \
       right-hand sides; the leftover full vectors 2 (NV = 4) or 1 at a time, then the        \
       partial one (masked where AVX is) */                                                    \
    const int NV = s == 1 ? 4 : TLR_NN_NV, SB = cx ? TLR_NN_SB_CX : TLR_NN_SB_RE;               \
    const ptrdiff_t Lv = L - L % W;                                                            \
    ptrdiff_t t0 = 0, l0, c0;                                                                  \
    do { /* nrows == 0: one pass that writes zeros */                                          \
        const ptrdiff_t tb = nrows - t0 < TLR_NN_TB ? nrows - t0 : TLR_NN_TB;                  \
        const int first = t0 == 0;                                                             \
        /* the next panel is contiguous (rows of B follow each other): its cache lines are    \
           prefetched in address order while this panel is computed, shared among the chunks  \
           (the strided chunk accesses alone keep too few lines in flight) */                 \
        const ptrdiff_t tn = nrows - t0 - tb < TLR_NN_TB ? nrows - t0 - tb : TLR_NN_TB;        \
        const ptrdiff_t lines = ldb == ncols ? (tn * lr * (ptrdiff_t)sizeof(R) + 63) / 64 : 0; \
        const ptrdiff_t rv = (Lv % (NV * W)) / W; /* vectors after the full chunks */          \
        const ptrdiff_t nch = Lv / (NV * W) + (NV > 2 ? rv / 2 + rv % 2 : rv);                 \
        const ptrdiff_t per = nch > 0 ? (lines + nch - 1) / nch : 0;                           \
        const char *nxt = (const char *)(B + (t0 + tb) * lr);                                  \
        ptrdiff_t ich = 0;                                                                     \
        for (l0 = 0; l0 < Lv; ) {                                                              \
            const int nv = Lv - l0 >= NV * W ? NV : NV > 2 && Lv - l0 >= 2 * W ? 2 : 1;        \
            const ptrdiff_t pf0 = ich * per < lines ? ich * per : lines;                       \
            const ptrdiff_t pfn0 = (lines - pf0 < per ? lines - pf0 : per);                    \
            ich++;                                                                             \
            for (c0 = 0; c0 < s; c0 += SB) {                                                   \
                const int sb = (int)(s - c0 < SB ? s - c0 : SB);                               \
                const char *pf = nxt + 64 * pf0;                                               \
                const ptrdiff_t pfn = c0 == 0 ? pfn0 : 0;                                      \
                const R *Bc = B + t0 * lr + l0, *ac = a + c0 * la + t0 * f;                    \
                R *oc = out + c0 * lo + l0;                                                    \
                /* constant S, NV, CX: each case is its own unrolled copy */                   \
                switch ((cx ? 64 : 0) + (nv == 4 ? 16 : nv == 2 ? 8 : 0) + sb) {               \
                TLR_NN_CASES(sfx)                                                              \
                default: break;                                                                \
                }                                                                              \
            }                                                                                  \
            l0 += nv * W;                                                                      \
        }                                                                                      \
        if (Lv < L && TLR_MASKED_TAIL) {                                                       \
            const ptrdiff_t rem = L - Lv;                                                      \
            for (c0 = 0; c0 < s; c0 += SB) {                                                   \
                const int sb = (int)(s - c0 < SB ? s - c0 : SB);                               \
                const R *Bc = B + t0 * lr + Lv, *ac = a + c0 * la + t0 * f;                    \
                R *oc = out + c0 * lo + Lv;                                                    \
                switch ((cx ? 64 : 0) + sb) {                                                  \
                TLR_NN_PCASES(sfx)                                                             \
                default: break;                                                                \
                }                                                                              \
            }                                                                                  \
        } else if (Lv < L)                                                                     \
            tlr_nn_tail_##sfx(B + t0 * lr + Lv, tb, lr, a + t0 * f, la, out + Lv, lo, L - Lv,  \
                              s, first, cx);                                                   \
        t0 += tb;                                                                              \
    } while (t0 < nrows);                                                                      \
}

/* switch cases of tlr_nn: real S = 1..6, complex S = 1..3, NV = 1, 2 or 4 */
#define TLR_NN_CASE(sfx, S, NV, CX)                                                            \
    case (CX ? 64 : 0) + (NV == 4 ? 16 : NV == 2 ? 8 : 0) + S:                                 \
        tlr_nn_blk_##sfx(Bc, tb, lr, ac, la, oc, lo, first, pf, pfn, 0, S, NV, CX, 0); break;
#define TLR_NN_CASES(sfx)                                                                      \
    TLR_NN_CASE(sfx, 1, 4, 0) TLR_NN_CASE(sfx, 1, 4, 1)                                        \
    TLR_NN_CASE(sfx, 1, 1, 0) TLR_NN_CASE(sfx, 2, 1, 0) TLR_NN_CASE(sfx, 3, 1, 0)              \
    TLR_NN_CASE(sfx, 4, 1, 0) TLR_NN_CASE(sfx, 5, 1, 0) TLR_NN_CASE(sfx, 6, 1, 0)              \
    TLR_NN_CASE(sfx, 1, 2, 0) TLR_NN_CASE(sfx, 2, 2, 0) TLR_NN_CASE(sfx, 3, 2, 0)              \
    TLR_NN_CASE(sfx, 4, 2, 0) TLR_NN_CASE(sfx, 5, 2, 0) TLR_NN_CASE(sfx, 6, 2, 0)              \
    TLR_NN_CASE(sfx, 1, 1, 1) TLR_NN_CASE(sfx, 2, 1, 1) TLR_NN_CASE(sfx, 3, 1, 1)              \
    TLR_NN_CASE(sfx, 1, 2, 1) TLR_NN_CASE(sfx, 2, 2, 1) TLR_NN_CASE(sfx, 3, 2, 1)              \
    TLR_NN_CASE(sfx, 2, 4, 0) TLR_NN_CASE(sfx, 3, 4, 0) TLR_NN_CASE(sfx, 4, 4, 0)              \
    TLR_NN_CASE(sfx, 5, 4, 0) TLR_NN_CASE(sfx, 6, 4, 0)                                        \
    TLR_NN_CASE(sfx, 2, 4, 1) TLR_NN_CASE(sfx, 3, 4, 1)
/* ... and of its partial last vector (masked loads and stores): S right-hand sides */
#define TLR_NN_PCASE(sfx, S, CX)                                                               \
    case (CX ? 64 : 0) + S:                                                                    \
        tlr_nn_blk_##sfx(Bc, tb, lr, ac, la, oc, lo, first, NULL, 0, rem, S, 1, CX, 1); break;
#define TLR_NN_PCASES(sfx)                                                                     \
    TLR_NN_PCASE(sfx, 1, 0) TLR_NN_PCASE(sfx, 2, 0) TLR_NN_PCASE(sfx, 3, 0)                    \
    TLR_NN_PCASE(sfx, 4, 0) TLR_NN_PCASE(sfx, 5, 0) TLR_NN_PCASE(sfx, 6, 0)                    \
    TLR_NN_PCASE(sfx, 1, 1) TLR_NN_PCASE(sfx, 2, 1) TLR_NN_PCASE(sfx, 3, 1)

/* switch cases of tlr_nn_rows_m: rows 1..TLR_NN_MRB x right-hand sides 2..2S (real), 2..S */
#define TLR_NN_MC(sfx, RB, S, CX)                                                              \
    case (CX ? 64 : 0) + RB * 8 + S:                                                           \
        if (S <= (CX ? 1 : 2) * TLR_NN_MROWS_S && RB <= TLR_NN_MRB)                            \
            tlr_nn_mrb_##sfx(Bt, lr, Lv, rem, at, la, out, q, so, pn, RB, S, CX);              \
        break;
#define TLR_NN_MC_RB(sfx, RB)                                                                  \
    TLR_NN_MC(sfx, RB, 2, 0) TLR_NN_MC(sfx, RB, 3, 0) TLR_NN_MC(sfx, RB, 4, 0)                 \
    TLR_NN_MC(sfx, RB, 5, 0) TLR_NN_MC(sfx, RB, 6, 0)                                          \
    TLR_NN_MC(sfx, RB, 2, 1) TLR_NN_MC(sfx, RB, 3, 1)
#define TLR_NN_MCASES(sfx)                                                                     \
    TLR_NN_MC_RB(sfx, 1) TLR_NN_MC_RB(sfx, 2) TLR_NN_MC_RB(sfx, 3) TLR_NN_MC_RB(sfx, 4)

#endif
