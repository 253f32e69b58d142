# cython: language_level=3
"""Vector kernels of the Krylov solvers (``wsesparse.linalg``): see _krylov.h.

Each entry point checks what it reads and writes (1-D C-contiguous ndarrays of one
floating dtype, equal lengths; None is a TypeError) and raises ValueError otherwise, and
takes at most one thread per chunk and ``MAX_TEAM``. Overlap is not checked:
``wsesparse.linalg`` passes buffers that share no memory (or, where an entry point says
so, the same array). Sums are bitwise the same for any thread count.
"""

cimport numpy as cnp
from libc.stdlib cimport free, malloc

import numpy as np

cnp.import_array()

cdef extern from "_omp_compat.h" nogil:
    int wsesparse_available_cores()

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
    void ws_kry_scaled_f(float *out, const float *y, Py_ssize_t n, double s, int nth)
    void ws_kry_scaled_d(double *out, const double *y, Py_ssize_t n, double s, int nth)
    double ws_kry_minres_a_f(float *y, const float *v, const float *r1, Py_ssize_t n,
                             double shift, double c1, int use_r1, double *part, int nth)
    double ws_kry_minres_a_d(double *y, const double *v, const double *r1, Py_ssize_t n,
                             double shift, double c1, int use_r1, double *part, int nth)
    double ws_kry_minres_b_f(float *y, const float *r2, Py_ssize_t n, int cx, double cr,
                             double ci, double *part, int nth)
    double ws_kry_minres_b_d(double *y, const double *r2, Py_ssize_t n, int cx, double cr,
                             double ci, double *part, int nth)
    double ws_kry_minres_c_f(float *w, const float *w1, const float *w2, const float *v,
                             const float *x, float *x_out, Py_ssize_t n, double oldeps,
                             double delta, double denom, double phi, double *part, int nth)
    double ws_kry_minres_c_d(double *w, const double *w1, const double *w2, const double *v,
                             const double *x, double *x_out, Py_ssize_t n, double oldeps,
                             double delta, double denom, double phi, double *part, int nth)
    void ws_kry_diag_f(float *z, const float *d, const float *r, Py_ssize_t n, int cx,
                       double *part, double *res, int nth)
    void ws_kry_diag_d(double *z, const double *d, const double *r, Py_ssize_t n, int cx,
                       double *part, double *res, int nth)
    void ws_kry_bicg_p_f(float *p, const float *r, const float *v, Py_ssize_t n, int cx,
                         double br, double bi, double omr, double omi, int nth)
    void ws_kry_bicg_p_d(double *p, const double *r, const double *v, Py_ssize_t n, int cx,
                         double br, double bi, double omr, double omi, int nth)
    void ws_kry_bicg_x_f(float *x, const float *ph, const float *sh, Py_ssize_t n, int cx,
                         double alr, double ali, double omr, double omi, int nth)
    void ws_kry_bicg_x_d(double *x, const double *ph, const double *sh, Py_ssize_t n, int cx,
                         double alr, double ali, double omr, double omi, int nth)
    void ws_kry_dot2_f(const float *a, const float *b, Py_ssize_t n, int cx, double *part,
                       double *res, int nth)
    void ws_kry_dot2_d(const double *a, const double *b, Py_ssize_t n, int cx, double *part,
                       double *res, int nth)
    void ws_kry_bicg_r_f(float *r, const float *t, const float *rt, Py_ssize_t n, int cx,
                         double omr, double omi, double *part, double *res, int nth)
    void ws_kry_bicg_r_d(double *r, const double *t, const double *rt, Py_ssize_t n, int cx,
                         double omr, double omi, double *part, double *res, int nth)
    void ws_kry_mgs_f(float *w, const float *vk, const float *u, Py_ssize_t n, int cx,
                      double hr, double hi, double *part, double *res, int nth)
    void ws_kry_mgs_d(double *w, const double *vk, const double *u, Py_ssize_t n, int cx,
                      double hr, double hi, double *part, double *res, int nth)

# Elements per partial sum (fixed: the sums do not depend on the thread count).
CHUNK = WS_KRY_CHUNK
# The most threads a call takes: one per chunk, and at most max(64, 4 per core), the cap
# wsesparse._threads.MAX_THREADS puts on requests (a team of 100,000 crashed the process).
MAX_TEAM = max(64, 4 * max(wsesparse_available_cores(), 1))


cdef inline int _team(int n_threads, Py_ssize_t n) noexcept:
    cdef Py_ssize_t chunks = (n + WS_KRY_CHUNK - 1) // WS_KRY_CHUNK
    cdef Py_ssize_t t = n_threads
    if t > chunks:
        t = chunks
    if t > MAX_TEAM_C:
        t = MAX_TEAM_C
    return <int>t if t > 1 else 1


cdef Py_ssize_t MAX_TEAM_C = MAX_TEAM


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
    # (at most three sums a chunk: dot2 and bicg_r of complex vectors)
    cdef double *part = <double *>malloc((3 * ((n + WS_KRY_CHUNK - 1) // WS_KRY_CHUNK) + 1)
                                         * sizeof(double))
    if part == NULL:
        raise MemoryError()
    return part


cdef double complex _scalar(value, int cx, str name) except *:
    """A kernel's scalar as a complex number (a Python or numpy number: a string is a
    TypeError); real vectors take only real ones."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    cdef double complex z = value
    if not cx and z.imag != 0:
        raise ValueError(f"{name} must be real for real vectors, got {value!r}")
    return z


def dot(cnp.ndarray a not None, cnp.ndarray b not None, int n_threads=1):
    """``numpy.vdot(a, b)``: sum of conj(a_i) b_i (a Python float or complex), summed in
    fixed chunks (single precision in double)."""
    cdef int k = _kind(a, "a")
    _kind(b, "b", a)
    cdef Py_ssize_t n = a.shape[0]
    cdef int cx = k >= 2, nth = _team(n_threads, n)
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


def xpby(cnp.ndarray p not None, cnp.ndarray z not None, beta, int n_threads=1):
    """``p = z + beta * p`` in place (``beta`` complex only for complex vectors)."""
    cdef int k = _kind(p, "p")
    _kind(z, "z", p)
    _writeable(p, "p")
    cdef int cx = k >= 2
    cdef double complex bc = _scalar(beta, cx, "beta")
    cdef Py_ssize_t n = p.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef void *pp = cnp.PyArray_DATA(p)
    cdef const void *pz = cnp.PyArray_DATA(z)
    with nogil:
        if k % 2 == 0:
            ws_kry_xpby_f(<float *>pp, <const float *>pz, n, cx, bc.real, bc.imag, nth)
        else:
            ws_kry_xpby_d(<double *>pp, <const double *>pz, n, cx, bc.real, bc.imag, nth)


def cg_update(cnp.ndarray x not None, cnp.ndarray r not None, cnp.ndarray p not None,
              cnp.ndarray q not None, alpha, int n_threads=1):
    """``x += alpha * p; r -= alpha * q`` in place, one pass (``alpha`` complex only for
    complex vectors); returns sum |r_i|^2 of the new ``r`` (a float, summed in the chunks
    of :func:`dot`)."""
    cdef int k = _kind(x, "x")
    _kind(r, "r", x)
    _kind(p, "p", x)
    _kind(q, "q", x)
    _writeable(x, "x")
    _writeable(r, "r")
    cdef int cx = k >= 2
    cdef double complex ac = _scalar(alpha, cx, "alpha")
    cdef Py_ssize_t n = x.shape[0]
    cdef int nth = _team(n_threads, n)
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


cdef int _real(cnp.ndarray a, str name, cnp.ndarray like=None) except -1:
    """_kind for the real-only kernels (MINRES): 0 float32, 1 float64."""
    cdef int k = _kind(a, name, like)
    if k >= 2:
        raise ValueError(f"{name} must be float32 or float64, got {a.dtype}")
    return k


def scaled(cnp.ndarray out not None, cnp.ndarray y not None, double s, int n_threads=1):
    """``out = s * y`` for a real ``s`` (complex vectors scaled as their reals; ``out`` may
    be ``y``)."""
    cdef int k = _kind(out, "out")
    _kind(y, "y", out)
    _writeable(out, "out")
    cdef Py_ssize_t n = out.shape[0] * (2 if k >= 2 else 1)
    cdef int nth = _team(n_threads, out.shape[0])
    cdef void *po = cnp.PyArray_DATA(out)
    cdef const void *py = cnp.PyArray_DATA(y)
    with nogil:
        if k % 2 == 0:
            ws_kry_scaled_f(<float *>po, <const float *>py, n, s, nth)
        else:
            ws_kry_scaled_d(<double *>po, <const double *>py, n, s, nth)


def minres_a(cnp.ndarray y not None, cnp.ndarray v not None, cnp.ndarray r1 not None,
             double shift, double c1, bint use_r1, int n_threads=1):
    """``y = (y - shift * v) - c1 * r1`` in place (without the r1 term unless ``use_r1``);
    returns ``v . y`` of the new ``y`` (real vectors)."""
    cdef int k = _real(y, "y")
    _real(v, "v", y)
    _real(r1, "r1", y)
    _writeable(y, "y")
    cdef Py_ssize_t n = y.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef double res
    cdef double *part = _parts(n)
    cdef void *pyy = cnp.PyArray_DATA(y)
    cdef const void *pv = cnp.PyArray_DATA(v)
    cdef const void *pr = cnp.PyArray_DATA(r1)
    with nogil:
        if k == 0:
            res = ws_kry_minres_a_f(<float *>pyy, <const float *>pv, <const float *>pr, n,
                                    shift, c1, use_r1, part, nth)
        else:
            res = ws_kry_minres_a_d(<double *>pyy, <const double *>pv, <const double *>pr, n,
                                    shift, c1, use_r1, part, nth)
    free(part)
    return res


def minres_b(cnp.ndarray y not None, cnp.ndarray r2 not None, c2, int n_threads=1):
    """``y = y - c2 * r2`` in place (``c2`` complex only for complex vectors); returns sum
    |y_i|^2 of the new ``y`` (a float)."""
    cdef int k = _kind(y, "y")
    _kind(r2, "r2", y)
    _writeable(y, "y")
    cdef int cx = k >= 2
    cdef double complex c = _scalar(c2, cx, "c2")
    cdef Py_ssize_t n = y.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef double res
    cdef double *part = _parts(n)
    cdef void *pyy = cnp.PyArray_DATA(y)
    cdef const void *pr = cnp.PyArray_DATA(r2)
    with nogil:
        if k % 2 == 0:
            res = ws_kry_minres_b_f(<float *>pyy, <const float *>pr, n, cx, c.real, c.imag,
                                    part, nth)
        else:
            res = ws_kry_minres_b_d(<double *>pyy, <const double *>pr, n, cx, c.real, c.imag,
                                    part, nth)
    free(part)
    return res


def minres_c(cnp.ndarray w not None, cnp.ndarray w1 not None, cnp.ndarray w2 not None,
             cnp.ndarray v not None, cnp.ndarray x not None, cnp.ndarray x_out not None,
             double oldeps, double delta, double denom, double phi, int n_threads=1):
    """``w = ((v - oldeps * w1) - delta * w2) * denom`` (the new direction; ``w`` shares no
    memory with the others), then ``x_out = x + phi * w`` (``x_out`` may be ``x``); returns
    ``x_out . x_out`` (real vectors)."""
    cdef int k = _real(w, "w")
    for a, name in ((w1, "w1"), (w2, "w2"), (v, "v"), (x, "x"), (x_out, "x_out")):
        _real(a, name, w)
    _writeable(w, "w")
    _writeable(x_out, "x_out")
    cdef Py_ssize_t n = w.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef double res
    cdef double *part = _parts(n)
    cdef void *pw = cnp.PyArray_DATA(w)
    cdef const void *pw1 = cnp.PyArray_DATA(w1)
    cdef const void *pw2 = cnp.PyArray_DATA(w2)
    cdef const void *pv = cnp.PyArray_DATA(v)
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *pxo = cnp.PyArray_DATA(x_out)
    with nogil:
        if k == 0:
            res = ws_kry_minres_c_f(<float *>pw, <const float *>pw1, <const float *>pw2,
                                    <const float *>pv, <const float *>px, <float *>pxo, n,
                                    oldeps, delta, denom, phi, part, nth)
        else:
            res = ws_kry_minres_c_d(<double *>pw, <const double *>pw1, <const double *>pw2,
                                    <const double *>pv, <const double *>px, <double *>pxo, n,
                                    oldeps, delta, denom, phi, part, nth)
    free(part)
    return res


def diag_apply(cnp.ndarray z not None, cnp.ndarray d not None, cnp.ndarray r not None,
               int n_threads=1):
    """``z = d * r`` elementwise (a diagonal preconditioner); returns ``numpy.vdot(r, z)``
    (a float or complex, summed as :func:`dot`). ``z`` shares no memory with the others."""
    cdef int k = _kind(z, "z")
    _kind(d, "d", z)
    _kind(r, "r", z)
    _writeable(z, "z")
    cdef Py_ssize_t n = z.shape[0]
    cdef int cx = k >= 2, nth = _team(n_threads, n)
    cdef double res[2]
    cdef double *part = _parts(n)
    cdef void *pz = cnp.PyArray_DATA(z)
    cdef const void *pd = cnp.PyArray_DATA(d)
    cdef const void *pr = cnp.PyArray_DATA(r)
    with nogil:
        if k % 2 == 0:
            ws_kry_diag_f(<float *>pz, <const float *>pd, <const float *>pr, n, cx, part, res,
                          nth)
        else:
            ws_kry_diag_d(<double *>pz, <const double *>pd, <const double *>pr, n, cx, part,
                          res, nth)
    free(part)
    return complex(res[0], res[1]) if cx else res[0]


# -- BiCGSTAB ------------------------------------------------------------------------------

def bicg_p(cnp.ndarray p not None, cnp.ndarray r not None, cnp.ndarray v not None, beta,
           omega, int n_threads=1):
    """``p = ((p - omega * v) * beta) + r`` in place (complex scalars for complex
    vectors)."""
    cdef int k = _kind(p, "p")
    _kind(r, "r", p)
    _kind(v, "v", p)
    _writeable(p, "p")
    cdef int cx = k >= 2
    cdef double complex be = _scalar(beta, cx, "beta"), om = _scalar(omega, cx, "omega")
    cdef Py_ssize_t n = p.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef void *pp = cnp.PyArray_DATA(p)
    cdef const void *pr = cnp.PyArray_DATA(r)
    cdef const void *pv = cnp.PyArray_DATA(v)
    with nogil:
        if k % 2 == 0:
            ws_kry_bicg_p_f(<float *>pp, <const float *>pr, <const float *>pv, n, cx, be.real,
                            be.imag, om.real, om.imag, nth)
        else:
            ws_kry_bicg_p_d(<double *>pp, <const double *>pr, <const double *>pv, n, cx,
                            be.real, be.imag, om.real, om.imag, nth)


def bicg_x(cnp.ndarray x not None, cnp.ndarray phat not None, cnp.ndarray shat not None,
           alpha, omega, int n_threads=1):
    """``x = (x + alpha * phat) + omega * shat`` in place (complex scalars for complex
    vectors)."""
    cdef int k = _kind(x, "x")
    _kind(phat, "phat", x)
    _kind(shat, "shat", x)
    _writeable(x, "x")
    cdef int cx = k >= 2
    cdef double complex al = _scalar(alpha, cx, "alpha"), om = _scalar(omega, cx, "omega")
    cdef Py_ssize_t n = x.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef void *px = cnp.PyArray_DATA(x)
    cdef const void *pph = cnp.PyArray_DATA(phat)
    cdef const void *psh = cnp.PyArray_DATA(shat)
    with nogil:
        if k % 2 == 0:
            ws_kry_bicg_x_f(<float *>px, <const float *>pph, <const float *>psh, n, cx,
                            al.real, al.imag, om.real, om.imag, nth)
        else:
            ws_kry_bicg_x_d(<double *>px, <const double *>pph, <const double *>psh, n, cx,
                            al.real, al.imag, om.real, om.imag, nth)


def dot2(cnp.ndarray a not None, cnp.ndarray b not None, int n_threads=1):
    """``(numpy.vdot(a, b), sum |a_i|^2)`` in one pass (a float or complex, and a float;
    each summed as :func:`dot`)."""
    cdef int k = _kind(a, "a")
    _kind(b, "b", a)
    cdef int cx = k >= 2
    cdef Py_ssize_t n = a.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef double res[3]
    cdef double *part = _parts(n)
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pb = cnp.PyArray_DATA(b)
    with nogil:
        if k % 2 == 0:
            ws_kry_dot2_f(<const float *>pa, <const float *>pb, n, cx, part, res, nth)
        else:
            ws_kry_dot2_d(<const double *>pa, <const double *>pb, n, cx, part, res, nth)
    free(part)
    return (complex(res[0], res[1]), res[2]) if cx else (res[0], res[1])


def bicg_r(cnp.ndarray r not None, cnp.ndarray t not None, cnp.ndarray rtilde not None,
           omega, int n_threads=1):
    """``r -= omega * t`` in place; returns ``(sum |r_i|^2, numpy.vdot(rtilde, r))`` of the
    new ``r`` (a float, and a float or complex)."""
    cdef int k = _kind(r, "r")
    _kind(t, "t", r)
    _kind(rtilde, "rtilde", r)
    _writeable(r, "r")
    cdef int cx = k >= 2
    cdef double complex om = _scalar(omega, cx, "omega")
    cdef Py_ssize_t n = r.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef double res[3]
    cdef double *part = _parts(n)
    cdef void *pr = cnp.PyArray_DATA(r)
    cdef const void *pt = cnp.PyArray_DATA(t)
    cdef const void *prt = cnp.PyArray_DATA(rtilde)
    with nogil:
        if k % 2 == 0:
            ws_kry_bicg_r_f(<float *>pr, <const float *>pt, <const float *>prt, n, cx, om.real,
                            om.imag, part, res, nth)
        else:
            ws_kry_bicg_r_d(<double *>pr, <const double *>pt, <const double *>prt, n, cx,
                            om.real, om.imag, part, res, nth)
    free(part)
    return (res[0], complex(res[1], res[2])) if cx else (res[0], res[1])


def mgs(cnp.ndarray w not None, cnp.ndarray vk not None, cnp.ndarray u not None, h,
        int n_threads=1):
    """``w -= h * vk`` in place; returns ``numpy.vdot(u, w)`` of the new ``w`` (a float or
    complex; ``u`` may be ``w``: then ``|w|^2``)."""
    cdef int k = _kind(w, "w")
    _kind(vk, "vk", w)
    _kind(u, "u", w)
    _writeable(w, "w")
    cdef int cx = k >= 2
    cdef double complex hh = _scalar(h, cx, "h")
    cdef Py_ssize_t n = w.shape[0]
    cdef int nth = _team(n_threads, n)
    cdef double res[2]
    cdef double *part = _parts(n)
    cdef void *pw = cnp.PyArray_DATA(w)
    cdef const void *pv = cnp.PyArray_DATA(vk)
    cdef const void *pu = cnp.PyArray_DATA(u)
    with nogil:
        if k % 2 == 0:
            ws_kry_mgs_f(<float *>pw, <const float *>pv, <const float *>pu, n, cx, hh.real,
                         hh.imag, part, res, nth)
        else:
            ws_kry_mgs_d(<double *>pw, <const double *>pv, <const double *>pu, n, cx, hh.real,
                         hh.imag, part, res, nth)
    free(part)
    return complex(res[0], res[1]) if cx else res[0]
