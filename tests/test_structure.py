"""``wsesparse._structure``: the structure checks of COO / BSR / DIA / LIL / DOK operands.

Corrupt operands (arrays changed in place after scipy built them; scipy does not re-check):
before the checks these crashed the process (segfault or heap corruption in scipy's
``tocsr`` or integer products) or returned garbage; now a ValueError naming the operand and
its format, through ``sparse_matmul`` and ``CSR``. Valid matrices still pass. The
catalogue is docs/adversarial_inputs.md.
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
