"""Bad input to ``sparse_matmul`` raises TypeError/ValueError with a clear message, never
crashes: missing sparse operand, None, scalars, 3-d operands, non-numeric dtypes,
mismatched shapes, a bad ``out``, and corrupt compressed structures."""

from __future__ import annotations

import datetime

import numpy as np
import pytest
import scipy.sparse as sp

from matmul_helpers import random_sparse
from wsesparse import CSR, sparse_matmul


@pytest.fixture
def S(rng):
    return random_sparse(rng, 6, 4, 0.5)


# -- operands ------------------------------------------------------------------------
def test_no_sparse_operand():
    with pytest.raises(TypeError, match="at least one scipy.sparse or wsesparse.CSR operand"):
        sparse_matmul(np.ones((2, 3)), np.ones((3, 2)))
    with pytest.raises(TypeError, match="at least one"):
        sparse_matmul([[1.0]], [[2.0]])


@pytest.mark.parametrize("side", ["left", "right"])
def test_none_operand(S, side):
    args = (S, None) if side == "left" else (None, S)
    with pytest.raises(TypeError, match="None"):
        sparse_matmul(*args)


def test_both_none():
    with pytest.raises(TypeError, match="None"):
        sparse_matmul(None, None)


@pytest.mark.parametrize("scalar", [3, 2.5, 1j, np.float64(2.0), np.int8(1), np.array(2.0)],
                         ids=repr)
@pytest.mark.parametrize("side", ["left", "right"])
def test_scalar_operand(S, scalar, side):
    args = (S, scalar) if side == "left" else (scalar, S)
    with pytest.raises(ValueError, match="scalar"):
        sparse_matmul(*args)


@pytest.mark.parametrize("side", ["left", "right"])
def test_3d_operand(S, side):
    X = np.ones((4, 2, 2)) if side == "left" else np.ones((2, 2, 6))
    args = (S, X) if side == "left" else (X, S)
    with pytest.raises(ValueError, match=r"3 dimensions \(shape \((4, 2, 2|2, 2, 6)\)\)"):
        sparse_matmul(*args)


def test_1d_sparse_operand():
    v = sp.coo_array(np.array([1.0, 0.0, 2.0]))
    with pytest.raises(ValueError, match="2-D"):
        sparse_matmul(v, np.ones((3, 2)))


@pytest.mark.parametrize("bad,what", [
    (np.array([[1, "a"]] * 4, dtype=object), "object"),
    (np.array([["a", "b"]] * 4), "str"),
    ([["a", "b"]] * 4, "str"),
    (np.array([[b"a", b"b"]] * 4), "bytes"),
    (np.full((4, 2), np.datetime64("2024-01-01")), "datetime64"),
    (np.full((4, 2), np.timedelta64(1, "s")), "timedelta64"),
    ([[datetime.date(2024, 1, 1)] * 2] * 4, "object"),
])
@pytest.mark.parametrize("side", ["left", "right"])
def test_non_numeric_dense(S, bad, what, side):
    """object/str/bytes/datetime dense operands: TypeError naming the operand and dtype."""
    if side == "right":
        args, name = (np.resize(np.asarray(bad), (2, 6)), S), "A"
    else:
        args, name = (S, bad), "B"
    with pytest.raises(TypeError, match=rf"{name} has dtype .*\({what}\)"):
        sparse_matmul(*args)


def test_unconvertible_dense(S):
    with pytest.raises(TypeError, match="cannot be converted"):
        sparse_matmul(S, [[1.0, 2.0], [3.0]] * 2)
    with pytest.raises(TypeError, match="object"):
        sparse_matmul(S, {"a": 1})


# -- shapes --------------------------------------------------------------------------------
@pytest.mark.parametrize("X,expect", [
    (np.ones((5, 2)), r"A is csr_array of shape \(6, 4\) and dtype float64, "
                      r"B is ndarray of shape \(5, 2\) and dtype float64"),
    (np.ones(6, np.float32), r"A is csr_array of shape \(6, 4\) and dtype float64, "
                             r"B is ndarray of shape \(6,\) and dtype float32"),
])
def test_mismatched_shapes_left(S, X, expect):
    with pytest.raises(ValueError, match="inner dimensions differ: " + expect):
        sparse_matmul(S, X)


@pytest.mark.parametrize("X,expect", [
    (np.ones((2, 4), np.int32), r"A is ndarray of shape \(2, 4\) and dtype int32, "
                                r"B is csr_array of shape \(6, 4\) and dtype float64"),
    (np.ones(4), r"A is ndarray of shape \(4,\) and dtype float64, "
                 r"B is csr_array of shape \(6, 4\) and dtype float64"),
])
def test_mismatched_shapes_right(S, X, expect):
    with pytest.raises(ValueError, match="inner dimensions differ: " + expect):
        sparse_matmul(X, S)


def test_mismatched_shapes_matrix_and_csr(S):
    with pytest.raises(ValueError, match=r"matrix of shape \(1, 5\).*CSR of shape \(6, 4\)"):
        sparse_matmul(np.asmatrix(np.ones((1, 5))), CSR(S))


def test_mismatched_sparse_sparse(S):
    with pytest.raises(ValueError, match=r"inner dimensions differ: .*\(6, 4\).*\(6, 4\)"):
        sparse_matmul(S, S)


# -- out and method ---------------------------------------------------------------------------
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


@pytest.mark.parametrize("method", ["blas", "", None, "Dense"])
def test_bad_method(S, method):
    with pytest.raises(ValueError, match="method must be 'auto', 'sparse' or 'dense'"):
        sparse_matmul(S, np.ones((4, 2)), method=method)


# -- corrupt compressed structures ----------------------------------------------------------------
def corrupt(A, how: str):
    """Damage a valid CSR/CSC matrix's arrays in place (scipy does not re-check them)."""
    if how == "indptr_decreasing":
        A.indptr[2] = A.indptr[3] + 2
    elif how == "indptr_start":
        A.indptr[0] = 1
    elif how == "index_too_large":
        A.indices[len(A.indices) // 2] = 10**6
    elif how == "index_at_bound":
        A.indices[0] = A.shape[1] if A.format == "csr" else A.shape[0]
    elif how == "index_negative":
        A.indices[-1] = -3
    elif how == "indptr_last_too_large":
        A.indptr[-1] = len(A.indices) + 5
    elif how == "data_short":
        A.data = A.data[:-3]
    elif how == "indptr_short":
        A.indptr = A.indptr[:-1]
    elif how == "indptr_long":
        A.indptr = np.append(A.indptr, A.indptr[-1])
    else:  # pragma: no cover
        raise ValueError(how)
    return A


CORRUPTIONS = ["indptr_decreasing", "indptr_start", "index_too_large", "index_at_bound",
               "index_negative", "indptr_last_too_large", "data_short", "indptr_short",
               "indptr_long"]


@pytest.mark.parametrize("how", CORRUPTIONS)
@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype,method", [(np.float64, "auto"), (np.float64, "dense"),
                                          (np.float32, "sparse"), (np.int64, "auto")], ids=str)
@pytest.mark.parametrize("n", [None, 3])
def test_corrupt_structure(rng, how, fmt, side, dtype, method, n):
    """Every corruption of a CSR/CSC operand is a ValueError on every path (kernel, dense
    BLAS, scipy's integer path), on either side of the product, never a crash or garbage."""
    A = random_sparse(rng, 40, 30, 0.2, dtype).asformat(fmt)
    corrupt(A, how)
    if side == "left":
        X = np.ones((30,) if n is None else (30, n), dtype)
        args = (A, X)
    else:
        X = np.ones((40,) if n is None else (n, 40), dtype)
        args = (X, A)
    with pytest.raises(ValueError, match="corrupt|index pointer|indices and data|should be"):
        sparse_matmul(*args, method=method)


@pytest.mark.parametrize("how,reason", [
    ("indptr_decreasing", "indptr decreases somewhere"),
    ("indptr_start", r"indptr\[0\] is not 0"),
    ("index_too_large", "a stored index is negative or not below 30"),
    ("index_negative", "a stored index is negative or not below 30"),
    ("indptr_last_too_large", r"indptr\[-1\] exceeds the number of stored indices"),
    ("data_short", "data has only"),
    ("indptr_short", "indptr has 40 entries, expected 41"),
])
@pytest.mark.parametrize("side", ["left", "right"])
def test_corrupt_csr_message_names_operand(rng, how, reason, side):
    """The message names the corrupt operand (A or B) and what is wrong."""
    A = corrupt(random_sparse(rng, 40, 30, 0.2), how)
    args = (A, np.ones((30, 2))) if side == "left" else (np.ones((2, 40)), A)
    name = "A" if side == "left" else "B"
    with pytest.raises(ValueError, match=rf"^{name} has a corrupt compressed structure.*{reason}"):
        sparse_matmul(*args)


@pytest.mark.parametrize("how", ["indptr_decreasing", "index_too_large", "index_negative",
                                 "indptr_last_too_large", "data_short", "indptr_short"])
def test_corrupt_sparse_at_sparse(rng, how):
    """sparse @ sparse (delegated to scipy) checks the CSR/CSC structures first."""
    A = corrupt(random_sparse(rng, 40, 30, 0.2), how)
    B = random_sparse(rng, 30, 20, 0.2)
    with pytest.raises(ValueError, match="corrupt"):
        sparse_matmul(A, B)
    C = random_sparse(rng, 10, 40, 0.2)
    with pytest.raises(ValueError, match="corrupt"):
        sparse_matmul(C, A)
