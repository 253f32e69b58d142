# Fused types shared by the kernel modules: ``from _types cimport index_t, value_t``.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

# The index type of a CSR operand (indptr and indices alike).
ctypedef fused index_t:
    int32_t
    int64_t

# The kernel dtypes: float32, float64, complex64, complex128.
ctypedef fused value_t:
    float
    double
    float complex
    double complex

# The real kernel dtypes (kernels of real values only).
ctypedef fused real_t:
    float
    double

# Values are moved, not computed with, by the transpositions (_csr_tools): any
# dtype, as elements of its size.
ctypedef fused elem_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    double complex
