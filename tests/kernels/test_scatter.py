"""``wsesparse._kernels._scatter``, the scatter kernel (``csr_spmm_t``: ``X @ W`` and
``W_csc @ X`` from the stored arrays): every row length and token width, row chunks, the
index checks of one-shot products, and its re-checks of its operands."""

import numpy as np
import pytest
import scipy.sparse as sp

from kernel_helpers import DTYPES, long_csr, rows_of_every_length, with_a_bad_index, with_duplicates
from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _scatter, _spmm
from wsesparse._kernels._csr_tools import CSR_BAD_INDEX, CSR_OK
from wsesparse import _thresholds as th
from wsesparse._drivers import scatter_chunks


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [1, 8, 24])
def test_one_shot_scatter_finds_a_bad_index_anywhere(dtype, itype, n_tokens):
    """X @ W (W scipy CSR) and W_csc @ X scatter from the stored arrays, checking the
    indices in the kernel: a bad one anywhere (any chunk or panel) is a ValueError
    naming the operand, never a write out of bounds."""
    A = long_csr(dtype, itype)
    X = np.ones((n_tokens, 300), dtype=dtype)
    X = X[0] if n_tokens == 1 else X
    np.testing.assert_allclose(sparse_matmul(X, A), X @ A, rtol=1e-4)
    for B in with_a_bad_index(A):
        with pytest.raises(ValueError, match=r"B has a corrupt .*not below 50"):
            sparse_matmul(X, B)
        C = sp.csc_array((B.data, B.indices, B.indptr), shape=(50, 300))
        with pytest.raises(ValueError, match=r"A has a corrupt .*not below 50"):
            sparse_matmul(C, X.T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_one_shot_vector_scatter_checks_every_row_block(dtype, itype):
    """x @ W for one vector checks short rows in blocks of CHECK_ROWS rows (as the
    SpMV does): a bad index on either side of a block edge is a ValueError."""
    rows = _spmm.CHECK_ROWS
    n_rows, per_row, n_cols = 4 * rows, 5, 50
    rng = np.random.default_rng(3)
    indptr = (np.arange(n_rows + 1) * per_row).astype(itype)
    indices = rng.integers(0, n_cols, n_rows * per_row).astype(itype)
    W = sp.csr_array((rng.standard_normal(indices.size).astype(dtype), indices, indptr),
                     shape=(n_rows, n_cols))
    x = rng.standard_normal(n_rows).astype(dtype)
    np.testing.assert_allclose(sparse_matmul(x, W), x @ W, rtol=1e-4)
    for q in (rows * per_row - 1, rows * per_row, 3 * rows * per_row):
        B = W.copy()
        B.indices[q] = n_cols
        with pytest.raises(ValueError, match=r"B has a corrupt .*not below 50"):
            sparse_matmul(x, B)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [None, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33,
                                      40, 64, 65, 100])
def test_scatter_every_row_length_and_token_width(dtype, itype, n_tokens):
    """The scatter kernel (Z = B.T @ U) against a complex128 oracle for every panel
    layout (whole vectors, remainders, several panels), with unsorted and duplicate
    entries, bitwise the same for 1-4 threads; and X @ W, W.T-as-CSC @ X.T through
    sparse_matmul (scatter or transpose, by width)."""
    A = with_duplicates(rows_of_every_length(40, 97, dtype, itype))
    rng = np.random.default_rng(2)
    X = rng.standard_normal((97,) if n_tokens is None else (n_tokens, 41)).astype(dtype)
    if n_tokens is None:
        X = X[:41]
    if np.dtype(dtype).kind == "c":
        X = X + 1j * rng.standard_normal(X.shape).astype(dtype)
    expected = X.astype(np.complex128) @ A.astype(np.complex128).toarray()
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    U = np.ascontiguousarray(X.T)
    refs = {}
    for chunks in (1, 2, 3, 4, 5):
        for t in (1, 2, 3, 4):
            Z = np.full(expected.shape[::-1], np.nan, dtype=dtype)
            scratch = np.full((chunks - 1,) + Z.shape, np.nan, dtype=dtype)
            _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z, t, n_chunks=chunks,
                                scratch=scratch)
            ref = refs.setdefault(chunks, Z)
            if t == 1:
                np.testing.assert_allclose(Z.T, expected, rtol=tol, atol=tol)
            assert Z.tobytes() == ref.tobytes(), f"{chunks} chunks: {t} threads differ from 1"
    ref = refs.get(scatter_chunks(A.nnz, A.shape[1], n_tokens or 1, np.dtype(dtype).itemsize))
    # A.T as CSC has the same arrays as A.
    At = sp.csc_array((A.data, A.indices, A.indptr), shape=A.shape[::-1])
    for got in (sparse_matmul(X, A), sparse_matmul(At, X.T).T):
        assert got.dtype == np.dtype(dtype) and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
        if (n_tokens or 1) * np.dtype(dtype).itemsize <= th.SCATTER_MAX_BYTES:
            assert got.T.tobytes(order="A") == ref.tobytes(), "not the scatter kernel's sums"


def test_one_shot_transposed_products_do_not_transpose(monkeypatch):
    """While a token row takes at most SCATTER_MAX_BYTES, X @ W (W CSR) and W_csc @ X
    never build a transpose; beyond, they do (and agree with scipy either way)."""
    W = sp.random(60, 50, density=0.2, format="csr", random_state=3)
    rng = np.random.default_rng(3)
    calls = []
    real_T = CSR.T
    monkeypatch.setattr(CSR, "T", property(lambda self: calls.append(1) or real_T.fget(self)))
    n_max = th.SCATTER_MAX_BYTES // 8  # float64
    for n in (1, 8, n_max):
        X = rng.standard_normal((n, 60))
        np.testing.assert_allclose(sparse_matmul(X, W), X @ W, rtol=1e-12, atol=1e-12)
        Xc = rng.standard_normal((50, n))
        np.testing.assert_allclose(sparse_matmul(W.tocsc(), Xc), W @ Xc, rtol=1e-12, atol=1e-12)
    assert calls == []
    X = rng.standard_normal((n_max + 1, 60))
    np.testing.assert_allclose(sparse_matmul(X, W), X @ W, rtol=1e-12, atol=1e-12)
    assert calls == [1]


def test_scatter_kernel_rejects_bad_operands():
    A = CSR(rows_of_every_length(5, 9, np.float64, np.int32))
    U, Z = np.ones((6, 4)), np.empty((9, 4))
    _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z, 1)
    np.testing.assert_allclose(Z, A.to_scipy().T @ U)
    with pytest.raises(ValueError, match="both be 1-D or both 2-D"):
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z[:, 0].copy(), 1)
    with pytest.raises(ValueError, match="same number of columns"):
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z[:, :2].copy(), 1)
    with pytest.raises(ValueError, match="dense operands"):
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U.astype(np.float32), Z, 1)
    with pytest.raises(ValueError, match="one entry per output row"):
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U[:-1], Z, 1)
    with pytest.raises(TypeError, match="int32 or both int64"):
        _scatter.csr_spmm_t(A.indptr, A.indices.astype(np.int64), A.data, U, Z, 1)
    with pytest.raises(ValueError, match="n_chunks"):
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z, 1, n_chunks=0)
    for bad in (None, np.empty((2, 9, 4)), np.empty((1, 9, 4), dtype=np.float32)):
        with pytest.raises(ValueError, match="scratch|dense operands"):
            _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z, 1, n_chunks=2, scratch=bad)
    scratch = np.empty((1, 9, 4))
    scratch.flags.writeable = False
    with pytest.raises(ValueError, match="scratch must be writeable"):
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z, 1, n_chunks=2, scratch=scratch)
    Z.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z, 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_scatter_kernel_check_cols(dtype, n_threads):
    """csr_spmm_t(check_cols=True): 4 for an index out of range in any chunk or panel,
    0 and the right product for a valid structure; without columns it checks all the same."""
    A = long_csr(dtype, np.int32, per_row=40, seed=5)   # 300 x 50
    for T, chunks in ((1, 1), (1, 4), (24, 2), (40, 1)):
        U = np.ones((300, T), dtype=dtype)
        Z = np.empty((50, T), dtype=dtype)
        S = np.empty((chunks - 1, 50, T), dtype=dtype)

        def call(ind):
            return _scatter.csr_spmm_t(A.indptr, ind, A.data, U, Z, n_threads, n_chunks=chunks,
                                       scratch=S if chunks > 1 else None, check_cols=True)

        assert call(A.indices) == CSR_OK
        np.testing.assert_allclose(Z, A.T @ U, rtol=1e-4)
        for pos in (0, A.nnz // 3, A.nnz // 2, A.nnz - 1):
            bad = A.indices.copy()
            bad[pos] = 50
            assert call(bad) == CSR_BAD_INDEX
    bad = A.indices.copy()
    bad[7] = -1
    assert _scatter.csr_spmm_t(A.indptr, bad, A.data, np.ones((300, 0), dtype),
                               np.empty((50, 0), dtype), 1, check_cols=True) == CSR_BAD_INDEX


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_one_column_scatter_is_a_column_of_a_wider_one(dtype, itype):
    """One column (vector @ W, W_csc @ vector) takes its own loop for complex values
    (ws_cscatter1, which checks each index as it goes): bit for bit the first column of
    a 3-column product, checked or not, for 1 and 3 row chunks and 1 and 2 threads."""
    A = with_duplicates(long_csr(dtype, itype, per_row=12, seed=7))
    rng = np.random.default_rng(7)
    U = rng.standard_normal((A.shape[0], 3)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        A.data = A.data + 1j * rng.standard_normal(A.nnz).astype(dtype)
        U = U + 1j * rng.standard_normal(U.shape).astype(dtype)
    for chunks in (1, 3):
        wide = np.empty((A.shape[1], 3), dtype)
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, wide, 1, n_chunks=chunks,
                            scratch=np.empty((chunks - 1,) + wide.shape, dtype))
        for n_threads in (1, 2):
            for check in (False, True):
                z = np.full(A.shape[1], np.nan, dtype)
                code = _scatter.csr_spmm_t(A.indptr, A.indices, A.data,
                                           np.ascontiguousarray(U[:, 0]), z, n_threads,
                                           n_chunks=chunks,
                                           scratch=np.empty((chunks - 1,) + z.shape, dtype),
                                           check_cols=check)
                assert code == CSR_OK
                assert z.tobytes() == wide[:, 0].copy().tobytes(), (chunks, n_threads, check)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_scatter_with_no_tokens(fmt):
    """X @ W with 0 tokens (and W_csc @ X with 0 columns): empty results, indices still
    checked."""
    W = sp.random(30, 20, density=0.2, format=fmt, random_state=1, dtype=np.float32)
    X = np.ones((0, 30), np.float32) if fmt == "csr" else np.ones((20, 0), np.float32)
    args = (X, W) if fmt == "csr" else (W, X)
    got = sparse_matmul(*args)
    assert got.shape == (args[0] @ args[1]).shape and got.size == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [2, 3, 4, 5, 6, 7, 9, 11, 13, 15, 16])
def test_scatter_remainder_columns_give_the_bits_of_one_column(dtype, itype, n_tokens):
    """Each column of a panel, its last (< one vector) columns included, is the same
    chain of multiply-adds in storage order as a one-column scatter of that column
    (the vector remainder steps must fuse exactly as the scalar loop does)."""
    A = with_duplicates(rows_of_every_length(40, 97, dtype, itype))
    rng = np.random.default_rng(5)
    U = rng.standard_normal((A.shape[0], n_tokens)).astype(dtype)
    Z = np.full((A.shape[1], n_tokens), np.nan, dtype=dtype)
    _scatter.csr_spmm_t(A.indptr, A.indices, A.data, U, Z, 1)
    for j in range(n_tokens):
        z = np.full(A.shape[1], np.nan, dtype=dtype)
        _scatter.csr_spmm_t(A.indptr, A.indices, A.data, np.ascontiguousarray(U[:, j]), z, 1)
        assert Z[:, j].tobytes() == z.tobytes(), f"column {j} of {n_tokens}"
