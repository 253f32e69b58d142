# The kernels' return codes (_codes.h): csr_check's, and those of the products
# that check column indices as they go (_spmm, _scatter, _csr_tools).
# _csr_tools exports them to Python without the WS_ prefix: CSR_OK,
# CSR_BAD_START, CSR_DECREASING, CSR_SHORT and CSR_BAD_INDEX.

cdef extern from "_codes.h" nogil:
    enum:
        WS_CSR_OK
        WS_CSR_BAD_START
        WS_CSR_DECREASING
        WS_CSR_SHORT
        WS_CSR_BAD_INDEX
