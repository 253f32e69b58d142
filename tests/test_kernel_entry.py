"""The compiled entry points: every row-length / token-width path against a
float64 oracle, and the kernels' own cheap re-checks of what they rely on.

The Python layer validates everything first; these checks make a wrong call
from inside the package fail with an exception instead of reading memory it
does not own.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _csr_tools, _runtime, _scatter, _spmm
from wsesparse._kernels._csr_tools import (CSR_BAD_INDEX, CSR_BAD_START, CSR_DECREASING,
                                           CSR_OK, CSR_SHORT)
from wsesparse import _hardware
from wsesparse import _thresholds as th
from wsesparse._drivers import (balanced_row_bounds, k_block, pack_single_panel, panel_width,
                                row_bounds, scatter_chunks)
from wsesparse._hardware import HardwareProfile


def _profile(vector_bytes=None, **changes) -> HardwareProfile:
    """This machine's profile with ``changes`` (cache sizes, fast_l3, ...)."""
    from dataclasses import replace
    hw = _hardware.current()
    if vector_bytes is not None:
        changes["vector_bytes"] = vector_bytes
    return replace(hw, **changes)


def _rows_of_every_length(max_len: int, n_cols: int, dtype, itype, seed=0) -> sp.csr_array:
    """One row of each length 0..max_len (the SpMV / tile code switches on length)."""
    rng = np.random.default_rng(seed)
    lengths = np.arange(max_len + 1)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    indices = np.concatenate([rng.choice(n_cols, size=n, replace=False) for n in lengths])
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.standard_normal(indptr[-1]).astype(dtype)
    return sp.csr_array((data, indices.astype(itype), indptr), shape=(len(lengths), n_cols))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 63,
                                      64, 65, 100, 128, 129, 200])
def test_every_row_length_and_token_width(dtype, itype, n_tokens):
    A = _rows_of_every_length(40, 97, dtype, itype)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((97, n_tokens)).astype(dtype)
    X = X[:, 0] if n_tokens == 1 else X
    expected = A.astype(np.complex128).toarray() @ X.astype(np.complex128)
    got = sparse_matmul(CSR(A), X, method="sparse")
    assert got.dtype == np.dtype(dtype) and got.shape == expected.shape
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def _args(dtype=np.float64, itype=np.int32, n_tokens=4):
    A = CSR(_rows_of_every_length(5, 9, dtype, itype))
    X = np.ones((9, n_tokens), dtype=dtype)
    Y = np.empty((A.shape[0], n_tokens), dtype=dtype)
    return A, X, Y, np.array([0, A.shape[0]], dtype=np.int64)


def test_spmm_rejects_mismatched_value_dtypes():
    A, X, Y, b = _args()
    with pytest.raises(ValueError, match="dense operands"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X.astype(np.float32), Y, b, 128, 1, False)
    with pytest.raises(TypeError, match="kernel dtype"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data.astype(np.int64), X, Y, b, 128, 1, False)


def test_spmm_rejects_non_contiguous_or_read_only_operands():
    A, X, Y, b = _args()
    with pytest.raises(ValueError, match="C-contiguous"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data, np.asfortranarray(X), Y, b, 128, 1, False)
    Y.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y, b, 128, 1, False)


def test_spmm_rejects_mixed_index_types_and_bad_shapes():
    A, X, Y, b = _args()
    with pytest.raises(TypeError, match="int32 or both int64"):
        _spmm.csr_spmm(A.indptr, A.indices.astype(np.int64), A.data, X, Y, b, 128, 1, False)
    with pytest.raises(TypeError, match="row_bounds"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y, b.astype(np.int32), 128, 1, False)
    with pytest.raises(ValueError, match="one entry per output row"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y[:-1], b, 128, 1, False)
    with pytest.raises(ValueError, match="same number of columns"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y[:, :2].copy(), b, 128, 1, False)
    with pytest.raises(ValueError, match="1-D"):
        _spmm.csr_spmv(A.indptr, A.indices, A.data, X, Y, b, 1)


def test_csr_check_codes_and_wide_int32_matrices():
    ok = np.array([0, 1, 2], dtype=np.int32)
    assert _csr_tools.csr_check(ok, np.array([0, 4], dtype=np.int32), 5, 1) == CSR_OK
    assert _csr_tools.csr_check(ok + 1, np.array([0, 4], dtype=np.int32), 5, 1) == CSR_BAD_START
    assert _csr_tools.csr_check(np.array([0, 2, 1], dtype=np.int32),
                           np.array([0, 4], dtype=np.int32), 5, 1) == CSR_DECREASING
    assert _csr_tools.csr_check(ok, np.array([0], dtype=np.int32), 5, 1) == CSR_SHORT
    assert _csr_tools.csr_check(ok, np.array([0, 5], dtype=np.int32), 5, 1) == CSR_BAD_INDEX
    assert _csr_tools.csr_check(ok, np.array([-1, 0], dtype=np.int32), 5, 1) == CSR_BAD_INDEX
    # More columns than int32 can index: every nonnegative int32 is in range,
    # negatives are still caught (the check compares as unsigned).
    big = 2**40
    assert _csr_tools.csr_check(ok, np.array([0, 2**31 - 1], dtype=np.int32), big, 1) == CSR_OK
    assert _csr_tools.csr_check(ok, np.array([0, -2**31], dtype=np.int32), big, 1) == CSR_BAD_INDEX
    assert (_csr_tools.csr_check(ok.astype(np.int64), np.array([0, big], dtype=np.int64), big, 1)
            == CSR_BAD_INDEX)
    with pytest.raises(TypeError, match="int32 or both int64"):
        _csr_tools.csr_check(ok, np.array([0, 4], dtype=np.int64), 5, 1)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_csr_check_finds_a_bad_index_in_every_thread_chunk(n_threads):
    n = 10_000
    indptr = np.array([0, n], dtype=np.int64)
    for bad_at in (0, n // 3, n // 2, n - 1):
        indices = np.zeros(n, dtype=np.int64)
        indices[bad_at] = 7
        assert _csr_tools.csr_check(indptr, indices, 7, n_threads) == CSR_BAD_INDEX
        indices[bad_at] = 6
        assert _csr_tools.csr_check(indptr, indices, 7, n_threads) == CSR_OK


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("prefetch", [False, True])
def test_several_panels_per_sweep(dtype, prefetch):
    """Token columns swept in panels narrower than N (what big K and N get)."""
    A = CSR(_rows_of_every_length(60, 200, dtype, np.int32, seed=3))
    tile = _spmm.TILE_BYTES_PER_ROW // np.dtype(dtype).itemsize
    N = 2 * tile + 3
    X = np.random.default_rng(4).standard_normal((200, N)).astype(dtype)
    expected = A.to_scipy().astype(np.complex128).toarray() @ X.astype(np.complex128)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    for panel, n_threads, parts in ((tile, 1, 1), (2 * tile, 2, 5), (N, 2, 3)):
        Y = np.full((A.shape[0], N), np.nan, dtype=dtype)
        bounds = np.linspace(0, A.shape[0], parts + 1).astype(np.int64)
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y, bounds, panel, n_threads, prefetch)
        np.testing.assert_allclose(Y, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("n_vectors", [1, 2, 4, 8])
def test_panels_one_tile_wide(dtype, prefetch, n_vectors):
    """Real panels exactly 1, 2, 4 or 8 vectors wide take a row loop of their own (no
    per-row tile dispatch; complex ones the same widths through their own kernel):
    rows of every length 0..60 against the oracle, and
    bitwise equal to the same columns inside a wider panel (the same tiles), also
    as the first panel of a wider X."""
    A = CSR(_rows_of_every_length(60, 200, dtype, np.int32, seed=5))
    w = n_vectors * _spmm.TILE_VECTOR_BYTES // np.dtype(dtype).itemsize
    X = np.random.default_rng(6).standard_normal((200, w + 3)).astype(dtype)
    bounds = np.array([0, 20, A.shape[0]], dtype=np.int64)
    Y = np.full((A.shape[0], w), np.nan, dtype=dtype)
    _spmm.csr_spmm(A.indptr, A.indices, A.data, np.ascontiguousarray(X[:, :w]), Y, bounds,
                   w, 2, prefetch)
    expected = A.to_scipy().astype(np.complex128).toarray() @ X[:, :w].astype(np.complex128)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(Y, expected, rtol=tol, atol=tol)
    wide = np.full((A.shape[0], w + 3), np.nan, dtype=dtype)
    _spmm.csr_spmm(A.indptr, A.indices, A.data, X, wide, bounds, w + 3, 2, prefetch)
    np.testing.assert_array_equal(Y, wide[:, :w])
    # A first panel of w columns out of w + 3 (X packed with its own row stride,
    # Y rows w + 3 apart).
    paneled = np.full_like(wide, np.nan)
    _spmm.csr_spmm(A.indptr, A.indices, A.data, X, paneled, bounds, w, 2, prefetch)
    np.testing.assert_array_equal(paneled, wide)


def _aligned(shape, dtype, offset=0):
    """A C-contiguous array of ``shape`` starting ``offset`` bytes past a 64-byte line."""
    itemsize = np.dtype(dtype).itemsize
    n = int(np.prod(shape))
    raw = np.empty(n * itemsize + 128, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + n * itemsize].view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("n_vectors, extra", [(1, 0), (2, 0), (3, 5), (8, 0), (9, 2), (16, 0)])
@pytest.mark.parametrize("panel_vectors", [None, 2])
@pytest.mark.parametrize("offset", [0, 8, 16, 32])
def test_streaming_stores_change_nothing(dtype, n_vectors, extra, panel_vectors, offset):
    """stream=True (non-temporal stores of Y's tiles) gives bitwise the result of plain
    stores, one sweep or packed panels, prefetch on or off; on a Y (or row stride, or
    panel) off the vector boundary the kernel keeps plain stores instead of faulting."""
    A = CSR(_rows_of_every_length(40, 150, dtype, np.int32, seed=7))
    vl = _spmm.TILE_VECTOR_BYTES // np.dtype(dtype).itemsize
    w = n_vectors * vl + extra
    panel = w if panel_vectors is None else panel_vectors * vl
    X = np.random.default_rng(8).standard_normal((150, w)).astype(dtype)
    bounds = np.array([0, 17, A.shape[0]], dtype=np.int64)
    plain = np.full((A.shape[0], w), np.nan, dtype=dtype)
    _spmm.csr_spmm(A.indptr, A.indices, A.data, X, plain, bounds, panel, 2, False)
    expected = A.to_scipy().astype(np.complex128).toarray() @ X.astype(np.complex128)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(plain, expected, rtol=tol, atol=tol)
    for prefetch in (False, True):
        Y = _aligned(plain.shape, dtype, offset)
        Y[...] = np.nan
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y, bounds, panel, 2, prefetch,
                       stream=True)
        np.testing.assert_array_equal(Y, plain)


def test_sparse_matmul_streams_big_results_of_short_rows(monkeypatch):
    """Results from STREAM_MIN_L3_SHARE of L3 on, of rows averaging at most SHORT_ROW_NNZ
    nonzeros, ask the kernel for streaming stores (and get the same values)."""
    A = sp.random(300, 200, density=0.05, format="csr", random_state=3, dtype=np.float32)
    X = np.random.default_rng(4).standard_normal((200, 64)).astype(np.float32)
    expected = sparse_matmul(A, X, method="sparse")
    narrower = sparse_matmul(A, X[:, :63], method="sparse")
    asked = []
    real = _spmm.csr_spmm

    def spy(*args, **kwargs):
        asked.append(kwargs["stream"])
        return real(*args, **kwargs)

    monkeypatch.setattr(_spmm, "csr_spmm", spy)
    monkeypatch.setattr(_hardware, "_current", _profile(l3_bytes=4 * 300 * 64 * 4))
    for S in (A, CSR(A)):
        np.testing.assert_array_equal(sparse_matmul(S, X, method="sparse"), expected)
    # One column short of the bound: plain stores.
    np.testing.assert_array_equal(sparse_matmul(A, X[:, :63], method="sparse"), narrower)
    long_rows = sp.random(300, 200, density=0.5, format="csr", random_state=3, dtype=np.float32)
    sparse_matmul(long_rows, X, method="sparse")
    assert asked == [True, True, False, False]


@pytest.mark.parametrize("l2", [256 << 10, 1 << 20, 2 << 20])
def test_panel_width_rule(l2):
    hw = HardwareProfile(l2_bytes=l2, l3_bytes=0, vector_bytes=32)  # no L3 to count on
    # Short rows: one sweep over all columns, however wide.
    assert panel_width((1000, 10**6), th.SHORT_ROW_NNZ * 1000, 4096, 4, hw) == 4096
    # Longer rows: whole 64-byte lines per X row whose slice of X fits in half of L2.
    K = 1024
    for itemsize in (4, 8, 16):
        p = panel_width((1000, K), (th.SHORT_ROW_NNZ + 1) * 1000, 1 << 20, itemsize, hw)
        line = 64 // itemsize
        assert p % line == 0 and K * p * itemsize <= l2 // 2 < K * (p + line) * itemsize
    # Never wider than N, never narrower than one line.
    assert panel_width((1000, K), 100 * 1000, 7, 8, hw) == 7
    assert panel_width((10, 1 << 40), 1000, 10_000, 8, hw) == 8
    # A slow L3 (probed or pinned) counts as none.
    slow = HardwareProfile(l2_bytes=l2, l3_bytes=64 << 20, vector_bytes=32, fast_l3=False)
    assert (panel_width((1000, K), 100 * 1000, 1 << 20, 4, slow)
            == panel_width((1000, K), 100 * 1000, 1 << 20, 4, hw))


def _widest(budget: int, K: int, itemsize: int) -> int:
    """Whole 64-byte lines per X row whose (K, panel) slice fits ``budget``, at least one."""
    line = 64 // itemsize
    return max(line, budget // (K * itemsize) // line * line)


@pytest.mark.parametrize("l2", [512 << 10, 1 << 20])
def test_panel_width_rule_with_fast_l3(l2):
    hw = HardwareProfile(l2_bytes=l2, l3_bytes=64 << 20, vector_bytes=32, fast_l3=True)
    l3 = th.L3_PANEL_MAX_BYTES  # a quarter of 64 MiB, capped
    N = 1 << 20
    for itemsize in (4, 8, 16):
        line = 64 // itemsize
        K = l2 // 2 // 64  # one line of every X row fills half of L2
        # Rows between short and long: the L3 slice.
        assert panel_width((100, K), (th.SHORT_ROW_NNZ + 1) * 100, N, itemsize, hw) == \
            _widest(l3, K, itemsize)
        # Long rows whose one-line slice fits in half of L2: all of L2.
        p = panel_width((100, K), th.LONG_ROW_NNZ * 100, N, itemsize, hw)
        assert p == _widest(l2, K, itemsize) == 2 * line
        # ... but not once a line of every X row overflows half of L2.
        assert panel_width((100, 2 * K), th.LONG_ROW_NNZ * 100, N, itemsize, hw) == \
            _widest(l3, 2 * K, itemsize)
        # Short rows and narrow products are as before.
        assert panel_width((100, K), th.SHORT_ROW_NNZ * 100, N, itemsize, hw) == N
        assert panel_width((100, K), th.LONG_ROW_NNZ * 100, 3, itemsize, hw) == 3


def test_read_bandwidth():
    assert _runtime.read_bandwidth(1 << 16, 2) > 0
    assert _runtime.read_bandwidth(0) == -1.0 and _runtime.read_bandwidth(63) == -1.0
    with pytest.raises(ValueError, match="nbytes must be nonnegative, got -1"):
        _runtime.read_bandwidth(-1)
    for repeats in (0, -3):
        with pytest.raises(ValueError, match=f"repeats must be at least 1, got {repeats}"):
            _runtime.read_bandwidth(1 << 16, repeats)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_every_panel_choice_against_oracle(monkeypatch, dtype):
    """One line, several lines and one sweep: what the L3 probe can pick."""
    rng = np.random.default_rng(8)
    K, N = 512, 200
    A = sp.random(300, K, density=0.2, format="csr", random_state=9, dtype=np.float64)
    A = A.astype(dtype)
    X = rng.standard_normal((K, N)).astype(dtype)
    expected = A.astype(np.complex128) @ X.astype(np.complex128)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    panels = set()
    for l2, l3, fast in ((64 * K, 0, False), (256 * K, 0, False), (64 * K, 1 << 32, True)):
        hw = _profile(l2_bytes=l2, l3_bytes=l3, fast_l3=fast)
        monkeypatch.setattr(_hardware, "_current", hw)
        panels.add(panel_width(A.shape, A.nnz, N, np.dtype(dtype).itemsize, hw))
        for n_threads in (1, 2):
            np.testing.assert_allclose(sparse_matmul(A, X, n_threads=n_threads), expected,
                                       rtol=tol, atol=tol)
    assert len(panels) == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("N", [1, 3, 4, 5, 8, 12, 16, 17, 24, 33])
def test_packed_single_panel(dtype, N):
    """``pack``: X read from an aligned copy with padded rows, every width."""
    A = CSR(_rows_of_every_length(60, 200, dtype, np.int32, seed=5))
    X = np.random.default_rng(6).standard_normal((200, N)).astype(dtype)
    for n_threads, parts, panel in ((1, 1, N), (2, 5, N), (2, 3, max(1, N // 2))):
        expected = np.empty((A.shape[0], N), dtype=dtype)
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, expected, 1, panel, 1, False)
        Y = np.full((A.shape[0], N), np.nan, dtype=dtype)
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y, parts, panel, n_threads, False,
                       pack=True)
        # The copy changes where X is read from, not how a row is summed.
        np.testing.assert_array_equal(Y, expected)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(Y, A.to_scipy() @ X, rtol=tol, atol=tol)


def test_pack_rule():

    def aligned(K, N, off):
        buf = np.zeros(K * N * 4 + 128, np.uint8)
        a = (-buf.ctypes.data) % 64 + off
        return buf[a:a + K * N * 4].view(np.float32).reshape(K, N)

    many = th.PACK_MIN_REUSE * 100
    assert not pack_single_panel(aligned(100, 64, 0), many)  # already on lines
    assert not pack_single_panel(aligned(100, 8, 0), many)   # 32-byte rows pack lines
    assert pack_single_panel(aligned(100, 64, 16), many)
    assert pack_single_panel(aligned(100, 12, 0), many)      # 48-byte rows straddle
    assert not pack_single_panel(aligned(100, 64, 16), many - 1)  # too little reuse


# -- one-shot products: the kernels check the column indices as they go -------

_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("max_len", [12, 40, 70])
@pytest.mark.parametrize("one_shot", [False, True])
def test_spmv_every_row_length(dtype, itype, max_len, one_shot):
    """Parts whose rows average under WS_SPMV_VEC_NNZ_<T> (24 float32, 16
    float64) run the scalar loop with the vector rows called out (max_len 12:
    no vector rows; 40: float32), others the vector steps inlined with scalar
    short rows and tails; prepared (unchecked) and one-shot (checked) alike."""
    A = _rows_of_every_length(max_len, 97, dtype, itype, seed=max_len)
    x = np.random.default_rng(2).standard_normal(97).astype(dtype)
    expected = A.astype(np.complex128).toarray() @ x.astype(np.complex128)
    got = sparse_matmul(A if one_shot else CSR(A), x)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("one_shot", [False, True])
def test_spmv_wide_x_every_row_length(dtype, one_shot):
    """x beyond L1 (the AVX-512 build gathers rows of 4 nonzeros and more):
    every row length against scipy, and int64 indices give int32's bits."""
    n_cols = 20_000
    A = _rows_of_every_length(70, n_cols, dtype, np.int32, seed=7)
    x = np.random.default_rng(3).standard_normal(n_cols).astype(dtype)
    got = sparse_matmul(A if one_shot else CSR(A), x)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, A.toarray() @ x, rtol=tol, atol=tol)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)),
                       shape=A.shape)
    got64 = sparse_matmul(A64 if one_shot else CSR(A64), x)
    assert got64.tobytes() == got.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_one_shot_spmv_wide_x_finds_a_bad_index_anywhere(dtype, itype):
    A = _long_csr(dtype, itype, n_cols=20_000)
    x = np.ones(20_000, dtype=dtype)
    np.testing.assert_allclose(sparse_matmul(A, x), A @ x, rtol=1e-4)
    for B in _with_a_bad_index(A, 20_000):
        with pytest.raises(ValueError, match="not below 20000"):
            sparse_matmul(B, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("long", [28, 80])
def test_one_shot_spmv_finds_a_bad_index_in_every_short_row_position(dtype, itype, long):
    """Rows of 1..23 nonzeros among longer ones: a bad index at every position of
    the short row is found. Rows of 80 make the part take the checked vector steps
    (its short rows the checked 16-byte steps and scalar tails); rows of 28 put the
    part's average on either side of the switches to the vector steps and to the
    checked blocks (WS_SPMV_VEC_NNZ_<T>, WS_SPMV_CHK_LOOP_NNZ_<T>)."""
    n_cols = 60
    for length in range(1, 24):
        lengths = np.array([long, length, long, long])
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
        indices = np.arange(indptr[-1]) % n_cols
        data = np.ones(indptr[-1], dtype=dtype)
        x = np.ones(n_cols, dtype=dtype)
        A = sp.csr_array((data, indices.astype(itype), indptr), shape=(4, n_cols))
        np.testing.assert_array_equal(sparse_matmul(A, x, n_threads=1), lengths)
        for pos in range(indptr[1], indptr[2]):
            for bad in (n_cols, -1):
                B = A.copy()
                B.indices[pos] = bad
                with pytest.raises(ValueError, match=f"not below {n_cols}"):
                    sparse_matmul(B, x, n_threads=1)


def _long_csr(dtype, itype, n_rows=300, per_row=20, n_cols=50, seed=0) -> sp.csr_array:
    """More nonzeros than one checked block (2048), rows of several lengths."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 2 * per_row, size=n_rows)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    indices = rng.integers(0, n_cols, size=indptr[-1]).astype(itype)
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    return sp.csr_array((data, indices, indptr), shape=(n_rows, n_cols))


def _with_a_bad_index(A: sp.csr_array, n_cols: int = 50):
    """Copies of ``A`` with one column index out of range (>= n_cols or negative), at
    the start, the middle and the end of the stored entries."""
    nnz = A.nnz
    for pos in (0, 1, nnz // 3, nnz // 2, nnz - 2, nnz - 1):
        for bad in (n_cols, -1, 10**6):
            B = A.copy()
            B.indices[pos] = bad
            yield B


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [1, 8, 40])
def test_one_shot_product_finds_a_bad_index_anywhere(dtype, itype, n_tokens):
    A = _long_csr(dtype, itype)
    X = np.ones((50, n_tokens), dtype=dtype)
    X = X[:, 0] if n_tokens == 1 else X
    np.testing.assert_allclose(sparse_matmul(A, X), A @ X, rtol=1e-4)
    for B in _with_a_bad_index(A):
        with pytest.raises(ValueError, match=r"A has a corrupt .*not below 50"):
            sparse_matmul(B, X)
        with pytest.raises(ValueError, match="not below 50"):
            CSR(B)  # a prepared operand is checked whole, at once


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [1, 8, 24])
def test_one_shot_scatter_finds_a_bad_index_anywhere(dtype, itype, n_tokens):
    """X @ W (W scipy CSR) and W_csc @ X scatter from the stored arrays, checking the
    indices in the kernel: a bad one anywhere (any chunk or panel) is a ValueError
    naming the operand, never a write out of bounds."""
    A = _long_csr(dtype, itype)
    X = np.ones((n_tokens, 300), dtype=dtype)
    X = X[0] if n_tokens == 1 else X
    np.testing.assert_allclose(sparse_matmul(X, A), X @ A, rtol=1e-4)
    for B in _with_a_bad_index(A):
        with pytest.raises(ValueError, match=r"B has a corrupt .*not below 50"):
            sparse_matmul(X, B)
        C = sp.csc_array((B.data, B.indices, B.indptr), shape=(50, 300))
        with pytest.raises(ValueError, match=r"A has a corrupt .*not below 50"):
            sparse_matmul(C, X.T)


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_kernel_check_cols(dtype, n_threads):
    """check_cols: 4 for an out-of-range index (in the first of several panels
    too), 0 for a valid structure; N = 0 checks all the same."""
    A = _long_csr(dtype, np.int32, per_row=40, seed=5)
    bounds = row_bounds(A.indptr, n_threads, {})
    for N, panel in ((1, 0), (8, 8), (40, 16), (0, 0)):
        X = np.ones((50, N), dtype=dtype)
        Y = np.empty((A.shape[0], N), dtype=dtype)

        def call(ind, X=X, Y=Y, N=N, panel=panel):
            if N == 1:
                return _spmm.csr_spmv(A.indptr, ind, A.data, X[:, 0], Y[:, 0].copy(), bounds,
                                      n_threads, check_cols=50)
            return _spmm.csr_spmm(A.indptr, ind, A.data, X, Y, bounds, panel, n_threads,
                                  False, check_cols=50)

        assert call(A.indices) == CSR_OK
        for pos in (0, A.nnz // 2, A.nnz - 1):
            bad = A.indices.copy()
            bad[pos] = 50
            assert call(bad) == CSR_BAD_INDEX
    with pytest.raises(ValueError, match="check_cols"):
        _spmm.csr_spmv(A.indptr, A.indices, A.data, np.ones(50, dtype), np.empty(300, dtype),
                       bounds, 1, check_cols=49)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_vectors", [1, 2, 4, 8])
@pytest.mark.parametrize("prefetch", [False, True])
def test_tile_loop_index_check(dtype, itype, n_vectors, prefetch):
    """One-shot rows one tile wide, averaging at least 32 nonzeros, compare each index
    in the tile loop: a bad one anywhere in a row (each accumulator set's slot, the
    last partial set, the prefetch distance's end), too large, negative or at the
    type's extremes, gives 4; valid indices give bitwise the unchecked product."""
    rng = np.random.default_rng(11)
    n_cols = 64
    lengths = rng.integers(33, 48, size=12)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    indices = np.concatenate([rng.choice(n_cols, n, replace=False) for n in lengths]).astype(itype)
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    w = n_vectors * _spmm.TILE_VECTOR_BYTES // np.dtype(dtype).itemsize
    X = rng.standard_normal((n_cols, w)).astype(dtype)
    bounds = np.array([0, 5, 12], dtype=np.int64)

    def call(ind, check):
        Y = np.zeros((12, w), dtype=dtype)
        code = _spmm.csr_spmm(indptr, ind, data, X, Y, bounds, w, 2, prefetch,
                              check_cols=n_cols if check else 0)
        return code, Y

    code, Y = call(indices, True)
    assert code == CSR_OK
    np.testing.assert_array_equal(Y, call(indices, False)[1])
    info = np.iinfo(itype)
    for row in (0, 7, 11):
        p0, p1 = int(indptr[row]), int(indptr[row + 1])
        for pos in (p0, p0 + 1, p0 + 2, p0 + 3, p0 + 9, p1 - 9, p1 - 2, p1 - 1):
            for value in (n_cols, -1, info.max, info.min):
                bad = indices.copy()
                bad[pos] = value
                assert call(bad, True)[0] == CSR_BAD_INDEX, (row, pos, value)


def test_csr_check_can_leave_the_indices_to_the_product():
    ok = np.array([0, 1, 2], dtype=np.int32)
    wild = np.array([0, 99], dtype=np.int32)
    assert _csr_tools.csr_check(ok, wild, 5, 1, check_indices=False) == CSR_OK
    assert _csr_tools.csr_check(ok, wild, 5, 1, check_indices=True) == CSR_BAD_INDEX
    # indptr is still checked:
    assert _csr_tools.csr_check(ok + 1, wild, 5, 1, check_indices=False) == CSR_BAD_START


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_parts", [1, 2, 3, 8, 299, 300, 301, 1000])
def test_kernel_cuts_the_rows_itself(dtype, itype, n_parts):
    """An int row_bounds (one-shot products) partitions the rows in the kernel:
    same result, bitwise, as the balanced_row_bounds array, also with more
    parts than rows."""
    A = _long_csr(dtype, itype, seed=n_parts)
    bounds = balanced_row_bounds(A.indptr, n_parts)
    for N in (1, 8, 40):
        X = np.random.default_rng(N).standard_normal((50, N)).astype(dtype)
        Y_int = np.full((A.shape[0], N), np.nan, dtype=dtype)
        Y_arr = np.full((A.shape[0], N), np.nan, dtype=dtype)
        if N == 1:
            y_int, y_arr = Y_int[:, 0].copy(), Y_arr[:, 0].copy()
            assert _spmm.csr_spmv(A.indptr, A.indices, A.data, X[:, 0].copy(), y_int,
                                  n_parts, 2, check_cols=50) == CSR_OK
            assert _spmm.csr_spmv(A.indptr, A.indices, A.data, X[:, 0].copy(), y_arr,
                                  bounds, 2) == CSR_OK
            Y_int[:, 0], Y_arr[:, 0] = y_int, y_arr
        else:
            assert _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y_int, n_parts, 16, 2,
                                  False, check_cols=50) == CSR_OK
            assert _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y_arr, bounds, 16, 2,
                                  False) == CSR_OK
        np.testing.assert_array_equal(Y_int, Y_arr)
        np.testing.assert_allclose(Y_int, A @ X, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("row_bounds", [0, -1, True, 2.0, "2", None,
                                        np.array([0, 300], dtype=np.int32),
                                        np.array([[0, 300]], dtype=np.int64),
                                        np.array([0, 0, 300, 300], dtype=np.int64)[::2]])
def test_kernel_rejects_badrow_bounds(row_bounds):
    A = _long_csr(np.float64, np.int32)
    X = np.ones((50, 8))
    with pytest.raises(TypeError, match="row_bounds"):
        _spmm.csr_spmm(A.indptr, A.indices, A.data, X, np.empty((300, 8)), row_bounds, 8, 1,
                       False)
    with pytest.raises(TypeError, match="row_bounds"):
        _spmm.csr_spmv(A.indptr, A.indices, A.data, X[:, 0].copy(), np.empty(300),
                       row_bounds, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_parts", [1, 3])
def test_spmv_check_in_parts_of_short_rows(dtype, itype, n_parts):
    """Parts of short rows check their indices per block before use (not in
    the loop): a bad index in the first, a middle or the last block is found,
    a valid matrix gives the unchecked kernel's result bitwise."""
    A = _long_csr(dtype, itype, n_rows=4000, per_row=3, seed=11)  # ~6k nonzeros: 3 blocks
    x = np.random.default_rng(2).standard_normal(50).astype(dtype)
    y_ref, y = np.empty(4000, dtype), np.empty(4000, dtype)
    assert _spmm.csr_spmv(A.indptr, A.indices, A.data, x, y_ref, n_parts, 2) == CSR_OK
    assert _spmm.csr_spmv(A.indptr, A.indices, A.data, x, y, n_parts, 2, check_cols=50) == CSR_OK
    np.testing.assert_array_equal(y, y_ref)
    for pos in (0, 1, A.nnz // 3, A.nnz // 2, A.nnz - 1):
        for bad in (50, -1):
            ind = A.indices.copy()
            ind[pos] = bad
            assert (_spmm.csr_spmv(A.indptr, ind, A.data, x, y, n_parts, 2, check_cols=50)
                    == CSR_BAD_INDEX)


def test_kernel_balanced_bounds_rejects_bad_input():
    indptr = np.array([0, 2, 4, 6], dtype=np.int64)
    np.testing.assert_array_equal(_spmm.balanced_bounds(indptr, 3, 0), [0, 1, 2, 3])
    for n_parts in (0, -1):
        with pytest.raises(ValueError, match="n_parts >= 1"):
            _spmm.balanced_bounds(indptr, n_parts, 0)
    with pytest.raises(ValueError, match="non-empty indptr"):
        _spmm.balanced_bounds(np.array([], dtype=np.int64), 2, 0)


def _plain(dtype=np.float64, itype=np.int32):
    A = _rows_of_every_length(6, 9, dtype, itype)
    return A.indptr, A.indices, A.data, A.shape


def test_plain_csr_nnz_takes_only_what_the_kernels_take_as_is():
    """The fast path's gate: the stored-entry count for plain valid arrays, -1
    (general path) for anything the kernels would misread or that is corrupt."""
    for dtype in (np.float32, np.float64, np.complex64, np.complex128):
        for itype in (np.int32, np.int64):
            ip, ix, d, (m, n) = _plain(dtype, itype)
            assert _spmm.plain_csr_nnz(ip, ix, d, m, n) == ip[-1] == 21
    ip, ix, d, (m, n) = _plain()
    unaligned = np.frombuffer(b"\0" + d.tobytes(), dtype=d.dtype, count=len(d), offset=1)
    bad = {
        "big-endian data": (ip, ix, d.astype(">f8"), m, n),
        "big-endian indices": (ip, ix.astype(">i4"), d, m, n),
        "big-endian indptr": (ip.astype(">i4"), ix, d, m, n),
        "strided indices": (ip, np.repeat(ix, 2)[::2], d, m, n),
        "unaligned data": (ip, ix, unaligned, m, n),
        "mixed index types": (ip.astype(np.int64), ix, d, m, n),
        "int16 indices": (ip.astype(np.int16), ix.astype(np.int16), d, m, n),
        "int data": (ip, ix, d.astype(np.int64), m, n),
        "float16 data": (ip, ix, d.astype(np.float16), m, n),
        "list indices": (ip, list(ix), d, m, n),
        "ndarray subclass": (ip, ix, d.view(np.matrix), m, n),
        "2-D data": (ip, ix, d[None, :], m, n),
        "no columns": (ip, ix, d, m, 0),
        "negative row count": (ip[:0], ix, d, -1, n),
        "indptr too short": (ip[:-1], ix, d, m, n),
        "indptr not from 0": (ip + 1, ix, d, m, n),
        "indptr decreasing": (np.r_[ip[:3], ip[2] - 1, ip[4:]].astype(np.int32), ix, d, m, n),
        "indptr beyond indices": (ip, ix[:-1], d, m, n),
        "indptr beyond data": (ip, ix, d[:-1], m, n),
    }
    for what, args in bad.items():
        assert _spmm.plain_csr_nnz(*args) == -1, what


def _with_duplicates(A: sp.csr_array) -> sp.csr_array:
    """``A`` with every row's entries reversed (unsorted) and its first entry stored twice."""
    rows, data, cols = [], [], []
    for i in range(A.shape[0]):
        lo, hi = A.indptr[i], A.indptr[i + 1]
        c, d = A.indices[lo:hi][::-1], A.data[lo:hi][::-1]
        c, d = np.concatenate([c, c[:1]]), np.concatenate([d, d[:1]])
        cols.append(c), data.append(d), rows.append(len(c))
    indptr = np.concatenate([[0], np.cumsum(rows)]).astype(A.indptr.dtype)
    return sp.csr_array((np.concatenate(data), np.concatenate(cols).astype(A.indices.dtype),
                         indptr), shape=A.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [None, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33,
                                      40, 64, 65, 100])
def test_scatter_every_row_length_and_token_width(dtype, itype, n_tokens):
    """The scatter kernel (Z = B.T @ U) against a complex128 oracle for every panel
    layout (whole vectors, remainders, several panels), with unsorted and duplicate
    entries, bitwise the same for 1-4 threads; and X @ W, W.T-as-CSC @ X.T through
    sparse_matmul (scatter or transpose, by width)."""
    A = _with_duplicates(_rows_of_every_length(40, 97, dtype, itype))
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
    A = CSR(_rows_of_every_length(5, 9, np.float64, np.int32))
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


def test_scatter_chunk_rule():
    """Row chunks only where panels are few and the nonzeros outweigh the copies."""
    pw32 = _scatter.scatter_panel_width(4)
    assert scatter_chunks(10**6, 1000, 1, 4) == 4
    assert scatter_chunks(10**6, 1000, pw32 + 1, 4) == 2     # 2 panels
    assert scatter_chunks(10**6, 1000, 4 * pw32, 4) == 1     # enough panels
    assert scatter_chunks(4 * 1000 * 4 - 1, 1000, 1, 4) == 1  # too few nonzeros
    assert scatter_chunks(10**9, 10**7, 8, 4) == 1           # scratch too big
    assert scatter_chunks(10**6, 1000, 0, 4) == 1            # no tokens (found by hypothesis)
    for bad in (0, 2, 32):
        with pytest.raises(ValueError, match="itemsize must be 4, 8 or 16"):
            _scatter.scatter_panel_width(bad)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_scatter_with_no_tokens(fmt):
    """X @ W with 0 tokens (and W_csc @ X with 0 columns): empty results, indices still
    checked."""
    W = sp.random(30, 20, density=0.2, format=fmt, random_state=1, dtype=np.float32)
    X = np.ones((0, 30), np.float32) if fmt == "csr" else np.ones((20, 0), np.float32)
    args = (X, W) if fmt == "csr" else (W, X)
    got = sparse_matmul(*args)
    assert got.shape == (args[0] @ args[1]).shape and got.size == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, bool,
                                   np.int8, np.int16, np.uint64, np.longdouble])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(300, 200), (1, 500), (500, 1), (0, 5), (5, 0), (40, 40)])
def test_transpose_is_scipys(dtype, itype, shape):
    """csr_transpose gives scipy's B.T.tocsr() arrays exactly (stable: rows of B.T by
    column of B, duplicates in storage order), for unsorted and duplicate entries, empty
    rows, any thread count, values longer than nnz."""
    rng = np.random.default_rng(5)
    B = _with_duplicates(sp.random(*shape, density=0.1, format="csr", random_state=5)
                         .astype(dtype)) if 0 not in shape else sp.csr_array(shape, dtype=dtype)
    indptr, indices = B.indptr.astype(itype), B.indices.astype(itype)
    data = np.concatenate([B.data, rng.standard_normal(3).astype(dtype)])  # spare capacity
    R = sp.csr_array((data[:indptr[-1]], indices, indptr), shape=shape).T.tocsr()
    for t in (1, 2, 3, 8):
        tp, ti, td = _csr_tools.csr_transpose(indptr, indices, data, shape[1], t)
        assert tp.dtype == ti.dtype == np.dtype(itype) and td.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(tp, R.indptr)
        np.testing.assert_array_equal(ti, R.indices)
        np.testing.assert_array_equal(td, R.data)  # (longdouble's padding bytes may differ)


def test_transpose_rejects_bad_operands():
    B = sp.random(30, 20, density=0.2, format="csr", random_state=1)
    with pytest.raises(TypeError, match="32-byte values"):
        _csr_tools.csr_transpose(B.indptr, B.indices, B.data.astype(np.clongdouble), 20, 1)
    with pytest.raises(ValueError, match="exceeds the stored"):
        _csr_tools.csr_transpose(B.indptr, B.indices[:-1], B.data, 20, 1)
    with pytest.raises(TypeError, match="int32 or both int64"):
        _csr_tools.csr_transpose(B.indptr, B.indices.astype(np.int64), B.data, 20, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        _csr_tools.csr_transpose(B.indptr, B.indices, np.repeat(B.data, 2)[::2], 20, 1)
    with pytest.raises(ValueError, match="n_cols must be nonnegative"):
        _csr_tools.csr_transpose(B.indptr, B.indices, B.data, -1, 1)


@pytest.mark.parametrize("dtype", [np.float64, np.clongdouble, bool])
def test_csr_from_csc_and_transpose(dtype):
    """CSR(csc) and CSR.T (compiled transposition, or scipy's for clongdouble)."""
    A = sp.random(50, 30, density=0.2, format="csr", random_state=2).astype(dtype)
    for P in (CSR(A.tocsc()), CSR(A).T.T):
        assert P.shape == A.shape
        np.testing.assert_array_equal(P.to_scipy().toarray(), A.toarray())
    np.testing.assert_array_equal(CSR(A).T.to_scipy().toarray(), A.toarray().T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, np.int8,
                                   np.int16, np.longdouble])
@pytest.mark.parametrize("shape", [(64, 4096), (8, 16384), (1000, 333), (7, 5), (1, 9), (300, 1),
                                   (0, 4), (3, 0)])
def test_transpose_into(dtype, shape):
    rng = np.random.default_rng(0)
    src = (rng.standard_normal(shape) * 100).astype(dtype)
    for t in (1, 2, 3):
        dst = np.full(shape[::-1], 7, dtype=dtype)
        _csr_tools.transpose_into(src, dst, t)
        np.testing.assert_array_equal(dst, src.T)


def test_transpose_into_rejects_bad_operands():
    src = np.ones((4, 6))
    with pytest.raises(ValueError, match="C-contiguous"):
        _csr_tools.transpose_into(src.T, np.empty((4, 6)), 1)
    with pytest.raises(ValueError, match="shape of src.T"):
        _csr_tools.transpose_into(src, np.empty((4, 6)), 1)
    with pytest.raises(ValueError, match="same dtype"):
        _csr_tools.transpose_into(src, np.empty((6, 4), dtype=np.float32), 1)
    dst = np.empty((6, 4))
    dst.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _csr_tools.transpose_into(src, dst, 1)
    with pytest.raises(TypeError, match="32-byte"):
        _csr_tools.transpose_into(src.astype(np.clongdouble), np.empty((6, 4), np.clongdouble), 1)


@pytest.mark.parametrize("side", ["left", "right"])
def test_blocked_copy_of_transposed_operands(side, monkeypatch):
    """X @ W with X C-ordered, and W @ X with X Fortran-ordered, rows 16 KiB apart:
    the dense operand is made C-contiguous by the blocked copy, results as scipy's."""
    calls = []
    real = _csr_tools.transpose_into
    monkeypatch.setattr(_csr_tools, "transpose_into",
                        lambda s, d, t: calls.append(s.shape) or real(s, d, t))
    W = sp.random(4096, 4096, density=0.001, format="csr", random_state=0, dtype=np.float32)
    X = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float32)
    if side == "left":
        got, ref = sparse_matmul(X, W), X @ W
    else:
        got, ref = sparse_matmul(W, X.T), W @ X.T  # X.T is Fortran-ordered
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert calls == [(64, 4096)]
    from wsesparse._drivers import contiguous_operand
    assert contiguous_operand(X[:, :4000].copy().T, np.dtype(np.float32), None).flags.c_contiguous
    assert calls == [(64, 4096)]  # 16000-byte rows: numpy's copy


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_scatter_kernel_check_cols(dtype, n_threads):
    """csr_spmm_t(check_cols=True): 4 for an index out of range in any chunk or panel,
    0 and the right product for a valid structure; without columns it checks all the same."""
    A = _long_csr(dtype, np.int32, per_row=40, seed=5)   # 300 x 50
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


def _duplicates_and_signed_zeros(shape, dtype, itype, seed=0) -> sp.csr_array:
    """Unsorted rows with duplicate columns, empty rows, and -0.0 / +-inf / nan values:
    what distinguishes "zero the row, then add in storage order" from other orders."""
    rng = np.random.default_rng(seed)
    n_rows, n_cols = shape
    lengths = rng.integers(0, 2 * n_cols + 1, n_rows) if n_cols else np.zeros(n_rows, int)
    lengths[::3] = 0
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    nnz = int(indptr[-1])
    indices = rng.integers(0, max(n_cols, 1), nnz).astype(itype)
    data = rng.choice(np.array([-0.0, 0.0, 1.5, -2.25, 1e30, -1e30, np.inf, np.nan]), nnz)
    data = data.astype(dtype)
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.choice(np.array([-0.0, 0.0, 3.0, -1e30]), nnz).astype(dtype)
    return sp.csr_array((data, indices, indptr), shape=shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(37, 23), (1, 1), (5, 1), (1, 300), (0, 4), (3, 0)])
def test_densify_into_is_scipys_toarray_bit_for_bit(dtype, itype, shape):
    A = _duplicates_and_signed_zeros(shape, dtype, itype)
    expected = A.toarray()
    for t in (1, 2, 3):
        D = np.full(shape, 7, dtype=dtype)
        assert _csr_tools.densify_into(A.indptr, A.indices, A.data, D, t) == CSR_OK
        # Bitwise, so that -0.0 and nan payloads count.
        assert D.tobytes() == expected.tobytes()


def test_densify_into_checks_indices_and_operands():
    A = sp.random(6, 5, density=0.5, format="csr", random_state=0)
    D = np.empty((6, 5))
    for bad in (5, -1, 1 << 40):
        indices = A.indices.astype(np.int64)
        indices[-1] = bad
        assert (_csr_tools.densify_into(A.indptr.astype(np.int64), indices, A.data, D, 2)
                == CSR_BAD_INDEX)
    with pytest.raises(ValueError, match="2-D"):
        _csr_tools.densify_into(A.indptr, A.indices, A.data, np.empty(30), 1)
    with pytest.raises(ValueError, match="one entry per output row"):
        _csr_tools.densify_into(A.indptr, A.indices, A.data, np.empty((5, 5)), 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        _csr_tools.densify_into(A.indptr, A.indices, A.data, np.empty((5, 6)).T, 1)
    with pytest.raises(ValueError, match="C-contiguous float64"):
        _csr_tools.densify_into(A.indptr, A.indices, A.data, np.empty((6, 5), np.float32), 1)
    with pytest.raises(ValueError, match="exceeds the stored"):
        _csr_tools.densify_into(A.indptr, A.indices[:-1], A.data, D, 1)
    D.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _csr_tools.densify_into(A.indptr, A.indices, A.data, D, 1)


def test_dense_dispatch_of_a_changed_operand_raises():
    """A CSR sharing its arrays (copy=False) whose indices the caller then breaks:
    the dense path's densify refuses the index instead of writing outside its copy."""
    A = sp.random(40, 30, density=0.5, format="csr", random_state=0)
    W = CSR(A)
    A.indices[7] = 30
    with pytest.raises(ValueError, match="negative or not below 30"):
        sparse_matmul(W, np.ones((30, 4)), method="dense")


def _kb_operands(dtype, itype, n_rows=150, n_cols=900, density=0.3, seed=3):
    """A CSR with unsorted and duplicate column indices in some rows, plus empty rows."""
    rng = np.random.default_rng(seed)
    A = sp.random(n_rows, n_cols, density=density, format="csr", dtype=dtype, random_state=rng)
    A.indices, A.indptr = A.indices.astype(itype), A.indptr.astype(itype)
    for i in range(0, n_rows, 3):
        s = slice(A.indptr[i], A.indptr[i + 1])
        A.indices[s] = rng.permutation(A.indices[s])
    for i in range(1, n_rows, 7):  # a duplicate: the row's first column again at its end
        if A.indptr[i + 1] - A.indptr[i] > 1:
            A.indices[A.indptr[i + 1] - 1] = A.indices[A.indptr[i]]
    A.data[::11] = np.array([np.inf, -0.0, np.nan, 1e30], dtype=dtype)[
        np.arange(len(A.data[::11])) % 4]
    return A


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("kb", [1, 64, 899, 900, 5000])
def test_column_blocks_are_the_row_sums_bit_for_bit(dtype, itype, kb):
    """csr_spmm's kblock sums each row in storage order, as the whole-row kernel does:
    the same bytes, for tile-wide panels (the rest ignore it), checked or not."""
    A = _kb_operands(dtype, itype)
    tile = _spmm.KBLOCK_TILE_VECTORS * _spmm.TILE_VECTOR_BYTES // np.dtype(dtype).itemsize
    rng = np.random.default_rng(4)
    X = rng.standard_normal((A.shape[1], 2 * tile + 5)).astype(dtype)
    X[7, 3] = np.inf
    for threads, prefetch, check in [(1, False, 0), (2, True, 0), (3, False, A.shape[1])]:
        Y0 = np.full((A.shape[0], X.shape[1]), 7, dtype)
        Y1 = Y0.copy()
        args = (A.indptr, A.indices, A.data, X)
        assert _spmm.csr_spmm(*args, Y0, 2 * threads, tile, threads, prefetch,
                              check_cols=check, pack=True) == CSR_OK
        assert _spmm.csr_spmm(*args, Y1, 2 * threads, tile, threads, prefetch,
                              check_cols=check, pack=True, kblock=kb) == CSR_OK
        assert Y1.tobytes() == Y0.tobytes()
    with np.errstate(invalid="ignore", over="ignore"):
        expected = A.astype(np.float64) @ X.astype(np.float64)
    np.testing.assert_allclose(Y1, expected, rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-2)


def test_column_blocks_check_indices_first():
    A = _kb_operands(np.float32, np.int32)
    tile = _spmm.KBLOCK_TILE_VECTORS * _spmm.TILE_VECTOR_BYTES // 4
    X = np.ones((A.shape[1], tile), np.float32)
    Y = np.zeros((A.shape[0], tile), np.float32)
    for bad in (A.shape[1], -1):
        B = A.copy()
        B.indices[B.indptr[40] + 1] = bad
        assert _spmm.csr_spmm(B.indptr, B.indices, B.data, X, Y, 2, tile, 2, False,
                              check_cols=A.shape[1], kblock=128) == CSR_BAD_INDEX


def test_products_take_column_blocks_where_the_rule_says(monkeypatch):
    """With a small L2 the rule picks blocks for these shapes; sparse_matmul then
    gives what the kernel gives for tile-wide panels without blocks, one-shot and
    prepared (other panel widths sum in other orders: only close)."""
    from wsesparse import _drivers
    tile_bytes = _hardware.current().kblock_tile_bytes  # the build's tile
    small = _profile(l2_bytes=256 * tile_bytes)  # kb = 128 columns
    for dtype in (np.float32, np.float64):
        monkeypatch.setattr(_hardware, "_current", small)
        A = _kb_operands(dtype, np.int32, n_rows=130, n_cols=2000, density=0.8)
        A.data[::11] = 1.5
        tile = tile_bytes // np.dtype(dtype).itemsize
        X = np.random.default_rng(5).standard_normal((2000, 2 * tile)).astype(dtype)
        assert k_block(A.shape, A.nnz, X.shape[1], np.dtype(dtype), small) == 128
        whole_rows = np.empty((130, 2 * tile), dtype)
        assert _spmm.csr_spmm(A.indptr, A.indices, A.data, X, whole_rows, 2, tile, 2,
                              False) == CSR_OK
        for Y in (sparse_matmul(A, X, method="sparse"),
                  sparse_matmul(CSR(A), X, method="sparse")):
            assert Y.tobytes() == whole_rows.tobytes()
        monkeypatch.setattr(_drivers, "k_block", lambda *args: 0)
        np.testing.assert_allclose(sparse_matmul(A, X, method="sparse"), whole_rows,
                                   rtol=1e-4, atol=1e-3)
        monkeypatch.undo()


@pytest.mark.parametrize("vector_bytes", [32, 64])
@pytest.mark.parametrize("l2", [512 << 10, 1 << 20, 2 << 20])
def test_column_block_rule(vector_bytes, l2):
    """Both builds' tiles (AVX2 / AVX-512) on caches of several sizes."""
    hw = HardwareProfile(l2_bytes=l2, l3_bytes=32 << 20, vector_bytes=vector_bytes)
    f32, c64 = np.dtype(np.float32), np.dtype(np.complex64)
    kb = l2 // 2 // hw.kblock_tile_bytes
    tile = hw.kblock_tile_bytes // 4
    big = 8 * kb  # a K x tile slice of X four times L2
    dense_rows = (64, big)
    assert k_block(dense_rows, 64 * big // 2, tile, f32, hw) == kb
    assert k_block(dense_rows, 64 * big // 2, tile - 1, f32, hw) == 0  # narrower than a tile
    assert k_block(dense_rows, 64 * big // 2, tile, c64, hw) == 0  # complex: whole rows
    assert k_block((64, kb), 64 * kb // 2, tile, f32, hw) == 0  # X's slice fits
    assert k_block(dense_rows, 0, tile, f32, hw) == 0
    # nonzeros per row and block: 95 no, 96 yes; with a slice of 2 L2, 256 needed
    assert k_block(dense_rows, 64 * 8 * 95, tile, f32, hw) == 0
    assert k_block(dense_rows, 64 * 8 * 96, tile, f32, hw) == kb
    assert k_block((64, 4 * kb), 64 * 4 * 200, tile, f32, hw) == 0
    assert k_block((64, 4 * kb), 64 * 4 * 256, tile, f32, hw) == kb
