"""Every kernel entry point that runs an OpenMP team takes a thread count below 1 as 1.

Python passes counts from ``resolve_n_threads`` (at least 1), but the entry points are
importable: OpenMP's ``num_threads`` clause with 0 or a negative count is undefined, and
libgomp aborted the process on -1 ("Out of memory allocating ... bytes").
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import TLRMatrix
from wsesparse._kernels import _krylov, _scatter, _sddmm, _spmm, _tlrmvm

BAD_COUNTS = (0, -1, -(2 ** 31))


def _csr():
    A = sp.random(60, 50, density=0.2, format="csr", random_state=0, dtype=np.float64)
    A.sort_indices()
    return A


def _spmm_call(n):
    A = _csr()
    X = np.arange(150, dtype=np.float64).reshape(50, 3) / 7
    Y = np.zeros((60, 3))
    _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y, 2, 3, n, False)
    return Y


def _spmv_call(n):
    A = _csr()
    y = np.zeros(60)
    _spmm.csr_spmv(A.indptr, A.indices, A.data, np.linspace(-1, 1, 50), y, 2, n)
    return y


def _spmm_t_call(n):
    A = _csr()
    Z = np.zeros((50, 2))
    _scatter.csr_spmm_t(A.indptr, A.indices, A.data, np.ones((60, 2)), Z, n)
    return Z


def _sddmm_call(n):
    A = _csr()
    out = np.zeros(A.nnz)
    rng = np.random.default_rng(1)
    _sddmm.sddmm(A.indptr, A.indices, rng.standard_normal((60, 4)),
                 rng.standard_normal((50, 4)), out, n)
    return out


def _tlr_call(n, adjoint=False):
    rng = np.random.default_rng(2)
    T = TLRMatrix.from_dense(rng.standard_normal((40, 30)), nb=16, tol=1e-8)
    U, V = T._bases(T.dtype)
    first, second = T._items(1, adjoint)
    m, k = T.shape if not adjoint else T.shape[::-1]
    X = rng.standard_normal((2, k))
    Y = np.empty((2, m))
    kernel = _tlrmvm.tlr_rmatmat if adjoint else _tlrmvm.tlr_matmat
    kernel(U, V, T.row_ptr, T.col_ptr, T.u_off, T.v_off, T.krow_ptr, T.kcol_ptr, T.perm,
           X, Y, first, second, n)
    return Y


def _triad_call(n):
    a = np.zeros(100)
    _tlrmvm.stream_triad(a, np.ones(100), np.arange(100.0), 2.0, n)
    return a


def _read_call(n):
    return np.array([_tlrmvm.stream_read(np.arange(100, dtype=np.uint64), n)])


def _krylov_call(n):
    # (long enough for several chunks, so that a team would split them)
    rng = np.random.default_rng(3)
    x, r, p, q = (rng.standard_normal(3 * _krylov.CHUNK + 5) for _ in range(4))
    d = _krylov.dot(p, q, n)
    _krylov.xpby(p, q, 0.5, n)
    rr = _krylov.cg_update(x, r, p, q, 0.25, n)
    w = np.empty_like(x)
    _krylov.scaled(w, p, 0.5, n)
    a = _krylov.minres_a(q, p, r, 0.1, 0.2, True, n)
    b = _krylov.minres_b(q, r, 0.3, n)
    c = _krylov.minres_c(w, p, q, r, x, x, 0.1, 0.2, 0.3, 0.4, n)
    z = np.empty_like(x)
    e = _krylov.diag_apply(z, p, r, n)
    _krylov.bicg_p(p, r, q, 0.5, 0.25, n)
    _krylov.bicg_x(x, p, q, 0.5, 0.25, n)
    f = _krylov.dot2(p, q, n)
    g = _krylov.bicg_r(r, q, p, 0.5, n)
    h = _krylov.mgs(w, p, q, 0.3, n)
    return np.concatenate([x, r, p, q, w, z, [d, rr, a, b, c, e, *f, *g, h]])


@pytest.mark.parametrize("call", [_spmm_call, _spmv_call, _spmm_t_call, _sddmm_call, _tlr_call,
                                  lambda n: _tlr_call(n, adjoint=True), _triad_call, _read_call,
                                  _krylov_call],
                         ids=["csr_spmm", "csr_spmv", "csr_spmm_t", "sddmm", "tlr_matmat",
                              "tlr_rmatmat", "stream_triad", "stream_read", "krylov"])
@pytest.mark.parametrize("n", BAD_COUNTS)
def test_thread_counts_below_one_run_one_thread(call, n):
    assert np.array_equal(call(n), call(1))
