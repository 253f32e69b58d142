"""nan and inf through ``sparse_matmul``: in the dense operand, stored in the sparse one,
stored zeros meeting inf, DIA padding; the same nan/inf positions as scipy's product."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from matmul_helpers import (KERNEL_DTYPES, assert_matches, random_dense, random_sparse,
                            scipy_product, sparse_operands, to_format)
from wsesparse import sparse_matmul
from wsesparse._thresholds import DENSE_MIN_TOKENS


def product(A, B, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return sparse_matmul(A, B, **kw)


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


@pytest.mark.parametrize("n", [None, 4])
def test_coo_explicit_zero_counts_as_stored(n):
    """A COO explicit zero meeting inf gives nan, as in scipy's CSR (and COO vector)
    product; scipy's COO multi-vector product skips stored zeros, which is not imitated."""
    C = sp.coo_array((np.array([0.0, 1.0]), (np.array([0, 1]), np.array([0, 1]))), shape=(2, 2))
    X = np.full((2,) if n is None else (2, n), np.inf)
    got = product(C, X)
    assert_matches(got, scipy_product(C.tocsr(), X))
    assert np.isnan(got[0]).all() and np.isposinf(got[1]).all()


@given(op=sparse_operands(dtypes=KERNEL_DTYPES, max_dim=30, formats=("csr",)),
       n=st.one_of(st.none(), st.integers(1, 80)), data=st.data())
def test_property_nonfinite(op, n, data):
    """inf/nan sprinkled into the dense operand: scipy's exact nan/inf pattern on auto."""
    S, rng = op
    k = S.shape[1]
    X = sprinkle(rng, random_dense(rng, (k,) if n is None else (k, n), S.dtype),
                 count=data.draw(st.integers(0, 5)))
    assert_matches(product(S, X), scipy_product(S, X), S, X)
