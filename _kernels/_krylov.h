/* Vector kernels of the Krylov solvers (wsesparse.linalg): a dot product, p = z + beta p, and
 * conjugate gradients' fused update x += alpha p, r -= alpha q with |r|^2 in the same pass.
 * numpy runs each of these on one thread and a temporary per scaled vector (x += alpha * p
 * reads p, writes alpha * p, reads it back); here they take the solver's OpenMP team and read
 * and write each vector once.
 *
 * Sums are reproducible: each WS_KRY_CHUNK elements add into 8 (real) or 4 (complex) fixed
 * accumulators in index order, folded in a fixed tree, and the chunks' partial sums are added
 * in chunk order after the parallel loop. Which thread computes a chunk does not change it, so
 * the bits do not depend on the thread count. Single-precision sums accumulate in double.
 *
 * No FMA: setup.py builds this module with -ffp-contract=off (and on x86 -mno-fma
 * -mno-avx512f, as GCC 12 fused complex products into vfmaddsub despite it), so every
 * product and sum rounds on its own, in a loop's vector body and its remainder alike.
 *
 * Complex vectors are passed as their real views (re, im pairs); n counts elements of the
 * dtype (complex numbers for complex ones). Scalars arrive as (re, im) doubles. _krylov.pyx
 * checks lengths, dtypes and contiguity; the callers (wsesparse.linalg) pass vectors that do
 * not overlap, except where a function says an output may be an input. */
#ifndef WSESPARSE_KRYLOV_H
#define WSESPARSE_KRYLOV_H

#include <stddef.h>
#include "_omp_compat.h"

#define WS_KRY_CHUNK 4096
/* The chunks of n elements, split among the team: a loop over chunk k whose body starts
 * with WS_KRY_CHUNK_AT (i0, the chunk's first element; m, its length). */
#define WS_KRY_NCH(n) (((n) + WS_KRY_CHUNK - 1) / WS_KRY_CHUNK)
#define WS_KRY_FOR_CHUNKS(n, nth, k)                                                           \
    _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")                   \
    for (ptrdiff_t k = 0; k < WS_KRY_NCH(n); k++)
#define WS_KRY_CHUNK_AT(n, k)                                                                  \
    const ptrdiff_t i0 = (k) * WS_KRY_CHUNK;                                                    \
    const ptrdiff_t m = (n) - i0 < WS_KRY_CHUNK ? (n) - i0 : WS_KRY_CHUNK

/* (a0 + i a1)(b0 + i b1), re and im, each product and sum rounded on its own (numpy's own
 * complex loops fuse some: agreement with them to rounding only) */
#define WS_CMUL_RE(a0, a1, b0, b1) ((a0) * (b0) - (a1) * (b1))
#define WS_CMUL_IM(a0, a1, b0, b1) ((a0) * (b1) + (a1) * (b0))

/* partial sums of the chunks: `width` values per chunk (part[width * c + j]), each added in
 * chunk order into res[j]; each thread writes its own chunks' entries */
static void ws_kry_sum_parts(const double *part, ptrdiff_t nch, int width, double *res)
{
    ptrdiff_t c;
    int j;
    for (j = 0; j < width; j++) res[j] = 0.0;
    for (c = 0; c < nch; c++)
        for (j = 0; j < width; j++) res[j] += part[width * c + j];
}

/* real: sum a_i b_i of one chunk, 8 accumulators in index order */
#define WS_KRY_REAL(R, sfx)                                                                     \
static inline double ws_kry_rdot_##sfx(const R *a, const R *b, ptrdiff_t n)                     \
{                                                                                               \
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                     \
    ptrdiff_t i = 0; int k;                                                                     \
    for (; i + 8 <= n; i += 8)                                                                  \
        for (k = 0; k < 8; k++) s[k] += (double)a[i + k] * (double)b[i + k];                    \
    for (k = 0; i < n; i++, k++) s[k] += (double)a[i] * (double)b[i];                           \
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));                   \
}                                                                                               \
                                                                                                \
/* y -= a x over n elements (complex, cx: a = a0 + i a1, interleaved vectors): the update of  \
   minres_b, bicg_r and mgs, each product and difference rounded on its own */                \
static inline void ws_kry_sub_scaled_##sfx(R *y, const R *x, ptrdiff_t n, int cx, R a0, R a1) \
{                                                                                               \
    ptrdiff_t i;                                                                                \
    if (!cx) {                                                                                  \
        for (i = 0; i < n; i++) y[i] = y[i] - a0 * x[i];                                        \
        return;                                                                                 \
    }                                                                                           \
    for (i = 0; i < n; i++) {                                                                   \
        const R xr = x[2 * i], xi = x[2 * i + 1];                                               \
        y[2 * i] -= WS_CMUL_RE(a0, a1, xr, xi);                                                 \
        y[2 * i + 1] -= WS_CMUL_IM(a0, a1, xr, xi);                                             \
    }                                                                                           \
}                                                                                               \
                                                                                                \
/* complex (interleaved): sum conj(a_i) b_i of one chunk of n complex, 4 accumulators each */  \
static inline void ws_kry_cdot_##sfx(const R *a, const R *b, ptrdiff_t n, double *re,          \
                                     double *im)                                                \
{                                                                                               \
    double sr[4] = {0, 0, 0, 0}, si[4] = {0, 0, 0, 0};                                          \
    ptrdiff_t i = 0; int k;                                                                     \
    for (; i + 4 <= n; i += 4)                                                                  \
        for (k = 0; k < 4; k++) {                                                               \
            const double ar = a[2 * (i + k)], ai = a[2 * (i + k) + 1];                          \
            const double br = b[2 * (i + k)], bi = b[2 * (i + k) + 1];                          \
            sr[k] += ar * br + ai * bi;                                                         \
            si[k] += ar * bi - ai * br;                                                         \
        }                                                                                       \
    for (k = 0; i < n; i++, k++) {                                                              \
        const double ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];        \
        sr[k] += ar * br + ai * bi;                                                             \
        si[k] += ar * bi - ai * br;                                                             \
    }                                                                                           \
    *re = (sr[0] + sr[1]) + (sr[2] + sr[3]);                                                    \
    *im = (si[0] + si[1]) + (si[2] + si[3]);                                                    \
}                                                                                               \
                                                                                                \
/* res[0] + i res[1] = sum conj(a_i) b_i (real: res[1] = 0); part: room for 2 * chunks */     \
static void ws_kry_dot_##sfx(const R *a, const R *b, ptrdiff_t n, int cx, double *part,        \
                             double *res, int nth)                                              \
{                                                                                               \
    WS_KRY_FOR_CHUNKS(n, nth, c) {                                                              \
        WS_KRY_CHUNK_AT(n, c);                                                                  \
        if (cx) ws_kry_cdot_##sfx(a + 2 * i0, b + 2 * i0, m, part + 2 * c, part + 2 * c + 1);  \
        else part[c] = ws_kry_rdot_##sfx(a + i0, b + i0, m);                                    \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), cx ? 2 : 1, res);                                     \
}                                                                                               \
                                                                                                \
/* p = z + beta p */                                                                            \
static void ws_kry_xpby_##sfx(R *p, const R *z, ptrdiff_t n, int cx, double br, double bi,     \
                              int nth)                                                          \
{                                                                                               \
    ptrdiff_t i;                                                                                \
    if (!cx) {                                                                                  \
        const R b = (R)br;                                                                      \
        _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")               \
        for (i = 0; i < n; i++) p[i] = z[i] + b * p[i];                                         \
    } else {                                                                                    \
        const R b0 = (R)br, b1 = (R)bi;                                                         \
        _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")               \
        for (i = 0; i < n; i++) {                                                               \
            const R pr = p[2 * i], pi = p[2 * i + 1];                                           \
            p[2 * i] = z[2 * i] + (b0 * pr - b1 * pi);                                          \
            p[2 * i + 1] = z[2 * i + 1] + (b0 * pi + b1 * pr);                                  \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
/* x += alpha p; r -= alpha q; returns sum |r_i|^2 of the new r (chunked as the dot) */        \
static double ws_kry_cg_update_##sfx(R *x, R *r, const R *p, const R *q, ptrdiff_t n, int cx,   \
                                     double ar, double ai, double *part, int nth)               \
{                                                                                               \
    const R a0 = (R)ar, a1 = (R)ai;                                                             \
    double res[2];                                                                              \
    WS_KRY_FOR_CHUNKS(n, nth, c) {                                                              \
        WS_KRY_CHUNK_AT(n, c);                                                                  \
        ptrdiff_t i;                                                                            \
        if (!cx) {                                                                              \
            R *xc = x + i0, *rc = r + i0;                                                       \
            const R *pc = p + i0, *qc = q + i0;                                                 \
            for (i = 0; i < m; i++) {                                                           \
                xc[i] += a0 * pc[i];                                                            \
                rc[i] -= a0 * qc[i];                                                            \
            }                                                                                   \
            part[c] = ws_kry_rdot_##sfx(rc, rc, m);                                             \
        } else {                                                                                \
            R *xc = x + 2 * i0, *rc = r + 2 * i0;                                               \
            const R *pc = p + 2 * i0, *qc = q + 2 * i0;                                         \
            for (i = 0; i < m; i++) {                                                           \
                const R pr = pc[2 * i], pi = pc[2 * i + 1], qr = qc[2 * i], qi = qc[2 * i + 1]; \
                xc[2 * i] += a0 * pr - a1 * pi;                                                 \
                xc[2 * i + 1] += a0 * pi + a1 * pr;                                             \
                rc[2 * i] -= a0 * qr - a1 * qi;                                                 \
                rc[2 * i + 1] -= a0 * qi + a1 * qr;                                             \
            }                                                                                   \
            /* |r|^2 as the real dot of the real views: 2m reals */                            \
            part[c] = ws_kry_rdot_##sfx(rc, rc, 2 * m);                                         \
        }                                                                                       \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), 1, res);                                              \
    return res[0];                                                                              \
}

WS_KRY_REAL(float, f)
WS_KRY_REAL(double, d)

/* MINRES (real vectors: scipy's minres takes inner products without conjugation; minres_b,
 * which BiCGSTAB calls too, also complex). Each returns a sum of squares or a dot product,
 * chunked as ws_kry_dot; scaled reads a complex vector as its reals. */
#define WS_KRY_MINRES(R, sfx)                                                                   \
/* out = s y */                                                                                 \
static void ws_kry_scaled_##sfx(R *out, const R *y, ptrdiff_t n, double s, int nth)            \
{                                                                                               \
    const R a = (R)s;                                                                           \
    ptrdiff_t i;                                                                                \
    _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")                   \
    for (i = 0; i < n; i++) out[i] = a * y[i];                                                  \
}                                                                                               \
                                                                                                \
/* y = (y - shift v) - c1 r1 (without r1 where use_r1 is 0); returns v . y */                  \
static double ws_kry_minres_a_##sfx(R *y, const R *v, const R *r1, ptrdiff_t n, double shift,  \
                                    double c1, int use_r1, double *part, int nth)               \
{                                                                                               \
    const R sh = (R)shift, c = (R)c1;                                                           \
    double res[2];                                                                              \
    WS_KRY_FOR_CHUNKS(n, nth, k) {                                                              \
        WS_KRY_CHUNK_AT(n, k);                                                                  \
        R *yc = y + i0;                                                                         \
        const R *vc = v + i0, *rc = r1 + i0;                                                    \
        ptrdiff_t i;                                                                            \
        if (use_r1)                                                                             \
            for (i = 0; i < m; i++) yc[i] = (yc[i] - sh * vc[i]) - c * rc[i];                   \
        else                                                                                    \
            for (i = 0; i < m; i++) yc[i] = yc[i] - sh * vc[i];                                 \
        part[k] = ws_kry_rdot_##sfx(vc, yc, m);                                                 \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), 1, res);                                              \
    return res[0];                                                                              \
}                                                                                               \
                                                                                                \
/* y = y - c2 r2 (complex: c2 = cr + i ci); returns sum |y_i|^2 of the new y (also BiCGSTAB's \
   r -= alpha v) */                                                                             \
static double ws_kry_minres_b_##sfx(R *y, const R *r2, ptrdiff_t n, int cx, double cr,         \
                                    double ci, double *part, int nth)                           \
{                                                                                               \
    const R c = (R)cr, c1 = (R)ci;                                                              \
    double res[1];                                                                              \
    WS_KRY_FOR_CHUNKS(n, nth, k) {                                                              \
        WS_KRY_CHUNK_AT(n, k);                                                                  \
        const ptrdiff_t f = cx ? 2 : 1;                                                         \
        ws_kry_sub_scaled_##sfx(y + f * i0, r2 + f * i0, m, cx, c, c1);                         \
        part[k] = ws_kry_rdot_##sfx(y + f * i0, y + f * i0, f * m);                             \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), 1, res);                                              \
    return res[0];                                                                              \
}                                                                                               \
                                                                                                \
/* w = ((v - oldeps w1) - delta w2) denom, the new direction (w: a third buffer), then     \
   x_out = x + phi w (x_out may be x); returns x_out . x_out */                                \
static double ws_kry_minres_c_##sfx(R *w, const R *w1, const R *w2, const R *v, const R *x,    \
                                    R *x_out, ptrdiff_t n, double oldeps, double delta,        \
                                    double denom, double phi, double *part, int nth)            \
{                                                                                               \
    const R oe = (R)oldeps, de = (R)delta, dn = (R)denom, ph = (R)phi;                          \
    double res[2];                                                                              \
    WS_KRY_FOR_CHUNKS(n, nth, k) {                                                              \
        WS_KRY_CHUNK_AT(n, k);                                                                  \
        R *wc = w + i0, *xo = x_out + i0;                                                       \
        const R *w1c = w1 + i0, *w2c = w2 + i0, *vc = v + i0, *xc = x + i0;                     \
        ptrdiff_t i;                                                                            \
        for (i = 0; i < m; i++) {                                                               \
            const R wi = ((vc[i] - oe * w1c[i]) - de * w2c[i]) * dn;                            \
            wc[i] = wi;                                                                         \
            xo[i] = xc[i] + ph * wi;                                                            \
        }                                                                                       \
        part[k] = ws_kry_rdot_##sfx(xo, xo, m);                                                 \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), 1, res);                                              \
    return res[0];                                                                              \
}

WS_KRY_MINRES(float, f)
WS_KRY_MINRES(double, d)

/* Jacobi preconditioning: z = d * r elementwise; returns sum conj(r_i) z_i (chunked as the
 * dot; complex: res[0] + i res[1]). */
#define WS_KRY_DIAG(R, sfx)                                                                     \
static void ws_kry_diag_##sfx(R *z, const R *d, const R *r, ptrdiff_t n, int cx, double *part, \
                              double *res, int nth)                                             \
{                                                                                               \
    WS_KRY_FOR_CHUNKS(n, nth, k) {                                                              \
        WS_KRY_CHUNK_AT(n, k);                                                                  \
        ptrdiff_t i;                                                                            \
        if (!cx) {                                                                              \
            R *zc = z + i0;                                                                     \
            const R *dc = d + i0, *rc = r + i0;                                                 \
            for (i = 0; i < m; i++) zc[i] = dc[i] * rc[i];                                      \
            part[k] = ws_kry_rdot_##sfx(rc, zc, m);                                             \
        } else {                                                                                \
            R *zc = z + 2 * i0;                                                                 \
            const R *dc = d + 2 * i0, *rc = r + 2 * i0;                                         \
            for (i = 0; i < m; i++) {                                                           \
                const R dr = dc[2 * i], di = dc[2 * i + 1], rr = rc[2 * i], ri = rc[2 * i + 1]; \
                zc[2 * i] = dr * rr - di * ri;                                                  \
                zc[2 * i + 1] = dr * ri + di * rr;                                              \
            }                                                                                   \
            ws_kry_cdot_##sfx(rc, zc, m, part + 2 * k, part + 2 * k + 1);                       \
        }                                                                                       \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), cx ? 2 : 1, res);                                     \
}

WS_KRY_DIAG(float, f)
WS_KRY_DIAG(double, d)

/* BiCGSTAB, real and complex (cx; complex scalars as (re, im) doubles, the order of numpy's
 * in-place steps kept: each step rounds to the vectors' dtype). */
#define WS_KRY_BICG(R, sfx)                                                                     \
/* p = ((p - omega v) beta) + r, scipy's three in-place steps in one pass */                    \
static void ws_kry_bicg_p_##sfx(R *p, const R *r, const R *v, ptrdiff_t n, int cx, double br,  \
                                double bi, double omr, double omi, int nth)                     \
{                                                                                               \
    const R be = (R)br, be1 = (R)bi, om = (R)omr, om1 = (R)omi;                                 \
    ptrdiff_t i;                                                                                \
    if (!cx) {                                                                                  \
        _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")               \
        for (i = 0; i < n; i++) p[i] = ((p[i] - om * v[i]) * be) + r[i];                        \
    } else {                                                                                    \
        _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")               \
        for (i = 0; i < n; i++) {                                                               \
            const R vr = v[2 * i], vi = v[2 * i + 1];                                           \
            const R tr = p[2 * i] - WS_CMUL_RE(om, om1, vr, vi);                                \
            const R ti = p[2 * i + 1] - WS_CMUL_IM(om, om1, vr, vi);                            \
            p[2 * i] = WS_CMUL_RE(tr, ti, be, be1) + r[2 * i];                                  \
            p[2 * i + 1] = WS_CMUL_IM(tr, ti, be, be1) + r[2 * i + 1];                          \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
/* x = (x + alpha phat) + omega shat */                                                         \
static void ws_kry_bicg_x_##sfx(R *x, const R *ph, const R *sh, ptrdiff_t n, int cx,           \
                                double alr, double ali, double omr, double omi, int nth)        \
{                                                                                               \
    const R al = (R)alr, al1 = (R)ali, om = (R)omr, om1 = (R)omi;                               \
    ptrdiff_t i;                                                                                \
    if (!cx) {                                                                                  \
        _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")               \
        for (i = 0; i < n; i++) x[i] = (x[i] + al * ph[i]) + om * sh[i];                        \
    } else {                                                                                    \
        _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")               \
        for (i = 0; i < n; i++) {                                                               \
            const R pr = ph[2 * i], pi = ph[2 * i + 1], sr = sh[2 * i], si = sh[2 * i + 1];     \
            x[2 * i] = (x[2 * i] + WS_CMUL_RE(al, al1, pr, pi)) + WS_CMUL_RE(om, om1, sr, si);  \
            x[2 * i + 1] = (x[2 * i + 1] + WS_CMUL_IM(al, al1, pr, pi))                         \
                           + WS_CMUL_IM(om, om1, sr, si);                                       \
        }                                                                                       \
    }                                                                                           \
}                                                                                               \
                                                                                                \
/* res = (a . b, a . a): real res[0], res[1]; complex vdot(a, b) = res[0] + i res[1] and       \
   |a|^2 = res[2] */                                                                            \
static void ws_kry_dot2_##sfx(const R *a, const R *b, ptrdiff_t n, int cx, double *part,       \
                              double *res, int nth)                                             \
{                                                                                               \
    WS_KRY_FOR_CHUNKS(n, nth, k) {                                                              \
        WS_KRY_CHUNK_AT(n, k);                                                                  \
        if (!cx) {                                                                              \
            part[2 * k] = ws_kry_rdot_##sfx(a + i0, b + i0, m);                                 \
            part[2 * k + 1] = ws_kry_rdot_##sfx(a + i0, a + i0, m);                             \
        } else {                                                                                \
            ws_kry_cdot_##sfx(a + 2 * i0, b + 2 * i0, m, part + 3 * k, part + 3 * k + 1);       \
            part[3 * k + 2] = ws_kry_rdot_##sfx(a + 2 * i0, a + 2 * i0, 2 * m);                 \
        }                                                                                       \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), cx ? 3 : 2, res);                                     \
}                                                                                               \
                                                                                                \
/* r -= omega t; res = (r . r, rt . r) of the new r: real res[0], res[1]; complex |r|^2 =       \
   res[0] and vdot(rt, r) = res[1] + i res[2] */                                                \
static void ws_kry_bicg_r_##sfx(R *r, const R *t, const R *rt, ptrdiff_t n, int cx,            \
                                double omr, double omi, double *part, double *res, int nth)     \
{                                                                                               \
    const R om = (R)omr, om1 = (R)omi;                                                          \
    WS_KRY_FOR_CHUNKS(n, nth, k) {                                                              \
        WS_KRY_CHUNK_AT(n, k);                                                                  \
        const ptrdiff_t f = cx ? 2 : 1;                                                         \
        R *rc = r + f * i0;                                                                     \
        ws_kry_sub_scaled_##sfx(rc, t + f * i0, m, cx, om, om1);                                \
        if (!cx) {                                                                              \
            part[2 * k] = ws_kry_rdot_##sfx(rc, rc, m);                                         \
            part[2 * k + 1] = ws_kry_rdot_##sfx(rt + i0, rc, m);                                \
        } else {                                                                                \
            part[3 * k] = ws_kry_rdot_##sfx(rc, rc, 2 * m);                                     \
            ws_kry_cdot_##sfx(rt + 2 * i0, rc, m, part + 3 * k + 1, part + 3 * k + 2);          \
        }                                                                                       \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), cx ? 3 : 2, res);                                     \
}

WS_KRY_BICG(float, f)
WS_KRY_BICG(double, d)

/* GMRES's modified Gram-Schmidt, one step a pass: w -= h vk (complex h = hr + i hi), then
 * vdot(u, w) of the new w (u: the next basis vector, or w itself for |w|^2 after the last
 * step); res[0] (+ i res[1], complex). */
#define WS_KRY_MGS(R, sfx)                                                                      \
static void ws_kry_mgs_##sfx(R *w, const R *vk, const R *u, ptrdiff_t n, int cx, double hr,    \
                             double hi, double *part, double *res, int nth)                     \
{                                                                                               \
    const R hh = (R)hr, h1 = (R)hi;                                                             \
    WS_KRY_FOR_CHUNKS(n, nth, k) {                                                              \
        WS_KRY_CHUNK_AT(n, k);                                                                  \
        const ptrdiff_t f = cx ? 2 : 1;                                                         \
        R *wc = w + f * i0;                                                                     \
        ws_kry_sub_scaled_##sfx(wc, vk + f * i0, m, cx, hh, h1);                                \
        if (!cx) part[k] = ws_kry_rdot_##sfx(u + i0, wc, m);                                    \
        else ws_kry_cdot_##sfx(u + 2 * i0, wc, m, part + 2 * k, part + 2 * k + 1);              \
    }                                                                                           \
    ws_kry_sum_parts(part, WS_KRY_NCH(n), cx ? 2 : 1, res);                                     \
}

WS_KRY_MGS(float, f)
WS_KRY_MGS(double, d)

#endif
