"""``sparse_matmul(..., out=)``: filled and returned (C/F order, strided, 1-D, np.matrix,
aliasing an input), and every bad ``out`` (shape, dtype, read-only, not an ndarray, sparse
result) a ValueError/TypeError naming it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from matmul_helpers import assert_matches, random_dense, random_sparse, scipy_product
from wsesparse import sparse_matmul


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("method", ["auto", "sparse", "dense"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int32], ids=str)
def test_out_is_filled_and_returned(rng, order, side, method, dtype):
    """``out`` (C or Fortran order, prefilled with garbage) is overwritten and returned."""
    A = random_sparse(rng, 20, 16, 0.4, dtype)
    X = random_dense(rng, (16, 70) if side == "left" else (70, 20), dtype)
    args = (A, X) if side == "left" else (X, A)
    expected = scipy_product(*args)
    out = np.full(expected.shape, 99, dtype=expected.dtype, order=order)
    got = sparse_matmul(*args, out=out, method=method)
    assert got is out
    assert_matches(out, expected, *args)


def test_out_strided_and_vector(rng):
    """A non-contiguous ``out`` view and a 1-D ``out`` are filled correctly."""
    A = random_sparse(rng, 20, 16, 0.4)
    X = random_dense(rng, (16, 5))
    big = np.zeros((40, 10))
    out = big[::2, ::2]
    assert sparse_matmul(A, X, out=out) is out
    assert_matches(out, A @ X, A, X)
    assert not big[1::2].any() and not big[:, 1::2].any()
    y = np.zeros(20)
    assert sparse_matmul(A, X[:, 0], out=y) is y
    assert_matches(y, A @ X[:, 0], A, X[:, 0])
    z = np.zeros(16)
    assert sparse_matmul(np.ones(20), A, out=z) is z
    assert_matches(z, np.ones(20) @ A)


@pytest.mark.parametrize("method", ["auto", "sparse", "dense"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_out_aliases_dense_input(rng, method, order):
    """``out`` that *is* the dense input (square sparse operand) still gives the right
    product, on both sides."""
    A = random_sparse(rng, 40, 40, 0.5)
    X = np.asarray(random_dense(rng, (40, 70)), order=order)
    X0, expected = X.copy(), A @ X
    assert sparse_matmul(A, X, out=X, method=method) is X
    assert_matches(X, expected, A, X0)
    Y = np.asarray(random_dense(rng, (70, 40)), order=order)
    Y0, expected = Y.copy(), Y @ A
    assert sparse_matmul(Y, A, out=Y, method=method) is Y
    assert_matches(Y, expected, Y0, A)
    # vector
    x = random_dense(rng, (40,))
    x0, expected = x.copy(), A @ x
    assert sparse_matmul(A, x, out=x, method=method) is x
    assert_matches(x, expected, A, x0)


def test_out_aliases_shifted_view(rng):
    """``out`` overlapping the dense input at an offset (not the same array)."""
    A = random_sparse(rng, 30, 30, 0.3)
    buf = random_dense(rng, (31, 8))
    X = buf[:30]
    out = buf[1:]
    expected = A @ X.copy()
    assert sparse_matmul(A, X, out=out) is out
    assert_matches(out, expected)


def test_out_aliases_sparse_data(rng):
    """``out`` sharing memory with the sparse operand's value array."""
    data = random_dense(rng, (40,))
    A = sp.csr_array((data[:20], np.arange(20) % 5, np.arange(0, 21, 5)), shape=(4, 5))
    X = random_dense(rng, (5, 10))
    expected = A @ X
    out = data[:40].reshape(4, 10)
    assert sparse_matmul(A, X, out=out) is out
    assert_matches(out, expected)


@pytest.mark.parametrize("array", ["indices", "indptr"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_out_aliases_sparse_index_arrays(rng, array, side):
    """``out`` over the sparse operand's index arrays: only the dense operand and the
    values were compared, so ``X @ A`` (a scatter from A's own arrays, int64 indices)
    wrote the result into the indices it was reading: a segfault."""
    A = sp.csr_array(random_sparse(rng, 64, 64, 0.5))
    A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    arr = getattr(A, array)
    if array == "indptr":  # (65 entries: room for one vector)
        X = random_dense(rng, (64,))
        out = arr[:64].view(np.float64)
    else:
        X = random_dense(rng, (2, 64) if side == "left" else (64, 2))
        out = arr[:128].view(np.float64).reshape(64, 2)
        out = out.T if side == "left" else out  # F-ordered (2, 64) for the scatter
    expected = X @ A if side == "left" else A @ X
    got = sparse_matmul(X, A, out=out) if side == "left" else sparse_matmul(A, X, out=out)
    assert got is out
    assert_matches(out, expected)


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n", [None, 1, 6])
def test_out_takes_the_fast_path(rng, monkeypatch, itype, n):
    """A plain ``out`` (a C-contiguous ndarray of the result's shape and dtype, apart from
    the operands) goes the fast path of an ``out``-less call, scipy CSR or ``CSR`` alike,
    with the same bits; before, it took the general path, which narrowed and checked a
    one-shot operand's indices first (3.7x the time of an int64 SpMV)."""
    from wsesparse import CSR, matmul
    A = sp.csr_array(random_sparse(rng, 300, 200, 0.05))
    A.indices, A.indptr = A.indices.astype(itype), A.indptr.astype(itype)
    X = random_dense(rng, (200,) if n is None else (200, n))
    for S in (A, CSR(A)):
        want = sparse_matmul(S, X)
        monkeypatch.setattr(matmul, "_as_csr", None)  # the general path would call it
        out = np.full(want.shape, np.nan)
        assert sparse_matmul(S, X, out=out) is out
        assert out.tobytes() == want.tobytes()
        monkeypatch.undo()


def test_out_matrix_container(rng):
    """``out`` given as an np.matrix is filled and returned as is."""
    A = sp.csr_matrix(random_sparse(rng, 6, 5, 0.5))
    X = np.asmatrix(random_dense(rng, (5, 3)))
    out = np.asmatrix(np.zeros((6, 3)))
    assert sparse_matmul(A, X, out=out) is out
    assert_matches(out, A @ X)


@pytest.mark.parametrize("method", ["auto", "sparse"])
def test_out_matrix_of_one_column_or_row(rng, method):
    """A one-column (or, for X @ A, one-row) np.matrix out: the SpMV path reshaped it to
    (1, m), not to a vector, and the kernel raised "x and y must be 1-D"."""
    from wsesparse import CSR
    A = sp.csr_matrix(random_sparse(rng, 30, 20, 0.3))
    for left in (A, CSR(A)):
        for X in (random_dense(rng, (20, 1)), np.asmatrix(random_dense(rng, (20, 1)))):
            out = np.asmatrix(np.zeros((30, 1)))
            assert sparse_matmul(left, X, out=out, method=method) is out
            assert_matches(out, A @ np.asarray(X), exact_type=False)
    for right in (A.tocsc(), CSR(A)):
        Z = random_dense(rng, (1, 30))
        out = np.asmatrix(np.zeros((1, 20)))
        assert sparse_matmul(Z, right, out=out, method=method) is out
        assert_matches(out, Z @ A, exact_type=False)


# -- bad out -----------------------------------------------------------------------------------
def test_out_wrong_shape(S):
    with pytest.raises(ValueError, match=r"out has shape \(6, 3\), but the product has shape "
                                         r"\(6, 2\)"):
        sparse_matmul(S, np.ones((4, 2)), out=np.empty((6, 3)))
    with pytest.raises(ValueError, match="out has shape"):
        sparse_matmul(S, np.ones(4), out=np.empty((6, 1)))
    with pytest.raises(ValueError, match="out has shape"):
        sparse_matmul(np.ones((2, 6)), S, out=np.empty((4, 2)))  # transposed shape


@pytest.mark.parametrize("out_dtype", [np.float32, np.complex128, np.int64])
def test_out_wrong_dtype(S, out_dtype):
    with pytest.raises(ValueError, match=r"out has dtype .*, but the product has dtype float64"):
        sparse_matmul(S, np.ones((4, 2)), out=np.empty((6, 2), out_dtype))


def test_out_float16_product_is_float32(rng):
    """An int8 x float16 product is float32 (scipy's rule): a float16 out is rejected."""
    A = random_sparse(rng, 6, 4, 0.5, np.int8)
    X = np.ones((4, 2), np.float16)
    with pytest.raises(ValueError, match="product has dtype float32"):
        sparse_matmul(A, X, out=np.empty((6, 2), np.float16))


def test_out_int_product(rng):
    A = random_sparse(rng, 6, 4, 0.5, np.int32)
    with pytest.raises(ValueError, match="product has dtype int32"):
        sparse_matmul(A, np.ones((4, 2), np.int8), out=np.empty((6, 2)))


def test_out_readonly(S):
    out = np.empty((6, 2))
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        sparse_matmul(S, np.ones((4, 2)), out=out)


@pytest.mark.parametrize("out", [[[0.0] * 2] * 6, (0.0,), "out", 1.0])
def test_out_not_ndarray(S, out):
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        sparse_matmul(S, np.ones((4, 2)), out=out)


def test_out_sparse_result(S):
    with pytest.raises(ValueError, match="out is only supported for dense results"):
        sparse_matmul(S, S.T, out=np.empty((6, 6)))
