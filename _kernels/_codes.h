/*
 * Return codes of the kernels' CSR structure check (csr_check) and of the
 * products and conversions that check column indices as they go (csr_spmm,
 * csr_spmv, csr_spmm_t with check_cols; densify_into). 0 is success; each
 * other code names the first thing found wrong. Python sees them as the
 * CSR_* constants of wsesparse._kernels._csr_tools, and wsesparse/_checks.py
 * (csr_error_message) turns them into messages.
 */
#ifndef WSESPARSE_CODES_H
#define WSESPARSE_CODES_H

enum ws_csr_code {
    WS_CSR_OK = 0,
    WS_CSR_BAD_START = 1,  /* indptr[0] != 0 */
    WS_CSR_DECREASING = 2, /* indptr[i + 1] < indptr[i] for some i */
    WS_CSR_SHORT = 3,      /* indptr[-1] beyond the stored indices */
    WS_CSR_BAD_INDEX = 4   /* a column index negative or not below n_cols */
};

#endif
