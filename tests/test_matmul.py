"""``sparse_matmul`` against scipy's ``A @ B`` over every format, container, dtype and layout.

Following scipy's test_base.py habit, each case runs over all seven formats
and both the ``*_array`` and ``*_matrix`` classes; the oracle is always
scipy's own product of the same operands (numpy's for densified operands).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from matmul_helpers import (DENSE_DTYPES, FORMATS, KERNEL_DTYPES, KINDS, SPARSE_DTYPES,
                      assert_matches, random_dense, random_sparse, sparse_operands,
                      to_format, tolerance)
from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _spmm
from wsesparse import _hardware
from wsesparse import _thresholds as th
from wsesparse._hardware import HardwareProfile
from wsesparse._thresholds import DENSE_MIN_TOKENS


def _dia_as_csr(X):
    return X.tocsr() if sp.issparse(X) and X.format in ("dia", "dok") else X


def scipy_product(A, B):
    # DIA and DOK operands are compared with scipy's product on their CSR form:
    # scipy's own DIA kernel multiplies padding zeros (documented difference,
    # see sparse_matmul's Notes) and raises for bool DIA @ float16 operands;
    # its DOK matvec is a Python loop that rounds each int8 * float16 product
    # to float16 before adding it to the float32 result (found by hypothesis).
    A, B = _dia_as_csr(A), _dia_as_csr(B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf/nan arithmetic
        R = A @ B
    if isinstance(R, np.generic) and (A.ndim == 2 or B.ndim == 2):
        # scipy's vector @ COO array with no rows is a scalar (an empty sum);
        # sparse_matmul gives the product's shape (found by hypothesis).
        shape = (B.shape[1],) if A.ndim == 1 else (A.shape[0],) if B.ndim == 1 else ()
        R = np.full(shape, R)
    return R


def product(A, B, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return sparse_matmul(A, B, **kw)


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


# -- containers: every format x class x dense kind x side ----------------------
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


# -- dtypes ------------------------------------------------------------------------
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


# -- memory layouts ------------------------------------------------------------------
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


# -- empty shapes -------------------------------------------------------------------------
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


# -- non-canonical CSR -------------------------------------------------------------------------
def noncanonical(rng, idx_dtype, m=20, k=15, dtype=np.float64, explicit_zeros=False):
    """A csr_array built from raw arrays with unsorted and duplicate column indices."""
    indptr = [0]
    indices = []
    for i in range(m):
        cols = list(rng.integers(0, k, size=rng.integers(0, 8)))
        if cols and i % 3 == 0:
            cols += cols[:2]  # duplicates
        indices += cols  # random order: unsorted
        indptr.append(len(indices))
    data = random_values_like(rng, len(indices), dtype)
    if explicit_zeros:
        data[::4] = 0
    A = sp.csr_array((data, np.array(indices, idx_dtype), np.array(indptr, idx_dtype)),
                     shape=(m, k))
    assert A.indices.dtype == idx_dtype and A.indptr.dtype == idx_dtype
    return A


def random_values_like(rng, n, dtype):
    return random_dense(rng, (n,), dtype).astype(dtype)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64], ids=str)
@pytest.mark.parametrize("explicit_zeros", [False, True])
@pytest.mark.parametrize("n", [None, 1, 7, 130])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int64], ids=str)
def test_noncanonical_csr(rng, idx_dtype, explicit_zeros, n, side, dtype):
    """Unsorted and duplicate indices, int32/int64 index arrays, explicit zeros."""
    A = noncanonical(rng, idx_dtype, dtype=dtype, explicit_zeros=explicit_zeros)
    assert not A.has_canonical_format
    rows = A.shape[1] if side == "left" else A.shape[0]
    X = random_dense(rng, (rows,) if n is None else (rows, n), dtype)
    args = (A, X) if side == "left" else (X.T, A)
    for method in ("auto", "sparse", "dense"):
        assert_matches(sparse_matmul(*args, method=method), scipy_product(*args), *args)
    # The operand is not canonicalised in place.
    assert not A.has_canonical_format


@pytest.mark.parametrize("fmt", ["csc", "coo", "bsr"])
def test_noncanonical_other_formats(rng, fmt):
    """Duplicates/unsorted entries in CSC and COO (built from raw arrays), BSR."""
    A = noncanonical(rng, np.int32)
    if fmt == "csc":
        S = sp.csc_array((A.data, A.indices, A.indptr), shape=A.shape[::-1])
    elif fmt == "coo":
        C = A.tocoo()
        S = sp.coo_array((C.data, (C.row[::-1], C.col[::-1])), shape=A.shape)
    else:
        S = sp.bsr_array((A.data.reshape(-1, 1, 1), A.indices, A.indptr), shape=A.shape)
    X = random_dense(rng, (S.shape[1], 6))
    Y = random_dense(rng, (3, S.shape[0]))
    assert_matches(sparse_matmul(S, X), S @ X, S, X)
    assert_matches(sparse_matmul(Y, S), Y @ S, Y, S)
    assert_matches(sparse_matmul(S, X[:, 0]), S @ X[:, 0], S, X[:, 0])


# -- nan / inf ---------------------------------------------------------------------------------
def sprinkle(rng, X, count=6):
    """X with a few +inf, -inf and nan entries (complex: in either part)."""
    X = X.copy()
    flat = X.reshape(-1)
    pos = rng.choice(flat.size, size=min(count, flat.size), replace=False)
    specials = [np.inf, -np.inf, np.nan]
    for j, p in enumerate(pos):
        v = specials[j % 3]
        if X.dtype.kind == "c" and j % 2:
            flat[p] = complex(flat[p].real, v)
        else:
            flat[p] = v
    return X


NAN_FORMATS = ("csr", "csc", "coo", "bsr", "lil", "dok")


@pytest.mark.parametrize("fmt", NAN_FORMATS)
@pytest.mark.parametrize("method", ["auto", "sparse"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("n", [None, 3, DENSE_MIN_TOKENS + 6])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128], ids=str)
def test_nonfinite_dense_operand(rng, fmt, method, side, n, dtype):
    """inf/nan in the dense operand propagate exactly where scipy's do: only through
    stored entries. With many tokens and density 0.5 "auto" would pick dense BLAS for a
    finite operand; it must not turn 0 * inf at implicit zeros into nan."""
    A = to_format(random_sparse(rng, 30, 24, 0.5, dtype), fmt)
    if side == "left":
        X = sprinkle(rng, random_dense(rng, (24,) if n is None else (24, n), dtype),
                     count=2 if n is None else 6)
        args = (A, X)
    else:
        X = sprinkle(rng, random_dense(rng, (30,) if n is None else (n, 30), dtype),
                     count=2 if n is None else 6)
        args = (X, A)
    expected = scipy_product(*args)
    assert not np.isfinite(expected).all()
    assert_matches(product(*args, method=method), expected, *args)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("n", [None, 70])
def test_nonfinite_dense_operand_method_dense(rng, side, n):
    """method="dense" has densified-BLAS semantics: 0 * inf = nan at implicit zeros,
    exactly as numpy's product with ``A.toarray()``."""
    A = random_sparse(rng, 30, 24, 0.5)
    if side == "left":
        X = sprinkle(rng, random_dense(rng, (24,) if n is None else (24, n)))
        expected = scipy_product(A.toarray(), X)
        got = product(A, X, method="dense")
    else:
        X = sprinkle(rng, random_dense(rng, (30,) if n is None else (n, 30)))
        expected = scipy_product(X, A.toarray())
        got = product(X, A, method="dense")
    assert_matches(got, expected, exact_type=True)


@pytest.mark.parametrize("method", ["auto", "sparse", "dense"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("n", [None, 70])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128], ids=str)
def test_nonfinite_sparse_values(rng, method, side, n, dtype):
    """inf/nan stored in the sparse operand: nan/inf pattern equal to scipy's for "auto"
    and "sparse" (stored values meet every entry of the dense operand, zeros included;
    "auto" must not hand complex infinities to BLAS, whose complex arithmetic differs
    from scipy's), and to numpy's product with ``A.toarray()`` for "dense"."""
    A = random_sparse(rng, 30, 24, 0.5, dtype)
    A.data[:] = sprinkle(rng, A.data, count=5)
    if side == "left":
        X = random_dense(rng, (24,) if n is None else (24, n), dtype)
        X.reshape(-1)[::5] = 0
        args = (A, X)
        dense_args = (A.toarray(), X)
    else:
        X = random_dense(rng, (30,) if n is None else (n, 30), dtype)
        X.reshape(-1)[::5] = 0
        args = (X, A)
        dense_args = (X, A.toarray())
    expected = scipy_product(*(dense_args if method == "dense" else args))
    assert_matches(product(*args, method=method), expected, *args)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("n", [None, 5, 70])
def test_explicit_zero_times_inf(rng, side, n):
    """A stored (explicit) zero in CSR meets inf: IEEE 0 * inf = nan, as scipy's CSR
    product gives; an implicit zero does not."""
    A = sp.csr_array((np.array([0.0, 2.0, 1.0]), np.array([0, 1, 1]), np.array([0, 1, 2, 3, 3])),
                     shape=(4, 3))
    if side == "left":
        X = np.ones((3,) if n is None else (3, n))
        X[0] = np.inf
        args = (A, X)
    else:
        X = np.ones((4,) if n is None else (n, 4))
        X[..., 0] = np.inf
        args = (X, A)
    expected = scipy_product(*args)
    assert np.isnan(expected).any()
    for method in ("auto", "sparse"):
        assert_matches(product(*args, method=method), expected, *args)


def test_dia_padding_is_not_stored(rng):
    """DIA stores zeros as padding of its diagonals; scipy's DIA product multiplies them
    (0 * inf = nan), which is a storage artefact. sparse_matmul treats DIA padding as
    implicit zeros: its result equals scipy's product with the same matrix in CSR."""
    A = random_sparse(rng, 12, 10, 0.3)
    D = A.todia()
    X = sprinkle(rng, random_dense(rng, (10, 4)))
    assert_matches(product(D, X), scipy_product(A, X), A, X)


# -- dense dispatch ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", KERNEL_DTYPES, ids=str)
@pytest.mark.parametrize("density", [0.05, 0.5, 1.0])
def test_methods_agree(rng, dtype, density):
    """"auto", "sparse" and "dense" agree with scipy on finite operands, around the
    dense-dispatch crossover."""
    A = random_sparse(rng, 60, 50, density, dtype)
    for n in (1, DENSE_MIN_TOKENS - 1, DENSE_MIN_TOKENS, 100):
        X = random_dense(rng, (50, n), dtype)
        expected = A @ X
        for method in ("auto", "sparse", "dense"):
            assert_matches(sparse_matmul(A, X, method=method), expected, A, X)
            assert_matches(sparse_matmul(X.T, A.T, method=method), X.T @ A.T, X.T, A.T)


# -- out= --------------------------------------------------------------------------------------------
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


def test_out_matrix_container(rng):
    """``out`` given as an np.matrix is filled and returned as is."""
    A = sp.csr_matrix(random_sparse(rng, 6, 5, 0.5))
    X = np.asmatrix(random_dense(rng, (5, 3)))
    out = np.asmatrix(np.zeros((6, 3)))
    assert sparse_matmul(A, X, out=out) is out
    assert_matches(out, A @ X)


# -- the CSR operand through sparse_matmul ------------------------------------------------------------
@pytest.mark.parametrize("dkind", ["1d", "2d", "matrix", "list"])
def test_csr_operand_containers(rng, dkind):
    """CSR behaves like a csr_array: CSR @ np.matrix is an ndarray, like csr_array's."""
    A = random_sparse(rng, 12, 10, 0.3)
    X = dense_operand(rng, dkind, (10, 1) if dkind == "1d" else (10, 4))
    assert_matches(sparse_matmul(CSR(A), X), A @ X, A, np.asarray(X))
    Y = dense_operand(rng, dkind, (12, 1) if dkind == "1d" else (4, 12))
    assert_matches(sparse_matmul(Y, CSR(A)), Y @ A, np.asarray(Y), A)


# -- property tests ----------------------------------------------------------------------------------
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


@given(op=sparse_operands(dtypes=KERNEL_DTYPES, max_dim=30, formats=("csr",)),
       n=st.one_of(st.none(), st.integers(1, 80)), data=st.data())
def test_property_nonfinite(op, n, data):
    """inf/nan sprinkled into the dense operand: scipy's exact nan/inf pattern on auto."""
    S, rng = op
    k = S.shape[1]
    X = sprinkle(rng, random_dense(rng, (k,) if n is None else (k, n), S.dtype),
                 count=data.draw(st.integers(0, 5)))
    assert_matches(product(S, X), scipy_product(S, X), S, X)


@pytest.mark.parametrize("n", [None, 4])
def test_coo_explicit_zero_counts_as_stored(n):
    """A COO explicit zero meeting inf gives nan, as in scipy's CSR (and COO vector)
    product; scipy's COO multi-vector product skips stored zeros, which is not imitated."""
    C = sp.coo_array((np.array([0.0, 1.0]), (np.array([0, 1]), np.array([0, 1]))), shape=(2, 2))
    X = np.full((2,) if n is None else (2, n), np.inf)
    got = product(C, X)
    assert_matches(got, scipy_product(C.tocsr(), X))
    assert np.isnan(got[0]).all() and np.isposinf(got[1]).all()


def test_dia_bool_times_float16_regression():
    """Found by hypothesis: scipy's DIA kernel raises for bool DIA @ float16;
    sparse_matmul gives scipy's CSR answer (dtype float32)."""
    A = sp.dia_array(np.eye(3, dtype=bool))
    X = np.ones((2, 3), np.float16)
    got = sparse_matmul(X, A)
    expected = X @ A.tocsr()
    assert got.dtype == expected.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


BUILDS = [32, 64]  # tile vector bytes: AVX2 / portable, AVX-512


def _build(vector_bytes: int) -> HardwareProfile:
    """This machine's profile as a kernel build with ``vector_bytes`` tiles would see it."""
    from dataclasses import replace
    return replace(_hardware.current(), vector_bytes=vector_bytes)


@pytest.mark.parametrize("vector_bytes", BUILDS)
@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("n", [1, 8, 63, 64, 255, 256, 1024])
@pytest.mark.parametrize("prepared", [False, True])
def test_auto_dispatch_rule(dtype, n, prepared, vector_bytes):
    """method="auto" picks dense BLAS exactly where each build's table says."""
    from wsesparse.matmul import _use_dense
    dt, hw = np.dtype(dtype), _build(vector_bytes)
    table = 64 if vector_bytes >= 64 else 32
    if prepared:
        threshold = th.DENSE_DENSITY_PREPARED[table][dt][
            0 if n == 1 else 1 if n < DENSE_MIN_TOKENS else 2 if n < th.DENSE_WIDE_TOKENS else 3]
    elif n < DENSE_MIN_TOKENS:
        threshold = None  # never dense
    else:
        threshold = (th.DENSE_DENSITY_WIDE if n >= th.DENSE_WIDE_TOKENS
                     else th.DENSE_DENSITY)[table][dt]
    if threshold is not None and threshold > 1:
        threshold = None  # a bucket that never goes dense
    X = np.ones((100, n), dtype)
    densities = (0.99, 0.5) if threshold is None else (threshold + 0.01, threshold - 0.01)
    for density, expect in zip(densities, (threshold is not None, False)):
        A = CSR(sp.random(100, 100, density=density, format="csr", random_state=0, dtype=dtype))
        assert _use_dense(A, X, "auto", n, prepared, hw) == expect, (density, n)
    X[0, 0] = np.inf  # implicit zeros must not meet inf: stay sparse
    A = CSR(sp.random(100, 100, density=0.99, format="csr", random_state=0, dtype=dtype))
    assert not _use_dense(A, X, "auto", n, prepared, hw)


def test_dispatch_tables_per_build():
    """Each build reads its own table (AVX-512 tiles vs 32-byte ones): the real types'
    one-shot crossovers differ, complex ones (no tiles) do not; every table covers every
    kernel dtype with densities in (0, 1] or the never-dense 1.01."""
    f32, c64 = np.dtype(np.float32), np.dtype(np.complex64)
    assert th.dense_threshold(f32, 64, False, 64) == th.DENSE_DENSITY[64][f32] > 1
    assert th.dense_threshold(f32, 64, False, 32) == th.DENSE_DENSITY[32][f32] == 0.60
    assert th.dense_threshold(c64, 64, False, 64) == th.dense_threshold(c64, 64, False, 32)
    assert th.dense_threshold(f32, 64, False, 16) == th.dense_threshold(f32, 64, False, 32)
    for tables in (th.DENSE_DENSITY, th.DENSE_DENSITY_WIDE, th.DENSE_DENSITY_PREPARED):
        assert sorted(tables) == [32, 64]
        for table in tables.values():
            assert set(table) == set(map(np.dtype, KERNEL_DTYPES))
            for v in table.values():
                assert all(0 < x <= 1.01 for x in np.atleast_1d(v))
    assert _hardware.current().vector_bytes == _spmm.TILE_VECTOR_BYTES


@pytest.mark.parametrize("n_threads", [None, 1, 2])
def test_prepared_csr_goes_dense_at_high_density_even_for_one_token(n_threads, monkeypatch):
    """A prepared CSR keeps its dense copy, so a dense matrix-vector product pays off; the
    one-shot call (densify every time) stays sparse. Observed through the cached copy."""
    A = sp.random(200, 150, density=0.9, format="csr", random_state=1, dtype=np.float64)
    X = np.random.default_rng(0).standard_normal(150)
    P = CSR(A)
    np.testing.assert_allclose(sparse_matmul(P, X, n_threads=n_threads), A @ X,
                               rtol=1e-12, atol=1e-12)
    assert P._dense is not None and P._dense.shape == A.shape
    np.testing.assert_allclose(P @ X, A @ X, rtol=1e-12, atol=1e-12)
    import wsesparse.matmul as mm
    calls = []
    monkeypatch.setattr(mm, "_dense_product", lambda *a, **k: calls.append(a))
    sparse_matmul(P, X)
    assert len(calls) == 1          # the prepared operand: dense
    np.testing.assert_allclose(sparse_matmul(A, X), A @ X, rtol=1e-12, atol=1e-12)
    assert len(calls) == 1          # the one-shot call: sparse


@pytest.mark.parametrize("vector_bytes", BUILDS)
def test_auto_dispatch_builds_a_big_dense_copy_only_for_wide_products(monkeypatch,
                                                                       vector_bytes):
    """Beyond the dense-copy bound auto densifies only from DENSE_WIDE_TOKENS columns on,
    at the one-shot crossover (measured at 16384^2: the copy costs too much for fewer),
    except a prepared operand whose own arrays take at least as much as the copy."""
    from wsesparse.matmul import _use_dense
    hw = _build(vector_bytes)
    monkeypatch.setattr(_hardware, "_current", hw)
    f64 = np.dtype(np.float64)
    wide, narrow = th.DENSE_WIDE_TOKENS, th.DENSE_WIDE_TOKENS - 1
    one_shot = th.dense_threshold(f64, wide, False, vector_bytes)
    # A: 9000 values and indices (108 kB) against an 80 kB copy; B: 6500 (78 kB).
    A = CSR(sp.random(100, 100, density=0.9, format="csr", random_state=0))
    B = CSR(sp.random(100, 100, density=0.65, format="csr", random_state=0))
    assert B.density >= one_shot  # both go dense at N = wide on every build
    for S in (A, B):
        for n in (narrow, wide):
            for prepared in (False, True):
                expect = S.density >= th.dense_threshold(f64, n, prepared, vector_bytes)
                assert _use_dense(S, np.ones((100, n)), "auto", n, prepared, hw) == expect
    monkeypatch.setattr(th, "KEEP_DENSE_BYTES", 100 * 100 * 8 - 1)
    Xn, Xw = np.ones((100, narrow)), np.ones((100, wide))
    for S in (A, B):
        assert not _use_dense(S, Xn, "auto", narrow, False, hw)
        assert _use_dense(S, Xn, "dense", narrow, False, hw)  # an explicit request goes dense
        assert _use_dense(S, Xw, "auto", wide, False, hw)
    # A keeps its copy (its arrays are larger): the prepared crossover still holds.
    assert _use_dense(A, Xn, "auto", narrow, True, hw) == (
        A.density >= th.dense_threshold(f64, narrow, True, vector_bytes))
    assert not _use_dense(B, Xn, "auto", narrow, True, hw)
    assert _use_dense(B, Xw, "auto", wide, True, hw)
    # The copy is built for every call at the one-shot crossover, not the prepared one.
    C = CSR(sp.random(100, 100, density=one_shot - 0.02, format="csr", random_state=0))
    assert C.density >= th.dense_threshold(f64, wide, True, vector_bytes)
    assert not _use_dense(C, Xw, "auto", wide, True, hw)
    for S, keeps in ((A, True), (B, False)):
        np.testing.assert_allclose(sparse_matmul(S, Xw), S.to_scipy() @ Xw, rtol=1e-12)
        assert (S._dense is not None) == keeps


def test_prepared_csr_with_an_infinite_value_stays_sparse():
    """A stored inf keeps auto on the sparse path (dense BLAS would spread nan through
    0 * inf); the finiteness of a prepared CSR is computed once and kept."""
    A = sp.random(120, 100, density=0.9, format="csr", random_state=2, dtype=np.float64)
    A.data[5] = np.inf
    P = CSR(A)
    X = np.random.default_rng(1).standard_normal((100, 300))
    assert_matches(sparse_matmul(P, X), A @ X, A, X)
    assert P._finite is False and P._dense is None


class _CSRSubclass(sp.csr_matrix):
    pass


def _unusual_csr(rng, how: str, dtype):
    """A scipy CSR operand whose arrays ``sparse_matmul``'s fast path does not
    take as they are (it must leave them to the general path)."""
    A = random_sparse(rng, 30, 25, 0.3, dtype=dtype).tocsr()
    data, indices, indptr = A.data, A.indices, A.indptr
    if how == "bigendian_data":
        data = data.astype(data.dtype.newbyteorder(">"))
    elif how == "bigendian_indices":
        indices = indices.astype(">i4")
    elif how == "strided_indices":
        indices = np.repeat(indices, 2)[::2]
    elif how == "mixed_index_types":
        indptr = indptr.astype(np.int64)
    elif how == "subclass":
        return _CSRSubclass(A)
    A = sp.csr_array(A.shape, dtype=dtype)  # then the arrays, as scipy would not make them
    A.data, A.indices, A.indptr = data, indices, indptr
    return A


@pytest.mark.parametrize("how", ["bigendian_data", "bigendian_indices", "strided_indices",
                                 "mixed_index_types", "subclass"])
@pytest.mark.parametrize("n", [None, 1, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_unusual_scipy_csr_arrays(rng, how, n, dtype):
    A = _unusual_csr(rng, how, dtype)
    X = random_dense(rng, (25,) if n is None else (25, n), dtype)
    got = sparse_matmul(A, X)
    assert type(got) is np.ndarray
    assert_matches(got, scipy_product(A, X), A, X)
    # The same kernel as for the plain arrays (the prepared operand skips the
    # dense dispatch, which it would take at this density): bitwise equal.
    prepared = sparse_matmul(CSR(A), X, method="sparse")
    assert prepared.dtype == got.dtype
    np.testing.assert_array_equal(prepared, got)


def test_one_dimensional_csr_array(rng):
    """scipy's 1-D CSR arrays are not the 2-D operand the fast path expects."""
    a = sp.csr_array(np.array([1.0, 0.0, 2.0]))
    if a.ndim != 1:
        pytest.skip("this scipy has no 1-D CSR arrays")
    with pytest.raises(ValueError, match="2-D"):
        sparse_matmul(a, np.ones((3, 2)))


@pytest.mark.parametrize("dtype", [bool, np.int32, np.float64])
def test_vector_times_empty_coo_has_the_products_shape(dtype):
    """scipy returns a scalar for these empty sums; sparse_matmul the product's shape."""
    x = np.zeros(0, dtype)
    for args, shape in (((x, sp.coo_array((0, 3), dtype=dtype)), (3,)),
                        ((sp.coo_array((3, 0), dtype=dtype), x), (3,))):
        got = sparse_matmul(*args)
        assert type(got) is np.ndarray and got.shape == shape and got.dtype == np.dtype(dtype)
        assert not got.any()
