"""Adversarial inputs to ``sparse_matmul`` and ``CSR`` not covered by test_matmul_errors.py.

Corrupt COO / BSR / DIA / LIL / DOK operands (arrays changed in place after scipy built
them; scipy does not re-check): before the fix these crashed the process (segfault or heap
corruption in scipy's ``tocsr`` or integer products) or returned garbage. Also int64 index
arrays beyond int32, a short ``indptr[-1]`` (scipy ignores the extra entries) and a float
``shape``. The catalogue is docs/adversarial_inputs.md.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from matmul_helpers import assert_matches, random_sparse
from wsesparse import CSR, sparse_matmul


def _base(rng, dtype=np.float64):
    return random_sparse(rng, 12, 8, 0.4, dtype)


def corrupt_other(A, how: str):
    """``A`` (CSR) in another format with its arrays damaged in place."""
    if how == "coo_row_big":
        S = sp.coo_array(A, copy=True)
        S.row[0] = 10**6
    elif how == "coo_row_negative":
        S = sp.coo_array(A, copy=True)
        S.row[-1] = -2
    elif how == "coo_col_big":
        S = sp.coo_array(A, copy=True)
        S.col[0] = A.shape[1]
    elif how == "coo_row_short":
        S = sp.coo_array(A, copy=True)
        S.row = S.row[:-2]
    elif how == "bsr_indptr_decreasing":
        S = sp.bsr_array(A, blocksize=(2, 2))
        S.indptr[1] = S.indptr[-1] + 5
    elif how == "bsr_indptr_last_big":
        S = sp.bsr_array(A, blocksize=(2, 2))
        S.indptr[-1] = 10**6
    elif how == "bsr_index_big":
        S = sp.bsr_array(A, blocksize=(2, 2))
        S.indices[0] = 10**6
    elif how == "bsr_data_short":
        S = sp.bsr_array(A, blocksize=(2, 2))
        S.data = S.data[:1]
    elif how == "dia_data_short":
        S = sp.dia_array(A)
        S.data = S.data[:1]
    elif how == "lil_col_big":
        S = sp.lil_array(A)
        S.rows[0] = [10**6]
        S.data[0] = [A.dtype.type(1)]
    elif how == "lil_length_mismatch":
        S = sp.lil_array(A)
        S.rows[1] = [0, 1]
        S.data[1] = [A.dtype.type(1)]
    elif how == "dok_key_big":
        S = sp.dok_array(A)
        getattr(S, "_dict", S)[(100, 100)] = A.dtype.type(1)   # past DOK's own bounds check
    else:  # pragma: no cover
        raise ValueError(how)
    return S


OTHER_CORRUPTIONS = ["coo_row_big", "coo_row_negative", "coo_col_big", "coo_row_short",
                     "bsr_indptr_decreasing", "bsr_indptr_last_big", "bsr_index_big",
                     "bsr_data_short", "dia_data_short", "lil_col_big", "lil_length_mismatch",
                     "dok_key_big"]


@pytest.mark.parametrize("how", OTHER_CORRUPTIONS)
@pytest.mark.parametrize("dtype", [np.float64, np.int64], ids=str)
@pytest.mark.parametrize("side", ["left", "right"])
def test_corrupt_other_formats(rng, how, dtype, side):
    """Float (kernel) and integer (scipy) paths, either side: ValueError naming the operand
    and its format, never a crash or a silent result."""
    S = corrupt_other(_base(rng, dtype), how)
    fmt = how.split("_")[0]
    if side == "left":
        args, name = (S, np.ones((8, 3), dtype)), "A"
    else:
        args, name = (np.ones((3, 12), dtype), S), "B"
    with pytest.raises((ValueError, TypeError), match=rf"^{name} \({fmt}\) has a corrupt structure"):
        sparse_matmul(*args)


@pytest.mark.parametrize("how", OTHER_CORRUPTIONS)
def test_corrupt_other_formats_csr_and_sparse_at_sparse(rng, how):
    S = corrupt_other(_base(rng), how)
    with pytest.raises(ValueError, match=r"^A \(\w+\) has a corrupt structure"):
        CSR(S)
    with pytest.raises(ValueError, match="corrupt structure"):
        sparse_matmul(S, random_sparse(rng, 8, 5, 0.5))


@pytest.mark.parametrize("fmt", ["coo", "bsr", "dia", "lil", "dok"])
def test_valid_other_formats_still_pass(rng, fmt):
    """The structure checks accept every valid matrix (incl. duplicates in COO)."""
    A = _base(rng)
    S = sp.bsr_array(A, blocksize=(2, 2)) if fmt == "bsr" else A.asformat(fmt)
    X = rng.standard_normal((8, 3))
    assert_matches(sparse_matmul(S, X), S @ X, S, X)
    dup = sp.coo_array((np.ones(3), (np.array([0, 0, 1]), np.array([2, 2, 0]))), shape=(2, 3))
    np.testing.assert_array_equal(sparse_matmul(dup, np.ones(3)), [2.0, 1.0])


@pytest.mark.parametrize("where", ["indices", "indptr"])
def test_int64_index_beyond_int32(rng, where):
    """int64 index arrays holding values >= 2**31 are range-checked in int64, not wrapped."""
    A = _base(rng)
    A.indptr = A.indptr.astype(np.int64)
    A.indices = A.indices.astype(np.int64)
    if where == "indices":
        A.indices[0] = 2**40
        match = "a stored index is negative or not below 8"
    else:
        A.indptr[-1] = 2**40
        match = r"indptr\[-1\] exceeds"
    with pytest.raises(ValueError, match=match):
        sparse_matmul(A, np.ones((8, 2)))
    with pytest.raises(ValueError, match=match):
        CSR.from_arrays(A.data, A.indices, A.indptr, A.shape)


def test_int64_indices_with_int32_range_values(rng):
    """int64 indices on a small matrix: same result as scipy (kernel runs on int64 indices)."""
    A = _base(rng)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)),
                       shape=A.shape)
    X = rng.standard_normal((8, 5))
    assert CSR(A64).indices.dtype == np.int64
    assert_matches(sparse_matmul(A64, X), A @ X, A, X)


@pytest.mark.parametrize("side", ["left", "right"])
def test_short_indptr_last_ignores_extra_entries_like_scipy(rng, side):
    """indptr[-1] < len(indices): entries past indptr[-1] are not part of the matrix (scipy's
    reading); documented result, not an error."""
    A = _base(rng)
    A.indptr[-1] -= 2     # the last row loses its last two entries
    X = rng.standard_normal((8, 4) if side == "left" else (4, 12))
    got = sparse_matmul(A, X) if side == "left" else sparse_matmul(X, A)
    ref = sp.csr_array((A.data[:A.indptr[-1]], A.indices[:A.indptr[-1]], A.indptr), shape=A.shape)
    want = ref @ X if side == "left" else X @ ref
    assert_matches(got, want, ref if side == "left" else X, X if side == "left" else ref)


@pytest.mark.parametrize("shape", [(2.0, 2), (2, 2.5), (np.float64(2), 2)], ids=str)
def test_from_arrays_float_shape(shape):
    with pytest.raises(ValueError, match="shape must be a pair of ints"):
        CSR.from_arrays([1.0], [0], [0, 1, 1], shape)


def test_from_arrays_numpy_int_shape():
    W = CSR.from_arrays([1.0], [0], [0, 1, 1], (np.int64(2), np.uint8(2)))
    assert W.shape == (2, 2) and all(type(s) is int for s in W.shape)


@pytest.mark.parametrize("ddtype", [np.bool_, np.float16, np.int8, np.uint64], ids=str)
def test_unusual_dense_dtypes_follow_scipy(rng, ddtype):
    """bool / float16 / int8 / uint64 dense operands: scipy's result dtype and values."""
    A = _base(rng)
    X = (rng.random((8, 3)) * 3).astype(ddtype)
    assert_matches(sparse_matmul(A, X), A @ X, A, X)
    assert_matches(sparse_matmul(X.T, A.T), X.T @ A.T, X.T, A.T)
