"""``wsesparse.CSR``: the validated, prepared operand (construction, index dtypes, products,
transpose, ``to_scipy``, ``from_arrays`` validation, the LinearOperator)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from matmul_helpers import (FORMATS, KERNEL_DTYPES, KINDS, SPARSE_DTYPES, assert_matches,
                            random_dense, random_sparse, to_format)
from wsesparse import CSR, sparse_matmul


# -- construction ------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", SPARSE_DTYPES, ids=str)
def test_construct_from_every_format(rng, fmt, kind, dtype):
    """CSR(S) holds S's values, shape and dtype for every format, class and dtype."""
    A = random_sparse(rng, 10, 8, 0.3, dtype)
    S = to_format(A, fmt, kind)
    W = CSR(S)
    assert W.shape == S.shape and W.dtype == S.dtype
    assert W.indices.dtype in (np.int32, np.int64) and W.indptr.dtype == W.indices.dtype
    T = W.to_scipy()
    assert isinstance(T, sp.csr_array)
    np.testing.assert_array_equal(T.toarray(), S.toarray())
    assert_matches(W @ np.ones((8, 2), dtype), S @ np.ones((8, 2), dtype), exact_type=False)


def test_construct_from_csr_and_copy(rng):
    A = random_sparse(rng, 10, 8, 0.3)
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
    W = CSR(A)
    assert np.shares_memory(W.data, A.data) and np.shares_memory(W.indices, A.indices)
    # int64 index arrays are narrowed to int32 copies; the values are still shared.
    A64 = A.copy()
    A64.indices, A64.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    W64 = CSR(A64)
    assert W64.indices.dtype == W64.indptr.dtype == np.int32
    assert np.shares_memory(W64.data, A64.data) and not np.shares_memory(W64.indices, A64.indices)
    assert np.array_equal(W64.indices, A64.indices) and np.array_equal(W64.indptr, A64.indptr)
    C = CSR(A, copy=True)
    assert not np.shares_memory(C.data, A.data)
    A.data[:] = 0  # the copy is independent
    assert C.to_scipy().count_nonzero() == C.nnz
    W2 = CSR(W)
    assert W2.shape == W.shape and np.shares_memory(W2.data, W.data)
    W3 = CSR(W, copy=True)
    assert not np.shares_memory(W3.data, W.data)


def test_construct_keeps_noncanonical(rng):
    """Duplicates and unsorted indices are kept as stored (they add up in products)."""
    A = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])),
                     shape=(2, 3))
    W = CSR(A)
    assert W.nnz == 3
    np.testing.assert_array_equal(W.indices, [2, 0, 2])
    np.testing.assert_array_equal(W @ np.array([1.0, 10.0, 100.0]), [402.0, 0.0])


@pytest.mark.parametrize("bad", [np.ones((2, 2)), [[1, 0]], None, 3.0])
def test_construct_rejects_non_sparse(bad):
    with pytest.raises(TypeError, match="A must be a scipy.sparse matrix or array"):
        CSR(bad)


def test_construct_rejects_1d_sparse():
    with pytest.raises(ValueError, match="2-D"):
        CSR(sp.coo_array(np.array([1.0, 0.0, 2.0])))


@pytest.mark.parametrize("how", ["decreasing", "negative", "too_large", "short_indptr"])
def test_construct_rejects_corrupt_csr(rng, how):
    A = random_sparse(rng, 20, 10, 0.3)
    if how == "decreasing":
        A.indptr[5] = A.indptr[6] + 1
    elif how == "negative":
        A.indices[3] = -1
    elif how == "too_large":
        A.indices[3] = 10
    else:
        A.indptr = A.indptr[:-1]
    with pytest.raises(ValueError, match="corrupt compressed structure"):
        CSR(A)


def test_properties_and_repr(rng):
    A = random_sparse(rng, 20, 10, 0.3, np.float32)
    W = CSR(A)
    assert W.nnz == A.nnz and W.ndim == 2
    assert W.density == pytest.approx(A.nnz / 200)
    assert CSR(sp.csr_array((0, 5))).density == 0.0
    r = repr(W)
    assert "20x10" in r and f"nnz={A.nnz}" in r and "float32" in r


# -- products ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", KERNEL_DTYPES + (np.dtype(np.int32), np.dtype(np.bool_)),
                         ids=str)
def test_repeated_products(rng, dtype):
    """One prepared operand, many products (1-D, N = 1, small and large N, other dtypes):
    each equal to scipy's, and repeating a product gives identical bits."""
    A = random_sparse(rng, 50, 40, 0.2, dtype)
    W = CSR(A)
    for shape in [(40,), (40, 1), (40, 7), (40, 130), (40, 70)]:
        for xdtype in (dtype, np.float32, np.complex128):
            X = random_dense(rng, shape, xdtype)
            first = W @ X
            assert_matches(first, A @ X, A, X)
            assert (W @ X).tobytes() == first.tobytes()
            assert_matches(sparse_matmul(W, X, method="sparse"), A @ X, A, X)


def test_rmatmul(rng):
    """X @ CSR goes to CSR.__rmatmul__ (ndarray, np.matrix, list, 1-D), like csr_array."""
    A = random_sparse(rng, 12, 9, 0.3)
    W = CSR(A)
    X = random_dense(rng, (5, 12))
    for left in (X, X[0], np.asmatrix(X), X.tolist(), np.asfortranarray(X), X[::-1]):
        got = left @ W
        assert_matches(got, left @ A, np.asarray(left), A)
        assert type(got) is np.ndarray


def test_matmul_sparse_and_csr(rng):
    """CSR @ sparse and sparse @ CSR give scipy's sparse product; CSR @ CSR gives it as a
    CSR (an operator again)."""
    A = random_sparse(rng, 12, 9, 0.3)
    B = random_sparse(rng, 9, 4, 0.3)
    assert_matches(CSR(A) @ B, A @ B, A, B)
    assert_matches(sparse_matmul(A, CSR(B)), A @ B, A, B)
    assert_matches(sparse_matmul(CSR(A), CSR(B)), A @ B, A, B)
    AB = CSR(A) @ CSR(B)
    assert type(AB) is CSR
    assert_matches(AB.to_scipy(), A @ B, A, B)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_linear_operator_algebra(rng, dtype):
    """@ and * with other LinearOperators build scipy's lazy operators, whose adjoints and
    powers (which scipy builds with @ on the factors' adjoints) match the dense ones."""
    from scipy.sparse.linalg import LinearOperator, aslinearoperator
    A = random_sparse(rng, 6, 6, 0.5, dtype)
    P, D = CSR(A), A.toarray()
    Q = aslinearoperator(np.diag(np.arange(1.0, 7.0)))
    E = np.diag(np.arange(1.0, 7.0))
    x = random_dense(rng, (6,), dtype)
    cases = [(P @ Q, D @ E), (Q @ P, E @ D), (Q * P, E @ D), (P * P, D @ D),
             ((P * P) ** 2, np.linalg.matrix_power(D @ D, 2)), (P @ P, D @ D),
             (P + Q, D + E), (2 * P @ Q, 2 * D @ E)]
    for op, M in cases:
        assert isinstance(op, LinearOperator)
        np.testing.assert_allclose(op @ x, M @ x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(op.H @ x, M.conj().T @ x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(op.H.matvec(x), M.conj().T @ x, rtol=1e-12, atol=1e-12)


def test_transpose(rng):
    """.T is the transpose, cached, and products with it match scipy's."""
    A = random_sparse(rng, 12, 9, 0.3, np.complex64)
    W = CSR(A)
    T = W.T
    assert T.shape == (9, 12) and T.dtype == A.dtype
    assert W.T is T
    np.testing.assert_array_equal(T.to_scipy().toarray(), A.T.toarray())
    np.testing.assert_array_equal(T.T.to_scipy().toarray(), A.toarray())
    X = random_dense(rng, (12, 5), np.complex64)
    assert_matches(T @ X, A.T @ X, A.T, X)
    Y = random_dense(rng, (5, 9), np.complex64)
    assert_matches(Y @ T, Y @ A.T, Y, A.T)


def test_to_scipy(rng):
    """to_scipy is a csr_array sharing the arrays, trimmed to nnz."""
    A = random_sparse(rng, 12, 9, 0.3)
    W = CSR(A)
    S = W.to_scipy()
    assert isinstance(S, sp.csr_array) and S.shape == A.shape
    assert np.shares_memory(S.data, W.data)
    np.testing.assert_array_equal(S.toarray(), A.toarray())
    # trailing entries beyond indptr[-1] are not part of the matrix
    W2 = CSR.from_arrays([1.0, 2.0, 99.0], [0, 1, 7], [0, 1, 2], (2, 2))
    assert W2.to_scipy().nnz == 2
    np.testing.assert_array_equal(W2 @ np.ones(2), [1.0, 2.0])
    np.testing.assert_array_equal(sparse_matmul(np.ones(2), W2), [1.0, 2.0])


def test_prepared_operand_keeps_its_dense_copy_for_dense_dispatch():
    """A prepared CSR sent to dense BLAS densifies once (cached), stays correct
    after a change of dtype, and one-shot scipy operands leave nothing behind."""
    rng = np.random.default_rng(0)
    A = sp.random(120, 90, density=0.9, format="csr", random_state=1, dtype=np.float64)
    W = CSR(A)
    X = rng.standard_normal((90, 300))
    np.testing.assert_allclose(sparse_matmul(W, X, method="dense"), A @ X, rtol=1e-12, atol=1e-10)
    cached = W._dense
    assert cached is not None and cached.dtype == np.float64
    np.testing.assert_allclose(sparse_matmul(W, X, method="dense"), A @ X, rtol=1e-12, atol=1e-10)
    assert W._dense is cached
    Xc = X.astype(np.complex128)
    np.testing.assert_allclose(sparse_matmul(W, Xc, method="dense"), A @ Xc, rtol=1e-12, atol=1e-10)
    assert W._dense.dtype == np.complex128


# -- from_arrays -------------------------------------------------------------------------------
def test_from_arrays_basic():
    W = CSR.from_arrays([1.0, 2.0], [1, 0], [0, 1, 2], (2, 2))
    np.testing.assert_array_equal(W.to_scipy().toarray(), [[0.0, 1.0], [2.0, 0.0]])
    np.testing.assert_array_equal(W @ np.array([3.0, 4.0]), [4.0, 6.0])


@pytest.mark.parametrize("ptr_dtype,idx_dtype,expect", [
    (np.int32, np.int32, np.int32), (np.int64, np.int64, np.int32),
    (np.int32, np.int64, np.int32), (np.int64, np.int32, np.int32),
    (np.uint32, np.int32, np.int32), (np.int16, np.uint8, np.int32)])
def test_from_arrays_index_dtypes(ptr_dtype, idx_dtype, expect):
    """Mixed/small/unsigned index dtypes become one kernel index type: int32 when the
    shape and the stored entries allow it."""
    W = CSR.from_arrays(np.array([1.0, 2.0, 3.0]), np.array([2, 0, 1], idx_dtype),
                        np.array([0, 2, 3], ptr_dtype), (2, 3))
    assert W.indices.dtype == expect and W.indptr.dtype == expect
    np.testing.assert_array_equal(W @ np.array([1.0, 10.0, 100.0]), [102.0, 30.0])


def test_from_arrays_empty_lists():
    """Empty index lists (float64 arrays to numpy) are taken, as scipy takes them; a
    nonempty float index array is not."""
    W = CSR.from_arrays([], [], [0, 0], (1, 3))
    assert W.nnz == 0 and W.indices.dtype == np.int32
    np.testing.assert_array_equal(W @ np.ones(3), [0.0])
    with pytest.raises(TypeError, match="A.indices must be a 1-D integer array"):
        CSR.from_arrays([1.0], [0.0], [0, 1], (1, 3))


def test_from_arrays_copy():
    data, indices, indptr = np.array([1.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2])
    W = CSR.from_arrays(data, indices, indptr, (2, 2), copy=True)
    data[:] = 7
    indices[:] = 5
    np.testing.assert_array_equal(W @ np.ones(2), [1.0, 2.0])


@pytest.mark.parametrize("args,exc,match", [
    (([1.0], [0], [0, 1, 0], (2, 2)), ValueError, "indptr decreases"),
    (([1.0], [0], [1, 1, 1], (2, 2)), ValueError, r"indptr\[0\] is not 0"),
    (([1.0], [-1], [0, 1, 1], (2, 2)), ValueError, "negative or not below 2"),
    (([1.0], [2], [0, 1, 1], (2, 2)), ValueError, "negative or not below 2"),
    (([1.0], [0], [0, 1, 2], (2, 2)), ValueError, r"indptr\[-1\] exceeds"),
    (([1.0], [0, 1], [0, 1, 2], (2, 2)), ValueError, "data has only 1 entries"),
    (([1.0], [0], [0, 1], (2, 2)), ValueError, "indptr has 2 entries, expected 3"),
    (([1.0], [0], [0, 1, 1, 1], (2, 2)), ValueError, "indptr has 4 entries, expected 3"),
    (([1.0], [0], np.zeros(0, np.int64), (0, 2)), ValueError, "indptr has 0 entries, expected 1"),
    (([1.0], [0.0], [0, 1, 1], (2, 2)), TypeError, "A.indices must be a 1-D integer array"),
    (([1.0], [0], [0.0, 1.0, 1.0], (2, 2)), TypeError, "A.indptr must be a 1-D integer array"),
    (([1.0], [[0]], [0, 1, 1], (2, 2)), TypeError, "A.indices must be a 1-D integer array"),
    (([[1.0]], [0], [0, 1, 1], (2, 2)), ValueError, "A.data must be 1-D"),
    ((np.array(["a"]), [0], [0, 1, 1], (2, 2)), TypeError, r"A.data has dtype .*str"),
    ((np.array([None]), [0], [0, 1, 1], (2, 2)), TypeError, "object"),
    (([1.0], [0], [0, 1, 1], (2,)), ValueError, "shape must be a pair of ints"),
    (([1.0], [0], [0, 1, 1], None), ValueError, "shape must be a pair of ints"),
    (([1.0], [0], [0, 1, 1], ("a", 2)), ValueError, "shape must be a pair of ints"),
    (([1.0], [0], [0, 1, 1], (2, -1)), ValueError, "shape must be nonnegative"),
    (([1.0], np.array([2**63], np.uint64), [0, 1, 1], (2, 2)), ValueError,
     "negative or not below 2"),
])
def test_from_arrays_validation(args, exc, match):
    with pytest.raises(exc, match=match):
        CSR.from_arrays(*args)


def test_from_arrays_empty():
    W = CSR.from_arrays(np.zeros(0), np.zeros(0, np.int32), np.zeros(4, np.int32), (3, 5))
    assert W.nnz == 0
    np.testing.assert_array_equal(W @ np.ones((5, 2)), np.zeros((3, 2)))
    np.testing.assert_array_equal(np.ones((2, 3)) @ W, np.zeros((2, 5)))
    W0 = CSR.from_arrays([], np.zeros(0, np.int64), [0], (0, 0))
    assert (W0 @ np.ones((0, 4))).shape == (0, 4)


@pytest.mark.parametrize("shape", [(2.0, 2), (2, 2.5), (np.float64(2), 2)], ids=str)
def test_from_arrays_float_shape(shape):
    with pytest.raises(ValueError, match="shape must be a pair of ints"):
        CSR.from_arrays([1.0], [0], [0, 1, 1], shape)


def test_from_arrays_numpy_int_shape():
    W = CSR.from_arrays([1.0], [0], [0, 1, 1], (np.int64(2), np.uint8(2)))
    assert W.shape == (2, 2) and all(type(s) is int for s in W.shape)


# -- index dtypes ------------------------------------------------------------------------------
INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("ptr_dt", INT_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("idx_dt", INT_DTYPES, ids=lambda t: np.dtype(t).name)
def test_csr_index_dtype_selection(ptr_dt, idx_dt):
    """Every integer index dtype becomes int32 where the values fit (here always: the
    checks run first, on int64 copies, so nothing wraps), and the product equals scipy's."""
    A = sp.random(6, 5, density=0.5, format="csr", random_state=2)
    W = CSR.from_arrays(A.data, A.indices.astype(idx_dt), A.indptr.astype(ptr_dt), A.shape)
    assert W.indptr.dtype == np.int32 and W.indices.dtype == np.int32
    assert np.array_equal(W.indptr, A.indptr) and np.array_equal(W.indices, A.indices)
    x = np.arange(5.0)
    np.testing.assert_allclose(W @ x, A @ x)


@pytest.mark.parametrize("ptr_dt", [np.int64, np.uint32, np.uint64])
def test_indptr_beyond_int32_is_not_cast_down(ptr_dt):
    """indptr values beyond the int32 range (nnz > 2**31, here without the arrays) keep
    their value: the check reports indptr[-1] = 2**31 + 1 > len(indices), not a
    wrapped negative value ('indptr decreases')."""
    indptr = np.array([0, 2**31 + 1], dtype=ptr_dt)
    with pytest.raises(ValueError, match="indptr.-1. exceeds the number of stored indices"):
        CSR.from_arrays([1.0], np.array([0], dtype=np.int32), indptr, (1, 1))


# -- a LinearOperator --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_csr_is_a_linear_operator(dtype):
    """aslinearoperator returns the CSR itself; matvec/matmat/rmatvec/rmatmat/adjoint/H/T
    give scipy's answers, with 1-D, column and np.matrix operands."""
    from scipy.sparse.linalg import LinearOperator, aslinearoperator
    rng = np.random.default_rng(3)
    A = sp.random(70, 50, density=0.2, format="csr", random_state=3, dtype=np.float64)
    if np.dtype(dtype).kind == "c":
        A = A + 1j * sp.random(70, 50, density=0.2, format="csr", random_state=4)
    A = A.astype(dtype).tocsr()
    P = CSR(A)
    assert isinstance(P, LinearOperator) and aslinearoperator(P) is P
    assert P.shape == (70, 50) and P.dtype == np.dtype(dtype)
    tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    x = rng.standard_normal(50).astype(dtype)
    y = rng.standard_normal(70).astype(dtype)
    X = rng.standard_normal((50, 3)).astype(dtype)
    Y = rng.standard_normal((70, 3)).astype(dtype)
    AH = A.conj().T
    with warnings.catch_warnings():  # (scipy 1.18 deprecates matvec of a column)
        warnings.simplefilter("ignore", FutureWarning)
        column = P.matvec(x[:, None])
    for got, ref in ((P.matvec(x), A @ x), (column, A @ x[:, None]),
                     (P.matmat(X), A @ X), (P.rmatvec(y), AH @ y), (P.rmatmat(Y), AH @ Y),
                     (P.H @ y, AH @ y), (P.adjoint().matvec(y), AH @ y),
                     (P.T @ y, A.T @ y), (P.transpose() @ Y, A.T @ Y), (P.dot(X), A @ X)):
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    assert isinstance(P.matvec(np.asmatrix(x).T), np.matrix)
    assert P.T.T is P and P.H.H is P
    with pytest.raises(ValueError, match="(?i)dimension mismatch"):  # (1.18: "Dimension")
        P.matvec(np.ones(49, dtype))


def test_csr_has_what_linear_operator_init_sets():
    """CSR does not call LinearOperator.__init__ (shape and dtype come from its arrays), so
    every attribute that __init__ sets must be there otherwise: scipy's methods read them.
    scipy 1.18 added ``_xp`` (its array namespace); without it every ``P.matvec`` raised
    AttributeError there, seen on a machine with scipy 1.18 in cg."""
    from scipy.sparse.linalg import LinearOperator, cg

    class Probe(LinearOperator):
        def __init__(self):
            super().__init__(np.float64, (3, 3))

        def _matvec(self, x):
            return x

    P = CSR(sp.eye(3, format="csr"))
    for name, value in vars(Probe()).items():
        assert hasattr(P, name), name
        if name not in ("shape", "dtype"):
            assert getattr(P, name) is value or getattr(P, name) == value, name
    x, info = cg(P, np.ones(3))
    assert info == 0 and np.allclose(x, 1.0)


def test_solvers_take_a_csr_as_it_is():
    """cg and lsqr on a prepared CSR: the iterates of scipy's own matrix, to rounding."""
    from scipy.sparse.linalg import cg, lsqr
    g = 20
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(g, g))
    L = (sp.kron(sp.eye(g), T) + sp.kron(T, sp.eye(g))).tocsr()
    b = np.arange(g * g, dtype=np.float64) % 7
    P = CSR(L)
    x_ref, info_ref = cg(L, b, rtol=1e-10, maxiter=500)
    x, info = cg(P, b, rtol=1e-10, maxiter=500)
    assert info == info_ref == 0
    np.testing.assert_allclose(x, x_ref, rtol=1e-8, atol=1e-10)
    R = sp.random(60, 30, density=0.2, format="csr", random_state=1) + sp.eye(60, 30)
    c = np.ones(60)
    ref, got = lsqr(R.tocsr(), c, atol=1e-12, btol=1e-12), lsqr(CSR(R.tocsr()), c, atol=1e-12,
                                                                   btol=1e-12)
    assert got[2] == ref[2]  # iterations
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("over", ["columns", "entries", "neither"])
def test_csr_narrows_only_what_fits(monkeypatch, over):
    """Index arrays stay int64 when the column count or the stored entries exceed the int32
    range (lowered here to between the two), and give the same product."""
    from wsesparse import csr as csr_module
    # More columns than entries, or more entries than columns.
    shape = (7, 40) if over == "columns" else (40, 7)
    A = sp.random(*shape, density=0.1, format="csr", random_state=3)
    A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    lo, hi = sorted((shape[1], A.nnz))
    assert lo < hi
    monkeypatch.setattr(csr_module, "_INT32_MAX", hi if over == "neither" else lo)
    W = CSR(A)
    want = np.int32 if over == "neither" else np.int64
    assert W.indptr.dtype == want and W.indices.dtype == want
    x = np.arange(float(shape[1]))
    assert (W @ x).tobytes() == sparse_matmul(A, x).tobytes()


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_int64_scipy_inputs_are_narrowed_in_every_format(fmt):
    """int64-indexed scipy inputs of any format give int32 CSR arrays (the CSC path goes
    through the transpose), and the same products as scipy (both sides)."""
    A = sp.random(60, 45, density=0.2, format="csr", random_state=7)
    A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    S = A.asformat(fmt)
    if fmt == "csc":
        S.indices, S.indptr = S.indices.astype(np.int64), S.indptr.astype(np.int64)
    W = CSR(S)
    assert W.indptr.dtype == np.int32 and W.indices.dtype == np.int32
    rng = np.random.default_rng(7)
    x, X = rng.standard_normal(45), rng.standard_normal((3, 60))
    np.testing.assert_allclose(W @ x, A @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(X @ W, X @ A, rtol=1e-12, atol=1e-12)



# -- concurrency and lifetime ------------------------------------------------------------------
@pytest.mark.parametrize("use", ["rmatvec", "left", "H"])
def test_first_transpose_from_many_threads(rng, use):
    """The transpose and conjugate transpose were published before they were filled in:
    threads that found them set used an object without shape or arrays (AttributeError in
    571 of 1600 calls of a review's reproducer). Eight threads use a fresh operand at once,
    with a short switch interval to widen any such window."""
    import sys
    import threading
    from concurrent.futures import ThreadPoolExecutor

    S = sp.random(600, 500, density=0.05, format="csr", random_state=1, dtype=np.complex128)
    S.data += 1j * rng.standard_normal(S.nnz)
    y = rng.standard_normal(600) + 1j * rng.standard_normal(600)
    Y = rng.standard_normal((2, 600))
    calls = {"rmatvec": lambda W: W.rmatvec(y), "left": lambda W: Y @ W,
             "H": lambda W: W.H @ y}
    want = calls[use](CSR(S))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for _ in range(30):
            W = CSR(S)  # caches empty
            barrier = threading.Barrier(8)

            def work(_, W=W, barrier=barrier):
                barrier.wait()
                return calls[use](W)

            with ThreadPoolExecutor(8) as pool:
                for got in pool.map(work, range(8)):
                    np.testing.assert_array_equal(got, want)
    finally:
        sys.setswitchinterval(interval)


def test_a_dropped_operand_is_freed_at_once(rng):
    """An operand whose transpose (and conjugate transpose) was used is freed when dropped,
    without the cyclic collector: the transpose's reference back to its operand made a
    cycle, and a loop building fresh operands kept 60 dead ones (2.7 GiB) alive in a
    review's reproducer. The transpose of a live operand still gives the operand back."""
    import gc
    import weakref

    S = sp.random(50, 40, density=0.2, format="csr", random_state=2, dtype=np.complex64)
    gc.disable()
    try:
        P = CSR(S)
        T, H = P.T, P.H
        assert T.T is P and H.H is P and P.T is T
        ref, ref_t, ref_h = weakref.ref(P), weakref.ref(T), weakref.ref(H)
        del P, T, H
        assert ref() is None and ref_t() is None and ref_h() is None
        # A transpose kept alone outlives its operand and transposes again when asked.
        T = CSR(S).T
        assert_matches(T.T.to_scipy().toarray(), S.toarray())
        # One-shot products through a temporary's transpose (X @ CSC with token rows over
        # 128 bytes) leave no operand behind either.
        def alive():
            return sum(isinstance(o, CSR) for o in gc.get_objects())

        before = alive()
        for _ in range(5):
            sparse_matmul(rng.standard_normal((40, 50)), sp.csr_array(S))
            sparse_matmul(sp.csc_array(S).T, rng.standard_normal((50, 40)))
        assert alive() == before
    finally:
        gc.enable()


def test_linear_operator_containers_follow_scipy():
    """matmat/rmatmat of an np.matrix gave an ndarray, where scipy's aslinearoperator of
    the same scipy matrix gives an np.matrix (its @ and dot give ndarrays, as CSR's do)."""
    import scipy.sparse.linalg as sla
    A = sp.random(5, 4, density=0.5, format="csr", random_state=0)
    M, N = np.asmatrix(np.ones((4, 2))), np.asmatrix(np.ones((5, 2)))
    v = np.asmatrix(np.ones((4, 1)))
    L, P = sla.aslinearoperator(A), CSR(A)
    for call in (lambda o: o.matmat(M), lambda o: o.rmatmat(N), lambda o: o @ M,
                 lambda o: o.dot(M), lambda o: o.matvec(v), lambda o: o.H.matmat(N),
                 lambda o: o.matmat(np.ones((4, 2)))):
        try:
            want = call(L)
        except ValueError:
            # scipy 1.18's aslinearoperator raises "could not interpret dimensions" for
            # matvec of an np.matrix column (it adds an axis to the matrix): no reference
            continue
        got = call(P)
        assert type(got) is type(want)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int8])
def test_toarray_is_scipy_s(rng, dtype):
    """CSR had no toarray (users went through to_scipy()); duplicates are summed."""
    A = sp.random(7, 5, density=0.4, format="coo", random_state=3).astype(dtype)
    A = sp.coo_array((np.concatenate([A.data, A.data[:2]]),
                      (np.concatenate([A.row, A.row[:2]]), np.concatenate([A.col, A.col[:2]]))),
                     shape=A.shape)
    got = CSR(A).toarray()
    assert got.dtype == A.dtype and type(got) is np.ndarray
    np.testing.assert_array_equal(got, A.toarray())


def test_pickles_after_its_transposes_were_used(rng):
    """The transposes hold their operand by a weak reference, which pickle refuses: an
    operand whose .T or .H had been used could not be pickled (nor sent to Dask workers)."""
    import pickle
    S = sp.random(9, 7, density=0.4, format="csr", random_state=4, dtype=np.complex128)
    P = CSR(S)
    T, H = P.T, P.H
    P2 = pickle.loads(pickle.dumps(P))
    assert P2.T.T is P2 and P2.H.H is P2
    np.testing.assert_array_equal(P2.T.toarray(), T.toarray())
    np.testing.assert_array_equal(P2.H.toarray(), H.toarray())
    T2 = pickle.loads(pickle.dumps(T))  # a transpose alone: transposed again when asked
    np.testing.assert_array_equal(T2.T.toarray(), S.toarray())


def test_pickles_and_copies_carry_the_arrays_not_the_caches(rng):
    """A pickle after one dense product held the dense copies (600x the arrays), so Dask
    shipped them and its key changed once caches filled; copy.copy pointed the original's
    transpose back at the copy (P.T.T was the copy, then a new transposition)."""
    import copy
    import gc
    import pickle
    S = sp.random(300, 200, density=0.02, format="csr", random_state=5, dtype=np.float32)
    P = CSR(S)
    fresh = pickle.dumps(P, protocol=5)
    X = rng.standard_normal((200, 64))
    want = S.toarray().astype(np.float64) @ X
    sparse_matmul(P, X, method="dense")
    T = P.T
    sparse_matmul(T, rng.standard_normal((300, 64)), method="dense")
    assert P._dense is not None and P._data_as and T._dense is not None  # caches filled
    assert pickle.dumps(P, protocol=5) == fresh
    for Q in (pickle.loads(fresh), copy.copy(P), copy.deepcopy(P)):
        assert Q._dense is None and not Q._data_as and Q._t is None
        assert Q.T.T is Q and Q.T is not T
        np.testing.assert_allclose(Q @ X, want, rtol=1e-5)
        assert not np.shares_memory(Q.T.data, T.data)
    gc.collect()
    assert P.T is T and T.T is P  # the original's transpose still points back at it


def test_float16_values_are_stored_as_float32():
    """float16 values were kept: products worked (float32), but toarray, to_scipy and
    wsesparse.dask failed on them, since scipy.sparse has no float16."""
    C = CSR.from_arrays(np.array([1, 2], np.float16), [1, 0], [0, 1, 2], (2, 2))
    assert C.dtype == np.float32 and C.data.dtype == np.float32
    np.testing.assert_array_equal(C.toarray(), [[0, 1], [2, 0]])
    assert C.to_scipy().dtype == np.float32
    y = sparse_matmul(C, np.ones(2, np.float16))
    assert y.dtype == np.float32 and (y == [1, 2]).all()


def test_int32_arrays_with_more_than_2_31_columns_become_int64():
    """The docstring's rule (int32 only below 2**31 columns) held for scipy input but not
    for from_arrays with int32 arrays."""
    C = CSR.from_arrays(np.ones(2), np.array([0, 2**31 - 1], np.int32),
                        np.array([0, 1, 2], np.int32), (2, 2**31 + 5))
    assert C.indptr.dtype == C.indices.dtype == np.int64
    small = CSR.from_arrays(np.ones(2), np.array([0, 1], np.int32),
                            np.array([0, 1, 2], np.int32), (2, 2))
    assert small.indices.dtype == np.int32


def test_arrays_are_read_only_views():
    """Products read the indices checked once at construction: a write through ``P.indices``
    (a public attribute) out of range crashed the process (a review). The input's own arrays
    stay writeable; pickles and copies come back read-only too."""
    import copy
    import pickle

    A = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    P = CSR(A)
    for name in ("indptr", "indices", "data"):
        arr = getattr(P, name)
        assert not arr.flags.writeable and getattr(A, name).flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            arr[:1] = 2 ** 31 - 1
    assert np.shares_memory(P.indices, A.indices)   # (a view, not a copy)
    for Q in (pickle.loads(pickle.dumps(P)), copy.copy(P), copy.deepcopy(P), CSR(A, copy=True),
              P.T, CSR(A.tocoo())):
        assert not any(getattr(Q, n).flags.writeable for n in ("indptr", "indices", "data"))
        S = Q.to_scipy()   # (canonical: shared, read-only)
        assert np.shares_memory(S.indices, Q.indices) and not S.indices.flags.writeable
    x = np.ones(200)
    np.testing.assert_allclose(P @ x, A @ x, rtol=1e-13)


def test_to_scipy_of_a_non_canonical_operand_takes_scipy_s_methods():
    """scipy's max(), abs(), power() and spsolve sort or merge a matrix with unsorted or
    duplicate indices in place; with read-only arrays they failed ("WRITEBACKIFCOPY base is
    read-only", a review). They keep the matrix: the operand's products stay the same."""
    from scipy.sparse.linalg import spsolve

    rng = np.random.default_rng(3)
    n = 60
    r = np.concatenate([rng.integers(0, n, 400), np.arange(n)])[::-1]
    c = np.concatenate([rng.integers(0, n, 400), np.arange(n)])[::-1]
    v = np.concatenate([rng.standard_normal(400), np.full(n, 10.0)])[::-1]
    coo = sp.coo_array((v, (r, c)), shape=(n, n))
    P = CSR(coo)   # (entries in COO order: unsorted, with duplicates)
    dense, x = coo.toarray(), rng.standard_normal(n)
    S = P.to_scipy()   # (a copy, which scipy may sort in place)
    assert not S.has_canonical_format and not np.shares_memory(S.indices, P.indices)
    assert P.to_scipy().max() == dense.max()
    np.testing.assert_allclose(abs(P.to_scipy()).toarray(), abs(dense), rtol=1e-13)
    np.testing.assert_allclose(spsolve(P.to_scipy().tocsc(), x), np.linalg.solve(dense, x),
                               rtol=1e-8)
    np.testing.assert_allclose(P @ x, dense @ x, rtol=1e-12, atol=1e-12)


def test_scipy_sorting_to_scipy_in_place_leaves_the_operand_right():
    """scipy's max() merges duplicates in place; on the operand's own arrays (shared
    writeable) that left its cached float64 copy of float32 values stale: products off by
    16.6 (a review). to_scipy of a non-canonical operand is now a copy."""
    rng = np.random.default_rng(0)
    n = 1000
    ind = rng.integers(0, n, 5 * n).astype(np.int32)
    ind[1::5] = ind[0::5]   # duplicates
    A = sp.csr_array((rng.standard_normal(5 * n).astype(np.float32), ind,
                      np.arange(n + 1, dtype=np.int32) * 5), shape=(n, n))
    P = CSR(A)
    X = rng.standard_normal((n, 4))
    ref = A.toarray().astype(np.float64) @ X
    before = P @ X   # (fills the float64 copy of the values)
    P.to_scipy().max()
    P.to_scipy().sort_indices()
    np.testing.assert_array_equal(P @ X, before)
    np.testing.assert_allclose(before, ref, rtol=1e-6, atol=1e-6)
    for Q in (CSR(P), CSR(A.tocsc()), P.H):   # (their arrays are other CSRs' read-only views)
        assert Q.to_scipy().max() == Q.toarray().max()
