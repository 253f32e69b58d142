# cython: language_level=3
"""Vector kernels of the Krylov solvers (``wsesparse.linalg``): see _krylov.h.

Each entry point checks what it reads and writes (1-D C-contiguous ndarrays of one
floating dtype, equal lengths) and raises ValueError otherwise; ``wsesparse.linalg``
checks overlap and everything else before calling. Sums are bitwise the same for any
thread count.
"""

cimport numpy as cnp
from libc.stdlib cimport free, malloc

import numpy as np

cnp.import_array()

cdef extern from "_krylov.h" nogil:
    int WS_KRY_CHUNK
    void ws_kry_dot_f(const float *a, const float *b, Py_ssize_t n, int cx, double *part,
                      double *res, int nth)
    void ws_kry_dot_d(const double *a, const double *b, Py_ssize_t n, int cx, double *part,
                      double *res, int nth)
    void ws_kry_xpby_f(float *p, const float *z, Py_ssize_t n, int cx, double br, double bi,
                       int nth)
    void ws_kry_xpby_d(double *p, const double *z, Py_ssize_t n, int cx, double br, double bi,
                       int nth)
    double ws_kry_cg_update_f(float *x, float *r, const float *p, const float *q,
                              Py_ssize_t n, int cx, double ar, double ai, double *part,
                              int nth)
    double ws_kry_cg_update_d(double *x, double *r, const double *p, const double *q,
                              Py_ssize_t n, int cx, double ar, double ai, double *part,
                              int nth)

# Elements per partial sum (fixed: the sums do not depend on the thread count).
CHUNK = WS_KRY_CHUNK


cdef int _kind(cnp.ndarray a, str name, cnp.ndarray like=None) except -1:
    """0 float32, 1 float64, 2 complex64, 3 complex128; ValueError for anything the
    kernels cannot read as it is."""
    if cnp.PyArray_NDIM(a) != 1 or not cnp.PyArray_IS_C_CONTIGUOUS(a):
        raise ValueError(f"{name} must be a 1-D C-contiguous array")
    c = a.dtype.char
    if c not in "fdFD" or not a.dtype.isnative:
        raise ValueError(f"{name} must be float32, float64, complex64 or complex128 in "
                         f"native byte order, got {a.dtype}")
    if like is not None and (a.dtype != like.dtype or a.shape[0] != like.shape[0]):
        raise ValueError(f"{name} must have the first vector's dtype and length "
                         f"({like.dtype}, {like.shape[0]}), got {a.dtype}, {a.shape[0]}")
    return "fdFD".index(c)


cdef void _writeable(cnp.ndarray a, str name) except *:
    if not cnp.PyArray_ISWRITEABLE(a):
        raise ValueError(f"{name} must be writeable")


cdef double *_parts(Py_ssize_t n) except NULL:
    cdef double *part = <double *>malloc((2 * ((n + WS_KRY_CHUNK - 1) // WS_KRY_CHUNK) + 1)
                                         * sizeof(double))
    if part == NULL:
        raise MemoryError()
    return part


def dot(cnp.ndarray a, cnp.ndarray b, int n_threads=1):
    """``numpy.vdot(a, b)``: sum of conj(a_i) b_i (a Python float or complex), summed in
    fixed chunks (single precision in double)."""
    cdef int k = _kind(a, "a")
    _kind(b, "b", a)
    cdef Py_ssize_t n = a.shape[0]
    cdef int cx = k >= 2, nth = max(n_threads, 1)
    cdef double res[2]
    cdef double *part = _parts(n)
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pb = cnp.PyArray_DATA(b)
    with nogil:
        if k % 2 == 0:
            ws_kry_dot_f(<const float *>pa, <const float *>pb, n, cx, part, res, nth)
        else:
            ws_kry_dot_d(<const double *>pa, <const double *>pb, n, cx, part, res, nth)
    free(part)
    return complex(res[0], res[1]) if cx else res[0]


def xpby(cnp.ndarray p, cnp.ndarray z, beta, int n_threads=1):
    """``p = z + beta * p`` in place (beta a real or complex number; only its real part
    for real vectors)."""
    cdef int k = _kind(p, "p")
    _kind(z, "z", p)
    _writeable(p, "p")
    cdef double complex bc = complex(beta)
    cdef Py_ssize_t n = p.shape[0]
    cdef int cx = k >= 2, nth = max(n_threads, 1)
    cdef void *pp = cnp.PyArray_DATA(p)
    cdef const void *pz = cnp.PyArray_DATA(z)
    with nogil:
        if k % 2 == 0:
            ws_kry_xpby_f(<float *>pp, <const float *>pz, n, cx, bc.real, bc.imag, nth)
        else:
            ws_kry_xpby_d(<double *>pp, <const double *>pz, n, cx, bc.real, bc.imag, nth)


def cg_update(cnp.ndarray x, cnp.ndarray r, cnp.ndarray p, cnp.ndarray q, alpha,
              int n_threads=1):
    """``x += alpha * p; r -= alpha * q`` in place, one pass; returns sum |r_i|^2 of the
    new ``r`` (a float, summed in the chunks of :func:`dot`)."""
    cdef int k = _kind(x, "x")
    _kind(r, "r", x)
    _kind(p, "p", x)
    _kind(q, "q", x)
    _writeable(x, "x")
    _writeable(r, "r")
    cdef double complex ac = complex(alpha)
    cdef Py_ssize_t n = x.shape[0]
    cdef int cx = k >= 2, nth = max(n_threads, 1)
    cdef double rr
    cdef double *part = _parts(n)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef void *pr = cnp.PyArray_DATA(r)
    cdef const void *pp = cnp.PyArray_DATA(p)
    cdef const void *pq = cnp.PyArray_DATA(q)
    with nogil:
        if k % 2 == 0:
            rr = ws_kry_cg_update_f(<float *>px, <float *>pr, <const float *>pp,
                                    <const float *>pq, n, cx, ac.real, ac.imag, part, nth)
        else:
            rr = ws_kry_cg_update_d(<double *>px, <double *>pr, <const double *>pp,
                                    <const double *>pq, n, cx, ac.real, ac.imag, part, nth)
    free(part)
    return rr
