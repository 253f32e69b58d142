/*
 * O(nnz) checks of a CSR structure, written so that GCC vectorizes them (a
 * corrupt-structure check runs on every one-shot product, so it must cost
 * little next to the product itself).
 *
 * ws_indptr_decreases_<I>(indptr, n): whether indptr[i + 1] < indptr[i] for
 *     some 0 <= i < n.
 * ws_indices_out_of_range_<I>(indices, p0, p1, n_cols): whether some
 *     indices[p], p0 <= p < p1, is negative or not below n_cols (one unsigned
 *     comparison covers both).
 * ws_index_span_<I>(indices, p0, p1, lo, hi): the least and greatest of
 *     indices[p0:p1] into *lo, *hi (0 and -1 if p0 == p1).
 * ws_col_limit_<I>(n_cols): the bound for that unsigned comparison, as the
 *     unsigned type of I (n_cols, or I's maximum + 1 if that is smaller).
 */
#ifndef WSESPARSE_CSR_CHECK_H
#define WSESPARSE_CSR_CHECK_H

#include <stddef.h>
#include <stdint.h>

#define WS_DEFINE_CHECKS(I, U, IMAX)                                              \
static int ws_indptr_decreases_##I(const I *indptr, ptrdiff_t n)                  \
{                                                                                 \
    int bad = 0;                                                                  \
    for (ptrdiff_t i = 0; i < n; ++i) bad |= indptr[i + 1] < indptr[i];           \
    return bad;                                                                   \
}                                                                                 \
static inline U ws_col_limit_##I(ptrdiff_t n_cols)                                \
{                                                                                 \
    /* Every nonnegative I is below n_cols when n_cols exceeds I's range. */      \
    return n_cols > (ptrdiff_t)(IMAX) ? (U)(IMAX) + 1 : (U)n_cols;                \
}                                                                                 \
static int ws_indices_out_of_range_##I(const I *indices, ptrdiff_t p0,            \
                                       ptrdiff_t p1, ptrdiff_t n_cols)            \
{                                                                                 \
    /* The largest index (unsigned) against lim once: one vector max per step, */ \
    /* where a compare per step took three instructions (one-shot SpMV and     */ \
    /* scatter 0.95-1.00x the time; docs/tuning.md, "Checks"). */                 \
    const U lim = ws_col_limit_##I(n_cols);                                       \
    U top = 0;                                                                    \
    for (ptrdiff_t p = p0; p < p1; ++p)                                           \
        top = (U)indices[p] > top ? (U)indices[p] : top;                          \
    return p1 > p0 && top >= lim;                                                 \
}                                                                                 \
static void ws_index_span_##I(const I *indices, ptrdiff_t p0, ptrdiff_t p1,       \
                              int64_t *lo, int64_t *hi)                           \
{                                                                                 \
    /* The least and greatest of indices[p0:p1] (lo > hi if empty): two vector */ \
    /* reductions, one read of the indices. */                                    \
    I mn = IMAX, mx = -1;                                                         \
    for (ptrdiff_t p = p0; p < p1; ++p) {                                         \
        mn = indices[p] < mn ? indices[p] : mn;                                   \
        mx = indices[p] > mx ? indices[p] : mx;                                   \
    }                                                                             \
    *lo = p1 > p0 ? (int64_t)mn : 0;                                              \
    *hi = p1 > p0 ? (int64_t)mx : -1;                                             \
}

WS_DEFINE_CHECKS(int32_t, uint32_t, INT32_MAX)
WS_DEFINE_CHECKS(int64_t, uint64_t, INT64_MAX)

#endif
