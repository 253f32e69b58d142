/* Register-tiled kernels of the three-phase TLR-MVM (used by _tlrmvm.pyx).
 *
 * Two block kernels cover all four phases that touch the bases (forward phase
 * 1 and 3, adjoint phase 1 and 3), for s right-hand sides at once:
 *
 *   tlr_nn_*  out[c, 0:ncols]  = sum_{t < nrows} a[c, t] * B[t, 0:ncols]
 *             (the forward GEMV of a stacked basis: one pass over the rows of
 *             B, each row multiplied by the s scalars a[c, t] held in registers)
 *   tlr_cn_*  out[c, r]        = sum_{l < ncols} conj(B[r, l]) * a[c, l]
 *             (the adjoint: dot products over the same contiguous rows of B,
 *             so the adjoint reads the bases in the order the forward does;
 *             no transposed copy)
 *
 * B is row-major (nrows x ncols, row stride ldb); a and out hold s vectors
 * with strides lda and ldo. Complex arrays are passed as their real views
 * (re, im pairs); all counts and strides are in elements of the matrix dtype.
 *
 * Complex arithmetic as real FMAs on the interleaved (re, im) vectors, with
 * no shuffle of the accumulators in the inner loops:
 *   nn: P[c] += Re(a_ct) * row, Q[c] += Im(a_ct) * row; out = P + (-1, +1,
 *       ...) * swap(Q) at the end of each panel of TLR_NN_TB rows (the next
 *       panel continues P from out, Q from 0). (Swapping each row instead, as
 *       before, gives the same products in the same chains: the same bits,
 *       and one shuffle per row vector more; docs/tuning.md, "TLR tiles".)
 *   cn: P += row * a, Q += row * swap(a) lane-wise; at the end
 *       Re = sum of P's lanes, Im = sum of Q's even lanes - sum of its odd lanes.
 *
 * Bitwise reproducibility: every output element is one fixed chain of FMAs
 * over t (nn, in fixed panels) or per lane over l (cn, then a fixed lane
 * sum; the tails are computed element-wise with the same operations), whatever the
 * register tile it falls in, the number of right-hand sides and the number of
 * threads. So column c of a product with s right-hand sides equals the
 * product with that column alone, bit for bit. The FMAs are written out
 * (setup.py builds modules that include a _tiles_*.h header with
 * -ffp-contract=off). TLR_NN_TB is part of the summation order: it is fixed
 * at build time, not tuned at run time.
 */
#ifndef WSESPARSE_TILES_TLR_H
#define WSESPARSE_TILES_TLR_H

#include "_tiles_tlr_nn.h"
#include "_tiles_tlr_cn.h"

TLR_ZMM_FN(float, 8, f)
TLR_ZMM_FN(double, 4, d)

TLR_DEFINE_NN(float, tlr_v8f, 8, f, TLR_NN_MRBZ)
TLR_DEFINE_NN(double, tlr_v4d, 4, d, TLR_NN_MRBZ)
#if TLR_NN_ZMM_TILES
TLR_DEFINE_NN(float, tlr_zv_f, 16, fz, TLR_NN_NO_MRBZ)
TLR_DEFINE_NN(double, tlr_zv_d, 8, dz, TLR_NN_NO_MRBZ)
#define TLR_NN_SEVERAL(sfx) tlr_nn_##sfx##z
#else
#define TLR_NN_SEVERAL(sfx) tlr_nn_##sfx
#endif

/* The forward block kernel: one right-hand side through the 32-byte kernels (tlr_nn_rows,
 * which reads rows in zmm itself where that was faster, or the register tiles for rows over
 * TLR_NN_ROWS_MAX reals), several through the 64-byte kernels where TLR_NN_ZMM_TILES
 * (_tiles_tlr_nn.h) has them. */
#define TLR_DEFINE_FORWARD(R, sfx)                                                             \
static void tlr_forward_##sfx(const R *B, ptrdiff_t nrows, ptrdiff_t ncols, ptrdiff_t ldb,     \
                              const R *a, ptrdiff_t lda, R *out, ptrdiff_t ldo, ptrdiff_t s,   \
                              int cx, int pf)                                                  \
{                                                                                              \
    if (s > 1)                                                                                 \
        TLR_NN_SEVERAL(sfx)(B, nrows, ncols, ldb, a, lda, out, ldo, s, cx, pf);                \
    else                                                                                       \
        tlr_nn_##sfx(B, nrows, ncols, ldb, a, lda, out, ldo, s, cx, pf);                       \
}
TLR_DEFINE_FORWARD(float, f)
TLR_DEFINE_FORWARD(double, d)
TLR_DEFINE_CN(float, tlr_v8f, 8, f)
TLR_DEFINE_CN(double, tlr_v4d, 4, d)

#endif
