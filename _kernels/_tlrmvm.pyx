# cython: language_level=3
"""Tile low-rank matrix-vector products in three phases (TLR-MVM).

A (m x n) is cut into tiles; tile (i, j) of shape (h_i, w_j) is approximated by
U_ij @ V_ij.T with rank k_ij. The bases are stored for the kernel
(``wsesparse.tlr.TLRMatrix`` builds and validates them):

``V``      all tile columns one after the other; tile column j is the row-major
           block ``Vs_j = [V_0j, V_1j, ...]`` of shape (w_j, Kc_j) starting at
           ``v_off[j]``, Kc_j = sum_i k_ij = kcol_ptr[j+1] - kcol_ptr[j].
``U``      all tile rows one after the other; tile row i is the row-major block
           ``Us_i.T`` of shape (Kr_i, h_i) (that is ``[U_i0, U_i1, ...]`` in
           column-major order) starting at ``u_off[i]``,
           Kr_i = krow_ptr[i+1] - krow_ptr[i].
``perm``   length K = sum k_ij; ``yu[p] = yv[perm[p]]`` turns the phase-1 output
           (tile-column order) into the phase-3 input (tile-row order).
``row_ptr``/``col_ptr``  tile boundaries in the matrix (n_tile_rows + 1, n_tile_cols + 1).

Vectors are passed as ``s`` right-hand sides stored one after the other
(C-contiguous (s, n) for inputs, (s, m) for outputs, (s, K) work arrays).

Forward (Y = A X):  phase 1 yv_j = Vs_j.T x_j   (one AXPY over Kc_j per input entry)
                    phase 2 yu = yv[perm]
                    phase 3 y_i = Us_i yu_i     (one AXPY over h_i per rank entry)
Adjoint (X = A^H Y): phase 1 yu_i = conj(Us_i).T y_i  (dot products)
                     phase 2 yv[perm] = yu
                     phase 3 x_j = conj(Vs_j) yv_j   (dot products)

Everything is checked in Python before it gets here; bounds checks are off
(see setup.py). Each output element is written by exactly one thread in a
fixed order, so results are bitwise identical for any thread count.
"""

cimport cython
from cython.parallel cimport prange
from libc.stdint cimport int64_t

cdef extern from "_omp_compat.h" nogil:
    int omp_get_max_threads()
    int wsesparse_has_openmp()

ctypedef fused value_t:
    float
    double
    float complex
    double complex


def openmp_enabled():
    """Whether the kernels were compiled with OpenMP."""
    return bool(wsesparse_has_openmp())


cdef inline value_t _conj(value_t z) noexcept nogil:
    if value_t is float or value_t is double:
        return z
    else:
        return z.conjugate()


cdef inline void _axpy(value_t* y, const value_t* a, value_t c, Py_ssize_t n) noexcept nogil:
    # y[0:n] += c * a[0:n]: no reduction, so the compiler vectorises it
    # without reassociating sums (no -ffast-math needed).
    cdef Py_ssize_t t
    for t in range(n):
        y[t] = y[t] + c * a[t]


cdef inline value_t _dotc(const value_t* a, const value_t* b, Py_ssize_t n) noexcept nogil:
    # sum conj(a) * b with four independent partial sums: a single chain of
    # complex FMAs is latency-bound at a few GB/s, well below memory speed.
    cdef value_t s0 = 0, s1 = 0, s2 = 0, s3 = 0
    cdef Py_ssize_t t = 0
    while t + 4 <= n:
        s0 = s0 + _conj(a[t]) * b[t]
        s1 = s1 + _conj(a[t + 1]) * b[t + 1]
        s2 = s2 + _conj(a[t + 2]) * b[t + 2]
        s3 = s3 + _conj(a[t + 3]) * b[t + 3]
        t += 4
    while t < n:
        s0 = s0 + _conj(a[t]) * b[t]
        t += 1
    return (s0 + s1) + (s2 + s3)


@cython.boundscheck(False)
@cython.wraparound(False)
def tlr_matmat(const value_t[::1] U, const value_t[::1] V,
               const int64_t[::1] row_ptr, const int64_t[::1] col_ptr,
               const int64_t[::1] u_off, const int64_t[::1] v_off,
               const int64_t[::1] krow_ptr, const int64_t[::1] kcol_ptr,
               const int64_t[::1] perm,
               const value_t[:, ::1] X, value_t[:, ::1] Y,
               value_t[:, ::1] yv, value_t[:, ::1] yu, int n_threads):
    """Y = A X for s right-hand sides.

    X: (s, n), Y: (s, m) output (overwritten), yv/yu: (s, K) work arrays.
    """
    cdef Py_ssize_t ntr = row_ptr.shape[0] - 1
    cdef Py_ssize_t ntc = col_ptr.shape[0] - 1
    cdef Py_ssize_t s = X.shape[0]
    cdef Py_ssize_t K = perm.shape[0]
    cdef Py_ssize_t i, j, t, q, c, p, c0, w, k0, kc, r0, h
    cdef const value_t* blk
    with nogil:
        # Phase 1: per tile column, stacked-V GEMV as w_j AXPYs of length Kc_j.
        # The row of Vs_j stays in L1 while it is applied to every rhs.
        for j in prange(ntc, num_threads=n_threads, schedule="dynamic"):
            c0 = col_ptr[j]
            w = col_ptr[j + 1] - c0
            k0 = kcol_ptr[j]
            kc = kcol_ptr[j + 1] - k0
            for c in range(s):
                for q in range(kc):
                    yv[c, k0 + q] = 0
            for t in range(w):
                blk = &V[v_off[j] + t * kc]
                for c in range(s):
                    _axpy(&yv[c, k0], blk, X[c, c0 + t], kc)
        # Phase 2: reshuffle from tile-column order to tile-row order.
        for p in prange(K, num_threads=n_threads, schedule="static"):
            for c in range(s):
                yu[c, p] = yv[c, perm[p]]
        # Phase 3: per tile row, stacked-U GEMV as Kr_i AXPYs of length h_i.
        for i in prange(ntr, num_threads=n_threads, schedule="dynamic"):
            r0 = row_ptr[i]
            h = row_ptr[i + 1] - r0
            k0 = krow_ptr[i]
            kc = krow_ptr[i + 1] - k0
            for c in range(s):
                for t in range(h):
                    Y[c, r0 + t] = 0
            for q in range(kc):
                blk = &U[u_off[i] + q * h]
                for c in range(s):
                    _axpy(&Y[c, r0], blk, yu[c, k0 + q], h)


@cython.boundscheck(False)
@cython.wraparound(False)
def tlr_rmatmat(const value_t[::1] U, const value_t[::1] V,
                const int64_t[::1] row_ptr, const int64_t[::1] col_ptr,
                const int64_t[::1] u_off, const int64_t[::1] v_off,
                const int64_t[::1] krow_ptr, const int64_t[::1] kcol_ptr,
                const int64_t[::1] perm,
                const value_t[:, ::1] Y, value_t[:, ::1] X,
                value_t[:, ::1] yv, value_t[:, ::1] yu, int n_threads):
    """X = A^H Y for s right-hand sides, reading the same bases.

    Y: (s, m), X: (s, n) output (overwritten), yv/yu: (s, K) work arrays.
    """
    cdef Py_ssize_t ntr = row_ptr.shape[0] - 1
    cdef Py_ssize_t ntc = col_ptr.shape[0] - 1
    cdef Py_ssize_t s = Y.shape[0]
    cdef Py_ssize_t K = perm.shape[0]
    cdef Py_ssize_t i, j, t, q, c, p, c0, w, k0, kc, r0, h
    cdef const value_t* blk
    with nogil:
        # Phase 1: per tile row, yu_i = Us_i^H y_i; rows of Us_i.T are contiguous.
        for i in prange(ntr, num_threads=n_threads, schedule="dynamic"):
            r0 = row_ptr[i]
            h = row_ptr[i + 1] - r0
            k0 = krow_ptr[i]
            kc = krow_ptr[i + 1] - k0
            for q in range(kc):
                blk = &U[u_off[i] + q * h]
                for c in range(s):
                    yu[c, k0 + q] = _dotc(blk, &Y[c, r0], h)
        # Phase 2: inverse reshuffle (perm is a bijection, so no write conflicts).
        for p in prange(K, num_threads=n_threads, schedule="static"):
            for c in range(s):
                yv[c, perm[p]] = yu[c, p]
        # Phase 3: per tile column, x_j = conj(Vs_j) yv_j; rows of Vs_j are contiguous.
        for j in prange(ntc, num_threads=n_threads, schedule="dynamic"):
            c0 = col_ptr[j]
            w = col_ptr[j + 1] - c0
            k0 = kcol_ptr[j]
            kc = kcol_ptr[j + 1] - k0
            for t in range(w):
                blk = &V[v_off[j] + t * kc]
                for c in range(s):
                    X[c, c0 + t] = _dotc(blk, &yv[c, k0], kc)


@cython.boundscheck(False)
@cython.wraparound(False)
def stream_triad(double[::1] a, const double[::1] b, const double[::1] c, double scalar,
                 int n_threads):
    """STREAM triad ``a = b + scalar * c`` (benchmarks compare TLR-MVM bandwidth to it).

    All three arrays have the same length; counts 24 bytes per element.
    """
    cdef Py_ssize_t i, n = a.shape[0]
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="static"):
            a[i] = b[i] + scalar * c[i]
