/* The adjoint block kernel of the TLR-MVM, tlr_cn (see _tiles_tlr.h), instantiated there by
 * TLR_DEFINE_CN. */
#ifndef WSESPARSE_TILES_TLR_CN_H
#define WSESPARSE_TILES_TLR_CN_H

#include "_tiles_tlr_ops.h"

/* Register tiles of tlr_cn with several right-hand sides: rows x right-hand sides, complex
 * and real (shapes measured with tlr_nn's, _tiles_tlr_nn.h, "Register tiles"). */
#ifndef TLR_CN_RB_CX
#define TLR_CN_RB_CX (TLR_WIDE_DEFAULT ? 4 : 2)
#endif
#ifndef TLR_CN_SB_CX
#define TLR_CN_SB_CX (TLR_WIDE_DEFAULT ? 3 : 2)
#endif
#ifndef TLR_CN_RB_RE
#define TLR_CN_RB_RE (TLR_WIDE_DEFAULT ? 6 : 3)
#endif
#ifndef TLR_CN_SB_RE
#define TLR_CN_SB_RE (TLR_WIDE_DEFAULT ? 4 : 3)
#endif
#if TLR_CN_RB_CX > 4 || TLR_CN_SB_CX > 3 || TLR_CN_RB_RE > 6 || TLR_CN_SB_RE > 4
#error "tlr_cn has no register tile of this shape (TLR_CN_RB_*, TLR_CN_SB_*)"
#endif

#define TLR_DEFINE_CN(R, V, W, sfx)                                                            \
TLR_INLINE void tlr_cn_blk_##sfx(const R *B, ptrdiff_t ldr, ptrdiff_t L,                       \
                                 const R *a, ptrdiff_t ldar, R *out, ptrdiff_t ldo, int pf,    \
                                 const int RR, const int S, const int CX)                      \
{                                                                                              \
    /* RR rows of B (stride ldr reals) against S vectors (stride ldar reals), L reals long;    \
       out[c * ldo + r] in elements of the dtype (ldo counts elements). pf (S == 1; S > 1 at  \
       2, bases beyond L3: from L3 it cost 0-6 %, from DRAM it saved 6-21 % on Zen 4): a cache \
       line of each of the next RR rows per two vectors, as tlr_nn_rows does (adjoint s = 1,  \
       2-core Zen 3, 2 threads: 9801^2 complex64 1955 -> 1447 us, float32 0.70x, float64     \
       0.98x, complex128 0.91x; 2499^2 0.87-0.95x; within L2 1.02-1.07x, so the caller asks  \
       only where the bases exceed L2; docs/tuning.md, "TLR tiles"). */                      \
    V P[8][4], Q[8][4];                                                                        \
    ptrdiff_t l; int r, c;                                                                     \
    for (r = 0; r < RR; r++)                                                                   \
        for (c = 0; c < S; c++) { P[r][c] = tlr_zero_##sfx(); Q[r][c] = P[r][c]; }             \
    for (l = 0; l + W <= L; l += W) {                                                          \
        V av[4], as[4];                                                                        \
        if ((S == 1 ? pf : pf > 1) && !(l & W))                                                \
            for (r = 0; r < RR; r++) TLR_PREFETCH(B + (RR + r) * ldr + l);                     \
        for (c = 0; c < S; c++) {                                                              \
            av[c] = tlr_ld_##sfx(a + c * ldar + l);                                            \
            if (CX) as[c] = tlr_swap_##sfx(av[c]);                                             \
        }                                                                                      \
        for (r = 0; r < RR; r++) {                                                             \
            const V b = tlr_ld_##sfx(B + r * ldr + l);                                         \
            for (c = 0; c < S; c++) {                                                          \
                P[r][c] = tlr_fma_##sfx(b, av[c], P[r][c]);                                    \
                if (CX) Q[r][c] = tlr_fma_##sfx(b, as[c], Q[r][c]);                            \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    if (l < L) {                                                                               \
        V av[4], as[4];                                                                        \
        for (c = 0; c < S; c++) {                                                              \
            av[c] = tlr_ldm_##sfx(a + c * ldar + l, L - l);                                    \
            if (CX) as[c] = tlr_swap_##sfx(av[c]);                                             \
        }                                                                                      \
        for (r = 0; r < RR; r++) {                                                             \
            const V b = tlr_ldm_##sfx(B + r * ldr + l, L - l);                                 \
            for (c = 0; c < S; c++) {                                                          \
                P[r][c] = tlr_fma_##sfx(b, av[c], P[r][c]);                                    \
                if (CX) Q[r][c] = tlr_fma_##sfx(b, as[c], Q[r][c]);                            \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    for (c = 0; c < S; c++)                                                                    \
        for (r = 0; r < RR; r++) {                                                             \
            if (CX) {                                                                          \
                out[2 * (c * ldo + r)] = tlr_hsum_##sfx(P[r][c]);                              \
                out[2 * (c * ldo + r) + 1] = tlr_hdiff_##sfx(Q[r][c]);                         \
            } else {                                                                           \
                out[c * ldo + r] = tlr_hsum_##sfx(P[r][c]);                                    \
            }                                                                                  \
        }                                                                                      \
}                                                                                              \
                                                                                               \
static void tlr_cn_##sfx(const R *B, ptrdiff_t nrows, ptrdiff_t ncols, ptrdiff_t ldb,          \
                         const R *a, ptrdiff_t lda, R *out, ptrdiff_t ldo, ptrdiff_t s, int cx, \
                         int pf)                                                               \
{                                                                                              \
    const ptrdiff_t f = cx ? 2 : 1, L = ncols * f, lr = ldb * f, la = lda * f;                 \
    ptrdiff_t r0, c0;                                                                          \
    /* one right-hand side: more rows at once (independent FMA chains);                       \
       several: TLR_CN_RB_CX x TLR_CN_SB_CX (complex) or TLR_CN_RB_RE x TLR_CN_SB_RE tiles */  \
    const int RB = s == 1 ? (cx ? 4 : 8) : (cx ? TLR_CN_RB_CX : TLR_CN_RB_RE);                \
    const int SB = cx ? TLR_CN_SB_CX : TLR_CN_SB_RE;                                           \
    for (r0 = 0; r0 < nrows; r0 += RB) {                                                       \
        const int rb = (int)(nrows - r0 < RB ? nrows - r0 : RB);                               \
        for (c0 = 0; c0 < s; c0 += SB) {                                                       \
            const int sb = (int)(s - c0 < SB ? s - c0 : SB);                                   \
            const R *Br = B + r0 * lr, *ac = a + c0 * la;                                      \
            R *oc = out + (c0 * ldo + r0) * f;                                                 \
            switch ((cx ? 64 : 0) + rb * 8 + sb) {                                             \
            TLR_CN_CASES(sfx)                                                                  \
            default: break;                                                                    \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
}

/* switch cases of tlr_cn: real rows 1..8 x vectors 1..4 where used, complex rows 1..4 x 1..3 */
#define TLR_CN_R(sfx, RR, S) \
    case RR * 8 + S: tlr_cn_blk_##sfx(Br, lr, L, ac, la, oc, ldo, pf, RR, S, 0); break;
#define TLR_CN_C(sfx, RR, S) \
    case 64 + RR * 8 + S: tlr_cn_blk_##sfx(Br, lr, L, ac, la, oc, ldo, pf, RR, S, 1); break;
#define TLR_CN_CASES(sfx)                                                                    \
    TLR_CN_R(sfx, 1, 1) TLR_CN_R(sfx, 2, 1) TLR_CN_R(sfx, 3, 1) TLR_CN_R(sfx, 4, 1)          \
    TLR_CN_R(sfx, 5, 1) TLR_CN_R(sfx, 6, 1) TLR_CN_R(sfx, 7, 1) TLR_CN_R(sfx, 8, 1)          \
    TLR_CN_R(sfx, 1, 2) TLR_CN_R(sfx, 2, 2) TLR_CN_R(sfx, 3, 2)                              \
    TLR_CN_R(sfx, 1, 3) TLR_CN_R(sfx, 2, 3) TLR_CN_R(sfx, 3, 3)                              \
    TLR_CN_R(sfx, 1, 4) TLR_CN_R(sfx, 2, 4) TLR_CN_R(sfx, 3, 4)                              \
    TLR_CN_C(sfx, 1, 1) TLR_CN_C(sfx, 2, 1) TLR_CN_C(sfx, 3, 1) TLR_CN_C(sfx, 4, 1)          \
    TLR_CN_C(sfx, 1, 2) TLR_CN_C(sfx, 2, 2)                                                  \
    TLR_CN_C(sfx, 1, 3) TLR_CN_C(sfx, 2, 3)                                                  \
    TLR_CN_R(sfx, 4, 2) TLR_CN_R(sfx, 5, 2) TLR_CN_R(sfx, 6, 2)                              \
    TLR_CN_R(sfx, 4, 3) TLR_CN_R(sfx, 5, 3) TLR_CN_R(sfx, 6, 3)                              \
    TLR_CN_R(sfx, 4, 4) TLR_CN_R(sfx, 5, 4) TLR_CN_R(sfx, 6, 4)                              \
    TLR_CN_C(sfx, 3, 2) TLR_CN_C(sfx, 4, 2) TLR_CN_C(sfx, 3, 3) TLR_CN_C(sfx, 4, 3)

#endif
