"""Work items of the TLR-MVM phases (wsesparse/tlr/_split.py): every tile's range covered
once, boundaries on whole vectors, no item for empty tiles, balance, and the products they
drive equal bit for bit whatever the cut."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tlr_helpers import kernel_product
from wsesparse import TLRMatrix
from wsesparse._kernels import _tlrmvm
from wsesparse.tlr._split import (FORWARD_CUT_ABOVE, GRAIN, PARTS, imbalance, queues_by_work,
                                   tile_items, wrap_items)

lengths = st.lists(st.integers(0, 600), min_size=0, max_size=12)


@settings(max_examples=200, deadline=None)
@given(split=lengths, data=st.data(), n_threads=st.integers(1, 64),
       cut=st.sampled_from([tile_items, wrap_items]))
def test_items_cover_every_tile_once(split, data, n_threads, cut):
    """Both cuts: every tile covered in order, boundaries on the grain, no item for an empty
    tile, whole tiles on one thread; the forward's wrap cut at most once per share end
    (n_threads - 1 cuts in all)."""
    other = data.draw(st.lists(st.integers(0, 300), min_size=len(split), max_size=len(split)))
    items = cut(np.array(split, dtype=np.int64), np.array(other, dtype=np.int64), n_threads)
    assert items.dtype == np.int64 and items.shape[1:] == (3,)
    for t, d in enumerate(split):
        mine = items[items[:, 0] == t]
        if d == 0:
            assert len(mine) == 0
            continue
        assert mine[0, 1] == 0 and mine[-1, 2] == d
        assert (mine[1:, 1] == mine[:-1, 2]).all() and (mine[:, 2] > mine[:, 1]).all()
        assert (mine[:-1, 2] % GRAIN == 0).all()
    tiles = sum(d > 0 for d in split)
    assert len(items) == tiles if n_threads == 1 else len(items) >= tiles
    if cut is wrap_items:
        assert len(items) <= tiles + n_threads - 1
    assert (np.diff(items[:, 0]) >= 0).all()  # tile by tile


def test_balance_of_few_large_tiles():
    """10 equal tiles on 16 threads: whole tiles would leave the longest thread 1.6-1.8x the
    mean work; the items are small enough for a dynamic schedule to even it out."""
    split, other = np.full(10, 256), np.full(10, 111)
    items = tile_items(split, other, 16)
    work = (items[:, 2] - items[:, 1]) * 111
    assert len(items) >= 16 * PARTS // 2
    assert work.max() <= 2 * work.sum() / (16 * PARTS)


def test_imbalance_of_whole_tiles():
    assert imbalance(np.full(10, 7), 16) == pytest.approx(1.6)
    assert imbalance(np.full(10, 7), 2) == 1.0
    assert imbalance(np.array([9, 1, 1, 1]), 2) == pytest.approx(1.5)
    assert imbalance(np.zeros(3), 4) == 1.0 and imbalance(np.full(3, 2), 1) == 1.0


@settings(max_examples=200, deadline=None)
@given(split=st.lists(st.integers(1, 600), min_size=1, max_size=12), data=st.data(),
       n_threads=st.integers(2, 32))
def test_wrap_shares_are_equal_work(split, data, n_threads):
    """The kernels' queues by work (queues_by_work) give thread t the items of share t: where
    shares are wider than two grains of rows, the queues run the items (imbalance) with the
    longest thread within that of the mean, and where the wrap cut, each share is; every
    item is in one queue, in order."""
    other = np.array(data.draw(st.lists(st.integers(1, 300), min_size=len(split),
                                        max_size=len(split))), dtype=np.int64)
    split = np.array(split, dtype=np.int64)
    items = wrap_items(split, other, n_threads)
    work = (items[:, 2] - items[:, 1]) * other[items[:, 0]]
    queues = _tlrmvm.queues_by_work(np.cumsum(work), n_threads)
    assert queues.shape == (n_threads, 2) and queues[0, 0] == 0
    assert (queues[1:, 0] == queues[:-1, 1]).all() and queues[-1, 1] == len(items)
    mean, slack = work.sum() / n_threads, 2 * GRAIN * other.max()
    if mean > 4 * slack:
        assert imbalance(work, n_threads) * mean <= mean + slack
        if len(items) > (split > 0).sum():  # (cut: whole tiles ran above the mean)
            shares = [work[a:b].sum() for a, b in queues]
            assert max(abs(x - mean) for x in shares) <= slack, (shares, mean)


def test_wrap_cuts_tiles_that_the_queues_run_unbalanced():
    """Hypothesis's example: whole tiles a largest-first schedule packs evenly (257 | 192 +
    49 + 16) but the kernels' queues, which run them in order, do not (322 | 192): the wrap
    cuts them, into shares of 257 each."""
    split, other = np.array([1] * 8 + [49, 257, 192]), np.array([2] * 8 + [1, 1, 1])
    work = split * other
    assert imbalance(work, 2) == pytest.approx(322 / 257)
    items = wrap_items(split, other, 2)
    iw = (items[:, 2] - items[:, 1]) * other[items[:, 0]]
    assert [int(iw[a:b].sum()) for a, b in queues_by_work(iw, 2)] == [257, 257]


@settings(max_examples=300, deadline=None)
@given(work=st.lists(st.integers(0, 1000), max_size=40), n_threads=st.integers(1, 40))
def test_queues_by_work_mirror_the_kernels(work, n_threads):
    """_split's queues (what imbalance simulates) are the kernels' (ws_part_queues_by_work);
    the simulated longest thread is at least the mean and at most the largest queue."""
    work = np.array(work, dtype=np.int64)
    queues = queues_by_work(work, n_threads)
    assert np.array_equal(np.array(queues, dtype=np.int64).reshape(-1, 2),
                          _tlrmvm.queues_by_work(np.cumsum(work), n_threads))
    r = imbalance(work, n_threads)
    if n_threads > 1 and work.sum() > 0:
        mean = work.sum() / n_threads
        assert 1.0 - 1e-12 <= r <= max(work[a:b].sum() for a, b in queues) / mean + 1e-12


def test_wrap_items_of_ten_equal_tiles():
    """Ten tile columns of 110 outputs on 16 threads (2499^2's phase 1): whole tiles leave
    the longest thread 1.6x the mean work, the wrap cuts 1.0x within a grain, and in 24 items
    against the 20 + ranges of the rule before (docs/tuning.md, "Shares of equal work")."""
    split, other = np.full(10, 110), np.full(10, 256)
    items = wrap_items(split, other, 16)
    work = (items[:, 2] - items[:, 1]) * 256
    queues = _tlrmvm.queues_by_work(np.cumsum(work), 16)
    shares = np.array([work[a:b].sum() for a, b in queues])
    assert imbalance(np.full(10, 1), 16) == pytest.approx(1.6)
    assert len(items) == 24 and shares.max() / shares.mean() <= 1 + GRAIN / 68.75
    assert wrap_items(split, other, 2).shape == (10, 3)  # (the share end is a tile's end)


def test_forward_cuts_only_where_whole_tiles_are_unbalanced():
    """The forward items (matrix._items): whole tiles where they leave the longest thread at
    most FORWARD_CUT_ABOVE times the mean work (ten equal tiles on 2 threads: 1.0; 39
    tiles of 9801^2's ranks on 16: 1.24), the wrap cut above it (ten on 16: 1.6)."""
    kw = dict(cut_above=FORWARD_CUT_ABOVE)
    split, other = np.full(10, 110), np.full(10, 256)
    assert len(wrap_items(split, other, 16, **kw)) == 24
    assert len(wrap_items(np.arange(10, 50), other[:1].repeat(40), 2, **kw)) == 40
    # (by work, not by length: two tiles of 100 outputs, of 300 and 10 rows, are cut)
    assert len(wrap_items(np.array([100, 100]), np.array([300, 10]), 2, **kw)) == 3
    tiles39 = np.random.default_rng(0).integers(100, 130, 39)
    assert imbalance(tiles39 * 256, 16) <= FORWARD_CUT_ABOVE
    assert wrap_items(tiles39, np.full(39, 256), 16, **kw).tolist() == [
        [t, 0, d] for t, d in enumerate(tiles39.tolist())]


@pytest.mark.parametrize("n_threads", [2, 3, 16])
@pytest.mark.parametrize("adjoint", [False, True])
def test_phase_queues_split_by_each_phase_s_work(adjoint, n_threads):
    """The queues a product makes (_phase_queues) split each phase's items by their work,
    range x rows of the block: forward phase 1 x tile width, phase 3 x tile row's ranks;
    adjoint phase 1 x tile height, phase 3 x tile column's ranks (an operator whose widths,
    heights and ranks all differ, so a wrong dimension gives other queues)."""
    rng = np.random.default_rng(3)
    m, n, nb = 150, 171, 64  # (tiles of 64, 64 and 22 rows, 64, 64 and 43 columns)
    tiles = {}
    for i, h_i in enumerate((64, 64, 22)):
        for j, w_j in enumerate((64, 64, 43)):
            k = int(rng.integers(1, 20))
            tiles[i, j] = (rng.standard_normal((h_i, k)), rng.standard_normal((w_j, k)))
    T = TLRMatrix.from_tiles((m, n), nb, tiles)
    kc, kr = T.ranks.sum(axis=0), T.ranks.sum(axis=1)
    w, h = np.diff(T.col_ptr), np.diff(T.row_ptr)
    index = (T.row_ptr, T.col_ptr, T.u_off, T.v_off, T.krow_ptr, T.kcol_ptr, T.perm)
    rows = {(False, 1): w, (False, 3): kr, (True, 1): h, (True, 3): kc}
    for phase, items in zip((1, 3), T._items(n_threads, adjoint)):
        work = (items[:, 2] - items[:, 1]) * np.maximum(rows[adjoint, phase][items[:, 0]], 1)
        got = _tlrmvm.phase_queues(index, items, adjoint, phase, n_threads)
        want = ([[0, len(items)]] if _tlrmvm.PARTS_SHARED
                else _tlrmvm.queues_by_work(np.cumsum(work), n_threads).tolist())
        assert got.tolist() == want, (phase, got.tolist(), want)


def test_phase_queues_and_shuffle_block_reject_bad_input():
    T = TLRMatrix.from_tiles((20, 20), 10, {(0, 0): (np.ones((10, 2)), np.ones((10, 2)))})
    index = (T.row_ptr, T.col_ptr, T.u_off, T.v_off, T.krow_ptr, T.kcol_ptr, T.perm)
    items = T._items(2, False)[0]
    for bad in (dict(n_threads=0), dict(phase=2)):
        with pytest.raises(ValueError, match="n_threads >= 1 and phase 1 or 3"):
            _tlrmvm.phase_queues(index, items, False, **{"phase": 1, "n_threads": 2, **bad})
    for wrong in (np.array([[2, 0, 5]]), np.array([[0, 5, 3]]), np.array([[-1, 0, 5]])):
        with pytest.raises(ValueError, match="item 0 is not a"):
            _tlrmvm.phase_queues(index, wrong.astype(np.int64), False, 1, 2)
    with pytest.raises(ValueError, match="items"):
        _tlrmvm.phase_queues(index, items[:, :2].copy(), False, 1, 2)
    with pytest.raises(TypeError):  # (an index array that is not an ndarray)
        _tlrmvm.phase_queues(index[:1] + (list(T.col_ptr),) + index[2:], items, False, 1, 2)
    for K, n in ((-1, 2), (10, 0)):
        with pytest.raises(ValueError, match="K >= 0 and n_threads >= 1"):
            _tlrmvm.shuffle_block(K, n)
    assert _tlrmvm.shuffle_block(0, 1) == 16


def test_queues_by_work_fall_back_to_counts():
    cum = np.cumsum([10, 10, 10, 10]).astype(np.int64)
    assert _tlrmvm.queues_by_work(cum, 1).tolist() == [[0, 4]]
    assert _tlrmvm.queues_by_work(cum, 2).tolist() == [[0, 2], [2, 4]]
    assert _tlrmvm.queues_by_work(np.cumsum([30, 5, 5]).astype(np.int64), 2).tolist() == [
        [0, 1], [1, 3]]
    # no work at all: by count; no items: empty queues
    assert _tlrmvm.queues_by_work(np.zeros(4, np.int64), 3).tolist() == [[0, 1], [1, 2], [2, 4]]
    assert _tlrmvm.queues_by_work(np.zeros(0, np.int64), 3).tolist() == [[0, 0]] * 3
    # an item goes to the share that holds its middle (strictly: a middle on a share's end
    # goes to the next), and the last queue takes what is left (items of no work at the end)
    assert _tlrmvm.queues_by_work(cum, 8).tolist() == [
        [0, 0], [0, 1], [1, 1], [1, 2], [2, 2], [2, 3], [3, 3], [3, 4]]
    assert _tlrmvm.queues_by_work(np.array([10, 10, 10]), 2).tolist() == [[0, 0], [0, 3]]
    with pytest.raises(ValueError, match="n_threads"):
        _tlrmvm.queues_by_work(cum, 0)


def test_matrix_items_follow_the_rules():
    rng = np.random.default_rng(1)
    tiles = {(i, j): (rng.standard_normal((64, 8)), rng.standard_normal((64, 8)))
             for i in range(3) for j in range(3)}
    T = TLRMatrix.from_tiles((192, 192), 64, tiles)
    fwd1, fwd3 = T._items(16, False)
    adj1, adj3 = T._items(16, True)
    # the forward cuts where 16 equal shares end (3 tiles of 24 outputs x 64 rows: shares
    # of 4.5 outputs, on the grain of 16: cuts at 16 in each); the adjoint cuts its 24 and 64
    # rows in ranges of 16
    assert fwd1.tolist() == [[0, 0, 16], [0, 16, 24], [1, 0, 16], [1, 16, 24], [2, 0, 16],
                             [2, 16, 24]]
    assert len(fwd3) == 3 * 4 and len(adj1) == 6 and len(adj3) == 12
    assert T._items(16, False) is T._items(16, False)  # kept per thread count
    assert T._items(1, True)[1].tolist() == [[0, 0, 64], [1, 0, 64], [2, 0, 64]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("s", [1, 3, 8])
def test_any_cut_gives_the_same_bits(dtype, s):
    """Whole tiles, the cut for 64 threads and cuts of one grain each: the same bytes, forward
    and adjoint, and the dense product to rounding."""
    rng = np.random.default_rng(0)
    m, n, nb = 150, 131, 64
    tiles = {}
    for i in range(3):
        for j in range(3):
            h, w = min(nb, m - i * nb), min(nb, n - j * nb)
            k = 0 if (i, j) == (1, 1) else int(rng.integers(1, min(h, w, 40)))
            if k:
                tiles[(i, j)] = (rng.standard_normal((h, k)).astype(dtype),
                                 rng.standard_normal((w, k)).astype(dtype))
    T = TLRMatrix.from_tiles((m, n), nb, tiles, dtype=dtype)
    X = rng.standard_normal((n, s)).astype(dtype)
    Y = rng.standard_normal((m, s)).astype(dtype)
    kc, kr = T.ranks.sum(axis=0), T.ranks.sum(axis=1)
    w, h = np.diff(T.col_ptr), np.diff(T.row_ptr)
    cuts = {"whole": 1, "64 threads": 64, "one grain": 10 ** 6}
    fwd = {k: kernel_product(T, X, items=(tile_items(kc, w, c), tile_items(h, kr, c)))
           for k, c in cuts.items()}
    for c in (3, 16):  # (the forward's own cut)
        fwd[f"wrap {c}"] = kernel_product(T, X, items=(wrap_items(kc, w, c),
                                                        wrap_items(h, kr, c)), n_threads=2)
    adj = {k: kernel_product(T, Y, adjoint=True,
                             items=(tile_items(kr, h, c), tile_items(w, kc, c)))
           for k, c in cuts.items()}
    for k in fwd:
        assert fwd[k].tobytes() == fwd["whole"].tobytes(), k
    for k in cuts:
        assert adj[k].tobytes() == adj["whole"].tobytes(), k
    assert len(tile_items(h, kr, 10 ** 6)) > len(h)  # the finest cut does cut
    D = T.toarray().astype(np.complex128)
    tol = 1e-4 if np.finfo(dtype).eps > 1e-10 else 1e-12
    np.testing.assert_allclose(fwd["whole"], D @ X, rtol=tol, atol=tol * np.abs(D @ X).max())
    np.testing.assert_allclose(adj["whole"], D.conj().T @ Y, rtol=tol,
                               atol=tol * np.abs(D.conj().T @ Y).max())
