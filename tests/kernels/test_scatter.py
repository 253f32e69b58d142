"""``wsesparse._kernels._scatter``, the scatter kernel (``csr_spmm_t``: ``X @ W`` and
``W_csc @ X`` from the stored arrays): every row length and token width, row chunks, the
index checks of one-shot products, and its re-checks of its operands."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_helpers import DTYPES, long_csr, rows_of_every_length, with_a_bad_index, with_duplicates
from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _scatter, _spmm
from wsesparse._kernels._csr_tools import CSR_BAD_INDEX, CSR_OK
from wsesparse import _thresholds as th
from wsesparse._drivers import scatter_chunks
from wsesparse.matmul import _scatter_ok


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
        if _scatter_ok(A, A.shape[1], A.shape[0], n_tokens or 1, np.dtype(dtype)):
            assert got.T.tobytes(order="A") == ref.tobytes(), "not the scatter kernel's sums"


def _describe_machine(monkeypatch, cores: int):
    """This process as a machine of ``cores`` cores, 1 MB L2 and 32 MB L3 for the scatter
    rules (``_scatter_ok``, ``scatter_chunks``), whatever it runs on."""
    import wsesparse._drivers as drivers
    import wsesparse.matmul as mm
    from wsesparse._hardware import HardwareProfile
    hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=32 << 20, vector_bytes=64)
    monkeypatch.setattr(drivers, "current", lambda: hw)
    monkeypatch.setattr(mm._hardware, "current", lambda: hw)
    monkeypatch.setattr(mm, "available_cores", lambda: cores)
    monkeypatch.setattr(drivers, "available_cores", lambda: cores)


def test_one_shot_transposed_products_do_not_transpose(monkeypatch):
    """In one token panel, X @ W (W CSR) and W_csc @ X never build a transpose; in two,
    only where _scatter_ok says so (many nonzeros per output row, a last panel of a
    quarter of a panel or more, real values); beyond, they do. All agree with scipy."""
    _describe_machine(monkeypatch, 2)
    rng = np.random.default_rng(3)
    calls = []
    real_T = CSR.T
    monkeypatch.setattr(CSR, "T", property(lambda self: calls.append(1) or real_T.fget(self)))
    width = _scatter.scatter_panel_width(8)   # float64

    def check(W, n, transposes):
        calls.clear()
        X = rng.standard_normal((n, W.shape[0])).astype(W.dtype)
        np.testing.assert_allclose(sparse_matmul(X, W), X @ W, rtol=1e-12, atol=1e-12)
        Xc = rng.standard_normal((W.shape[0], n)).astype(W.dtype)
        C = sp.csc_array((W.data, W.indices, W.indptr), shape=W.shape[::-1])   # W.T as CSC
        np.testing.assert_allclose(sparse_matmul(C, Xc), C @ Xc, rtol=1e-12, atol=1e-12)
        assert calls == ([1, 1] if transposes else []), (W.nnz, W.shape, n)

    portable = width * 8 < 128     # 64-byte panels: two always scatter, as before
    sparse_rows = sp.random(60, 50, density=0.2, format="csr", random_state=3)
    for n in (1, 8, width):
        check(sparse_rows, n, False)
    check(sparse_rows, width + 1, not portable)            # two panels, 12 per output row
    dense_rows = sp.random(80, 50, density=0.9, format="csr", random_state=3)  # 72 per row
    check(dense_rows, width + width // 4, False)           # two panels: scattered
    check(dense_rows, 2 * width, False)
    check(dense_rows, width + 1, False)                    # a one-column panel, padded
    tall = sp.random(2000, 10, density=0.04, format="csr", random_state=3)   # 80 per row
    check(tall, width + 1, not portable)                   # ... unpadded: X read 0.4 times
    check(tall, width + width // 4, False)
    check(dense_rows, 2 * width + 1, True)                 # three panels
    check(dense_rows.astype(np.complex128), width // 2 + width // 8, not portable)  # complex


def test_two_panel_scatter_writes_out_on_lines_only(monkeypatch):
    """A two-panel scatter writes straight into an ``out`` whose rows start on 64-byte
    lines (its panels' threads would share lines otherwise), and through a temporary
    into any other; the result is the same either way."""
    import wsesparse.matmul as mm
    _describe_machine(monkeypatch, 2)
    W = sp.random(120, 90, density=0.9, format="csr", random_state=4)
    n = _scatter.scatter_panel_width(8) * 2
    X = np.random.default_rng(4).standard_normal((n, 120))
    ref = sparse_matmul(X, W)
    assert mm._scatter_ok(W, 90, 120, n, np.dtype(np.float64))
    seen = []
    real = mm.scatter_into
    monkeypatch.setattr(mm, "scatter_into", lambda *a, **k: seen.append(a[6]) or real(*a, **k))
    buf = np.empty(n * 90 * 8 + 128, dtype=np.uint8)
    start = -buf.__array_interface__["data"][0] % 64
    for off, direct in ((0, True), (8, False), (32, False)):   # (rows of 256 bytes)
        out = np.ndarray((90, n), np.float64, buf[start + off:start + off + n * 90 * 8]).T
        seen.clear()
        assert sparse_matmul(X, W, out=out) is out
        assert out.tobytes(order="F") == ref.tobytes(order="F")
        assert np.may_share_memory(seen[0], out) == direct, off
    assert ref.T.__array_interface__["data"][0] % 64 == 0      # its own result: on a line


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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("per_row", [3, 12])
def test_checked_one_column_scatter_finds_every_bad_index(dtype, itype, per_row):
    """A checked one-column real scatter (the compare in the loop for rows averaging
    _scatter.CHECK_LOOP_ROWS_MIN or more, the block check for shorter ones: AVX-512 builds
    take both here) returns CSR_BAD_INDEX for -1, the
    column count, and the index type's least and greatest values, first, in the middle or
    last, in any of 1 or 3 row chunks; valid indices give the unchecked bits."""
    A = long_csr(dtype, itype, per_row=per_row, seed=4)   # 300 x 50
    u = np.random.default_rng(4).standard_normal(300).astype(dtype)
    info = np.iinfo(itype)
    for chunks, threads in ((1, 1), (3, 2)):
        z = np.empty(50, dtype)
        S = np.empty((chunks - 1, 50), dtype) if chunks > 1 else None

        def call(ind, check=True):
            return _scatter.csr_spmm_t(A.indptr, ind, A.data, u, z, threads, n_chunks=chunks,
                                       scratch=S, check_cols=check)

        assert call(A.indices, check=False) == CSR_OK
        unchecked = z.copy()
        assert call(A.indices) == CSR_OK
        assert z.tobytes() == unchecked.tobytes()
        for pos in (0, A.nnz // 3, A.nnz // 2, A.nnz - 1):
            for value in (-1, 50, info.min, info.max):
                bad = A.indices.copy()
                bad[pos] = value
                assert call(bad) == CSR_BAD_INDEX, (pos, value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_one_column_scatter_is_a_column_of_a_wider_one(dtype, itype):
    """One column (vector @ W, W_csc @ vector) takes its own loop for complex values
    (ws_cscatter1, which checks each index as it goes), and checked real ones of rows of
    _scatter.CHECK_LOOP_ROWS_MIN or more too (ws_rscatter1_chk): bit for bit the first
    column of a 3-column product, checked or not, for 1 and 3 row chunks and 1 and 2
    threads."""
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
@pytest.mark.parametrize("n_tokens", [2, 3, 4, 5, 6, 7, 9, 11, 13, 15, 16, 17, 23, 25, 31])
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


def _banded(n, band, per_row, dtype, itype, seed=0, empty_rows=()):
    """n x n CSR with per_row random entries within +-band of the diagonal (unsorted,
    with duplicates), rows in ``empty_rows`` left empty."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), per_row)
    cols = np.clip(rows + rng.integers(-band, band + 1, rows.size), 0, n - 1)
    keep = ~np.isin(rows, empty_rows)
    rows, cols = rows[keep], cols[keep]
    indptr = np.zeros(n + 1, dtype=itype)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    vals = rng.standard_normal(rows.size).astype(dtype)
    return sp.csr_array((vals, cols.astype(itype), indptr), shape=(n, n))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [None, 1, 3, 8, 13, 16])
@pytest.mark.parametrize("zones", [2, 3, 8])
@pytest.mark.parametrize("far", [False, True])
def test_scatter_zones(dtype, itype, n_tokens, zones, far):
    """Zoned row chunks (csr_spmm_t(zones=K)) on banded matrices: the oracle's sums,
    the same bits for 1-4 threads, every row written (Z starts as NaN, some rows of
    B and of Z empty), and the gaps reported (also where some rows read far off the
    band)."""
    if n_tokens and n_tokens > _scatter.scatter_panel_width(np.dtype(dtype).itemsize):
        pytest.skip("beyond one panel: no zones")
    n = 3000
    B = _banded(n, 40, 3, dtype, itype, empty_rows=range(1000, 1100))
    if far:
        B.indices[B.indptr[1500]:B.indptr[1600]] = 0  # far off the band
    rng = np.random.default_rng(1)
    U = rng.standard_normal((n,) if n_tokens is None else (n, n_tokens)).astype(dtype)
    expected = B.T.astype(np.float64) @ U.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    ref = None
    for t in (1, 2, 3, 4):
        Z = np.full(expected.shape, np.nan, dtype=dtype)
        gap = np.zeros(1, np.int64)
        code = _scatter.csr_spmm_t(B.indptr, B.indices, B.data, U, Z, t, check_cols=True,
                                   zones=zones, max_gap_rows=n, gap_rows=gap)
        assert code == CSR_OK
        assert (0 <= gap[0]) if far else (0 < gap[0] < n // 4), "zones did not run"
        np.testing.assert_allclose(Z, expected, rtol=tol, atol=tol)
        ref = Z if ref is None else ref
        assert Z.tobytes() == ref.tobytes(), f"{t} threads differ from 1"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_zones_fall_back_and_check(dtype):
    """Where the gaps would pass max_gap_rows (random columns), one chunk with the
    plain kernel's bits; a bad index is reported with zones as without; zones=1 and
    complex values take the plain path."""
    n = 2000
    R = sp.random_array((n, n), density=0.005, format="csr", rng=3, dtype=dtype)
    U = np.random.default_rng(2).standard_normal(n).astype(dtype)
    plain = np.empty(n, dtype)
    _scatter.csr_spmm_t(R.indptr, R.indices, R.data, U, plain, 2, check_cols=True)
    for zones, max_gap in ((4, n // 8), (1, n), (0, n)):
        Z = np.empty(n, dtype)
        gap = np.zeros(1, np.int64)
        assert _scatter.csr_spmm_t(R.indptr, R.indices, R.data, U, Z, 2, check_cols=True,
                                   zones=zones, max_gap_rows=max_gap, gap_rows=gap) == CSR_OK
        assert gap[0] == -1 and Z.tobytes() == plain.tobytes()
    B = _banded(n, 10, 3, dtype, np.int64)
    for q in (0, B.nnz // 2, B.nnz - 1):
        bad = B.indices.copy()
        for value in (n, -1, n + 10**12):
            bad[q] = value
            for check, max_gap in ((True, n), (True, 0), (False, n), (False, 0)):
                # (the zones' span pass reports a bad index even unchecked: never a
                # write out of bounds)
                Z = np.empty(n, dtype)
                assert _scatter.csr_spmm_t(B.indptr, bad, B.data, U, Z, 2, check_cols=check,
                                           zones=4, max_gap_rows=max_gap) == CSR_BAD_INDEX
    Z = np.empty(n, dtype)
    gap = np.zeros(1, np.int64)
    assert _scatter.csr_spmm_t(B.indptr, B.indices, B.data, U, Z, 2, zones=4, max_gap_rows=n,
                               max_zone_bytes=0, gap_rows=gap) == CSR_OK  # copies too big
    assert gap[0] == -1
    np.testing.assert_allclose(Z, B.T @ U, rtol=1e-4)
    C = B.astype(np.complex128)
    Z = np.empty(n, np.complex128)
    gap = np.zeros(1, np.int64)
    _scatter.csr_spmm_t(C.indptr, C.indices, C.data, U.astype(np.complex128), Z, 2,
                        zones=4, max_gap_rows=n, gap_rows=gap)
    assert gap[0] == -1
    np.testing.assert_allclose(Z, C.T @ U.astype(np.complex128), rtol=1e-12)
    with pytest.raises(ValueError, match="zones"):
        _scatter.csr_spmm_t(B.indptr, B.indices, B.data, U, Z.real.copy(), 1, zones=-1)
    with pytest.raises(ValueError, match="gap_rows"):
        _scatter.csr_spmm_t(B.indptr, B.indices, B.data, U, np.empty(n, dtype), 1, zones=2,
                            gap_rows=np.zeros(2, np.int64))


def test_scatter_zones_nested_spans():
    """A chunk whose span lies inside another's has no zone of its own; the sums stay
    right (the zones are what no other chunk's span meets, not neighbours' gaps)."""
    n = 4000
    rng = np.random.default_rng(4)
    rows = np.repeat(np.arange(n), 2)
    cols = rows.copy()
    cols[(rows >= 1000) & (rows < 2000)] = rng.integers(0, n, 2000)  # chunk 1: everywhere
    cols[(rows >= 3000)] = rng.integers(3900, 4000, 2000)            # chunk 3: a narrow end
    B = sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(n, n))
    U = rng.standard_normal(n)
    Z = np.full(n, np.nan)
    gap = np.zeros(1, np.int64)
    _scatter.csr_spmm_t(B.indptr, B.indices, B.data, U, Z, 2, check_cols=True, zones=4,
                        max_gap_rows=n, gap_rows=gap)
    assert gap[0] > n - 50  # chunk 1 meets nearly every row: zones at the ends at most
    np.testing.assert_allclose(Z, B.T @ U, rtol=1e-12, atol=1e-12)


def test_one_shot_banded_csc_takes_zones(monkeypatch):
    """A banded CSC matrix @ x and @ X (one-shot) goes through zones where the driver says
    so, with scipy's results and the same bits for 1 and 2 threads."""
    from wsesparse import _drivers
    n = 20000
    B = _banded(n, 30, 4, np.float64, np.int32)
    A = sp.csc_array((B.data, B.indices, B.indptr), shape=(n, n))  # A = B.T
    f64 = np.dtype(np.float64)
    assert _drivers.scatter_zones(B.indptr, B.indices, B.nnz, n, 5, f64, items=2) == 2
    assert _drivers.scatter_zones(B.indptr, B.indices, B.nnz, n, 1, f64, items=2) == 2
    seen = []
    real = _scatter.csr_spmm_t
    monkeypatch.setattr(_scatter, "csr_spmm_t",
                        lambda *a, **k: seen.append(k.get("zones")) or real(*a, **k))
    monkeypatch.setattr(_drivers, "available_cores", lambda: 2)
    x = np.random.default_rng(5).standard_normal(n)
    X = np.random.default_rng(6).standard_normal((n, 5))
    for D in (x, X):
        one, two = sparse_matmul(A, D, n_threads=1), sparse_matmul(A, D, n_threads=2)
        np.testing.assert_allclose(two, A @ D, rtol=1e-12, atol=1e-12)
        assert one.tobytes() == two.tobytes()
    assert seen == [2, 2, 2, 2]


@settings(max_examples=80, deadline=None)
@given(n_rows=st.integers(1, 300), n_out=st.integers(1, 300), band=st.integers(0, 300),
       per_row=st.integers(0, 5), zones=st.integers(2, 9), max_gap=st.integers(0, 300),
       n_tokens=st.sampled_from([None, 1, 2, 7]), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([np.float32, np.float64]),
       itype=st.sampled_from([np.int32, np.int64]))
def test_scatter_zones_any_structure(n_rows, n_out, band, per_row, zones, max_gap, n_tokens,
                                     seed, dtype, itype):
    """Zones or their fallback on any structure (empty chunks, fewer rows than zones,
    bands of any width): the oracle's sums, every row written, the same bits on 1 and 3
    threads."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, per_row + 1, n_rows)
    rows = np.repeat(np.arange(n_rows), counts)
    centre = rows * n_out // max(n_rows, 1)
    cols = np.clip(centre + rng.integers(-band, band + 1, rows.size), 0, n_out - 1)
    indptr = np.zeros(n_rows + 1, dtype=itype)
    np.cumsum(counts, out=indptr[1:])
    B = sp.csr_array((rng.standard_normal(rows.size).astype(dtype), cols.astype(itype), indptr),
                     shape=(n_rows, n_out))
    U = rng.standard_normal((n_rows,) if n_tokens is None else (n_rows, n_tokens)).astype(dtype)
    outs = []
    for t, check in ((1, True), (3, True), (2, False)):
        Z = np.full((n_out,) + U.shape[1:], np.nan, dtype=dtype)
        assert _scatter.csr_spmm_t(B.indptr, B.indices, B.data, U, Z, t, check_cols=check,
                                   zones=zones, max_gap_rows=max_gap) == CSR_OK
        outs.append(Z)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(outs[0], B.T.astype(np.float64) @ U.astype(np.float64),
                               rtol=tol, atol=tol)
    assert outs[0].tobytes() == outs[1].tobytes() == outs[2].tobytes()


def test_scatter_zones_rule():
    """The driver asks for zones only where 3 sampled windows of rows of B are banded,
    the matrix has enough rows to sample and the token rows fit one panel (one column
    too)."""
    from wsesparse._drivers import scatter_zones
    f64 = np.dtype(np.float64)
    n = 20000
    B = _banded(n, 30, 4, np.float64, np.int32)
    assert scatter_zones(B.indptr, B.indices, B.nnz, n, 4, f64, items=3) == 3
    assert scatter_zones(B.indptr, B.indices, B.nnz, n, 4, f64, items=1) == 0
    assert scatter_zones(B.indptr, B.indices, B.nnz, n, 4, np.dtype(np.complex128), items=2) == 0
    for n_tokens, dtype in ((1, f64), (2, f64), (1, np.dtype(np.float32))):   # narrow rows
        assert scatter_zones(B.indptr, B.indices, B.nnz, n, n_tokens, dtype, items=2) == 2
    wide = _scatter.scatter_panel_width(8) + 1
    assert scatter_zones(B.indptr, B.indices, B.nnz, n, wide, f64, items=2) == 0
    middle = B.indices.copy()
    middle[B.indptr[n // 2]] = n - 1  # one far index in the middle window
    assert scatter_zones(B.indptr, middle, B.nnz, n, 4, f64, items=2) == 0
    for rows, expected in ((4 * th.SCATTER_ZONE_SAMPLE_ROWS, 2),
                           (4 * th.SCATTER_ZONE_SAMPLE_ROWS - 1, 0)):  # too few to sample
        S = _banded(rows, 3, 80, np.float64, np.int32)
        S = sp.csr_array((S.data, S.indices, S.indptr), shape=(rows, 10000))
        assert scatter_zones(S.indptr, S.indices, S.nnz, 10000, 4, f64, items=2) == expected


def test_banded_sample_reads_only_valid_windows():
    """banded_sample (the zones' C-side sample): True for a band, False for random
    columns or too few rows, and a ValueError (never a read out of bounds) for an
    indptr past the indices."""
    n = 4000
    B = _banded(n, 5, 3, np.float64, np.int64)
    R = sp.random_array((n, n), density=0.01, format="csr", rng=0)
    assert _scatter.banded_sample(B.indptr, B.indices, 64, n // 8)
    assert not _scatter.banded_sample(R.indptr, R.indices, 64, n // 8)
    assert not _scatter.banded_sample(B.indptr[:200], B.indices, 64, n // 8)  # 199 rows
    bad = B.indptr.copy()
    bad[n // 2:] += B.nnz
    with pytest.raises(ValueError, match="indptr must be valid"):
        _scatter.banded_sample(bad, B.indices, 64, n // 8)
    with pytest.raises(TypeError, match="int32 or both int64"):
        _scatter.banded_sample(B.indptr, B.indices.astype(np.int32), 64, n // 8)


@pytest.mark.parametrize("cores, n_out, expected", [
    (2, 4096, True),        # two panels: two work items for two cores
    (16, 4096, True),       # a 1 MB result: 8 row chunks x 2 panels for 16 cores
    (16, 16384, False),     # a 4 MB result (beyond two L2s): one chunk, 2 of 16 cores
    (2, 65536, False),      # a 16 MB result: beyond a quarter of L3
])
def test_two_panel_scatter_rule(monkeypatch, cores, n_out, expected):
    """_scatter_ok for two 128-byte panels on a machine described to it (1 MB L2, 32 MB
    L3, ``cores`` cores): 64 float32 tokens, 100 nonzeros per output row."""
    import wsesparse.matmul as mm
    if _scatter.scatter_panel_width(4) * 4 < 128:
        pytest.skip("the portable build's 64-byte panels keep the old rule")
    _describe_machine(monkeypatch, cores)

    class Stored:   # what _scatter_ok reads of the operand: indptr[-1]
        indptr = np.array([0, 100 * n_out])
    f32 = np.dtype(np.float32)
    assert mm._scatter_ok(Stored, n_out, n_out, 64, f32) is expected
    assert mm._scatter_ok(Stored, n_out, n_out, 32, f32)          # one panel: always
    assert mm._scatter_ok(Stored, n_out, n_out, 33, f32) is expected   # padded to 48
    assert not mm._scatter_ok(Stored, n_out, 1000 * n_out, 33, f32)    # one column, unpadded
    Stored.indptr = np.array([0, 63 * n_out])
    assert not mm._scatter_ok(Stored, n_out, n_out, 64, f32)      # 63 per output row


@pytest.mark.parametrize("side", ["left", "right"])
def test_a_malformed_indptr_gets_our_message_in_two_panels(side):
    """The two-panel rule reads indptr[-1] before the structure checks: a 2-D, empty or
    float indptr still gets the library's message, not numpy's."""
    n = _scatter.scatter_panel_width(8) * 2       # two panels of float64
    for bad in (lambda p: p.reshape(1, -1), lambda p: p[:0], lambda p: p.astype(float)):
        W = sp.random(100, 50, density=0.9, format="csr", random_state=5)
        W.indptr = bad(W.indptr)
        with pytest.raises((ValueError, TypeError), match="indptr"):
            if side == "left":
                sparse_matmul(np.ones((n, 100)), W)
            else:
                sparse_matmul(W, np.ones((50, n)))


@pytest.mark.parametrize("dtype, extra", [(np.float32, 8), (np.float32, 3), (np.float64, 4),
                                          (np.float64, 9)])
def test_padded_tokens_keep_the_sums(monkeypatch, dtype, extra):
    """scatter_into pads rows of two panels to a 64-byte multiple (scatter_tokens): the
    same bytes as the kernel on the unpadded operands, and Y untouched on a bad index
    where padded (the padded result is copied back only after the kernel succeeded; the
    portable build never pads)."""
    from wsesparse._drivers import scatter_into, scatter_tokens
    _describe_machine(monkeypatch, 2)
    itemsize = np.dtype(dtype).itemsize
    n = _scatter.scatter_panel_width(itemsize) + extra
    B = sp.random(300, 70, density=0.5, format="csr", random_state=6).astype(dtype)
    padded = scatter_tokens(n, itemsize, B.nnz, 300)
    if _scatter.scatter_panel_width(itemsize) * itemsize < 128:
        assert padded == n                       # the portable build: never padded
    else:
        assert padded >= n and (padded * itemsize) % 64 == 0
        assert (padded == n) == ((n * itemsize) % 64 == 0)
    assert scatter_tokens(n, itemsize, 599, 300) == n      # X's rows read < 2 times: as is
    X = np.random.default_rng(6).standard_normal((300, n)).astype(dtype)
    ref = np.empty((70, n), dtype)
    _scatter.csr_spmm_t(B.indptr, B.indices, B.data, X, ref, 1)
    Y = np.full((70, n), np.nan, dtype)
    scatter_into(B.indptr, B.indices, B.data, B.shape, B.nnz, X, Y, None, check_cols=True)
    assert Y.tobytes() == ref.tobytes()
    bad = B.indices.copy()
    bad[-1] = 70
    Y[...] = 7
    with pytest.raises(ValueError, match="not below 70"):
        scatter_into(B.indptr, bad, B.data, B.shape, B.nnz, X, Y, None, check_cols=True)
    if padded != n:       # (unpadded, the kernel writes Y as it goes)
        assert (Y == 7).all()
