"""``sparse_matmul`` against scipy's ``A @ B`` over every format, container, dtype, layout
and shape, and the operands it refuses.

Following scipy's test_base.py habit, each case runs over all seven formats
and both the ``*_array`` and ``*_matrix`` classes; the oracle is always
scipy's own product of the same operands (numpy's for densified operands).
Bad operands (missing sparse operand, None, scalars, 3-d, non-numeric dtypes,
mismatched shapes) raise TypeError/ValueError with a clear message, never crash.
"""

from __future__ import annotations

import datetime

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from matmul_helpers import (DENSE_DTYPES, FORMATS, KERNEL_DTYPES, KINDS, SPARSE_DTYPES,
                            assert_matches, random_dense, random_sparse, scipy_product,
                            sparse_operands, to_format, tolerance)
from wsesparse import CSR, sparse_matmul
from wsesparse._thresholds import DENSE_MIN_TOKENS


def _base(rng, dtype=np.float64):
    return random_sparse(rng, 12, 8, 0.4, dtype)


def dense_operand(rng, kind: str, shape2d, dtype=np.float64):
    """A dense operand of ``kind`` ("1d", "2d", "matrix", "list", "list1d")."""
    if kind in ("1d", "list1d"):
        x = random_dense(rng, (shape2d[0] if shape2d[1] == 1 else shape2d[1],), dtype)
        return x.tolist() if kind == "list1d" else x
    X = random_dense(rng, shape2d, dtype)
    if kind == "matrix":
        return np.asmatrix(X)
    if kind == "list":
        return X.tolist()
    return X


# -- containers: every format x class x dense kind x side --------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dkind", ["1d", "2d", "matrix", "list", "list1d"])
def test_sparse_at_dense_container(rng, fmt, kind, dkind):
    """S @ X: same type (ndarray vs np.matrix), shape, dtype and values as scipy."""
    S = to_format(random_sparse(rng, 12, 10, 0.3), fmt, kind)
    X = dense_operand(rng, dkind, (10, 1) if dkind.endswith("1d") else (10, 5))
    expected = scipy_product(S, X)
    got = sparse_matmul(S, X)
    assert_matches(got, expected, S, np.asarray(X))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dkind", ["1d", "2d", "matrix", "list", "list1d"])
def test_dense_at_sparse_container(rng, fmt, kind, dkind):
    """X @ S: same type, shape, dtype and values as scipy."""
    S = to_format(random_sparse(rng, 12, 10, 0.3), fmt, kind)
    X = dense_operand(rng, dkind, (12, 1) if dkind.endswith("1d") else (4, 12))
    expected = scipy_product(X, S)
    got = sparse_matmul(X, S)
    assert_matches(got, expected, np.asarray(X), S)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fa,fb", [("csr", "csr"), ("csr", "csc"), ("coo", "dok"),
                                   ("bsr", "lil"), ("dia", "csr")])
def test_sparse_at_sparse(rng, kind, fa, fb):
    """Sparse @ sparse returns scipy's sparse result (same class, dtype, values)."""
    A = to_format(random_sparse(rng, 8, 6, 0.4), fa, kind)
    B = to_format(random_sparse(rng, 6, 10, 0.4, np.int32), fb, kind)
    assert_matches(sparse_matmul(A, B), A @ B, A, B)


def test_csr_operand_at_sparse(rng):
    A = random_sparse(rng, 8, 6, 0.4)
    B = random_sparse(rng, 6, 4, 0.4)
    for a, b in ((CSR(A), B), (A, CSR(B)), (CSR(A), CSR(B))):
        assert_matches(sparse_matmul(a, b), A @ B, A, B)


@pytest.mark.parametrize("dkind", ["1d", "2d", "matrix", "list"])
def test_csr_operand_containers(rng, dkind):
    """CSR behaves like a csr_array: CSR @ np.matrix is an ndarray, like csr_array's."""
    A = random_sparse(rng, 12, 10, 0.3)
    X = dense_operand(rng, dkind, (10, 1) if dkind == "1d" else (10, 4))
    assert_matches(sparse_matmul(CSR(A), X), A @ X, A, np.asarray(X))
    Y = dense_operand(rng, dkind, (12, 1) if dkind == "1d" else (4, 12))
    assert_matches(sparse_matmul(Y, CSR(A)), Y @ A, np.asarray(Y), A)


# -- dtypes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sdtype", SPARSE_DTYPES, ids=str)
@pytest.mark.parametrize("ddtype", DENSE_DTYPES, ids=str)
@pytest.mark.parametrize("side", ["left", "right"])
def test_result_dtype_matches_scipy(rng, sdtype, ddtype, side):
    """Result dtype (and values) equal scipy's for every sparse x dense dtype pair;
    an ``out`` of that dtype is accepted and returned."""
    S = random_sparse(rng, 9, 7, 0.4, sdtype)
    if side == "left":
        X = random_dense(rng, (7, 3), ddtype)
        args = (S, X)
    else:
        X = random_dense(rng, (3, 9), ddtype)
        args = (X, S)
    expected = scipy_product(*args)
    got = sparse_matmul(*args)
    assert_matches(got, expected, *args)
    out = np.empty(expected.shape, expected.dtype)
    assert sparse_matmul(*args, out=out) is out
    assert_matches(out, expected, *args)
    # 1-D dense operand too
    x = X[:, 0] if side == "left" else X[0]
    args1 = (S, x) if side == "left" else (x, S)
    assert_matches(sparse_matmul(*args1), scipy_product(*args1), *args1)


@pytest.mark.parametrize("ddtype", [np.bool_, np.float16, np.int8, np.uint64], ids=str)
def test_unusual_dense_dtypes_follow_scipy(rng, ddtype):
    """bool / float16 / int8 / uint64 dense operands: scipy's result dtype and values."""
    A = _base(rng)
    X = (rng.random((8, 3)) * 3).astype(ddtype)
    assert_matches(sparse_matmul(A, X), A @ X, A, X)
    assert_matches(sparse_matmul(X.T, A.T), X.T @ A.T, X.T, A.T)


def test_dia_bool_times_float16_regression():
    """Found by hypothesis: scipy's DIA kernel raises for bool DIA @ float16;
    sparse_matmul gives scipy's CSR answer (dtype float32)."""
    A = sp.dia_array(np.eye(3, dtype=bool))
    X = np.ones((2, 3), np.float16)
    got = sparse_matmul(X, A)
    expected = X @ A.tocsr()
    assert got.dtype == expected.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


# -- memory layouts ----------------------------------------------------------------------------
def layout(rng, shape, how: str, dtype=np.float64):
    """An array of exactly ``shape`` with the memory layout ``how``."""
    r, c = shape
    if how == "C":
        return random_dense(rng, shape, dtype)
    if how == "F":
        return np.asfortranarray(random_dense(rng, shape, dtype))
    if how == "rows_step2":
        return random_dense(rng, (2 * r, c), dtype)[::2]
    if how == "cols_step3":
        return random_dense(rng, (r, 3 * c), dtype)[:, ::3]
    if how == "neg_rows":
        return random_dense(rng, shape, dtype)[::-1]
    if how == "neg_both":
        return random_dense(rng, (2 * r, c), dtype)[::-2, ::-1]
    if how == "F_strided":
        return np.asfortranarray(random_dense(rng, (2 * r, 2 * c), dtype))[::2, ::2]
    if how in ("readonly", "readonly_F"):
        X = random_dense(rng, shape, dtype)
        X = np.asfortranarray(X) if how == "readonly_F" else X
        X.flags.writeable = False
        return X
    if how == "bigendian":
        return random_dense(rng, shape, dtype).astype(np.dtype(dtype).newbyteorder(">"))
    raise ValueError(how)


LAYOUTS = ["C", "F", "rows_step2", "cols_step3", "neg_rows", "neg_both", "F_strided",
           "readonly", "readonly_F", "bigendian"]


@pytest.mark.parametrize("how", LAYOUTS)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("method", ["auto", "sparse", "dense"])
@pytest.mark.parametrize("n", [5, DENSE_MIN_TOKENS + 6])
def test_dense_operand_layouts(rng, how, side, method, n):
    """C/Fortran/strided/negative-stride/read-only/big-endian dense operands,
    with few tokens and with enough tokens (and density) for the dense dispatch."""
    S = random_sparse(rng, 30, 25, 0.4)
    if side == "left":
        X = layout(rng, (25, n), how)
        args = (S, X)
    else:
        X = layout(rng, (n, 30), how)
        args = (X, S)
    before = np.array(X, copy=True)
    got = sparse_matmul(*args, method=method)
    assert_matches(got, scipy_product(*args), *args)
    np.testing.assert_array_equal(X, before)  # input untouched


@pytest.mark.parametrize("how", ["contig", "step2", "neg", "readonly"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", KERNEL_DTYPES, ids=str)
def test_vector_operand_layouts(rng, how, side, dtype):
    """1-D dense operands (the GEMV kernel): strided, reversed, read-only."""
    S = random_sparse(rng, 40, 40, 0.2, dtype)
    x = random_dense(rng, (80,), dtype)
    x = {"contig": x[:40], "step2": x[::2], "neg": x[:40][::-1], "readonly": x[:40]}[how]
    if how == "readonly":
        x.flags.writeable = False
    args = (S, x) if side == "left" else (x, S)
    assert_matches(sparse_matmul(*args), scipy_product(*args), *args)


def test_readonly_sparse_arrays(rng):
    """A sparse operand whose data/indices/indptr are read-only works on every path."""
    S = random_sparse(rng, 30, 20, 0.3)
    for arr in (S.data, S.indices, S.indptr):
        arr.flags.writeable = False
    X = random_dense(rng, (20, 70))
    for method in ("sparse", "dense"):
        assert_matches(sparse_matmul(S, X, method=method), S @ X, S, X)
        assert_matches(sparse_matmul(X.T, S.T, method=method), X.T @ S.T, X.T, S.T)
    assert_matches(sparse_matmul(S, X[:, 0]), S @ X[:, 0], S, X[:, 0])


def test_multiple_panels(rng):
    """K large enough that the token panel is narrower than N (several panel sweeps),
    N not a multiple of the tile width."""
    for dtype in (np.float32, np.float64, np.complex128):
        S = random_sparse(rng, 120, 4000, 0.005, dtype)
        X = random_dense(rng, (4000, 301), dtype)
        assert_matches(sparse_matmul(S, X, method="sparse"), S @ X, S, X)


# -- empty shapes ------------------------------------------------------------------------------
@pytest.mark.parametrize("m,k,n", [(0, 4, 3), (4, 0, 3), (4, 3, 0), (0, 0, 0), (0, 0, 3),
                                   (4, 0, 0), (3, 4, 3)])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex64], ids=str)
@pytest.mark.parametrize("method", ["auto", "sparse", "dense"])
def test_empty_shapes(rng, m, k, n, side, dtype, method):
    """M, K or N = 0, and nnz = 0 (the (3, 4, 3) case has no stored entries)."""
    S = sp.csr_array((m, k), dtype=dtype)
    if side == "left":
        X = random_dense(rng, (k, n), dtype)
        args = (S, X)
        args1 = (S, X[:, 0]) if n else (S, np.zeros(k, dtype))
    else:
        X = random_dense(rng, (n, m), dtype)
        args = (X, S)
        args1 = (X[0], S) if n else (np.zeros(m, dtype), S)
    expected = scipy_product(*args)
    got = sparse_matmul(*args, method=method)
    assert_matches(got, expected, *args)
    assert_matches(sparse_matmul(*args1, method=method), scipy_product(*args1), *args1)
    out = np.full(expected.shape, 7, expected.dtype)
    assert sparse_matmul(*args, out=out, method=method) is out
    assert_matches(out, expected, *args)


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_formats(fmt):
    """nnz = 0 and zero-size matrices in every format."""
    for shape in ((5, 4), (0, 4), (5, 0)):
        S = to_format(sp.csr_array(shape), fmt)
        X = np.ones((shape[1], 2))
        assert_matches(sparse_matmul(S, X), S @ X)
        Y = np.ones((2, shape[0]))
        assert_matches(sparse_matmul(Y, S), Y @ S)


@pytest.mark.parametrize("dtype", [bool, np.int32, np.float64])
def test_vector_times_empty_coo_has_the_products_shape(dtype):
    """scipy returns a scalar for these empty sums; sparse_matmul the product's shape."""
    x = np.zeros(0, dtype)
    for args, shape in (((x, sp.coo_array((0, 3), dtype=dtype)), (3,)),
                        ((sp.coo_array((3, 0), dtype=dtype), x), (3,))):
        got = sparse_matmul(*args)
        assert type(got) is np.ndarray and got.shape == shape and got.dtype == np.dtype(dtype)
        assert not got.any()


# -- property tests ----------------------------------------------------------------------------
@given(op=sparse_operands(), ddtype=st.sampled_from(DENSE_DTYPES),
       n=st.one_of(st.none(), st.integers(0, 20)), side=st.sampled_from(["left", "right"]),
       method=st.sampled_from(["auto", "sparse"]))
def test_property_against_scipy(op, ddtype, n, side, method):
    """Random format/class/shape/density/row pattern/dtypes: equal to scipy's product."""
    S, rng = op
    m, k = S.shape
    if side == "left":
        X = random_dense(rng, (k,) if n is None else (k, n), ddtype)
        args = (S, X)
    else:
        X = random_dense(rng, (m,) if n is None else (n, m), ddtype)
        args = (X, S)
    expected = scipy_product(*args)
    assert_matches(sparse_matmul(*args, method=method), expected, *args)


@given(op=sparse_operands(dtypes=KERNEL_DTYPES, max_dim=120, formats=("csr", "csc")),
       n=st.sampled_from([1, 2, 17, 64, 129, 200]), side=st.sampled_from(["left", "right"]),
       method=st.sampled_from(["auto", "sparse", "dense"]))
def test_property_kernels(op, n, side, method):
    """Kernel dtypes, larger shapes and token counts that cross tile boundaries and the
    dense-dispatch threshold; tolerance ~1e-5 (single) / 1e-12 (double) of |A||X|."""
    S, rng = op
    m, k = S.shape
    dtype = S.dtype
    if side == "left":
        X = random_dense(rng, (k, n), dtype)
        args = (S, X)
    else:
        X = random_dense(rng, (n, m), dtype)
        args = (X, S)
    assert_matches(sparse_matmul(*args, method=method), scipy_product(*args), *args,
                   rtol=tolerance(dtype))


# -- bad operands ------------------------------------------------------------------------------
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


def test_one_dimensional_csr_array(rng):
    """scipy's 1-D CSR arrays are not the 2-D operand the fast path expects."""
    a = sp.csr_array(np.array([1.0, 0.0, 2.0]))
    if a.ndim != 1:
        pytest.skip("this scipy has no 1-D CSR arrays")
    with pytest.raises(ValueError, match="2-D"):
        sparse_matmul(a, np.ones((3, 2)))


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


# -- shapes that do not chain ------------------------------------------------------------------
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


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("how", ["strided column", "fortran block", "float32 operand",
                                 "reversed vector", "method sparse", "matrix operand",
                                 "float32 matrix", "int64 matrix"])
def test_one_shot_products_that_copy_the_dense_operand_skip_the_csr(rng, monkeypatch, itype,
                                                                     how):
    """A scipy CSR times a dense operand that needs a copy first (strided, Fortran order,
    another dtype, np.matrix), with ``method="sparse"``, or whose values are of another
    dtype than the result (float32 or int64 A, float64 X: the values converted) goes on to
    the fast path once the copy is made, without building a ``CSR`` (which checked and
    narrowed int64 indices first: 3-4x the time of the product); the bits of the plain
    call."""
    from wsesparse import matmul
    A = sp.csr_array(random_sparse(rng, 300, 200, 0.05))
    A.indices, A.indptr = A.indices.astype(itype), A.indptr.astype(itype)
    A.data = np.trunc(A.data * 8)  # exact in float32 and int64
    X = rng.standard_normal((200, 3))
    x = X[:, 0].copy()
    cases = {"strided column": ((A, X[:, 0]), {}, x),
             "fortran block": ((A, np.asfortranarray(X)), {}, X),
             "float32 operand": ((A, X.astype(np.float32)), {}, X.astype(np.float32)
                                 .astype(np.float64)),
             "reversed vector": ((A, x[::-1]), {}, x[::-1].copy()),
             "method sparse": ((A, X), {"method": "sparse"}, X),
             "matrix operand": ((sp.csr_matrix(A), np.asmatrix(X)), {}, X),
             "float32 matrix": ((A.astype(np.float32), X), {}, X),
             "int64 matrix": ((A.astype(np.int64), X), {}, X)}
    args, kwargs, plain = cases[how]
    want = sparse_matmul(A, plain)
    monkeypatch.setattr(matmul, "_as_csr", None)  # the general path would call it
    got = sparse_matmul(*args, **kwargs)
    assert type(got) is (np.matrix if how == "matrix operand" else np.ndarray)
    assert np.asarray(got).tobytes() == want.tobytes()
