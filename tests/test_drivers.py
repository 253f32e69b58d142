"""``wsesparse._drivers``: how a product is cut before the compiled kernels run it: the row
partition, the token panel width, packing, column blocks and scatter chunks, each rule on the
machine profiles it depends on (both builds' tiles, caches of several sizes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wsesparse import _thresholds as th
from wsesparse._drivers import (balanced_row_bounds, k_block, pack_single_panel, panel_width,
                                scatter_chunks)
from wsesparse._hardware import HardwareProfile, available_cores, current
from wsesparse._kernels import _scatter


@given(lengths=st.lists(st.integers(0, 50), max_size=200), n_parts=st.integers(1, 16),
       row_cost=st.integers(0, 4))
def test_balanced_row_bounds_is_a_partition(lengths, n_parts, row_cost):
    """Bounds: n_parts + 1 (or 2) nondecreasing int64 boundaries from 0 to n_rows; no part's
    work exceeds the mean by more than one row's work."""
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n_rows = len(lengths)
    b = balanced_row_bounds(indptr, n_parts, row_cost)
    assert b.dtype == np.int64 and b[0] == 0 and b[-1] == n_rows
    assert np.all(np.diff(b) >= 0)
    if n_parts > 1 and n_rows > 1:
        assert len(b) == n_parts + 1
        cost = np.asarray(lengths) + row_cost
        work = np.array([cost[b[i]:b[i + 1]].sum() for i in range(n_parts)])
        assert work.max() <= cost.sum() / n_parts + (cost.max() if n_rows else 0)


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


def test_scatter_chunk_rule():
    """Row chunks only where panels are fewer than the work items, at most as many
    as leave 4 nonzeros per output row each and keep the copies within their bytes,
    and none where a copy passes the L2 rule; the cores and this machine's L2 by
    default."""
    pw32 = _scatter.scatter_panel_width(4)
    big = 1 << 40  # an L2 that fits any copy

    def chunks(nnz, n_out, n_tokens, items=4, l2=big):
        return scatter_chunks(nnz, n_out, n_tokens, 4, items=items, l2_bytes=l2)

    assert chunks(10**6, 1000, 1) == 4
    assert chunks(10**6, 1000, 1, items=16) == 16
    assert chunks(10**6, 1000, pw32 + 1) == 2            # 2 panels
    assert chunks(10**6, 1000, 4 * pw32) == 1            # enough panels
    assert chunks(4 * 1000 * 4 - 1, 1000, 1) == 3        # 3 chunks of 4 or more per row
    assert chunks(10 * 1000, 1000, 1, items=6) == 2      # 2 chunks of 5 per row
    assert chunks(10 * 1000, 1000, 1, items=3) == 2
    assert chunks(4 * 1000 * 2 - 1, 1000, 1) == 1        # too few nonzeros
    assert chunks(10**9, 10**7, 8) == 1                  # scratch too big
    assert chunks(10**9, 10**6, 8, items=16) == 3        # ... above 3 chunks
    assert chunks(10**6, 0, 1) == 1                      # no output rows
    assert chunks(10**6, 1000, 0) == 1                   # no tokens (found by hypothesis)
    assert chunks(10**6, 1000, 1, items=1) == th.SCATTER_MIN_ITEMS
    copy = 1000 * 8 * 4                                   # one copy of 1000 x 8 float32
    assert chunks(10**6, 1000, 8, l2=copy // th.SCATTER_COPY_L2S) == 4
    assert chunks(10**6, 1000, 8, l2=copy // th.SCATTER_COPY_L2S - 1) == 1  # beyond the L2s
    assert scatter_chunks(10**6, 1000, 1, 4) == scatter_chunks(
        10**6, 1000, 1, 4, items=max(available_cores(), th.SCATTER_MIN_ITEMS),
        l2_bytes=current().l2_bytes)
    for bad in (0, 2, 32):
        with pytest.raises(ValueError, match="itemsize must be 4, 8 or 16"):
            _scatter.scatter_panel_width(bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_one_column_products_are_the_vector_products(dtype, itype):
    """A @ X with X of one column runs the SpMV kernel: the bits of A @ X[:, 0], prepared
    or one-shot, on 1 and 2 threads, also for a strided column (a slice of a wider X,
    made contiguous first)."""
    import scipy.sparse as sp

    from wsesparse import CSR, sparse_matmul
    rng = np.random.default_rng(11)
    A = sp.random(300, 200, density=0.08, format="csr", random_state=11, dtype=np.float64)
    A = A.astype(dtype)
    if np.dtype(dtype).kind == "c":
        A.data = A.data + 1j * rng.standard_normal(A.nnz)
    A.indices, A.indptr = A.indices.astype(itype), A.indptr.astype(itype)
    W = np.asarray(rng.standard_normal((200, 3)) + (1j if np.dtype(dtype).kind == "c" else 0)
                   * rng.standard_normal((200, 3)), dtype=dtype)
    x = np.ascontiguousarray(W[:, 0])
    for S in (A, CSR(A)):
        for t in (1, 2):
            ref = sparse_matmul(S, x, n_threads=t)
            got = sparse_matmul(S, x[:, None], n_threads=t)
            assert got.shape == (300, 1) and got.tobytes() == ref.tobytes(), (type(S), t)
            strided = sparse_matmul(S, W[:, :1], n_threads=t, method="sparse")
            assert strided.tobytes() == ref.tobytes(), (type(S), t)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("N", [9, 31, 65, 200])
def test_few_uses_of_x_rows_take_one_sweep(monkeypatch, dtype, N):
    """Where X's rows are used fewer than PANEL_MIN_REUSE times on average (a few long rows
    of a wide A), the product takes one sweep: no panels or column blocks, which read or
    copied all K rows of X per sweep (a review found a 1 x 100,000 row of 10,000 nonzeros
    times 65 columns 100x slower than scipy). Results match scipy, one-shot and prepared,
    and the rule leaves products with more uses alone."""
    import scipy.sparse as sp

    from wsesparse import CSR, sparse_matmul
    from wsesparse._kernels import _spmm
    calls = []
    real = _spmm.csr_spmm

    def spy(*args, **kwargs):
        calls.append((args[6], kwargs.get("kblock", 0)))   # (panel, kblock)
        return real(*args, **kwargs)

    monkeypatch.setattr(_spmm, "csr_spmm", spy)
    rng = np.random.default_rng(N)
    for rows, K, per_row in ((1, 40000, 4000), (4, 40000, 4000), (64, 20000, 600)):
        A = sp.random(rows, K, density=per_row / K, format="csr", random_state=N,
                      dtype=np.float64).astype(dtype)
        assert A.nnz < th.PANEL_MIN_REUSE * K
        X = rng.standard_normal((K, N)).astype(dtype)
        for S in (A, CSR(A)):
            calls.clear()
            Y = sparse_matmul(S, X, method="sparse")
            np.testing.assert_allclose(Y, A @ X, rtol=1e-4 if dtype == np.float32 else 1e-12,
                                       atol=1e-3 if dtype == np.float32 else 1e-9)
            assert calls == [(N, 0)], (rows, K, type(S))
    dense = sp.random(64, 2000, density=0.5, format="csr", random_state=1, dtype=np.float64)
    calls.clear()
    sparse_matmul(dense, rng.standard_normal((2000, 200)), method="sparse")
    hw = current()   # (many uses: the panel and blocks of the rules as before, this machine's)
    kb = k_block(dense.shape, dense.nnz, 200, np.dtype(np.float64), hw)
    panel = hw.kblock_tile_bytes // 8 if kb else panel_width(dense.shape, dense.nnz, 200, 8, hw)
    assert calls == [(panel, kb)]
