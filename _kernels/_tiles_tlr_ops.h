/* Vector primitives of the TLR-MVM kernels (_tiles_tlr_nn.h, _tiles_tlr_cn.h; the
 * summation order they keep is described in _tiles_tlr.h). */
#ifndef WSESPARSE_TILES_TLR_OPS_H
#define WSESPARSE_TILES_TLR_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define TLR_INLINE static inline __attribute__((always_inline))
#define TLR_NOINLINE static __attribute__((noinline))
#define TLR_ALIGNED __attribute__((aligned(64)))
#define TLR_VECEXT 1
#else
#define TLR_INLINE static __forceinline
#define TLR_NOINLINE static __declspec(noinline)
#define TLR_ALIGNED __declspec(align(64))
#endif

/* The software prefetches of the bases ask for L2 (prefetcht1), not L1: on a 2-core Zen 4 the
 * single-vector forward from DRAM went from 14 to 20 GB/s on one thread (the plain read: 22-23)
 * and 24 to 29-31 on two; on Zen 3 the level made no difference (docs/tuning.md, "TLR tiles"). */
#ifndef TLR_PF_LOCALITY
#define TLR_PF_LOCALITY 2
#endif
/* a hint only: never faults, also past the end of an array */
#if defined(TLR_VECEXT) && !defined(TLR_NO_PREFETCH)
#define TLR_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, TLR_PF_LOCALITY)
#else
#define TLR_PREFETCH(p) ((void)0)
#endif

#if defined(TLR_VECEXT) && (defined(__x86_64__) || defined(__i386__)) && defined(__FMA__)
#include <immintrin.h>
#define TLR_X86_FMA 1
#endif
/* The value in a register from here on: GCC otherwise folded a row vector's load into each
 * of its FMAs as a memory operand, twice the loads (docs/tuning.md, "One right-hand side in
 * zmm"). */
#if defined(TLR_X86_FMA) && !defined(TLR_NO_IN_REG)
#define TLR_IN_REG(v) __asm__("" : "+v"(v))
#else
#define TLR_IN_REG(v) ((void)0)
#endif
/* 64-byte vectors where AVX-512F has them (the same FMA per element as the 32-byte code, so
 * the same bits): tlr_nn_rows's single right-hand side where the rows are not prefetched
 * (2-core Zen 4, docs/tuning.md "One right-hand side in zmm"), and tlr_nn's register tiles
 * and streamed rows for several right-hand sides (TLR_NN_ZMM_TILES, _tiles_tlr_nn.h). The
 * operations of the 32-byte vectors under the suffixes fz and dz. */
#if defined(TLR_X86_FMA) && defined(__AVX512F__) && !defined(TLR_NO_ZMM)
#define TLR_ZMM 1
typedef float tlr_zv_f __attribute__((vector_size(64)));
typedef double tlr_zv_d __attribute__((vector_size(64)));
TLR_INLINE tlr_zv_f tlr_ld_fz(const float *p) { tlr_zv_f v; memcpy(&v, p, sizeof v); return v; }
TLR_INLINE tlr_zv_d tlr_ld_dz(const double *p) { tlr_zv_d v; memcpy(&v, p, sizeof v); return v; }
TLR_INLINE void tlr_st_fz(float *p, tlr_zv_f v) { memcpy(p, &v, sizeof v); }
TLR_INLINE void tlr_st_dz(double *p, tlr_zv_d v) { memcpy(p, &v, sizeof v); }
/* the first n (< 16 or 8) reals, the other lanes zero; reading and writing nothing beyond */
TLR_INLINE tlr_zv_f tlr_ldm_fz(const float *p, ptrdiff_t n)
{ return (tlr_zv_f)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p); }
TLR_INLINE tlr_zv_d tlr_ldm_dz(const double *p, ptrdiff_t n)
{ return (tlr_zv_d)_mm512_maskz_loadu_pd((__mmask8)((1u << n) - 1), p); }
TLR_INLINE void tlr_stm_fz(float *p, tlr_zv_f v, ptrdiff_t n)
{ _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v); }
TLR_INLINE void tlr_stm_dz(double *p, tlr_zv_d v, ptrdiff_t n)
{ _mm512_mask_storeu_pd(p, (__mmask8)((1u << n) - 1), (__m512d)v); }
TLR_INLINE tlr_zv_f tlr_bc_fz(float x) { return (tlr_zv_f)_mm512_set1_ps(x); }
TLR_INLINE tlr_zv_d tlr_bc_dz(double x) { return (tlr_zv_d)_mm512_set1_pd(x); }
TLR_INLINE tlr_zv_f tlr_zero_fz(void) { return tlr_bc_fz(0.0f); }
TLR_INLINE tlr_zv_d tlr_zero_dz(void) { return tlr_bc_dz(0.0); }
TLR_INLINE tlr_zv_f tlr_fma_fz(tlr_zv_f a, tlr_zv_f b, tlr_zv_f c)
{ return (tlr_zv_f)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c); }
TLR_INLINE tlr_zv_d tlr_fma_dz(tlr_zv_d a, tlr_zv_d b, tlr_zv_d c)
{ return (tlr_zv_d)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c); }
/* re <-> im of each complex, and -1 on the real parts, +1 on the imaginary ones */
TLR_INLINE tlr_zv_f tlr_swap_fz(tlr_zv_f v)
{ return (tlr_zv_f)_mm512_permute_ps((__m512)v, 0xB1); }
TLR_INLINE tlr_zv_d tlr_swap_dz(tlr_zv_d v)
{ return (tlr_zv_d)_mm512_permute_pd((__m512d)v, 0x55); }
TLR_INLINE tlr_zv_f tlr_sign_fz(void)
{
    const tlr_zv_f sg = {-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f,
                         -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f};
    return sg;
}
TLR_INLINE tlr_zv_d tlr_sign_dz(void)
{
    const tlr_zv_d sg = {-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0};
    return sg;
}
#else
#define TLR_ZMM 0
#endif
/* scalar FMA matching one lane of tlr_fma_* */
#ifdef TLR_X86_FMA
#define TLR_FMA1(suffix, a, b, c) __builtin_fma##suffix((a), (b), (c))
#else
#define TLR_FMA1(suffix, a, b, c) ((a) * (b) + (c))
#endif

/* ------------------------------------------------------------------ vectors */
#ifdef TLR_VECEXT
#if defined(__GNUC__) && !defined(__clang__) && !defined(__AVX__)
/* 32-byte vectors without AVX (WSESPARSE_NATIVE=0 builds): GCC notes that such
 * values would be passed differently between functions; these are all inlined. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float tlr_v8f __attribute__((vector_size(32)));
typedef double tlr_v4d __attribute__((vector_size(32)));

TLR_INLINE tlr_v8f tlr_ld_f(const float *p) { tlr_v8f v; memcpy(&v, p, sizeof v); return v; }
TLR_INLINE tlr_v4d tlr_ld_d(const double *p) { tlr_v4d v; memcpy(&v, p, sizeof v); return v; }
TLR_INLINE void tlr_st_f(float *p, tlr_v8f v) { memcpy(p, &v, sizeof v); }
TLR_INLINE void tlr_st_d(double *p, tlr_v4d v) { memcpy(p, &v, sizeof v); }
TLR_INLINE tlr_v8f tlr_bc_f(float x) { tlr_v8f v = {x, x, x, x, x, x, x, x}; return v; }
TLR_INLINE tlr_v4d tlr_bc_d(double x) { tlr_v4d v = {x, x, x, x}; return v; }
TLR_INLINE tlr_v8f tlr_zero_f(void) { return tlr_bc_f(0.0f); }
TLR_INLINE tlr_v4d tlr_zero_d(void) { return tlr_bc_d(0.0); }
TLR_INLINE tlr_v8f tlr_fma_f(tlr_v8f a, tlr_v8f b, tlr_v8f c)
{
#ifdef TLR_X86_FMA
    return (tlr_v8f)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}
TLR_INLINE tlr_v4d tlr_fma_d(tlr_v4d a, tlr_v4d b, tlr_v4d c)
{
#ifdef TLR_X86_FMA
    return (tlr_v4d)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#else
    return a * b + c;
#endif
}
/* (x0, x1, x2, x3, ...) -> (x1, x0, x3, x2, ...): re <-> im of each complex. */
TLR_INLINE tlr_v8f tlr_swap_f(tlr_v8f v)
{
#if defined(__clang__)
    return __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
#else
    typedef int tlr_v8i __attribute__((vector_size(32)));
    const tlr_v8i m = {1, 0, 3, 2, 5, 4, 7, 6};
    return __builtin_shuffle(v, m);
#endif
}
TLR_INLINE tlr_v4d tlr_swap_d(tlr_v4d v)
{
#if defined(__clang__)
    return __builtin_shufflevector(v, v, 1, 0, 3, 2);
#else
    typedef long long tlr_v4l __attribute__((vector_size(32)));
    const tlr_v4l m = {1, 0, 3, 2};
    return __builtin_shuffle(v, m);
#endif
}
TLR_INLINE tlr_v8f tlr_sign_f(void)  /* -1 on the real parts, +1 on the imaginary ones */
{
    const tlr_v8f sg = {-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f};
    return sg;
}
TLR_INLINE tlr_v4d tlr_sign_d(void)
{
    const tlr_v4d sg = {-1.0, 1.0, -1.0, 1.0};
    return sg;
}
#define TLR_LANE(v, i) ((v)[i])
#define TLR_FMAS_f(a, b, c) TLR_FMA1(f, a, b, c)
#define TLR_FMAS_d(a, b, c) TLR_FMA1(, a, b, c)
#else  /* plain C fallback (e.g. MSVC): the same operations lane by lane */
typedef struct { float x[8]; } tlr_v8f;
typedef struct { double x[4]; } tlr_v4d;
#define TLR_FALLBACK_OPS(V, R, W, sfx)                                                        \
    TLR_INLINE V tlr_ld_##sfx(const R *p) { V v; memcpy(&v, p, sizeof v); return v; }         \
    TLR_INLINE void tlr_st_##sfx(R *p, V v) { memcpy(p, &v, sizeof v); }                      \
    TLR_INLINE V tlr_bc_##sfx(R a) { V v; int i; for (i = 0; i < W; i++) v.x[i] = a; return v; } \
    TLR_INLINE V tlr_zero_##sfx(void) { return tlr_bc_##sfx((R)0); }                          \
    TLR_INLINE V tlr_fma_##sfx(V a, V b, V c)                                                 \
    { int i; for (i = 0; i < W; i++) c.x[i] = a.x[i] * b.x[i] + c.x[i]; return c; }           \
    TLR_INLINE V tlr_swap_##sfx(V a)                                                          \
    { V v; int i; for (i = 0; i < W; i++) v.x[i] = a.x[i ^ 1]; return v; }                    \
    TLR_INLINE V tlr_sign_##sfx(void)                                                         \
    { V v; int i; for (i = 0; i < W; i++) v.x[i] = (i & 1) ? (R)1 : (R)-1; return v; }        \
    TLR_INLINE V tlr_vadd_##sfx(V a, V b)                                                     \
    { int i; for (i = 0; i < W; i++) a.x[i] = a.x[i] + b.x[i]; return a; }
TLR_FALLBACK_OPS(tlr_v8f, float, 8, f)
TLR_FALLBACK_OPS(tlr_v4d, double, 4, d)
#define TLR_LANE(v, i) ((v).x[i])
#define TLR_FMAS_f(a, b, c) ((a) * (b) + (c))
#define TLR_FMAS_d(a, b, c) ((a) * (b) + (c))
#endif

/* A possibly partial vector: n (< W) reals, the rest zero. */
#define TLR_LDN(V, R, W, sfx)                                                                  \
    TLR_INLINE V tlr_ldn_##sfx(const R *p, ptrdiff_t n)                                        \
    { R buf[W] = {0}; memcpy(buf, p, (size_t)n * sizeof(R)); return tlr_ld_##sfx(buf); }       \
    TLR_INLINE void tlr_stn_##sfx(R *p, V v, ptrdiff_t n)                                      \
    { R buf[W]; tlr_st_##sfx(buf, v); memcpy(p, buf, (size_t)n * sizeof(R)); }
TLR_LDN(tlr_v8f, float, 8, f)
TLR_LDN(tlr_v4d, double, 4, d)

/* The first n (< W) reals at p, the other lanes zero, reading nothing beyond p + n: a
 * masked load where AVX has one (the last partial vector of a row in tlr_nn_rows, tlr_nn's
 * register tiles and tlr_cn), else the zero-padded copy; tlr_stm stores the first n lanes. */
#ifdef TLR_X86_FMA
#define TLR_MASKED_TAIL 1
TLR_INLINE tlr_v8f tlr_ldm_f(const float *p, ptrdiff_t n)
{
    static const int tbl[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return (tlr_v8f)_mm256_maskload_ps(p, _mm256_loadu_si256((const __m256i *)(tbl + 8 - n)));
}
TLR_INLINE tlr_v4d tlr_ldm_d(const double *p, ptrdiff_t n)
{
    static const long long tbl[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
    return (tlr_v4d)_mm256_maskload_pd(p, _mm256_loadu_si256((const __m256i *)(tbl + 4 - n)));
}
TLR_INLINE void tlr_stm_f(float *p, tlr_v8f v, ptrdiff_t n)
{
    static const int tbl[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    _mm256_maskstore_ps(p, _mm256_loadu_si256((const __m256i *)(tbl + 8 - n)), (__m256)v);
}
TLR_INLINE void tlr_stm_d(double *p, tlr_v4d v, ptrdiff_t n)
{
    static const long long tbl[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
    _mm256_maskstore_pd(p, _mm256_loadu_si256((const __m256i *)(tbl + 4 - n)), (__m256d)v);
}
#else
#define TLR_MASKED_TAIL 0
TLR_INLINE tlr_v8f tlr_ldm_f(const float *p, ptrdiff_t n) { return tlr_ldn_f(p, n); }
TLR_INLINE tlr_v4d tlr_ldm_d(const double *p, ptrdiff_t n) { return tlr_ldn_d(p, n); }
TLR_INLINE void tlr_stm_f(float *p, tlr_v8f v, ptrdiff_t n) { tlr_stn_f(p, v, n); }
TLR_INLINE void tlr_stm_d(double *p, tlr_v4d v, ptrdiff_t n) { tlr_stn_d(p, v, n); }
#endif

/* Fixed-order lane sums (the same tree everywhere). */
TLR_INLINE float tlr_hsum_f(tlr_v8f v)
{
    return ((TLR_LANE(v, 0) + TLR_LANE(v, 1)) + (TLR_LANE(v, 2) + TLR_LANE(v, 3)))
         + ((TLR_LANE(v, 4) + TLR_LANE(v, 5)) + (TLR_LANE(v, 6) + TLR_LANE(v, 7)));
}
TLR_INLINE double tlr_hsum_d(tlr_v4d v)
{
    return (TLR_LANE(v, 0) + TLR_LANE(v, 1)) + (TLR_LANE(v, 2) + TLR_LANE(v, 3));
}
/* sum of even lanes - sum of odd lanes */
TLR_INLINE float tlr_hdiff_f(tlr_v8f v)
{
    return ((TLR_LANE(v, 0) + TLR_LANE(v, 2)) + (TLR_LANE(v, 4) + TLR_LANE(v, 6)))
         - ((TLR_LANE(v, 1) + TLR_LANE(v, 3)) + (TLR_LANE(v, 5) + TLR_LANE(v, 7)));
}
TLR_INLINE double tlr_hdiff_d(tlr_v4d v)
{
    return (TLR_LANE(v, 0) + TLR_LANE(v, 2)) - (TLR_LANE(v, 1) + TLR_LANE(v, 3));
}


#if TLR_ZMM
#define TLR_FMAS_fz TLR_FMAS_f
#define TLR_FMAS_dz TLR_FMAS_d
#endif

/* Wider register tiles where AVX-512VL gives 32 vector registers (_tiles_tlr_nn.h, "Register
 * tiles with several right-hand sides"). */
#if defined(__AVX512VL__)
#define TLR_WIDE_DEFAULT 1
#else
#define TLR_WIDE_DEFAULT 0
#endif

#endif
