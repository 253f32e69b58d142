"""The stored structure of the sparse operand of ``sparse_matmul``: non-canonical CSR and
other formats, scipy CSR arrays the fast path does not take as they are, int32/int64 index
arrays (beyond int32 too), a short ``indptr[-1]``, and corrupt CSR/CSC structures (a
ValueError naming the operand on every path, never a crash or garbage). Corrupt COO / BSR /
DIA / LIL / DOK operands: tests/test_structure.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from matmul_helpers import assert_matches, random_dense, random_sparse, scipy_product
from wsesparse import CSR, sparse_matmul, wafer


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


# -- scipy CSR arrays the fast path leaves to the general one ----------------------------------
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
        indices, indptr = indices.astype(np.int32), indptr.astype(np.int64)
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_bigendian_values_times_the_same_dtype(rng, dtype):
    """Big-endian values times a dense operand of that very dtype object (as user code
    writes ``np.ones(n, dtype=P.dtype)``): the fast path took '>f8' for a kernel dtype
    (KeyError in the dense threshold table; the kernels read native values), and the
    product's dtype came out '>f8', so the float64 ``out=`` scipy's result fits was
    refused."""
    A = _unusual_csr(rng, "bigendian_data", dtype)
    big = A.data.dtype
    x, X = np.ones(25, dtype=big), random_dense(rng, (25, 3), dtype).astype(big)
    native = np.dtype(dtype)
    P = CSR(A)
    assert P.dtype == native and P.data.dtype.isnative
    for S in (A, P):
        for D in (x, X):
            got = sparse_matmul(S, D)
            assert got.dtype == native
            assert_matches(got, scipy_product(A, D), A, D)
            out = np.empty(got.shape, native)
            assert sparse_matmul(S, D, out=out) is out
            np.testing.assert_array_equal(out, got)


@pytest.mark.parametrize("fmt", ["coo_array", "coo_matrix"])
@pytest.mark.parametrize("values,x,want", [
    (np.array([True, True]), 1.5, 3.0),                        # bool: OR-ed to True before
    (np.array([100, 100], dtype=np.int8), 1.5, 300.0),         # int8: wrapped to -56 before
    (np.array([1.0, 1e-8], dtype=np.float32), 1.5,             # float32: rounded before
     1.5 * np.float64(np.float32(1.0)) + 1.5 * np.float64(np.float32(1e-8))),
])
def test_coo_duplicates_multiply_in_the_result_dtype(fmt, values, x, want):
    """A COO operand's duplicate entries are each multiplied in the product's dtype and
    added, as scipy's COO product does: scipy's ``tocsr`` summed them in the stored dtype
    first (one-shot, ``CSR(coo)``, both orders)."""
    A = getattr(sp, fmt)((values, ([0, 0], [0, 0])), shape=(1, 1))
    X = np.array([x])
    assert float(np.asarray(A @ X).ravel()[0]) == want
    for got in (sparse_matmul(A, X), CSR(A) @ X, sparse_matmul(X, A), sparse_matmul(A.T, X)):
        assert float(np.asarray(got).ravel()[0]) == want


@pytest.mark.parametrize("x", [np.array([1.0, 1.0, 1.0]), np.array([1, 1, 1])],
                         ids=["kernel dtype", "int"])  # (the one-vector fast path; general)
@pytest.mark.parametrize("fmt", ["coo", "dia", "bsr", "csr", "csc"])
@pytest.mark.parametrize("stored", [True, False])
def test_one_row_array_times_a_vector_is_1d(fmt, stored, x):
    """(1, n) @ (n,) has shape (1,). scipy's COO array product returns a scalar there (its
    rule for 1-D arrays also takes arrays of one row); sparse_matmul gives (1,) on every
    path. A fuzzer found the one-vector fast path returning a 0-d array."""
    A = sp.coo_array(np.array([[1.0, 2.0, 0.0]] if stored else np.zeros((1, 3)))).asformat(fmt)
    y = sparse_matmul(A, x)
    assert type(y) is np.ndarray and y.shape == (1,)
    assert y[0] == (3 if stored else 0)
    assert sparse_matmul(x, A.T).shape == (1,)


# -- int64 indices -----------------------------------------------------------------------------
def _base(rng, dtype=np.float64):
    return random_sparse(rng, 12, 8, 0.4, dtype)


@pytest.mark.parametrize("where", ["indices", "indptr"])
def test_int64_index_beyond_int32(rng, where):
    """int64 index arrays holding values >= 2**31 are range-checked in int64, not wrapped."""
    A = _base(rng)
    A.indptr = A.indptr.astype(np.int64)
    A.indices = A.indices.astype(np.int64)
    if where == "indices":
        A.indices[0] = 2**40
        match = "a stored column index is negative or not below 8"
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
    assert CSR(A64).indices.dtype == np.int32  # (the prepared operand narrows them)
    assert_matches(sparse_matmul(A64, X), A @ X, A, X)


def _int64_indexed(A):
    """``A`` (CSR) with int64 index arrays (scipy's constructor would narrow them)."""
    B = A.copy()
    B.indptr, B.indices = A.indptr.astype(np.int64), A.indices.astype(np.int64)
    return B


def test_int64_indices_are_kept_through_products_and_wafer():
    """int64-indexed operands stay int64 (prepared CSR, its transpose, the wafer pattern)
    and give the same bits as int32 ones in every kernel (GEMV, GEMM, both sides, wafer
    cycle estimate)."""
    A = sp.random(300, 200, density=0.05, format="csr", random_state=4)
    A64 = _int64_indexed(A)
    assert A64.indices.dtype == np.int64
    # CSR narrows indices that fit; one with int64 arrays (a matrix beyond 2**31 columns or
    # entries) is built here from a narrowed one, to run the prepared int64 kernels.
    W64 = CSR(A64)
    W64.indptr, W64.indices = A64.indptr, A64.indices
    W64._clear_caches()
    rng = np.random.default_rng(4)
    for x, left in ((rng.standard_normal(200), True), (rng.standard_normal((200, 40)), True),
                    (rng.standard_normal((7, 300)), False), (rng.standard_normal(300), False)):
        # One-shot with one-shot, prepared with prepared: x @ A one-shot is a
        # scatter, x @ CSR(A) a gather over the cached transpose (other rounding).
        for S, S32 in ((A64, A), (W64, CSR(A))):
            got = sparse_matmul(S, x) if left else sparse_matmul(x, S)
            ref = sparse_matmul(S32, x) if left else sparse_matmul(x, S32)
            assert got.tobytes() == ref.tobytes()
    # Random wafer patterns get int64 indptr whatever their size.
    P = wafer.random_weights(50, 40, 0.9)
    assert P.indptr.dtype == np.int64
    m = dataclasses.replace(wafer.WSE2, rows=8, cols=4)
    c32 = wafer.estimate_gemm(A, 64, machine=m)
    c64 = wafer.estimate_gemm(A64, 64, machine=m)
    assert (c32.cycles, c32.dense_cycles) == (c64.cycles, c64.dense_cycles)
    assert np.array_equal(c32.row_cycles, c64.row_cycles)


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


# -- corrupt compressed structures -------------------------------------------------------------
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
    ("index_too_large", "a stored column index is negative or not below 30"),
    ("index_negative", "a stored column index is negative or not below 30"),
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


@pytest.mark.parametrize("how,reason", [
    ("indptr_decreasing", "indptr decreases somewhere"),
    ("indptr_start", r"indptr\[0\] is not 0"),
    ("index_too_large", "a stored row index is negative or not below 40"),
    ("index_at_bound", "a stored row index is negative or not below 40"),
    ("index_negative", "a stored row index is negative or not below 40"),
    ("indptr_last_too_large", r"indptr\[-1\] exceeds the number of stored indices"),
    ("data_short", "data has only"),
    ("indptr_short", r"indptr has 30 entries, expected 31 for shape \(40, 30\) \(CSC\)"),
])
@pytest.mark.parametrize("n", [None, 2, 40])
@pytest.mark.parametrize("side", ["left", "right"])
def test_corrupt_csc_message_speaks_of_the_csc_operand(rng, how, reason, n, side):
    """A corrupt CSC operand (40 x 30) is described as it is, not as the CSR arrays of its
    transpose: its own shape and row indices, on the scatter path (few columns), the
    transposing path and ``CSR(A)``."""
    A = corrupt(random_sparse(rng, 40, 30, 0.2).asformat("csc"), how)
    if side == "left":
        args = (A, np.ones((30,) if n is None else (30, n)))
    else:
        args = (np.ones((40,) if n is None else (n, 40)), A)
    name = "A" if side == "left" else "B"
    where = r"\(40x30, CSC\)" if how.startswith("index") else ""
    with pytest.raises(ValueError,
                       match=rf"^{name} has a corrupt compressed structure.*{where}.*{reason}"):
        sparse_matmul(*args)
    with pytest.raises(ValueError, match=rf"^A has a corrupt compressed structure.*{reason}"):
        CSR(A)


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


@pytest.mark.parametrize("cls", [sp.dia_array, sp.dia_matrix])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 6)])
@pytest.mark.parametrize("method", ["auto", "sparse", "dense"])
def test_dense_times_dia_with_data_wider_than_the_matrix(cls, shape, method):
    """``X @ D`` went through scipy's DIA transpose, which misplaced entries where ``data`` has
    more columns than the matrix's larger side: the one-shot product (as scipy's own) gave
    other values than ``X @ D.toarray()`` and ``X @ CSR(D)`` (a review)."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((3, max(shape) + 3))
    D = cls((data, [1, -1, 0]), shape=shape)
    dense = D.toarray()
    for X in (rng.standard_normal((2, shape[0])), rng.standard_normal(shape[0])):
        np.testing.assert_allclose(sparse_matmul(X, D, method=method), X @ dense,
                                   rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(X @ CSR(D), X @ dense, rtol=1e-13, atol=1e-13)
    assert D.data.shape == (3, max(shape) + 3)   # (the operand is left as it was)
