# The AXPY kernels of _axpy_tiles.h (SpMM rows, SpMV rows, scatter; float and
# double with int32 or int64 indices, and the complex dot products and
# scatter), its constants, and ``_block_end`` for either index type. For the
# modules that include that header (_spmm, _scatter): setup.py builds them
# with -ffp-contract=off.

from libc.stdint cimport int32_t, int64_t, uint8_t

from _types cimport index_t

cdef extern from "_axpy_tiles.h" nogil:
    void ws_spmm_rows_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                    Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, int)
    void ws_spmm_rows_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                    Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, int)
    void ws_spmm_rows_double_int32_t(const int32_t*, const int32_t*, const double*,
                                     const double*, Py_ssize_t, double*, Py_ssize_t,
                                     Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_double_int64_t(const int64_t*, const int64_t*, const double*,
                                     const double*, Py_ssize_t, double*, Py_ssize_t,
                                     Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    int ws_spmm_rows_chk_float_int32_t(const int32_t*, const int32_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    int ws_spmm_rows_chk_float_int64_t(const int64_t*, const int64_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    int ws_spmm_rows_chk_double_int32_t(const int32_t*, const int32_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    int ws_spmm_rows_chk_double_int64_t(const int64_t*, const int64_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, int, Py_ssize_t)
    void ws_spmm_rows_kb_float_int32_t(const int32_t*, const int32_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_kb_float_int64_t(const int64_t*, const int64_t*, const float*,
                                       const float*, Py_ssize_t, float*, Py_ssize_t, Py_ssize_t,
                                       Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_kb_double_int32_t(const int32_t*, const int32_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    void ws_spmm_rows_kb_double_int64_t(const int64_t*, const int64_t*, const double*,
                                        const double*, Py_ssize_t, double*, Py_ssize_t,
                                        Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, int)
    int ws_spmv_rows_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                   float*, Py_ssize_t, Py_ssize_t, Py_ssize_t, int, int)
    int ws_spmv_rows_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                   float*, Py_ssize_t, Py_ssize_t, Py_ssize_t, int, int)
    int ws_spmv_rows_double_int32_t(const int32_t*, const int32_t*, const double*, const double*,
                                    double*, Py_ssize_t, Py_ssize_t, Py_ssize_t, int, int)
    int ws_spmv_rows_double_int64_t(const int64_t*, const int64_t*, const double*, const double*,
                                    double*, Py_ssize_t, Py_ssize_t, Py_ssize_t, int, int)
    int ws_spmv_rows_chk_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                       float*, Py_ssize_t, Py_ssize_t, Py_ssize_t, int, int)
    int ws_spmv_rows_chk_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                       float*, Py_ssize_t, Py_ssize_t, Py_ssize_t, int, int)
    int ws_spmv_rows_chk_double_int32_t(const int32_t*, const int32_t*, const double*,
                                        const double*, double*, Py_ssize_t, Py_ssize_t,
                                        Py_ssize_t, int, int)
    int ws_spmv_rows_chk_double_int64_t(const int64_t*, const int64_t*, const double*,
                                        const double*, double*, Py_ssize_t, Py_ssize_t,
                                        Py_ssize_t, int, int)

    void ws_spmv_coded_rows_float_int32_t(const int32_t*, const int32_t*, const uint8_t*,
                                          const float*, const float*, float*, Py_ssize_t,
                                          Py_ssize_t)
    void ws_spmv_coded_rows_float_int64_t(const int64_t*, const int64_t*, const uint8_t*,
                                          const float*, const float*, float*, Py_ssize_t,
                                          Py_ssize_t)
    void ws_spmv_coded_rows_double_int32_t(const int32_t*, const int32_t*, const uint8_t*,
                                           const double*, const double*, double*, Py_ssize_t,
                                           Py_ssize_t)
    void ws_spmv_coded_rows_double_int64_t(const int64_t*, const int64_t*, const uint8_t*,
                                           const double*, const double*, double*, Py_ssize_t,
                                           Py_ssize_t)

    ctypedef struct ws_zone_float:
        float* s
        Py_ssize_t s_lo, ex_lo
        size_t ex_n
    ctypedef struct ws_zone_double:
        double* s
        Py_ssize_t s_lo, ex_lo
        size_t ex_n
    ws_zone_float ws_no_zone_float()
    ws_zone_double ws_no_zone_double()
    void ws_scatter_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                  Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                  ws_zone_float)
    void ws_scatter_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                  Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                  ws_zone_float)
    void ws_scatter_double_int32_t(const int32_t*, const int32_t*, const double*,
                                   const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                   Py_ssize_t, ws_zone_double)
    void ws_scatter_double_int64_t(const int64_t*, const int64_t*, const double*,
                                   const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                   Py_ssize_t, ws_zone_double)

    void ws_scatterz_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                   Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                   ws_zone_float)
    void ws_scatterz_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                   Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                   ws_zone_float)
    void ws_scatterz_double_int32_t(const int32_t*, const int32_t*, const double*,
                                    const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, ws_zone_double)
    void ws_scatterz_double_int64_t(const int64_t*, const int64_t*, const double*,
                                    const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, ws_zone_double)

    void ws_cscatter_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                   Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    void ws_cscatter_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                   Py_ssize_t, float*, Py_ssize_t, Py_ssize_t, Py_ssize_t)
    void ws_cscatter_double_int32_t(const int32_t*, const int32_t*, const double*,
                                    const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t)
    void ws_cscatter_double_int64_t(const int64_t*, const int64_t*, const double*,
                                    const double*, Py_ssize_t, double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t)

    int ws_rscatter1_chk_float_int32_t(const int32_t*, const int32_t*, const float*,
                                       const float*, float*, Py_ssize_t, Py_ssize_t)
    int ws_rscatter1_chk_double_int32_t(const int32_t*, const int32_t*, const double*,
                                        const double*, double*, Py_ssize_t, Py_ssize_t)
    int ws_rscatter1_chk_float_int64_t(const int64_t*, const int64_t*, const float*,
                                       const float*, float*, Py_ssize_t, Py_ssize_t)
    int ws_rscatter1_chk_double_int64_t(const int64_t*, const int64_t*, const double*,
                                        const double*, double*, Py_ssize_t, Py_ssize_t)
    int ws_cscatter1_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                   float*, Py_ssize_t, Py_ssize_t)
    int ws_cscatter1_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                   float*, Py_ssize_t, Py_ssize_t)
    int ws_cscatter1_double_int32_t(const int32_t*, const int32_t*, const double*, const double*,
                                    double*, Py_ssize_t, Py_ssize_t)
    int ws_cscatter1_double_int64_t(const int64_t*, const int64_t*, const double*, const double*,
                                    double*, Py_ssize_t, Py_ssize_t)

    void ws_cdots_float_int32_t(const int32_t*, const int32_t*, const float*, const float*,
                                float*, Py_ssize_t, Py_ssize_t)
    void ws_cdots_float_int64_t(const int64_t*, const int64_t*, const float*, const float*,
                                float*, Py_ssize_t, Py_ssize_t)
    void ws_cdots_double_int32_t(const int32_t*, const int32_t*, const double*,
                                 const double*, double*, Py_ssize_t, Py_ssize_t)
    void ws_cdots_double_int64_t(const int64_t*, const int64_t*, const double*,
                                 const double*, double*, Py_ssize_t, Py_ssize_t)

    # Checked products validate the column indices of this many nonzeros (or
    # of one longer row) just before multiplying them, while they are in cache.
    enum: _CHECK_BLOCK "WS_CHECK_BLOCK"
    enum: _CHECK_ROWS "WS_CHECK_ROWS"
    enum: _SPMV_FAR_X_BYTES "WS_SPMV_FAR_X_BYTES"
    enum: _SPMV_FAR_VEC_NNZ "WS_SPMV_FAR_VEC_NNZ"
    enum: _SPMV_GATHER "WS_SPMV_GATHER"
    enum: _SPMV_GATHER_ROW_MIN_float "WS_SPMV_GATHER_ROW_MIN_float"
    enum: _SPMV_GATHER_ROW_MIN_double "WS_SPMV_GATHER_ROW_MIN_double"
    enum: _SPMV_GATHER_LONG "WS_SPMV_GATHER_LONG"
    enum: _SPMV_GATHER_LONG_X_BYTES_float "WS_SPMV_GATHER_LONG_X_BYTES_float"
    enum: _SPMV_GATHER_LONG_X_BYTES_double "WS_SPMV_GATHER_LONG_X_BYTES_double"
    enum: _SPMV_GATHER_NEAR_ROW_MIN_float "WS_SPMV_GATHER_NEAR_ROW_MIN_float"
    enum: _SPMV_GATHER_NEAR_ROW_MIN_double "WS_SPMV_GATHER_NEAR_ROW_MIN_double"
    enum: _SPMV_GATHER_NEAR_ANY_MATRIX_float "WS_SPMV_GATHER_NEAR_ANY_MATRIX_float"
    enum: _SPMV_GATHER_NEAR_ANY_MATRIX_double "WS_SPMV_GATHER_NEAR_ANY_MATRIX_double"
    enum: _SPMV_RUN_SCALAR "WS_SPMV_RUN_SCALAR"
    enum: _SPMV_VEC_NNZ_float "WS_SPMV_VEC_NNZ_float"
    enum: _SPMV_VEC_NNZ_double "WS_SPMV_VEC_NNZ_double"
    enum: _SPMV_GATHER_X_BYTES "WS_SPMV_GATHER_X_BYTES"
    enum: _CHK_IN_LOOPS "WS_CHK_IN_LOOPS"
    enum: _SCATTER1_CHK_LOOP_ROWS_MIN "WS_SCATTER1_CHK_LOOP_ROWS_MIN"
    enum: _SPMV_CHK_LOOP_ROWS_MIN "WS_SPMV_CHK_LOOP_ROWS_MIN"
    enum: _SPMV_CHK_LOOP_ROWS_MAX "WS_SPMV_CHK_LOOP_ROWS_MAX"
    enum: _TILE_VBYTES "WS_TILE_VBYTES"
    enum: _STREAM_Y "WS_STREAM_Y"
    enum: _KB_NV "WS_KB_NV"
    Py_ssize_t ws_block_end_int32_t(const int32_t*, Py_ssize_t, Py_ssize_t)
    Py_ssize_t ws_block_end_int64_t(const int64_t*, Py_ssize_t, Py_ssize_t)
    Py_ssize_t ws_row_block_end_int32_t(const int32_t*, Py_ssize_t, Py_ssize_t)
    Py_ssize_t ws_row_block_end_int64_t(const int64_t*, Py_ssize_t, Py_ssize_t)


cdef inline Py_ssize_t _block_end(const index_t* indptr, Py_ssize_t i,
                                  Py_ssize_t r1) noexcept nogil:
    """The end of the block of rows from ``i`` (before ``r1``) holding about
    CHECK_BLOCK nonzeros (at least one row): ``ws_block_end``, the one the
    SpMM kernels use."""
    if index_t is int32_t:
        return ws_block_end_int32_t(indptr, i, r1)
    else:
        return ws_block_end_int64_t(indptr, i, r1)


cdef inline Py_ssize_t _row_block_end(const index_t* indptr, Py_ssize_t i,
                                      Py_ssize_t r1) noexcept nogil:
    """``_block_end`` for one-vector products (SpMV, one-column scatter):
    ``ws_row_block_end``, blocks of up to 64 short rows (_tiles_base.h)."""
    if index_t is int32_t:
        return ws_row_block_end_int32_t(indptr, i, r1)
    else:
        return ws_row_block_end_int64_t(indptr, i, r1)
