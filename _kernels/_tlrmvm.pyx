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

Forward (Y = A X):  phase 1 yv_j = Vs_j.T x_j   (one pass over the rows of Vs_j)
                    phase 2 yu = yv[perm]
                    phase 3 y_i = Us_i yu_i     (one pass over the rows of Us_i.T)
Adjoint (X = A^H Y): phase 1 yu_i = conj(Us_i).T y_i  (dot products over the rows of Us_i.T)
                     phase 2 yv[perm] = yu
                     phase 3 x_j = conj(Vs_j) yv_j   (dot products over the rows of Vs_j)

The adjoint reads the same stored bases, row by row in the same order as the
forward product (no transposed or conjugated copy). The block kernels live in
``_tiles_tlr.h``: they take all s right-hand sides in one pass over a basis,
with register tiles of several vectors, and do the complex arithmetic as real
FMAs.

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


cdef extern from "_tiles_tlr.h" nogil:
    void tlr_nn_f(const float* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                  const float* a, Py_ssize_t lda, float* out, Py_ssize_t ldo, Py_ssize_t s, int cx,
                  int pf)
    void tlr_nn_d(const double* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                  const double* a, Py_ssize_t lda, double* out, Py_ssize_t ldo, Py_ssize_t s, int cx,
                  int pf)
    void tlr_cn_f(const float* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                  const float* a, Py_ssize_t lda, float* out, Py_ssize_t ldo, Py_ssize_t s, int cx)
    void tlr_cn_d(const double* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                  const double* a, Py_ssize_t lda, double* out, Py_ssize_t ldo, Py_ssize_t s, int cx)


cdef inline void _nn(const value_t* B, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t ldb,
                     const value_t* a, Py_ssize_t lda, value_t* out, Py_ssize_t ldo,
                     Py_ssize_t s, int pf) noexcept nogil:
    # out[c, 0:ncols] = sum_t a[c, t] * B[t, 0:ncols] (B row-major, nrows x ncols of a
    # block with rows of ldb)
    if value_t is float:
        tlr_nn_f(B, nrows, ncols, ldb, a, lda, out, ldo, s, 0, pf)
    elif value_t is double:
        tlr_nn_d(B, nrows, ncols, ldb, a, lda, out, ldo, s, 0, pf)
    elif sizeof(value_t) == 8:  # float complex
        tlr_nn_f(<const float*>B, nrows, ncols, ldb, <const float*>a, lda, <float*>out,
                 ldo, s, 1, pf)
    else:
        tlr_nn_d(<const double*>B, nrows, ncols, ldb, <const double*>a, lda, <double*>out,
                 ldo, s, 1, pf)


cdef inline void _cn(const value_t* B, Py_ssize_t nrows, Py_ssize_t ncols,
                     const value_t* a, Py_ssize_t lda, value_t* out, Py_ssize_t ldo,
                     Py_ssize_t s) noexcept nogil:
    # out[c, r] = sum_l conj(B[r, l]) * a[c, l] (dot products over the rows of B)
    if value_t is float:
        tlr_cn_f(B, nrows, ncols, ncols, a, lda, out, ldo, s, 0)
    elif value_t is double:
        tlr_cn_d(B, nrows, ncols, ncols, a, lda, out, ldo, s, 0)
    elif sizeof(value_t) == 8:  # float complex
        tlr_cn_f(<const float*>B, nrows, ncols, ncols, <const float*>a, lda, <float*>out,
                 ldo, s, 1)
    else:
        tlr_cn_d(<const double*>B, nrows, ncols, ncols, <const double*>a, lda, <double*>out,
                 ldo, s, 1)


@cython.boundscheck(False)
@cython.wraparound(False)
def tlr_matmat(const value_t[::1] U, const value_t[::1] V,
               const int64_t[::1] row_ptr, const int64_t[::1] col_ptr,
               const int64_t[::1] u_off, const int64_t[::1] v_off,
               const int64_t[::1] krow_ptr, const int64_t[::1] kcol_ptr,
               const int64_t[::1] perm,
               const value_t[:, ::1] X, value_t[:, ::1] Y,
               value_t[:, ::1] yv, value_t[:, ::1] yu,
               const int64_t[:, ::1] col_items, const int64_t[:, ::1] row_items,
               int n_threads, bint prefetch=True):
    """Y = A X for s right-hand sides.

    X: (s, n), Y: (s, m) output (overwritten), yv/yu: (s, K) work arrays. col_items /
    row_items: (tile, start, stop) ranges of the outputs of each tile column's phase-1
    block (of its kc) and each tile row's phase-3 block (of its h), covering them all
    (wsesparse/tlr/_split.py; Python checked them). prefetch: software prefetch of the
    bases (for bases read from DRAM). Neither changes the result.
    """
    cdef int pf = 1 if prefetch else 0
    cdef Py_ssize_t q, a, b
    cdef Py_ssize_t ntr = row_ptr.shape[0] - 1
    cdef Py_ssize_t ntc = col_ptr.shape[0] - 1
    cdef Py_ssize_t s = X.shape[0]
    cdef Py_ssize_t m = Y.shape[1], n = X.shape[1]
    cdef Py_ssize_t K = perm.shape[0]
    cdef Py_ssize_t i, j, c, p, c0, w, k0, kc, r0, h
    if s == 0:
        return
    with nogil:
        # Phase 1: per tile column, yv_j = Vs_j.T x_j for all s vectors in one
        # pass over Vs_j (register tiles of s vectors times a chunk of a row).
        for q in prange(col_items.shape[0], num_threads=n_threads, schedule="dynamic"):
            j = col_items[q, 0]
            a = col_items[q, 1]
            b = col_items[q, 2]
            c0 = col_ptr[j]
            w = col_ptr[j + 1] - c0
            k0 = kcol_ptr[j]
            kc = kcol_ptr[j + 1] - k0
            _nn(&V[v_off[j] + a], w, b - a, kc, &X[0, c0], n, &yv[0, k0 + a], K, s, pf)
        # Phase 2: reshuffle from tile-column order to tile-row order.
        for p in prange(K, num_threads=n_threads, schedule="static"):
            for c in range(s):
                yu[c, p] = yv[c, perm[p]]
        # Phase 3: per tile row, y_i = Us_i yu_i (rows of Us_i.T, same kernel).
        for q in prange(row_items.shape[0], num_threads=n_threads, schedule="dynamic"):
            i = row_items[q, 0]
            a = row_items[q, 1]
            b = row_items[q, 2]
            r0 = row_ptr[i]
            h = row_ptr[i + 1] - r0
            k0 = krow_ptr[i]
            kc = krow_ptr[i + 1] - k0
            # (kc == 0: a tile row of rank 0 everywhere; the kernel writes zeros)
            _nn(&U[u_off[i] + a], kc, b - a, h, &yu[0, k0], K, &Y[0, r0 + a], m, s, pf)


@cython.boundscheck(False)
@cython.wraparound(False)
def tlr_rmatmat(const value_t[::1] U, const value_t[::1] V,
                const int64_t[::1] row_ptr, const int64_t[::1] col_ptr,
                const int64_t[::1] u_off, const int64_t[::1] v_off,
                const int64_t[::1] krow_ptr, const int64_t[::1] kcol_ptr,
                const int64_t[::1] perm,
                const value_t[:, ::1] Y, value_t[:, ::1] X,
                value_t[:, ::1] yv, value_t[:, ::1] yu,
                const int64_t[:, ::1] row_items, const int64_t[:, ::1] col_items,
                int n_threads):
    """X = A^H Y for s right-hand sides, reading the same bases in the same order.

    Y: (s, m), X: (s, n) output (overwritten), yv/yu: (s, K) work arrays. row_items /
    col_items: (tile, start, stop) ranges of the rows of each tile row's phase-1 block (of
    its kc) and each tile column's phase-3 block (of its w), covering them all; they do
    not change the result.
    """
    cdef Py_ssize_t q, a, b
    cdef Py_ssize_t ntr = row_ptr.shape[0] - 1
    cdef Py_ssize_t ntc = col_ptr.shape[0] - 1
    cdef Py_ssize_t s = Y.shape[0]
    cdef Py_ssize_t m = Y.shape[1], n = X.shape[1]
    cdef Py_ssize_t K = perm.shape[0]
    cdef Py_ssize_t i, j, c, p, c0, w, k0, kc, r0, h
    if s == 0:
        return
    with nogil:
        # Phase 1: per tile row, yu_i = Us_i^H y_i: dot products over the
        # contiguous rows of Us_i.T (the rows the forward phase 3 reads).
        for q in prange(row_items.shape[0], num_threads=n_threads, schedule="dynamic"):
            i = row_items[q, 0]
            a = row_items[q, 1]
            b = row_items[q, 2]
            r0 = row_ptr[i]
            h = row_ptr[i + 1] - r0
            k0 = krow_ptr[i]
            _cn(&U[u_off[i] + a * h], b - a, h, &Y[0, r0], m, &yu[0, k0 + a], K, s)
        # Phase 2: inverse reshuffle (perm is a bijection, so no write conflicts).
        for p in prange(K, num_threads=n_threads, schedule="static"):
            for c in range(s):
                yv[c, perm[p]] = yu[c, p]
        # Phase 3: per tile column, x_j = conj(Vs_j) yv_j: dot products over the
        # contiguous rows of Vs_j (the rows the forward phase 1 reads).
        for q in prange(col_items.shape[0], num_threads=n_threads, schedule="dynamic"):
            j = col_items[q, 0]
            a = col_items[q, 1]
            b = col_items[q, 2]
            c0 = col_ptr[j]
            k0 = kcol_ptr[j]
            kc = kcol_ptr[j + 1] - k0
            # (kc == 0: dot products of length 0, the kernel writes zeros)
            _cn(&V[v_off[j] + a * kc], b - a, kc, &yv[0, k0], K, &X[0, c0 + a], n, s)


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
