/*
 * Register-blocked AXPY tiles for the sparse x dense kernel (_spmm.pyx).
 *
 * ws_tile_<T>_<I>_<NV>(indices, data, p0, p1, X, ldx, y):
 *     y[0 : NV*VL] = sum over p in [p0, p1) of data[p] * X[indices[p]*ldx + 0 : NV*VL]
 * where VL is the number of <T> values in a 32-byte vector. The NV
 * accumulators are named vector variables, so they live in registers while the
 * row's nonzeros stream past; each output element is summed in stored order.
 * Pointers need no alignment. Arguments are validated by the Python layer.
 *
 * Without GCC/Clang vector extensions the same functions are plain loops.
 */
#ifndef WSESPARSE_AXPY_TILES_H
#define WSESPARSE_AXPY_TILES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define WS_HAVE_VEC 1
typedef float ws_vf __attribute__((vector_size(32), aligned(4)));
typedef double ws_vd __attribute__((vector_size(32), aligned(8)));
#else
#define WS_HAVE_VEC 0
#endif

#define WS_VL_float 8
#define WS_VL_double 4

#if WS_HAVE_VEC

/* Rows of X are visited in the order of a row's column indices, which the
 * hardware prefetcher cannot guess: fetch the tile of the nonzero WS_PF_DIST
 * places ahead (within the same row) explicitly. */
#ifndef WS_PF_DIST
#define WS_PF_DIST 8
#endif
#define WS_PREFETCH_ROWS(T, NV)                                                   \
    if (WS_PF_DIST > 0 && p + WS_PF_DIST < p1) {                                  \
        const char *xp = (const char *)(X + (ptrdiff_t)indices[p + WS_PF_DIST] * ldx); \
        for (int c = 0; c < (int)(NV * 32); c += 64) __builtin_prefetch(xp + c);  \
    }

#define WS_ACC_DECL(k) V a##k = (V){0};
#define WS_ACC_STEP(k) a##k += w * *(const V *)(x + (k) * VL);
#define WS_ACC_STORE(k) *(V *)(y + (k) * VL) = a##k;

/* NV vectors, spelled out so every accumulator is its own register. */
#define WS_REPEAT_1(M) M(0)
#define WS_REPEAT_2(M) M(0) M(1)
#define WS_REPEAT_4(M) M(0) M(1) M(2) M(3)
#define WS_REPEAT_8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)

#define WS_DEFINE_TILE(T, VT, I, NV)                                              \
static inline void ws_tile_##T##_##I##_##NV(const I *indices, const T *data,      \
                                            ptrdiff_t p0, ptrdiff_t p1,           \
                                            const T *X, ptrdiff_t ldx, T *y)      \
{                                                                                 \
    typedef VT V;                                                                 \
    enum { VL = WS_VL_##T };                                                      \
    WS_REPEAT_##NV(WS_ACC_DECL)                                                   \
    for (ptrdiff_t p = p0; p < p1; ++p) {                                         \
        const T *x = X + (ptrdiff_t)indices[p] * ldx;                             \
        const V w = (V){0} + data[p];                                             \
        WS_PREFETCH_ROWS(T, NV)                                                   \
        WS_REPEAT_##NV(WS_ACC_STEP)                                               \
    }                                                                             \
    WS_REPEAT_##NV(WS_ACC_STORE)                                                  \
}

#else /* portable fallback */

#define WS_DEFINE_TILE(T, VT, I, NV)                                              \
static inline void ws_tile_##T##_##I##_##NV(const I *indices, const T *data,      \
                                            ptrdiff_t p0, ptrdiff_t p1,           \
                                            const T *X, ptrdiff_t ldx, T *y)      \
{                                                                                 \
    enum { W = NV * WS_VL_##T };                                                  \
    T acc[W];                                                                     \
    for (int t = 0; t < W; ++t) acc[t] = 0;                                       \
    for (ptrdiff_t p = p0; p < p1; ++p) {                                         \
        const T *x = X + (ptrdiff_t)indices[p] * ldx;                             \
        const T w = data[p];                                                      \
        for (int t = 0; t < W; ++t) acc[t] += w * x[t];                           \
    }                                                                             \
    for (int t = 0; t < W; ++t) y[t] = acc[t];                                    \
}

#endif

#define WS_DEFINE_TILES(T, VT, I) \
    WS_DEFINE_TILE(T, VT, I, 1)   \
    WS_DEFINE_TILE(T, VT, I, 2)   \
    WS_DEFINE_TILE(T, VT, I, 4)   \
    WS_DEFINE_TILE(T, VT, I, 8)

#if !WS_HAVE_VEC
typedef float ws_vf;
typedef double ws_vd;
#endif

/*
 * ws_span_<T>_<I>(...): covers y[0 : nt] with as many whole-vector tiles as fit
 * (widest first) and returns how many columns it did; the caller finishes the
 * last (fewer than one vector) columns.
 */
#define WS_DEFINE_SPAN(T, VT, I)                                                  \
WS_DEFINE_TILES(T, VT, I)                                                         \
static inline ptrdiff_t ws_span_##T##_##I(const I *indices, const T *data,        \
                                          ptrdiff_t p0, ptrdiff_t p1,             \
                                          const T *X, ptrdiff_t ldx, T *y,        \
                                          ptrdiff_t nt)                           \
{                                                                                 \
    enum { VL = WS_VL_##T };                                                      \
    ptrdiff_t t = 0;                                                              \
    for (; t + 8 * VL <= nt; t += 8 * VL)                                         \
        ws_tile_##T##_##I##_8(indices, data, p0, p1, X + t, ldx, y + t);          \
    if (t + 4 * VL <= nt) {                                                       \
        ws_tile_##T##_##I##_4(indices, data, p0, p1, X + t, ldx, y + t);          \
        t += 4 * VL;                                                              \
    }                                                                             \
    if (t + 2 * VL <= nt) {                                                       \
        ws_tile_##T##_##I##_2(indices, data, p0, p1, X + t, ldx, y + t);          \
        t += 2 * VL;                                                              \
    }                                                                             \
    if (t + VL <= nt) {                                                           \
        ws_tile_##T##_##I##_1(indices, data, p0, p1, X + t, ldx, y + t);          \
        t += VL;                                                                  \
    }                                                                             \
    return t;                                                                     \
}

/*
 * ws_dot_<T>_<I>(...): sum over p in [p0, p1) of data[p] * x[indices[p]], with
 * four partial sums (combined in a fixed way) to hide the add latency.
 * Kept scalar on purpose: the vectorizer would turn the x[indices[p]] loads
 * into gather instructions, which are slower than scalar loads on many x86
 * cores (AMD Zen in particular).
 */
#if defined(__GNUC__) && !defined(__clang__)
#define WS_SCALAR_LOOP __attribute__((optimize("no-tree-vectorize")))
#else
#define WS_SCALAR_LOOP
#endif
#define WS_DEFINE_DOT(T, I)                                                       \
WS_SCALAR_LOOP static inline T ws_dot_##T##_##I(const I *indices, const T *data,  \
                                                ptrdiff_t p0, ptrdiff_t p1,       \
                                                const T *x)                       \
{                                                                                 \
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                             \
    ptrdiff_t p = p0;                                                             \
    for (; p + 4 <= p1; p += 4) {                                                 \
        s0 += data[p] * x[indices[p]];                                            \
        s1 += data[p + 1] * x[indices[p + 1]];                                    \
        s2 += data[p + 2] * x[indices[p + 2]];                                    \
        s3 += data[p + 3] * x[indices[p + 3]];                                    \
    }                                                                             \
    for (; p < p1; ++p)                                                           \
        s0 += data[p] * x[indices[p]];                                            \
    return (s0 + s1) + (s2 + s3);                                                 \
}
WS_DEFINE_DOT(float, int32_t)
WS_DEFINE_DOT(float, int64_t)
WS_DEFINE_DOT(double, int32_t)
WS_DEFINE_DOT(double, int64_t)

WS_DEFINE_SPAN(float, ws_vf, int32_t)
WS_DEFINE_SPAN(float, ws_vf, int64_t)
WS_DEFINE_SPAN(double, ws_vd, int32_t)
WS_DEFINE_SPAN(double, ws_vd, int64_t)

#endif
