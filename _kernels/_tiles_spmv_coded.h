/* ws_spmv_coded_rows_<T>_<I>: rows r0:r1 of y = A @ x for a CSR matrix whose values are
 * stored as one-byte codes into a table of at most 256 distinct values (value-indexed CSR:
 * Kourtis, Goumas and Koziris, "Optimizing sparse matrix-vector multiplication using index
 * and value compression", CF 2008). A nonzero then streams 5 bytes (int32 index and code)
 * instead of 12 (float64): where the matrix streams from DRAM, a SpMV moves fewer bytes.
 *
 * Each row is one scalar FMA chain in storage order, the loop of ws_spmv_srow with
 * table[codes[p]] for data[p]: the same operations on the same values, so the same bits as
 * the plain CSR kernel wherever that kernel sums every row so (x beyond WS_SPMV_FAR_X_BYTES,
 * rows under WS_SPMV_FAR_VEC_NNZ, builds without gathers; _drivers.spmv_coded decides).
 * Indices are not checked: only prepared (checked) operands come here. */
#ifndef WSESPARSE_TILES_SPMV_CODED_H
#define WSESPARSE_TILES_SPMV_CODED_H

#include <stdint.h>

#define WS_DEFINE_SPMV_CODED(T, I)                                                \
WS_SCALAR_LOOP WS_MAYBE_UNUSED static void ws_spmv_coded_rows_##T##_##I(          \
    const I *indptr, const I *indices, const uint8_t *codes, const T *table,      \
    const T *x, T *y, ptrdiff_t r0, ptrdiff_t r1)                                 \
{                                                                                 \
    ptrdiff_t i, p, p1;                                                           \
    for (i = r0; i < r1; ++i) {                                                   \
        T s = 0;                                                                  \
        p1 = (ptrdiff_t)indptr[i + 1];                                            \
        for (p = (ptrdiff_t)indptr[i]; p < p1; ++p)                               \
            s = WS_FMA_##T(table[codes[p]], x[indices[p]], s);                    \
        y[i] = s;                                                                 \
    }                                                                             \
}

#endif
