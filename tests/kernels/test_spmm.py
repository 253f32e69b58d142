"""``wsesparse._kernels._spmm``, the gather kernels (``csr_spmv``, ``csr_spmm``): every
row-length / token-width path against a float64 oracle, panels, packing, streaming stores,
column blocks, the one-shot products' index checks, and the kernels' own cheap re-checks of
what they rely on.

The Python layer validates everything first; these checks make a wrong call
from inside the package fail with an exception instead of reading memory it
does not own.
"""

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from kernel_helpers import DTYPES, long_csr, rows_of_every_length, with_a_bad_index
from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _spmm
from wsesparse._kernels._csr_tools import CSR_BAD_INDEX, CSR_OK
from wsesparse import _hardware
from wsesparse import _thresholds as th
from wsesparse._drivers import balanced_row_bounds, k_block, panel_width, row_bounds
from wsesparse._hardware import HardwareProfile


def _kwarg_spy(monkeypatch, kernel: str, keyword: str) -> list:
    """The values of ``keyword`` that the drivers pass to ``_spmm.<kernel>``, in call order
    (the kernel still runs)."""
    seen = []
    real = getattr(_spmm, kernel)

    def spy(*args, **kwargs):
        seen.append(kwargs[keyword])
        return real(*args, **kwargs)

    monkeypatch.setattr(_spmm, kernel, spy)
    return seen


def _profile(vector_bytes=None, **changes) -> HardwareProfile:
    """This machine's profile with ``changes`` (cache sizes, fast_l3, ...)."""
    from dataclasses import replace
    hw = _hardware.current()
    if vector_bytes is not None:
        changes["vector_bytes"] = vector_bytes
    return replace(hw, **changes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 63,
                                      64, 65, 100, 128, 129, 200])
def test_every_row_length_and_token_width(dtype, itype, n_tokens):
    A = rows_of_every_length(40, 97, dtype, itype)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((97, n_tokens)).astype(dtype)
    X = X[:, 0] if n_tokens == 1 else X
    expected = A.astype(np.complex128).toarray() @ X.astype(np.complex128)
    got = sparse_matmul(CSR(A), X, method="sparse")
    assert got.dtype == np.dtype(dtype) and got.shape == expected.shape
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def _args(dtype=np.float64, itype=np.int32, n_tokens=4):
    A = CSR(rows_of_every_length(5, 9, dtype, itype))
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("prefetch", [False, True])
def test_several_panels_per_sweep(dtype, prefetch):
    """Token columns swept in panels narrower than N (what big K and N get)."""
    A = CSR(rows_of_every_length(60, 200, dtype, np.int32, seed=3))
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
    A = CSR(rows_of_every_length(60, 200, dtype, np.int32, seed=5))
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
    A = CSR(rows_of_every_length(40, 150, dtype, np.int32, seed=7))
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
    asked = _kwarg_spy(monkeypatch, "csr_spmm", "stream")
    monkeypatch.setattr(_hardware, "_current", _profile(l3_bytes=4 * 300 * 64 * 4))
    for S in (A, CSR(A)):
        np.testing.assert_array_equal(sparse_matmul(S, X, method="sparse"), expected)
    # One column short of the bound: plain stores.
    np.testing.assert_array_equal(sparse_matmul(A, X[:, :63], method="sparse"), narrower)
    long_rows = sp.random(300, 200, density=0.5, format="csr", random_state=3, dtype=np.float32)
    sparse_matmul(long_rows, X, method="sparse")
    assert asked == [True, True, False, False]


def test_one_shot_spmv_says_streamed_beyond_l3(monkeypatch):
    """One-shot SpMV passes ``streamed`` where the indices and values exceed L3 (then the
    kernels may check those indices in the row loops: int64 ones without AVX-512, those
    of rows averaging SPMV_CHK_LOOP_ROWS_MIN to _MAX on AMD with it), never for a
    prepared ``CSR``; results and errors are the same either way."""
    rng = np.random.default_rng(3)
    A = sp.random_array((3000, 2000), density=0.004, format="csr", rng=rng)
    assert A.indices.dtype == np.int32
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)),
                       shape=A.shape)
    x = rng.standard_normal(2000)
    expected = sparse_matmul(A, x)
    asked = _kwarg_spy(monkeypatch, "csr_spmv", "streamed")
    bytes32, bytes64 = A.nnz * 12, A.nnz * 16  # the indices and values of A, A64
    for l3, want64, want32 in ((bytes32, True, True), (bytes32 + 1, True, False),
                               (bytes64 + 1, False, False)):
        monkeypatch.setattr(_hardware, "_current", _profile(l3_bytes=l3))
        asked.clear()
        for S in (A64, A, CSR(A64)):
            assert sparse_matmul(S, x).tobytes() == expected.tobytes()
        assert asked == [want64, want32, False]
        for S in (A64, A):
            bad = S.copy()
            bad.indices[S.nnz // 2] = 2000
            with pytest.raises(ValueError, match="not below 2000"):
                sparse_matmul(bad, x)


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
    A = CSR(rows_of_every_length(60, 200, dtype, np.int32, seed=5))
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


# -- one-shot products: the kernels check the column indices as they go ------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("max_len", [12, 40, 70])
@pytest.mark.parametrize("one_shot", [False, True])
def test_spmv_every_row_length(dtype, itype, max_len, one_shot):
    """Parts whose rows average under WS_SPMV_VEC_NNZ_<T> (24 float32, 16
    float64) run the scalar loop with the vector rows called out (max_len 12:
    no vector rows; 40: float32), others the vector steps inlined with scalar
    short rows and tails; prepared (unchecked) and one-shot (checked) alike."""
    A = rows_of_every_length(max_len, 97, dtype, itype, seed=max_len)
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
    A = rows_of_every_length(70, n_cols, dtype, np.int32, seed=7)
    x = np.random.default_rng(3).standard_normal(n_cols).astype(dtype)
    got = sparse_matmul(A if one_shot else CSR(A), x)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, A.toarray() @ x, rtol=tol, atol=tol)
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)),
                       shape=A.shape)
    got64 = sparse_matmul(A64 if one_shot else CSR(A64), x)
    assert got64.tobytes() == got.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("far", [False, True])
def test_spmv_blocks_give_the_same_bits(dtype, itype, far):
    """csr_spmv(blocks=True) (prepared short rows in blocks of rows, each block's indices
    prefetched first; complex values ignore it) gives the plain kernel's bits for every
    row length, partition and thread count, x in or beyond SPMV_FAR_X_BYTES. (A part's
    rows take the vector steps or not by the part's mean length, so the reference is the
    plain kernel on the same parts.)"""
    itemsize = np.dtype(dtype).itemsize
    n_cols = _spmm.SPMV_FAR_X_BYTES // itemsize + 1 if far else 300
    rng = np.random.default_rng(5)
    every = rows_of_every_length(_spmm.SPMV_FAR_VEC_NNZ + 10, n_cols, dtype, itype, seed=11)
    # thousands of rows of 0-3 nonzeros: several 64-row blocks per part in every build
    # (gather builds take the vector steps from 4 per row on)
    lengths = rng.integers(0, 4, size=3000)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    short = sp.csr_array((rng.standard_normal(int(indptr[-1])).astype(dtype),
                          rng.integers(0, n_cols, size=int(indptr[-1])).astype(itype), indptr),
                         shape=(3000, n_cols))
    x = rng.standard_normal(n_cols).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(n_cols).astype(dtype)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    for A in (every, short):
        n = A.shape[0]
        for parts, threads in ((1, 1), (3, 2), (8, 2), (n, 2)):
            plain, y = np.empty(n, dtype), np.full(n, np.nan, dtype)
            _spmm.csr_spmv(A.indptr, A.indices, A.data, x, plain, parts, threads)
            np.testing.assert_allclose(plain, A @ x, rtol=tol, atol=tol)
            assert _spmm.csr_spmv(A.indptr, A.indices, A.data, x, y, parts, threads,
                                  blocks=True) == 0
            assert y.tobytes() == plain.tobytes()


def test_prepared_spmv_takes_blocks_for_banded_rows_from_dram(monkeypatch):
    """spmv_blocks: blocks only where the matrix exceeds L3, x exceeds SPMV_FAR_X_BYTES
    and 64-row blocks read x in runs (a band, not the same band with its columns
    permuted), in builds that do not gather x; the decision is kept per value size and
    reaches the kernel, and the product is scipy's."""
    from wsesparse import _drivers
    n = _spmm.SPMV_FAR_X_BYTES // 2   # x beyond the threshold in float32 too
    band = sp.diags([1.0, -2.0, 1.0, 0.5], [-3, 0, 1, 40], shape=(n, n), format="csr")
    spread = band[:, np.random.default_rng(0).permutation(n)].tocsr()
    small_l3 = HardwareProfile(l2_bytes=1 << 20, l3_bytes=1 << 16, vector_bytes=64)
    large_l3 = HardwareProfile(l2_bytes=1 << 20, l3_bytes=1 << 30, vector_bytes=64)
    args = (band.indptr, band.indices, band.shape, band.nnz)
    assert _drivers.spmv_blocks(*args, 8, small_l3) == (not _spmm.SPMV_GATHER)
    monkeypatch.setattr(_spmm, "SPMV_GATHER", False)   # (what the rest looks at)
    assert _drivers.spmv_blocks(*args, 8, small_l3)
    assert not _drivers.spmv_blocks(*args, 8, large_l3)          # the matrix fits L3
    assert not _drivers.spmv_blocks(spread.indptr, spread.indices, spread.shape,
                                    spread.nnz, 8, small_l3)    # x read at random
    narrow = band[:, :_spmm.SPMV_FAR_X_BYTES // 8].tocsr()        # x within the threshold
    assert not _drivers.spmv_blocks(narrow.indptr, narrow.indices, narrow.shape,
                                    narrow.nnz, 8, small_l3)
    monkeypatch.setattr(_hardware, "current", lambda: small_l3)
    from wsesparse import _thresholds as th
    monkeypatch.setattr(th, "SPMV_CODED_AFTER", 1 << 62)   # (4 values: codes would take it)
    P = CSR(band.astype(np.float32))
    x = np.random.default_rng(1).standard_normal(n)
    calls, kernel_blocks = [], []
    real, real_spmv = _drivers.spmv_blocks, _spmm.csr_spmv
    monkeypatch.setattr(_drivers, "spmv_blocks", lambda *a: calls.append(a) or real(*a))

    def spmv(*a, **kw):
        kernel_blocks.append(kw.get("blocks"))
        return real_spmv(*a, **kw)
    monkeypatch.setattr(_spmm, "csr_spmv", spmv)
    for _ in range(3):   # float64 x: the values cast to float64
        np.testing.assert_allclose(sparse_matmul(P, x), band.astype(np.float32) @ x,
                                   rtol=1e-12, atol=1e-12)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(sparse_matmul(P, x32), band.astype(np.float32) @ x32,
                               rtol=1e-5, atol=1e-5)
    assert [a[4] for a in calls] == [8, 4]   # once per value size, then kept
    assert P._bounds[("blocks", 8)] and P._bounds[("blocks", 4)]
    assert kernel_blocks == [True] * 4


def _coded_matrix(dtype, itype, n_rows=3000, seed=5):
    """Rows of 0 to SPMV_FAR_VEC_NNZ - 1 nonzeros (each length at least once), x beyond
    SPMV_FAR_X_BYTES, values from 40 distinct ones with -0.0, 0.0, inf and NaN among them."""
    rng = np.random.default_rng(seed)
    itemsize = np.dtype(dtype).itemsize
    n_cols = _spmm.SPMV_FAR_X_BYTES // itemsize + 7
    lengths = np.concatenate([np.arange(_spmm.SPMV_FAR_VEC_NNZ),
                              rng.integers(0, 12, n_rows - _spmm.SPMV_FAR_VEC_NNZ)])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    nnz = int(indptr[-1])
    values = np.concatenate([rng.standard_normal(36), [-0.0, 0.0, np.inf, np.nan]])
    data = values[rng.integers(0, len(values), nnz)].astype(dtype)
    return sp.csr_array((data, rng.integers(0, n_cols, nnz).astype(itype), indptr),
                        shape=(n_rows, n_cols))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_spmv_coded_gives_the_plain_kernels_bits(dtype, itype):
    """csr_spmv_coded (values as one-byte codes into a table) sums every row as csr_spmv
    does where x is beyond SPMV_FAR_X_BYTES and rows are under SPMV_FAR_VEC_NNZ: the same
    bytes for every partition and thread count, NaN and signed zeros included (builds that
    gather x sum otherwise: there only scipy's values to rounding)."""
    from wsesparse._kernels import _csr_tools
    A = _coded_matrix(dtype, itype)
    codes, table = _csr_tools.value_codes(A.data)
    x = np.random.default_rng(2).standard_normal(A.shape[1]).astype(dtype)
    x[A.indices[:50]] = np.inf   # (inf * 0.0 and inf - inf: NaNs in some rows)
    n = A.shape[0]
    for parts, threads in ((1, 1), (3, 2), (8, 2), (n, 2)):
        plain, y = np.empty(n, dtype), np.full(n, 7, dtype)
        _spmm.csr_spmv(A.indptr, A.indices, A.data, x, plain, parts, threads)
        _spmm.csr_spmv_coded(A.indptr, A.indices, codes, table, x, y, parts, threads)
        if _spmm.SPMV_GATHER:
            np.testing.assert_allclose(y, plain, rtol=1e-5)
        else:
            assert y.tobytes() == plain.tobytes()
    with np.errstate(invalid="ignore"):
        ref = A.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(y, ref, rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)


def test_spmv_coded_refuses_what_it_cannot_read():
    """The kernel's own checks: a table of 256 real values of x's dtype (so that no code
    reads past it), uint8 codes and column indices for every stored entry."""
    A = _coded_matrix(np.float64, np.int32, n_rows=100)
    from wsesparse._kernels import _csr_tools
    codes, table = _csr_tools.value_codes(A.data)
    x, y = np.ones(A.shape[1]), np.empty(A.shape[0])
    ip, ix = A.indptr, A.indices
    with pytest.raises(ValueError, match="256 entries"):
        _spmm.csr_spmv_coded(ip, ix, codes, table[:255], x, y, 1, 1)
    with pytest.raises(TypeError, match="float32 or float64 only"):
        _spmm.csr_spmv_coded(ip, ix, codes, table.astype(complex), x.astype(complex),
                             y.astype(complex), 1, 1)
    with pytest.raises(TypeError, match="^table has dtype int64"):
        _spmm.csr_spmv_coded(ip, ix, codes, np.zeros(256, np.int64), x, y, 1, 1)
    with pytest.raises(ValueError, match="^table must be C-contiguous"):
        _spmm.csr_spmv_coded(ip, ix, codes, np.repeat(table, 2)[::2], x, y, 1, 1)
    with pytest.raises(ValueError, match="dense operands"):
        _spmm.csr_spmv_coded(ip, ix, codes, table, x.astype(np.float32), y, 1, 1)
    with pytest.raises(TypeError, match="uint8"):
        _spmm.csr_spmv_coded(ip, ix, codes.astype(np.int8), table, x, y, 1, 1)
    with pytest.raises(ValueError, match="indptr.-1. entries"):
        _spmm.csr_spmv_coded(ip, ix, codes[:-1], table, x, y, 1, 1)
    with pytest.raises(ValueError, match="indptr.-1. entries"):
        _spmm.csr_spmv_coded(ip, ix[:-1], codes, table, x, y, 1, 1)
    with pytest.raises(TypeError, match="must both be int32 or both int64"):
        _spmm.csr_spmv_coded(ip.astype(np.int64), ix, codes, table, x, y, 1, 1)


def test_prepared_spmv_takes_value_codes_from_dram(monkeypatch):
    """spmv_coded: codes only where the matrix exceeds L3, x exceeds SPMV_FAR_X_BYTES, every
    row is under SPMV_FAR_VEC_NNZ, the values are real with at most 256 distinct bit
    patterns, in builds that do not gather x. A prepared CSR makes them on its call after
    SPMV_CODED_AFTER (once per value size), then every SpMV reads them: the same bytes as
    before, transposes and several columns untouched."""
    from wsesparse import _drivers
    from wsesparse import _thresholds as th
    A = _coded_matrix(np.float64, np.int32)
    small_l3 = HardwareProfile(l2_bytes=1 << 20, l3_bytes=1 << 16, vector_bytes=32)
    large_l3 = HardwareProfile(l2_bytes=1 << 20, l3_bytes=1 << 30, vector_bytes=32)
    args = (A.indptr, A.indices, A.data, A.shape, A.nnz)
    monkeypatch.setattr(_spmm, "SPMV_GATHER", False)
    codes, table = _drivers.spmv_coded(*args, small_l3)
    assert table[codes].tobytes() == A.data.tobytes()
    assert _drivers.spmv_coded(*args, large_l3) is None                 # fits L3
    assert _drivers.spmv_coded(A.indptr, A.indices, A.data.astype(complex), A.shape,
                               A.nnz, small_l3) is None                  # complex
    many = np.arange(A.nnz, dtype=np.float64)
    assert _drivers.spmv_coded(A.indptr, A.indices, many, A.shape, A.nnz, small_l3) is None
    long_row = sp.random_array((2, A.shape[1]), density=0.001, format="csr", rng=0)
    long_row.data[:] = 1.0
    assert long_row.indptr[1] >= _spmm.SPMV_FAR_VEC_NNZ
    assert _drivers.spmv_coded(long_row.indptr, long_row.indices, long_row.data,
                               long_row.shape, long_row.nnz, small_l3) is None
    narrow = A[:, :_spmm.SPMV_FAR_X_BYTES // 8].tocsr()
    assert _drivers.spmv_coded(narrow.indptr, narrow.indices, narrow.data, narrow.shape,
                               narrow.nnz, small_l3) is None             # x within L2
    monkeypatch.setattr(_spmm, "SPMV_GATHER", True)
    assert _drivers.spmv_coded(*args, small_l3) is None
    monkeypatch.undo()

    monkeypatch.setattr(_hardware, "current", lambda: small_l3)
    P = CSR(A)
    x = np.random.default_rng(1).standard_normal(A.shape[1])
    plain = np.empty(A.shape[0])
    _spmm.csr_spmv(A.indptr, A.indices, A.data, x, plain, 1, 1)
    calls, coded_calls = [], []
    real, real_coded = _drivers.spmv_coded, _spmm.csr_spmv_coded
    monkeypatch.setattr(_drivers, "spmv_coded", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(_spmm, "csr_spmv_coded",
                        lambda *a: coded_calls.append(a) or real_coded(*a))
    expect_coded = not _spmm.SPMV_GATHER
    for k in range(th.SPMV_CODED_AFTER + 3):
        y = P @ x
        assert len(calls) == (k >= th.SPMV_CODED_AFTER)
        assert len(coded_calls) == (max(0, k - th.SPMV_CODED_AFTER + 1) if expect_coded else 0)
        if expect_coded:
            assert y.tobytes() == plain.tobytes()
        else:
            np.testing.assert_allclose(y, plain, rtol=1e-12, atol=1e-12)
    assert (type(P._bounds[("coded", "d")]) is tuple) == expect_coded
    n_coded = len(coded_calls)
    u = np.random.default_rng(3).standard_normal(A.shape[0])
    np.testing.assert_allclose(P.rmatvec(u), A.T @ u, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(P @ np.stack([x, x], axis=1), np.stack([plain] * 2, axis=1),
                               rtol=1e-12, atol=1e-12)
    assert len(coded_calls) == n_coded
    import copy
    assert ("coded", "d") not in copy.copy(P)._bounds   # (caches are not copied)


def test_value_codes_of_one_dtype_serve_that_dtype_only(monkeypatch):
    """A float32 operand's SpMVs with float64 x make float64 codes; its complex64 products
    (8-byte values too) take the plain kernel and give scipy's result, before and after
    (the codes were keyed by value size, and complex64 products then failed: a review)."""
    from wsesparse import _thresholds as th
    monkeypatch.setattr(_hardware, "current", lambda: HardwareProfile(
        l2_bytes=1 << 20, l3_bytes=1 << 16, vector_bytes=32))
    monkeypatch.setattr(_spmm, "SPMV_GATHER", False)
    A = _coded_matrix(np.float32, np.int32)
    A.data[~np.isfinite(A.data)] = 1.0
    P = CSR(A)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(A.shape[1])
    xc = (x + 1j * rng.standard_normal(A.shape[1])).astype(np.complex64)
    for _ in range(th.SPMV_CODED_AFTER + 1):
        np.testing.assert_allclose(P @ x, A.astype(np.float64) @ x, rtol=1e-12, atol=1e-12)
    assert type(P._bounds[("coded", "d")]) is tuple
    for _ in range(th.SPMV_CODED_AFTER + 2):
        np.testing.assert_allclose(P @ xc, A.astype(np.complex64) @ xc, rtol=1e-4, atol=1e-4)
    assert P._bounds.get(("coded", "F")) is False
    assert type(P._bounds[("coded", "d")]) is tuple


def test_value_codes_of_unaligned_values(monkeypatch):
    """Values in a buffer off their alignment: the operand keeps an aligned copy (the
    kernels read aligned values; a UBSan build reported the misaligned loads), and the
    codes of such values are made from an aligned copy (from the third SpMV on, every
    product raised TypeError: a review); every product the same bytes. (The build's own
    SPMV_GATHER for the products: where it gathers, the coded rows, one chain each, would
    sum otherwise, and the products keep the plain kernel.)"""
    from wsesparse import _thresholds as th
    monkeypatch.setattr(_hardware, "current", lambda: HardwareProfile(
        l2_bytes=1 << 20, l3_bytes=1 << 16, vector_bytes=32))
    A = _coded_matrix(np.float64, np.int32)
    buf = np.zeros(A.nnz * 8 + 1, np.uint8)
    data = np.frombuffer(buf.data, np.float64, count=A.nnz, offset=1)
    data[...] = A.data
    assert not data.flags.aligned
    P = CSR.from_arrays(data, A.indices, A.indptr, A.shape)
    assert P.data.flags.aligned and P.data.tobytes() == A.data.tobytes()
    x = np.random.default_rng(4).standard_normal(A.shape[1])
    first = P @ x
    for _ in range(th.SPMV_CODED_AFTER + 2):
        assert (P @ x).tobytes() == first.tobytes()
    assert (type(P._bounds[("coded", "d")]) is tuple) == (not _spmm.SPMV_GATHER)
    from wsesparse import _drivers
    monkeypatch.setattr(_spmm, "SPMV_GATHER", False)   # (the decision alone, no product)
    codes, table = _drivers.spmv_coded(A.indptr, A.indices, data, A.shape, A.nnz,
                                       _hardware.current())
    assert table[codes].tobytes() == A.data.tobytes()


def test_value_codes_are_made_on_the_products_threads(monkeypatch):
    """The codes are made on the call's ``n_threads`` at most (a review: on every core)."""
    from wsesparse import _drivers
    from wsesparse import _thresholds as th
    from wsesparse._kernels import _csr_tools
    monkeypatch.setattr(_hardware, "current", lambda: HardwareProfile(
        l2_bytes=1 << 20, l3_bytes=1 << 16, vector_bytes=32))
    monkeypatch.setattr(_spmm, "SPMV_GATHER", False)
    seen = []
    real = _csr_tools.value_codes
    monkeypatch.setattr(_csr_tools, "value_codes", lambda v, t: seen.append(t) or real(v, t))
    A = _coded_matrix(np.float64, np.int32)
    P = CSR(A)
    x = np.ones(A.shape[1])
    for _ in range(th.SPMV_CODED_AFTER + 1):
        sparse_matmul(P, x, n_threads=1)
    assert seen == [1]
    assert _drivers.spmv_coded(A.indptr, A.indices, A.data, A.shape, A.nnz,
                               _hardware.current(), 2) is not None and seen[-1] <= 2


def _chain(data, x_at, fused: bool) -> float:
    """One row summed in storage order, each step rounded once (an FMA) or twice."""
    s = 0.0
    for a, b in zip(data.tolist(), x_at.tolist()):
        s = (float(Fraction(a) * Fraction(b) + Fraction(s)) if fused
             else float(Fraction(float(Fraction(a) * Fraction(b))) + Fraction(s)))
    return s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("one_shot", [False, True])
def test_spmv_far_x_every_row_length(dtype, one_shot):
    """x over SPMV_FAR_X_BYTES: rows shorter than SPMV_FAR_VEC_NNZ are one scalar chain
    (builds without gathers), longer ones the vector steps. Every length against
    scipy; the same bits one-shot and prepared, for int64 indices, on two threads."""
    n_cols = _spmm.SPMV_FAR_X_BYTES // np.dtype(dtype).itemsize + 1
    long = _spmm.SPMV_FAR_VEC_NNZ
    A = rows_of_every_length(long + 10, n_cols, dtype, np.int32, seed=5)
    x = np.random.default_rng(4).standard_normal(n_cols).astype(dtype)
    got = sparse_matmul(A if one_shot else CSR(A), x, n_threads=1)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, A.toarray() @ x, rtol=tol, atol=tol)
    _assert_the_same_bits_everywhere(A, x, got)
    if dtype == np.float64 and not _spmm.SPMV_GATHER:
        rows = [(A.data[A.indptr[i]:A.indptr[i + 1]], x[A.indices[A.indptr[i]:A.indptr[i + 1]]])
                for i in range(long)]
        # The build sums with FMAs or without (portable builds): one of the two, every row.
        assert any(all(got[i] == _chain(d, xa, fused) for i, (d, xa) in enumerate(rows))
                   for fused in (True, False))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_one_shot_spmv_wide_x_finds_a_bad_index_anywhere(dtype, itype):
    A = long_csr(dtype, itype, n_cols=20_000)
    x = np.ones(20_000, dtype=dtype)
    np.testing.assert_allclose(sparse_matmul(A, x), A @ x, rtol=1e-4)
    for B in with_a_bad_index(A, 20_000):
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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_tokens", [1, 8, 40])
def test_one_shot_product_finds_a_bad_index_anywhere(dtype, itype, n_tokens):
    A = long_csr(dtype, itype)
    X = np.ones((50, n_tokens), dtype=dtype)
    X = X[:, 0] if n_tokens == 1 else X
    np.testing.assert_allclose(sparse_matmul(A, X), A @ X, rtol=1e-4)
    for B in with_a_bad_index(A):
        with pytest.raises(ValueError, match=r"A has a corrupt .*not below 50"):
            sparse_matmul(B, X)
        with pytest.raises(ValueError, match="not below 50"):
            CSR(B)  # a prepared operand is checked whole, at once


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_kernel_check_cols(dtype, n_threads):
    """check_cols: 4 for an out-of-range index (in the first of several panels
    too), 0 for a valid structure; N = 0 checks all the same."""
    A = long_csr(dtype, np.int32, per_row=40, seed=5)
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
@pytest.mark.parametrize("n_vectors", [0.5, 1, 2, 4, 8])
@pytest.mark.parametrize("prefetch", [False, True])
def test_tile_loop_index_check(dtype, itype, n_vectors, prefetch):
    """One-shot rows one tile wide (or half a tile: one 32-byte vector where tiles
    are 64 bytes), averaging at least 32 nonzeros, compare each index in the tile
    loop: a bad one anywhere in a row (each accumulator set's slot, the last partial
    set, the prefetch distance's end), too large, negative or at the type's extremes,
    gives 4; valid indices give bitwise the unchecked product."""
    rng = np.random.default_rng(11)
    n_cols = 64
    lengths = rng.integers(33, 48, size=12)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    indices = np.concatenate([rng.choice(n_cols, n, replace=False) for n in lengths]).astype(itype)
    data = rng.standard_normal(indptr[-1]).astype(dtype)
    w = int(n_vectors * _spmm.TILE_VECTOR_BYTES) // np.dtype(dtype).itemsize
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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_parts", [1, 2, 3, 8, 299, 300, 301, 1000])
def test_kernel_cuts_the_rows_itself(dtype, itype, n_parts):
    """An int row_bounds (one-shot products) partitions the rows in the kernel:
    same result, bitwise, as the balanced_row_bounds array, also with more
    parts than rows."""
    A = long_csr(dtype, itype, seed=n_parts)
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


@pytest.mark.parametrize("n_threads", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("n_parts", [0, 1, 2, 7, 13, 40, 301])
@pytest.mark.parametrize("spin", [0, 2000])
def test_part_queues_hand_out_every_part_once(n_parts, n_threads, spin):
    """The queues of the SpMV and SpMM sweeps (_part_queues.h) give every part to exactly
    one take, with more threads than parts or cores (the late threads find their queues
    taken), and with one thread all parts to thread 0."""
    takes, taker = _spmm.part_takes(n_parts, n_threads, spin)
    np.testing.assert_array_equal(takes, np.ones(n_parts, dtype=np.int64))
    assert ((taker >= 0) & (taker < n_threads)).all()
    if n_threads == 1:
        np.testing.assert_array_equal(taker, np.zeros(n_parts, dtype=np.int64))


def test_part_takes_rejects_bad_counts():
    for args in ((-1, 2), (4, 0), (4, 2, -1)):
        with pytest.raises(ValueError, match="n_parts"):
            _spmm.part_takes(*args)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("n_vectors", [1, 8])
def test_part_trace_records_each_part_of_one_sweep(n_threads, n_vectors):
    """Armed, the next sweep records which thread took each part and when (within the
    sweep, which ends by the join); the trace then stays as it was until armed again."""
    A = long_csr(np.float64, np.int32, seed=4)
    X = np.random.default_rng(0).standard_normal((50, n_vectors))
    n_parts = 7
    bounds = balanced_row_bounds(A.indptr, n_parts)

    def call():
        if n_vectors == 1:
            _spmm.csr_spmv(A.indptr, A.indices, A.data, X[:, 0].copy(), np.empty(300),
                           bounds, n_threads)
        else:
            _spmm.csr_spmm(A.indptr, A.indices, A.data, X, np.empty((300, n_vectors)),
                           bounds, n_vectors, n_threads, False)
    _spmm.part_trace_arm(n_parts)
    assert _spmm.part_trace() is None
    call()
    parts, joined, phases = _spmm.part_trace()
    assert parts.shape == (n_parts, 3)
    assert phases == (n_parts, n_parts)  # (one phase)
    assert ((parts[:, 0] >= 0) & (parts[:, 0] < n_threads)).all()
    assert (parts[:, 1] >= 0).all() and (parts[:, 1] <= parts[:, 2]).all()
    assert (parts[:, 2] <= joined).all()
    call()  # (unarmed: not recorded)
    again, joined_again, _ = _spmm.part_trace()
    np.testing.assert_array_equal(again, parts)
    assert joined_again == joined
    _spmm.part_trace_arm(n_parts - 1)  # (too few parts: the sweep takes it, records none)
    call()
    assert _spmm.part_trace() is None
    with pytest.raises(ValueError, match="capacity"):
        _spmm.part_trace_arm(0)


def test_part_trace_times_each_thread_s_own_parts():
    """Each thread's parts run back to back, so their traced durations add up to nearly
    the span from its first start to its last end (a start the threads shared, not private
    to each, once cut them short: about half). Timing-based, so one of five sweeps must
    show it for every thread; a loaded machine that runs the threads one after the other
    passes either way."""
    A = long_csr(np.float64, np.int32, n_rows=4000, per_row=40, n_cols=3000, seed=6)
    x = np.random.default_rng(0).standard_normal(3000)
    bounds = balanced_row_bounds(A.indptr, 16)
    covered = []
    for _ in range(5):
        _spmm.part_trace_arm(16)
        _spmm.csr_spmv(A.indptr, A.indices, A.data, x, np.empty(4000), bounds, 2)
        parts, _, _ = _spmm.part_trace()
        shares = []
        for t in np.unique(parts[:, 0]):
            mine = parts[parts[:, 0] == t]
            span = mine[:, 2].max() - mine[:, 1].min()
            shares.append((mine[:, 2] - mine[:, 1]).sum() / max(span, 1))
        covered.append(min(shares))
        if covered[-1] >= 0.8:
            break
    assert max(covered) >= 0.8, covered


def test_parts_shared_is_a_flag():
    assert isinstance(_spmm.PARTS_SHARED, bool)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_threads", [2, 3, 8])
def test_every_part_is_summed_on_more_threads_than_parts(dtype, n_threads):
    """SpMV, SpMM in one sweep and in panels, and the coded SpMV write every row once,
    bit for bit as on one thread, for part counts below, at and above the thread count
    (outputs start as NaN: a part left out shows)."""
    A = long_csr(dtype, np.int32, seed=n_threads)
    rng = np.random.default_rng(n_threads)
    x = rng.standard_normal(50).astype(dtype)
    X = rng.standard_normal((50, 40)).astype(dtype)
    n = A.shape[0]
    for n_parts in (2, n_threads, 4 * n_threads + 1, n):
        bounds = balanced_row_bounds(A.indptr, n_parts)
        for b in (bounds, n_parts):
            y, y1 = np.full(n, np.nan, dtype), np.full(n, np.nan, dtype)
            _spmm.csr_spmv(A.indptr, A.indices, A.data, x, y, b, n_threads)
            _spmm.csr_spmv(A.indptr, A.indices, A.data, x, y1, b, 1)
            assert y.tobytes() == y1.tobytes()
            for panel in (40, 16):
                Y, Y1 = np.full((n, 40), np.nan, dtype), np.full((n, 40), np.nan, dtype)
                _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y, b, panel, n_threads, False)
                _spmm.csr_spmm(A.indptr, A.indices, A.data, X, Y1, b, panel, 1, False)
                assert Y.tobytes() == Y1.tobytes()
        np.testing.assert_allclose(y, A @ x, rtol=1e-4, atol=1e-4)
        if dtype in (np.float32, np.float64):
            from wsesparse._kernels import _csr_tools
            B = A.copy()
            B.data = np.round(B.data).astype(dtype)  # (at most 256 distinct values)
            codes, table = _csr_tools.value_codes(B.data)
            y, y1 = np.full(n, np.nan, dtype), np.full(n, np.nan, dtype)
            _spmm.csr_spmv_coded(B.indptr, B.indices, codes, table, x, y, bounds, n_threads)
            _spmm.csr_spmv_coded(B.indptr, B.indices, codes, table, x, y1, bounds, 1)
            assert y.tobytes() == y1.tobytes()
            np.testing.assert_allclose(y, B @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("row_bounds", [0, -1, True, 2.0, "2", None,
                                        np.array([0, 300], dtype=np.int32),
                                        np.array([[0, 300]], dtype=np.int64),
                                        np.array([0, 0, 300, 300], dtype=np.int64)[::2]])
def test_kernel_rejects_badrow_bounds(row_bounds):
    A = long_csr(np.float64, np.int32)
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
    A = long_csr(dtype, itype, n_rows=4000, per_row=3, seed=11)  # ~6k nonzeros: 3 blocks
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
    A = rows_of_every_length(6, 9, dtype, itype)
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


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_threads", [1, 2, 3, 8])
def test_plain_csr_nnz_checks_a_long_indptr_with_threads(itype, n_threads):
    """From PARALLEL_INDPTR_ROWS rows on, indptr is checked in one chunk per thread: a
    decrease is found wherever it is, at the chunk edges too, and a valid one passes."""
    m = _spmm.PARALLEL_INDPTR_ROWS + 5
    ip = np.arange(m + 1, dtype=itype)
    ix = np.zeros(m, itype)
    d = np.ones(m)
    assert _spmm.plain_csr_nnz(ip, ix, d, m, 4, n_threads) == m
    chunk = -(-m // n_threads)
    spots = {1, m - 1, m}
    for k in range(1, n_threads):
        spots |= {k * chunk - 1, k * chunk, k * chunk + 1}
    for i in sorted(q for q in spots if 0 < q <= m):
        bad = ip.copy()
        bad[i] = bad[i - 1] - 1  # indptr[i] < indptr[i - 1]
        assert _spmm.plain_csr_nnz(bad, ix, d, m, 4, n_threads) == -1, i


# -- column blocks -----------------------------------------------------------------------------
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


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("far", [False, True])
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("per_row,banded", [(5, False), (5, True), (12, False)])
def test_checked_spmv_finds_a_bad_index_in_every_block(itype, dtype, far, streamed, per_row,
                                                       banded):
    """Short rows are checked block by block: CHECK_ROWS rows where they hold at most
    CHECK_BLOCK nonzeros, else about CHECK_BLOCK nonzeros (found by galloping from the
    block's first row). A bad index anywhere is found, at the edges of both kinds of
    block too, and valid input gives the unchecked kernel's bits. ``streamed`` (a matrix
    read from DRAM): builds without AVX-512 check int64 indices in the row loops instead
    (WS_CHK_IN_LOOPS), AVX-512 builds on AMD rows of 12 (SPMV_CHK_LOOP_ROWS_MIN to _MAX)
    and shorter ones that read x at random (``banded``: along a band, they keep the block
    check), with x within or beyond SPMV_FAR_X_BYTES (``far``: one scalar chain per row);
    the same positions are found there."""
    rng = np.random.default_rng(0)
    rows_per_block, block_nnz = _spmm.CHECK_ROWS, _spmm.CHECK_BLOCK
    n_rows = 20_000
    n_cols = _spmm.SPMV_FAR_X_BYTES // np.dtype(dtype).itemsize + 1 if far else 3000
    lengths = np.full(n_rows, per_row)
    # A run of long rows: CHECK_ROWS of them hold more than CHECK_BLOCK nonzeros.
    long0 = 10 * rows_per_block
    lengths[long0:long0 + 3 * rows_per_block] = 2 * block_nnz // rows_per_block + 1
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    nnz = int(indptr[-1])
    assert nnz / n_rows < 16  # short rows on average (SpMV's vector steps start at 16)
    if banded:  # each row's entries within a few columns of the row's place in x
        rows = np.repeat(np.arange(n_rows), lengths)
        indices = (rows * n_cols // n_rows + rng.integers(0, 8, nnz)) % n_cols
    else:
        indices = rng.integers(0, n_cols, nnz)
    indices = indices.astype(itype)
    data = rng.standard_normal(nnz).astype(dtype)
    x = rng.standard_normal(n_cols).astype(dtype)
    y0, y1 = np.empty(n_rows, dtype), np.empty(n_rows, dtype)
    row_edges = [int(indptr[k * rows_per_block]) for k in (1, 2, 10, 11)]
    nnz_edges = [int(indptr[long0]) + k * block_nnz for k in (1, 2)]
    edges = [q + d for q in row_edges + nnz_edges for d in (-1, 0, 1)]
    for parts, threads in ((1, 1), (8, 2)):
        assert _spmm.csr_spmv(indptr, indices, data, x, y0, parts, threads) == 0
        assert _spmm.csr_spmv(indptr, indices, data, x, y1, parts, threads,
                              check_cols=n_cols, streamed=streamed) == 0
        assert y0.tobytes() == y1.tobytes()
        for q in [0, 50_001, nnz - 1] + edges:
            # The index type's extremes too (and float32: eight lanes per AVX2 step).
            for bad in (n_cols, -1, np.iinfo(itype).min, np.iinfo(itype).max):
                spoilt = indices.copy()
                spoilt[q] = bad
                assert _spmm.csr_spmv(indptr, spoilt, data, x, y1, parts, threads,
                                      check_cols=n_cols, streamed=streamed) != 0, (q, bad)


def _assert_the_same_bits_everywhere(A, x, got, parts=(), paths=({},)):
    """``A @ x`` gives ``got``'s bits one-shot and prepared, with int32 and int64 indices, on
    1 and 2 threads, and from ``csr_spmv`` on each number of row parts in ``parts``, called
    with each set of keyword arguments in ``paths`` (e.g. ``blocks=True``). For matrices
    that stay in cache (``csr_spmv`` without ``far_matrix``, as ``sparse_matmul`` calls it
    for them)."""
    l3 = _hardware.current().l3_bytes or th.STREAM_DEFAULT_L3_BYTES
    assert A.nnz * (x.itemsize + 4) <= th.SPMV_CACHED_L3_SHARE * l3
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)),
                       shape=A.shape)
    for B in (A, A64):
        for op in (B, CSR(B)):
            for threads in (1, 2):
                assert sparse_matmul(op, x, n_threads=threads).tobytes() == got.tobytes()
        for n_parts in parts:
            for kwargs in paths:
                y = np.empty(A.shape[0], x.dtype)
                assert _spmm.csr_spmv(B.indptr, B.indices, B.data, x, y, n_parts, 2,
                                      **kwargs) == 0
                assert y.tobytes() == got.tobytes()


def _gather_test_length(dtype, near: bool = False) -> int:
    """A row length past the build's SPMV_GATHER_ROW_MIN (the gathers of long rows in
    AVX-512 builds that do not gather short ones), and past the vector steps; ``near``:
    also past SPMV_GATHER_NEAR_ROW_MIN (where those rows gather with a small x)."""
    name = np.dtype(dtype).name
    mins = _spmm.SPMV_GATHER_ROW_MIN or {}                  # (None: the build never gathers)
    near_min = _spmm.SPMV_GATHER_NEAR_ROW_MIN[name] if near else 0
    return max(mins.get(name, 0), near_min, _spmm.SPMV_FAR_VEC_NNZ) + 40


def _x_columns(where: str, dtype) -> int:
    """Columns of a matrix whose x is small (700), at or just past the build's
    SPMV_GATHER_LONG_X_BYTES (at least 700), or past SPMV_FAR_X_BYTES."""
    item = np.dtype(dtype).itemsize
    at = max(_spmm.SPMV_GATHER_LONG_X_BYTES[np.dtype(dtype).name] // item, 700)
    return {"small": 700, "at": at, "past": at + 1,
            "far": _spmm.SPMV_FAR_X_BYTES // item + 1}[where]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("where", ["small", "at", "past", "far"])
def test_spmv_long_rows_gathered_or_not_keep_their_bits(dtype, where):
    """Rows of every length up to past SPMV_GATHER_ROW_MIN (builds that gather only long
    rows switch there, per row, where x is past SPMV_GATHER_LONG_X_BYTES): scipy's result,
    and the same bits one-shot and prepared, for int64 indices, on 1 and 2 threads, and for
    every partition of the rows (the switch is the row's own, never the part's)."""
    n_cols = _x_columns(where, dtype)
    # (x at SPMV_GATHER_LONG_X_BYTES: rows up to past SPMV_GATHER_NEAR_ROW_MIN too; not
    # with the small x, where such rows make the matrix dense enough for a dense product)
    length = _gather_test_length(dtype, near=where == "at")
    A = rows_of_every_length(length, n_cols, dtype, np.int32, seed=9)
    x = np.random.default_rng(6).standard_normal(n_cols).astype(dtype)
    got = sparse_matmul(CSR(A), x, n_threads=1)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, A.toarray() @ x, rtol=tol, atol=tol)
    _assert_the_same_bits_everywhere(A, x, got, parts=(1, 2, 5, A.shape[0]))


@pytest.mark.skipif(_spmm.SPMV_GATHER_ROW_MIN is None, reason="the build never gathers")
@pytest.mark.parametrize("where", ["at", "past"])
@pytest.mark.parametrize("near_min", [False, True])
def test_spmv_long_float32_rows_gather_only_where_x_is_past_the_limit(where, near_min):
    """Which way a long float32 row is summed, told by its bits: 2^24 at position 0, 1 at
    16 and 48, zeros elsewhere, x all ones. Gathers (16 lanes, two accumulators taking 32
    values a step) put both ones in one lane of the second accumulator: 2^24 + 2. Element
    loads (8 lanes, two accumulators taking 16 a step) add each one to 2^24 in the first,
    and each rounds away: 2^24. Builds that gather every row (SPMV_GATHER) gather here;
    those that gather long rows only (SPMV_GATHER_LONG) do where x has more than
    SPMV_GATHER_LONG_X_BYTES, or the row at least SPMV_GATHER_NEAR_ROW_MIN nonzeros
    (``near_min``: a row that long, else one just past SPMV_GATHER_ROW_MIN): one-shot and
    prepared, on 1 and 2 threads."""
    n_cols = _x_columns(where, np.float32)
    shortest = (_spmm.SPMV_GATHER_NEAR_ROW_MIN if near_min else _spmm.SPMV_GATHER_ROW_MIN)
    length = 32 * (max(shortest["float32"], 64) // 32 + 1)
    assert length <= n_cols
    row = np.zeros(length, np.float32)
    row[[0, 16, 48]] = 2.0 ** 24, 1, 1
    rows = 4
    A = sp.csr_array((np.tile(row, rows), np.tile(np.arange(length, dtype=np.int32), rows),
                      np.arange(rows + 1, dtype=np.int32) * length), shape=(rows, n_cols))
    x = np.ones(n_cols, np.float32)
    gathers = _spmm.SPMV_GATHER or (
        _spmm.SPMV_GATHER_LONG
        and (4 * n_cols > _spmm.SPMV_GATHER_LONG_X_BYTES["float32"]
             or length >= _spmm.SPMV_GATHER_NEAR_ROW_MIN["float32"]))
    for op in (A, CSR(A)):
        for threads in (1, 2):
            got = sparse_matmul(op, x, n_threads=threads)
            assert (got == 2.0 ** 24 + (2 if gathers else 0)).all(), (op, threads, got)


@pytest.mark.skipif(_spmm.SPMV_GATHER_ROW_MIN is None, reason="the build never gathers")
@pytest.mark.parametrize("where", ["at", "past"])
@pytest.mark.parametrize("near_min", [False, True])
def test_spmv_long_float64_rows_gather_only_where_x_or_the_matrix_is_far(where, near_min):
    """Which way a long float64 row is summed, told by its bits as in the float32 test
    above: 2^53 at position 0, 1 at 8 and 24, x all ones; gathers give 2^53 + 2, element
    loads 2^53. Builds that gather long rows only (SPMV_GATHER_LONG) gather float64 rows
    past SPMV_GATHER_ROW_MIN where x has more than SPMV_GATHER_LONG_X_BYTES, where the row
    has at least SPMV_GATHER_NEAR_ROW_MIN nonzeros, or where ``csr_spmv`` is told that the
    matrix does not stay in cache (``far_matrix``, unless SPMV_GATHER_NEAR_ANY_MATRIX).
    ``sparse_matmul`` of this small matrix, one-shot and prepared, takes the cached way."""
    n_cols = _x_columns(where, np.float64)
    shortest = (_spmm.SPMV_GATHER_NEAR_ROW_MIN if near_min else _spmm.SPMV_GATHER_ROW_MIN)
    length = 32 * (max(shortest["float64"], 64) // 32 + 1)
    assert length <= n_cols
    row = np.zeros(length)
    row[[0, 8, 24]] = 2.0 ** 53, 1, 1
    rows = 4
    A = sp.csr_array((np.tile(row, rows), np.tile(np.arange(length, dtype=np.int32), rows),
                      np.arange(rows + 1, dtype=np.int32) * length), shape=(rows, n_cols))
    x = np.ones(n_cols)

    def gathers(far_matrix):
        return _spmm.SPMV_GATHER or (
            _spmm.SPMV_GATHER_LONG
            and (8 * n_cols > _spmm.SPMV_GATHER_LONG_X_BYTES["float64"]
                 or length >= _spmm.SPMV_GATHER_NEAR_ROW_MIN["float64"]
                 or (far_matrix and not _spmm.SPMV_GATHER_NEAR_ANY_MATRIX["float64"])))

    for threads in (1, 2):
        for op in (A, CSR(A)):
            got = sparse_matmul(op, x, n_threads=threads)
            assert (got == 2.0 ** 53 + (2 if gathers(False) else 0)).all(), (op, threads, got)
        for far_matrix in (False, True):
            for check in (0, n_cols):
                y = np.empty(rows)
                assert _spmm.csr_spmv(A.indptr, A.indices, A.data, x, y, 2, threads,
                                      check_cols=check, far_matrix=far_matrix) == 0
                want = 2.0 ** 53 + (2 if gathers(far_matrix) else 0)
                assert (y == want).all(), (far_matrix, check, threads, y)


def test_spmv_of_a_far_matrix_keeps_its_bits(monkeypatch):
    """A matrix beyond SPMV_CACHED_L3_SHARE of L3 (a small L3 here): one-shot with int32
    and int64 indices and prepared (narrowed to int32), on 1 and 2 threads, all give the
    bits of ``csr_spmv(far_matrix=True)``; on builds where float64 rows of 64-511 with a
    small x take element loads only in cached matrices, other bits than ``far_matrix=False``
    (which the same products give with the real L3)."""
    rng = np.random.default_rng(4)
    n_rows, n_cols = 300, 4096
    lengths = rng.integers(70, 500, n_rows)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate([np.sort(rng.choice(n_cols, k, replace=False))
                              for k in lengths]).astype(np.int32)
    A = sp.csr_array((rng.standard_normal(indices.size), indices, indptr),
                     shape=(n_rows, n_cols))
    A64 = sp.csr_array((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)),
                       shape=A.shape)
    x = rng.standard_normal(n_cols)
    ways = {}
    for far in (False, True):
        ways[far] = np.empty(n_rows)
        assert _spmm.csr_spmv(A.indptr, A.indices, A.data, x, ways[far], 1, 1,
                              far_matrix=far) == 0
        np.testing.assert_allclose(ways[far], A @ x, rtol=1e-12, atol=1e-12)
    if _spmm.SPMV_GATHER_LONG and not _spmm.SPMV_GATHER_NEAR_ANY_MATRIX["float64"]:
        assert ways[True].tobytes() != ways[False].tobytes()
    l3 = int(A.nnz * 12 / th.SPMV_CACHED_L3_SHARE)
    for small_l3, far in ((l3 - 1, True), (l3, False)):
        monkeypatch.setattr(_hardware, "_current", _profile(l3_bytes=small_l3))
        for op in (A, A64, CSR(A), CSR(A64)):
            for threads in (1, 2):
                got = sparse_matmul(op, x, n_threads=threads)
                assert got.tobytes() == ways[far].tobytes(), (small_l3, op, threads)


def test_spmv_far_matrix_from_the_matrix_size(monkeypatch):
    """``product_into`` tells ``csr_spmv`` that a matrix is far where its values and 4-byte
    indices exceed SPMV_CACHED_L3_SHARE of L3, whatever the index width and thread count
    (one-shot and prepared products of one matrix then sum the same way)."""
    from wsesparse import _drivers

    A = sp.random_array((300, 4000), density=0.05, format="csr", rng=3)
    x = np.random.default_rng(1).standard_normal(4000)
    seen = _kwarg_spy(monkeypatch, "csr_spmv", "far_matrix")
    limit = int(A.nnz * 12 / th.SPMV_CACHED_L3_SHARE)  # (exact: A.nnz * 24)
    for l3, far in ((limit, False), (limit - 1, True)):
        hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=l3, vector_bytes=64)
        for index_type in (np.int32, np.int64):
            for bounds in (None, {}):
                for threads in (1, 2):
                    seen.clear()
                    y = np.empty(A.shape[0])
                    _drivers.product_into(A.indptr.astype(index_type),
                                          A.indices.astype(index_type), A.data, A.shape,
                                          A.nnz, x, y, threads, bounds, hw)
                    assert seen == [far], (l3, index_type, bounds, threads)
                    np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spmv_rows_in_runs_of_one_length(dtype):
    """Runs of rows of one length beside rows of varying length, x beyond
    SPMV_GATHER_X_BYTES: scipy's result, and the same bits one-shot and prepared, with
    int64 indices, on 1 and 2 threads and for every partition (a run's first rows in one
    part and the rest in the next: the rule reads the rows before across parts). Where
    the build has SPMV_RUN_SCALAR, a short float64 row (under 8) with as many nonzeros as
    each of the two rows before it is one scalar FMA chain in storage order."""
    rng = np.random.default_rng(12)
    n_cols = _spmm.SPMV_GATHER_X_BYTES // np.dtype(dtype).itemsize + 1000
    lengths = np.concatenate([[5] * 9, rng.integers(0, 30, 40), [7, 7, 3, 3, 3, 0, 0],
                              [12] * 9, [_spmm.SPMV_VEC_NNZ[np.dtype(dtype).name]] * 3,
                              [6, 6, 5, 6, 6, 6, 6]])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    A = sp.csr_array((rng.standard_normal(int(indptr[-1])).astype(dtype),
                      rng.integers(0, n_cols, int(indptr[-1])).astype(np.int32), indptr),
                     shape=(len(lengths), n_cols))
    x = rng.standard_normal(n_cols).astype(dtype)
    got = sparse_matmul(CSR(A), x, n_threads=1)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, A.toarray() @ x, rtol=tol, atol=tol)
    # (also the blocks and the streamed checked paths of csr_spmv)
    _assert_the_same_bits_everywhere(
        A, x, got, parts=(1, 2, 3, 5, 7, A.shape[0]),
        paths=({}, {"blocks": True}, {"check_cols": n_cols, "streamed": True}))
    if _spmm.SPMV_RUN_SCALAR and dtype == np.float64:
        runs = [i for i in range(2, len(lengths))
                if 0 < lengths[i] == lengths[i - 1] == lengths[i - 2] < 8]
        assert len(runs) >= 9
        for i in runs:
            row = slice(indptr[i], indptr[i + 1])
            assert got[i] == _chain(A.data[row], x[A.indices[row]], fused=True), i


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("n_cols", [500, 5000])
def test_one_shot_spmv_finds_a_bad_index_in_a_gathered_row(dtype, itype, n_cols):
    """A bad index at each position of two long rows (40 positions of the first's first
    vector steps, which check 16 or 32 indices at a time, and the last 21 of it and 32 of
    the second, 9 longer, through the steps of 16, the masked tail and the scalar one) next
    to short rows: found. x of 2 kB or 20 kB: AMD builds gather long float32 rows only past
    16 kB (SPMV_GATHER_LONG_X_BYTES), Intel builds always, and AVX2 builds never."""
    length = _gather_test_length(dtype) + 5      # (not a multiple of 16)
    rng = np.random.default_rng(8)
    lengths = np.array([3, length, 7, length + 9, 0, 12])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
    A = sp.csr_array((rng.standard_normal(int(indptr[-1])).astype(dtype),
                      rng.integers(0, n_cols, int(indptr[-1])).astype(itype), indptr),
                     shape=(len(lengths), n_cols))
    x = rng.standard_normal(n_cols).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(sparse_matmul(A, x), A @ x, rtol=tol, atol=tol)
    start, end, end2 = int(indptr[1]), int(indptr[2]), int(indptr[4])
    positions = sorted({*range(start, start + 40), *range(end - 21, end),
                        *range(end2 - 32, end2)})
    for pos in positions:
        for bad in (n_cols, -1):
            B = A.copy()
            B.indices[pos] = bad
            with pytest.raises(ValueError, match=f"not below {n_cols}"):
                sparse_matmul(B, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("neighbours", [(3, 40), (45, 80)], ids=["short", "long"])
def test_one_shot_spmv_finds_a_bad_index_anywhere_in_a_long_row(dtype, itype, neighbours):
    """Long rows take the checked vector steps, float32 ones with int32 indices 32
    indices a check where the build does (WS_VROW_CHK32, AVX2 and AVX-512), then 16 and 8
    (WS_OORV2, WS_OORV1): a bad index at every position of rows of 8 to 130 nonzeros is
    found, whatever its value, and a valid row gives the prepared (unchecked) product's
    bits (``method="sparse"``: at this density a prepared operand's vector product may go
    to dense BLAS). Between short rows the part is checked by blocks for most lengths;
    between long ones (at least WS_SPMV_CHK_LOOP_NNZ_float = 40 a row on average) in
    the row loops, which a review found no bad index had reached at 16 or 8 a step."""
    n_cols = 200
    rng = np.random.default_rng(3)
    for length in (8, 16, 24, 31, 32, 33, 48, 56, 63, 64, 65, 100, 130):
        lengths = np.array([neighbours[0], length, neighbours[1]])
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
        indices = rng.integers(0, n_cols, indptr[-1]).astype(itype)
        data = rng.standard_normal(indptr[-1]).astype(dtype)
        x = rng.standard_normal(n_cols).astype(dtype)
        A = sp.csr_array((data, indices, indptr), shape=(3, n_cols))
        y = sparse_matmul(A, x, n_threads=1)
        assert y.tobytes() == sparse_matmul(CSR(A), x, n_threads=1, method="sparse").tobytes()
        for pos in range(indptr[1], indptr[2]):
            for bad in (n_cols, -1, np.iinfo(itype).max):
                B = A.copy()
                B.indices[pos] = bad
                with pytest.raises(ValueError, match=f"not below {n_cols}"):
                    sparse_matmul(B, x, n_threads=1)
