# cython: language_level=3
"""Sampled dense-dense product (SDDMM) on a CSR mask: the masked weight gradient.

``wsesparse.wafer.gradient`` validates before calling: ``indptr`` has
``n_out + 1`` nondecreasing entries from 0, every ``indices[p]`` lies in
``[0, X.shape[0])``, ``dY`` is C-contiguous ``(n_out, N)``, ``X`` C-contiguous
``(n_in, N)`` of the same dtype, ``out`` has ``indptr[-1]`` entries. Bounds
checks are off (see setup.py).
"""

cimport cython
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t

ctypedef fused real_t:
    float
    double

ctypedef fused idx_t:
    int32_t
    int64_t


def sddmm(const idx_t[::1] indptr, const idx_t[::1] indices, const real_t[:, ::1] dY,
          const real_t[:, ::1] X, real_t[::1] out, int n_threads):
    """``out[p] = dot(dY[i], X[indices[p]])`` for every stored (i, p); one thread per row."""
    cdef Py_ssize_t n_out = indptr.shape[0] - 1, n = dY.shape[1]
    cdef Py_ssize_t i, p, t, j
    cdef real_t s
    if n_threads < 1:  # (OpenMP aborts on num_threads below 1)
        n_threads = 1
    for i in prange(n_out, nogil=True, num_threads=n_threads, schedule="guided"):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            s = 0
            for t in range(n):
                s = s + dY[i, t] * X[j, t]
            out[p] = s
