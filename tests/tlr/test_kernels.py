"""TLR-MVM kernels: forward, adjoint and many right-hand sides against dense products.

Covers the kernels of ``_kernels/_tiles_tlr*.h`` (register tiles, and the row-streaming
``tlr_nn_rows`` and ``tlr_nn_rows_m`` for one right-hand side and for a group of them): every
dtype, s = 1..70 right-hand sides (all remainders of the vector tiles and groups), ranks that
leave partial vectors and zero tile rows/columns, the adjoint identity, and bitwise
reproducibility across thread counts, across the number of right-hand sides, across the
forward paths and with or without software prefetch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tlr_helpers import kernel_product
from wsesparse import TLRMatrix
from wsesparse._kernels import _tlrmvm
from wsesparse.tlr import matrix as tlr_matrix

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
RTOL = {np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-13, np.complex128: 1e-13}


def _rand(rng, shape, dtype):
    z = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        z = z + 1j * rng.standard_normal(shape)
    return z.astype(dtype)


def _random_tlr(dtype, m=203, n=171, nb=40, seed=0):
    """Random factors with uneven ranks: odd ranks, rank-0 tiles, a rank-0 tile row and
    column, tiles taller than a kernel panel (32 rows) and edge tiles of 3 and 11."""
    rng = np.random.default_rng(seed)
    rp = list(range(0, m, nb)) + [m]
    cp = list(range(0, n, nb)) + [n]
    tiles = {}
    for i in range(len(rp) - 1):
        for j in range(len(cp) - 1):
            h, w = rp[i + 1] - rp[i], cp[j + 1] - cp[j]
            if i == 1 or j == 2:
                continue  # a zero tile row and a zero tile column
            k = int(rng.integers(0, min(h, w, 13) + 1))
            if k:
                tiles[(i, j)] = (_rand(rng, (h, k), dtype), _rand(rng, (w, k), dtype))
    return TLRMatrix.from_tiles((m, n), nb, tiles, dtype=dtype)


@pytest.fixture(scope="module", params=DTYPES, ids=lambda d: np.dtype(d).name)
def case(request):
    dtype = request.param
    T = _random_tlr(dtype)
    assert (T.ranks[1] == 0).all() and (T.ranks[:, 2] == 0).all()
    return T, T.toarray().astype(np.complex128), dtype


def test_forward_and_adjoint_match_dense_for_s_1_to_70(case):
    T, D, dtype = case
    rng = np.random.default_rng(1)
    m, n = T.shape
    X = _rand(rng, (n, 70), dtype)
    Y = _rand(rng, (m, 70), dtype)
    rtol = RTOL[dtype]
    for s in range(1, 71):
        for got, want in ((T @ X[:, :s], D @ X[:, :s]), (T.H @ Y[:, :s], D.conj().T @ Y[:, :s])):
            assert got.dtype == np.dtype(dtype) and got.shape == want.shape
            err = np.abs(got - want).max(axis=0)
            scale = np.abs(D).sum() / min(D.shape) * np.abs(want).max(axis=0) + 1e-30
            assert (err <= rtol * (np.abs(want).max(axis=0) + scale)).all(), s
    # one vector
    np.testing.assert_allclose(T @ X[:, 0], D @ X[:, 0], rtol=rtol * 10, atol=rtol * 100)
    np.testing.assert_allclose(T.H @ Y[:, 0], D.conj().T @ Y[:, 0], rtol=rtol * 10,
                               atol=rtol * 100)


def test_adjoint_identity(case):
    """<A x, y> = <x, A^H y> for single vectors and blocks."""
    T, _, dtype = case
    rng = np.random.default_rng(2)
    m, n = T.shape
    for s in (1, 3, 16):
        x = _rand(rng, (n, s), dtype)
        y = _rand(rng, (m, s), dtype)
        lhs = np.vdot(y, T @ x)          # <A x, y> = y^H (A x)
        rhs = np.vdot(T.H @ y, x)        # <x, A^H y> = (A^H y)^H x
        tol = 50 * np.finfo(dtype).eps * np.linalg.norm(T @ x) * np.linalg.norm(y)
        assert abs(lhs - rhs) <= tol


@pytest.mark.parametrize("s", [1, 2, 5, 17, 64])
def test_bitwise_identical_across_thread_counts(case, s):
    T, _, dtype = case
    rng = np.random.default_rng(3)
    m, n = T.shape
    X, Y = _rand(rng, (n, s), dtype), _rand(rng, (m, s), dtype)
    f1, a1 = T.matvec(X, n_threads=1), T.rmatvec(Y, n_threads=1)
    for nt in (2, 3, 4, 16):  # (16: tiles cut into ranges, wsesparse/tlr/_split.py)
        assert np.array_equal(T.matvec(X, n_threads=nt), f1)
        assert np.array_equal(T.rmatvec(Y, n_threads=nt), a1)


def test_columns_of_a_block_equal_single_vector_products(case):
    """Each output element has one fixed summation order: the register tile a vector lands
    in (its position in a block of s) does not change its bits."""
    T, _, dtype = case
    rng = np.random.default_rng(4)
    m, n = T.shape
    X, Y = _rand(rng, (n, 13), dtype), _rand(rng, (m, 13), dtype)
    F, A = T @ X, T.H @ Y
    for c in (0, 1, 5, 12):
        assert np.array_equal(F[:, c], T @ X[:, c])
        assert np.array_equal(A[:, c], T.H @ Y[:, c])
        assert np.array_equal(F[:, c:c + 3], T @ X[:, c:c + 3])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,nb", [(1, 1, 1), (7, 300, 300), (300, 7, 64), (97, 65, 97)])
def test_odd_shapes_and_long_rows(dtype, m, n, nb):
    """Single-element tiles, rows of 300 (many vector chunks plus a partial one), one tile."""
    rng = np.random.default_rng(5)
    k = min(m, n, 5)
    A = (_rand(rng, (m, k), dtype) @ _rand(rng, (k, n), dtype)).astype(dtype)
    T = TLRMatrix.from_dense(A, nb=nb, tol=1e-5 if np.finfo(dtype).eps < 1e-10 else 1e-3)
    D = T.toarray().astype(np.complex128)
    rtol = RTOL[dtype] * 10
    for s in (1, 2, 3, 7):
        X, Y = _rand(rng, (n, s), dtype), _rand(rng, (m, s), dtype)
        np.testing.assert_allclose(T @ X, D @ X, rtol=rtol, atol=rtol * np.abs(D).sum())
        np.testing.assert_allclose(T.H @ Y, D.conj().T @ Y, rtol=rtol,
                                   atol=rtol * np.abs(D).sum())


def test_all_zero_ranks_give_zeros():
    T = TLRMatrix.from_tiles((50, 40), 16, {}, dtype=np.complex64)
    assert T.ranks.sum() == 0
    assert not (T @ np.ones((40, 3), np.complex64)).any()
    assert not (T.H @ np.ones(50, np.complex64)).any()


@pytest.mark.parametrize("s", [1, 2, 5, 13])
def test_prefetch_does_not_change_the_bits(case, s):
    T, _, dtype = case
    X = _rand(np.random.default_rng(6), (T.shape[1], s), dtype)
    Y = _rand(np.random.default_rng(7), (T.shape[0], s), dtype)
    for level in (1, 2):
        on, off = kernel_product(T, X, prefetch=level), kernel_product(T, X, prefetch=0)
        assert on.tobytes() == off.tobytes()
        assert np.array_equal(on, T @ X)
        on = kernel_product(T, Y, adjoint=True, prefetch=level)
        off = kernel_product(T, Y, adjoint=True, prefetch=0)
        assert on.tobytes() == off.tobytes()
        assert np.array_equal(on, T.H @ Y)


@pytest.mark.parametrize("bad", [-1, 3])
def test_prefetch_level_checked(case, bad):
    T, _, dtype = case
    X = _rand(np.random.default_rng(6), (T.shape[1], 2), dtype)
    with pytest.raises(ValueError, match="prefetch must be 0, 1 or 2"):
        kernel_product(T, X, prefetch=bad)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_longer_than_the_streaming_buffer(dtype):
    """One right-hand side streams rows of up to 2048 reals (``TLR_NN_ROWS_MAX``) and hands
    longer ones to the register tiles. A 2100-row tile (phase 3 rows of 2100 elements) and a
    tile column whose ranks sum to 2100 (phase 1 rows of 2100) take the register path in one
    phase and the streaming path in the other; the single-vector product still equals the
    column of a block product bit for bit, and the dense product to rounding."""
    rng = np.random.default_rng(7)
    tall = {(0, 0): (_rand(rng, (2100, 3), dtype), _rand(rng, (9, 3), dtype))}
    wide = {(i, 0): (_rand(rng, (100, 100), dtype), _rand(rng, (100, 100), dtype))
            for i in range(21)}
    T1 = TLRMatrix.from_tiles((2100, 9), 2100, tall, dtype=dtype)
    T2 = TLRMatrix.from_tiles((2100, 100), 100, wide, dtype=dtype)
    assert int(T2.ranks.sum(axis=0).max()) == 2100
    for T in (T1, T2):
        D = T.toarray().astype(np.complex128)
        X = _rand(rng, (T.shape[1], 3), dtype)
        block = T @ X
        for c in range(3):
            assert np.array_equal(T @ X[:, c], block[:, c])
        rtol = RTOL[dtype] * 10
        np.testing.assert_allclose(T @ X[:, 0], D @ X[:, 0], rtol=rtol,
                                   atol=rtol * np.abs(D).sum(axis=1).max() * np.abs(X).max())


@pytest.mark.parametrize("dtype", DTYPES)
def test_register_tiles_of_every_remainder(dtype):
    """Rows longer than ``FORWARD_ROWS_MAX`` reals take the register tiles, one vector in
    32-byte vectors and several in 64-byte ones where the build has them
    (``_tlrmvm.FORWARD_TILES_ZMM``): chunks of 4, 2 and 1 vectors, then a masked partial one.
    Phase-3 rows of every length from ``FORWARD_ROWS_MAX + 1`` to 64 reals more (every
    remainder of a 4-vector chunk of either width), 40 of them (two panels of
    ``TLR_NN_TB`` = 32 rows: the second continues from the stored sums): each column of a
    product of 2, 3, 4 and 7 vectors equals the product of that vector alone bit for bit,
    and the dense product to rounding."""
    cx = np.dtype(dtype).kind == "c"
    rng = np.random.default_rng(21)
    rtol = RTOL[dtype] * 10
    first = _tlrmvm.FORWARD_ROWS_MAX + 1
    for h in sorted({(L + 1) // 2 if cx else L for L in range(first, first + 64)}):
        T = TLRMatrix.from_tiles((h, 48), h, {(0, 0): (_rand(rng, (h, 40), dtype),
                                                       _rand(rng, (48, 40), dtype))},
                                 dtype=dtype)
        X = _rand(rng, (48, 7), dtype)
        singles = [T @ X[:, c] for c in range(7)]
        for s in (2, 3, 4, 7):
            F = T @ X[:, :s]
            for c in range(s):
                assert F[:, c].tobytes() == singles[c].tobytes(), (h, s, c)
        D = T.toarray().astype(np.complex128)
        np.testing.assert_allclose(F, D @ X, rtol=rtol,
                                   atol=rtol * np.abs(D).sum(axis=1).max() * np.abs(X).max())
    assert isinstance(_tlrmvm.FORWARD_TILES_ZMM, bool)
    assert _tlrmvm.FORWARD_ROWS_ZMM or not _tlrmvm.FORWARD_TILES_ZMM  # (both need AVX-512F)


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_paths_give_the_same_bits(dtype):
    """The forward kernel takes right-hand sides three ways (``_tlrmvm.FORWARD_ROWS_*``): rows
    streamed for one vector, rows streamed for a group of vectors (one pass per group where
    there are more), and register tiles where more vectors than a group meet a block above
    ``FORWARD_ROWS_GROUP_BYTES``. One tile of rank 120 whose blocks exceed that size (the
    register tiles) and a small operator (a pass per group): the columns of a block product
    equal the products of one vector and of each group size, bit for bit, and the dense
    product to rounding."""
    cx = np.dtype(dtype).kind == "c"
    group = _tlrmvm.FORWARD_ROWS_GROUP * (1 if cx else 2)
    real_bytes = np.dtype(dtype).itemsize // (2 if cx else 1)
    k = 120  # phase-1 rows of k (complex: 2k) reals, phase-3 rows of w (2w)
    w = _tlrmvm.FORWARD_ROWS_GROUP_BYTES // (k * (2 if cx else 1) * real_bytes) + 1
    assert k <= w and w * (2 if cx else 1) <= _tlrmvm.FORWARD_ROWS_MAX
    rng = np.random.default_rng(11)
    big = TLRMatrix.from_tiles((w, w), w, {(0, 0): (_rand(rng, (w, k), dtype),
                                                    _rand(rng, (w, k), dtype))}, dtype=dtype)
    for T in (big, _random_tlr(dtype, seed=5)):
        X = _rand(rng, (T.shape[1], 2 * group + 3), dtype)
        F = T @ X
        for s in range(1, group + 1):
            assert np.array_equal(T @ X[:, :s], F[:, :s]), s
            assert np.array_equal(T @ X[:, 1:s + 1], F[:, 1:s + 1]), s
        for c in range(X.shape[1]):
            assert np.array_equal(T @ X[:, c], F[:, c]), c
        D = T.toarray().astype(np.complex128)
        rtol = RTOL[dtype] * 10
        np.testing.assert_allclose(F, D @ X, rtol=rtol,
                                   atol=rtol * np.abs(D).sum(axis=1).max() * np.abs(X).max())


@pytest.mark.parametrize("dtype", DTYPES)
def test_single_vector_rows_of_every_length(dtype):
    """One right-hand side streams its rows 64 bytes at a time where the build has AVX-512
    (``_tlrmvm.FORWARD_ROWS_ZMM``) and does not prefetch them (else 32), then a masked
    partial vector; the block products of several vectors take the register tiles. One tile
    of every rank up to 19 (the phase-1 rows) and every height up to 37 (the phase-3 rows):
    rows of 1 to 74 reals, every remainder of those vectors. At every prefetch level the
    single-vector product equals each column of a block product bit for bit, and the dense
    product to rounding."""
    rng = np.random.default_rng(12)
    rtol = RTOL[dtype] * 10
    for h, k in [(37, k) for k in range(1, 20)] + [(h, min(h, 3)) for h in range(1, 37)]:
        T = TLRMatrix.from_tiles((h, 23), 64, {(0, 0): (_rand(rng, (h, k), dtype),
                                                        _rand(rng, (23, k), dtype))},
                                 dtype=dtype)
        X = _rand(rng, (23, 5), dtype)
        block = T @ X
        for level in (0, 1, 2):
            for c in (0, 4):
                one = kernel_product(T, X[:, c:c + 1], prefetch=level)
                assert one.tobytes() == np.ascontiguousarray(block[:, c:c + 1]).tobytes(), (h, k)
        D = T.toarray().astype(np.complex128)
        np.testing.assert_allclose(block, D @ X, rtol=rtol,
                                   atol=rtol * np.abs(D).sum(axis=1).max() * np.abs(X).max())
    assert isinstance(_tlrmvm.FORWARD_ROWS_ZMM, bool)
    assert _tlrmvm.FORWARD_ROWS_PREFETCH in (1, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adjoint_rows_of_every_length(dtype):
    """The adjoint's dot products (``tlr_cn``) over rows of 1 to 74 reals, every remainder of
    its vectors: the phase-1 rows (tile heights 1-37) and the phase-3 rows (ranks 1-19),
    with rows of zeros. At every prefetch level the single-vector product equals each column
    of a block product bit for bit (also in the sign of zeros: ``tobytes``), and the dense
    product to rounding."""
    rng = np.random.default_rng(13)
    rtol = RTOL[dtype] * 10
    for h, k in [(37, k) for k in range(1, 20)] + [(h, min(h, 3)) for h in range(1, 37)]:
        U, V = _rand(rng, (h, k), dtype), _rand(rng, (23, k), dtype)
        U[h // 2:] = 0
        T = TLRMatrix.from_tiles((h, 23), 64, {(0, 0): (U, V)}, dtype=dtype)
        Y = _rand(rng, (h, 5), dtype)
        block = T.H @ Y
        for level in (0, 1, 2):
            for c in (0, 4):
                one = kernel_product(T, Y[:, c:c + 1], adjoint=True, prefetch=level)
                assert one.tobytes() == np.ascontiguousarray(block[:, c:c + 1]).tobytes(), (h, k)
        D = T.toarray().astype(np.complex128)
        np.testing.assert_allclose(block, D.conj().T @ Y, rtol=rtol,
                                   atol=rtol * np.abs(D).sum(axis=0).max() * np.abs(Y).max())


def test_prefetch_rule(monkeypatch):
    """The products prefetch bases larger than one core's L2 (level 1), and more of them
    beyond a third of L3 (level 2); an unknown size (0) counts as exceeded."""
    import dataclasses

    from wsesparse import _hardware
    hw = _hardware.current()

    def sizes(l2, l3):
        monkeypatch.setattr(_hardware, "current",
                            lambda: dataclasses.replace(hw, l2_bytes=l2, l3_bytes=l3))

    sizes(1 << 20, 30 << 20)
    share = (30 << 20) // tlr_matrix.L3_SHARE
    assert [tlr_matrix._prefetch_bases(n) for n in (1, 1 << 20, (1 << 20) + 1, share,
                                                    share + 1, 30 << 20)] == [0, 0, 1, 1, 2, 2]
    sizes(0, 32 << 20)
    assert tlr_matrix._prefetch_bases(1) == 1
    sizes(1 << 20, 0)
    assert [tlr_matrix._prefetch_bases(n) for n in (1 << 20, (1 << 20) + 1)] == [0, 2]


def test_vector_fast_path_equals_the_general_path(case):
    """``T @ x`` for a 1-D ``x`` of ``T``'s dtype skips the checks (matrix._apply); it gives
    the bits of the general path (a one-column block), strided and read-only ``x`` too."""
    T, _, dtype = case
    rng = np.random.default_rng(8)
    m, n = T.shape
    x2, y2 = _rand(rng, (2 * n,), dtype), _rand(rng, (2 * m,), dtype)
    for x, y in ((x2[:n], y2[:m]), (x2[::2], y2[::2])):
        x.flags.writeable = False
        assert np.array_equal(T @ x, (T @ x[:, None])[:, 0])
        assert np.array_equal(T.H @ y, (T.H @ y[:, None])[:, 0])
        assert (T @ x).shape == (m,) and (T.H @ y).dtype == np.dtype(dtype)


def _plan_args(T, adjoint=False, n_threads=2, vector_bytes=1 << 30):
    U, V = T._bases(T.dtype)
    index = (T.row_ptr, T.col_ptr, T.u_off, T.v_off, T.krow_ptr, T.kcol_ptr, T.perm)
    return [adjoint, U, V, index, *T._items(n_threads, adjoint), n_threads, 1, vector_bytes]


@pytest.mark.parametrize("adjoint", [False, True])
def test_plan_vector_takes_only_plain_vectors_of_its_dtype_and_length(case, adjoint):
    """``Plan.vector`` runs a 1-D product without the Python checks: anything but a plain
    ndarray of the plan's dtype, native byte order and length gives None (the general path
    then checks and converts it), and so does a plan whose arrays reach ``vector_bytes``;
    a strided x gives the bits of a contiguous one."""
    T, dense, dtype = case
    plan = _tlrmvm.Plan(*_plan_args(T, adjoint))
    m, n = T.shape
    n_in, n_out = (m, n) if adjoint else (n, m)
    assert (plan.n_in, plan.n_out, plan.adjoint, plan.n_threads) == (n_in, n_out, adjoint, 2)
    rng = np.random.default_rng(3)
    x2 = _rand(rng, (2 * n_in,), dtype)
    x = x2[::2].copy()
    y = plan.vector(x)
    assert y.shape == (n_out,) and y.dtype == np.dtype(dtype) and y.flags.c_contiguous
    want = (T.H @ x[:, None] if adjoint else T @ x[:, None])[:, 0]
    assert np.array_equal(y, want)
    assert np.array_equal(plan.vector(x2[::2]), y)                  # strided
    other = np.complex128 if np.dtype(dtype) != np.complex128 else np.complex64
    for bad in (x[:-1], np.append(x, x[:1]), x[:, None], x.astype(other),
                x.astype(x.dtype.newbyteorder()), np.ma.masked_array(x), list(x), None):
        assert plan.vector(bad) is None
    limit = (n_in + n_out + 2 * T._K) * x.itemsize   # (input, output, two work arrays)
    assert T._K > 0 and _tlrmvm.Plan(*_plan_args(T, adjoint, vector_bytes=limit)).vector(x) is None
    assert np.array_equal(_tlrmvm.Plan(*_plan_args(T, adjoint, vector_bytes=limit + 1)).vector(x),
                          y)
    assert np.array_equal(T.H @ x.astype(x.dtype.newbyteorder()) if adjoint
                          else T @ x.astype(x.dtype.newbyteorder()), y)  # (general path)


def test_plan_checks_its_arrays_once_and_the_vectors_at_each_call():
    """A Plan checks the operator's arrays when made and the input and output of each call,
    shapes included: ValueError naming the argument, never a read out of bounds."""
    T = _random_tlr(np.float64, m=40, n=30, nb=16)
    args = _plan_args(T)
    plan = _tlrmvm.Plan(*args)
    X, Y = np.ones((3, 30)), np.empty((3, 40))
    plan(X, Y)
    np.testing.assert_allclose(Y, X @ T.toarray().T)
    for a, b, match in [(np.ones((3, 29)), Y, r"need the input \(s, 30\)"),
                        (X, np.empty((3, 41)), "and the output"),
                        (X, np.empty((2, 40)), "and the output"),
                        (np.ones((30, 3)).T, Y, "the input must be a C-contiguous"),
                        (X.astype(">f8"), Y, "native byte order"),
                        (X, np.empty((3, 40), np.float32), "the output must be")]:
        with pytest.raises(ValueError, match=match):
            plan(a, b)
    for i, value, match in [(1, T.U.astype(np.float32), "V must be a C-contiguous"),
                            (6, 0, "n_threads must be >= 1"),
                            (7, 3, "prefetch must be 0, 1 or 2"),
                            (4, T._items(2, False)[0][:, :2].copy(), "must have 3 columns")]:
        bad = list(args)
        bad[i] = value
        with pytest.raises(ValueError, match=match):
            _tlrmvm.Plan(*bad)
    index = list(args[3])
    index[0] = np.zeros(0, np.int64)
    with pytest.raises(ValueError, match="row_ptr and col_ptr must not be empty"):
        _tlrmvm.Plan(*args[:3], tuple(index), *args[4:])
    with pytest.raises(ValueError, match="need the 7 index arrays"):
        _tlrmvm.Plan(*args[:3], tuple(index[:6]), *args[4:])


def test_plan_keeps_its_arrays_alive():
    """A Plan made of arrays nobody else holds keeps them: products after they are dropped
    and the heap reused give the same bits."""
    import gc

    T = _random_tlr(np.complex128, m=90, n=70, nb=16)
    x = _rand(np.random.default_rng(1), (70,), np.complex128)
    want = T @ x
    args = _plan_args(T)
    args[1:6] = [args[1].copy(), args[2].copy(), tuple(a.copy() for a in args[3]),
                 args[4].copy(), args[5].copy()]
    plan = _tlrmvm.Plan(*args)
    del args
    gc.collect()
    junk = [np.full(n, np.nan) for n in range(1, 3000, 7)]   # (reuses freed memory)
    assert np.array_equal(plan.vector(x), want) and len(junk) > 0


def test_vector_of_wrong_length_is_a_shape_error_before_n_threads():
    """The vector path checks the length before the thread count: a wrong one gets the
    shape error, as every other input does, whatever ``n_threads`` is."""
    T = _random_tlr(np.float64, m=40, n=30, nb=16)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="x needs 30 rows"):
            T.matvec(np.ones(31), n_threads=bad)
        with pytest.raises(ValueError, match="y needs 40 rows"):
            T.rmatvec(np.ones(30), n_threads=bad)


def test_phase_queues_hook_rejects_a_short_index_tuple():
    with pytest.raises(ValueError, match="need the index arrays"):
        _tlrmvm.phase_queues((np.zeros(3, np.int64),), np.zeros((0, 3), np.int64), False, 1, 2)


def test_vectors_beyond_the_check_size_take_the_checked_path(monkeypatch):
    """A vector product whose arrays reach CHECK_MIN_BYTES goes through the allocation
    check, as blocks do (the plan's vector_bytes)."""
    T = _random_tlr(np.float32, m=40, n=30, nb=16)
    x = np.ones(30, np.float32)
    checked = []
    monkeypatch.setattr(tlr_matrix, "check_allocation", lambda n, what: checked.append(n))
    want = T @ x
    assert checked == []
    monkeypatch.setattr(tlr_matrix, "CHECK_MIN_BYTES", 0)
    T.__dict__.pop("_plan_cache")
    assert np.array_equal(T @ x, want) and len(checked) == 1


def test_kernel_entry_points_reject_bad_arrays():
    """``tlr_matmat``/``tlr_rmatmat`` take the arrays' data pointers as they are, after
    checking types, layouts and writeability: a wrong one is a ValueError naming it, never
    a read of the wrong type."""
    from wsesparse._kernels import _tlrmvm

    T = _random_tlr(np.complex64, m=40, n=30, nb=16)
    U, V = T._bases(T.dtype)
    first, second = T._items(1, False)

    def args(**kw):
        a = dict(U=U, V=V, row_ptr=T.row_ptr, col_ptr=T.col_ptr, u_off=T.u_off, v_off=T.v_off,
                 krow_ptr=T.krow_ptr, kcol_ptr=T.kcol_ptr, perm=T.perm,
                 X=np.ones((2, 30), np.complex64), Y=np.empty((2, 40), np.complex64),
                 first=first, second=second)
        a.update(kw)
        return list(a.values()) + [1]

    _tlrmvm.tlr_matmat(*args())  # the valid call
    read_only = np.empty((2, 40), np.complex64)
    read_only.flags.writeable = False
    for kw, match in [
        (dict(U=np.zeros(U.shape, np.int32)), "U must be float32, float64, complex64 or"),
        (dict(V=V.astype(np.complex128)), "V must be a C-contiguous 1-D array of complex64"),
        (dict(perm=T.perm.astype(np.int32)), "perm must be a C-contiguous 1-D array of int64"),
        (dict(X=np.ones((30, 2), np.complex64).T), "the input must be a C-contiguous 2-D"),
        (dict(X=np.ones(30, np.complex64)), "the input must be a C-contiguous 2-D"),
        (dict(X=np.ones((2, 30), ">c8")), "the input must .*native byte order"),
        (dict(Y=read_only), "the output must be writeable"),
        (dict(first=first[:, :2].copy()), "the first phase's items must have 3 columns"),
        (dict(second=second.astype(np.float64)), "the last phase's items must be"),
    ]:
        with pytest.raises(ValueError, match=match):
            _tlrmvm.tlr_matmat(*args(**kw))
    with pytest.raises(TypeError):
        _tlrmvm.tlr_rmatmat(*args(U=list(U)))
    for name in ("U", "perm", "X", "Y", "first"):  # (None is no array: no pointer read)
        with pytest.raises(TypeError):
            _tlrmvm.tlr_matmat(*args(**{name: None}))


@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("s", [1, 3])
def test_kernel_allocates_its_work_arrays(adjoint, s):
    """The entry points allocate the two (s, K) work arrays themselves (uninitialized
    memory): every output element is written, and right, whatever was there before."""
    from wsesparse._kernels import _tlrmvm

    T = _random_tlr(np.float64, m=70, n=50, nb=16)
    m, n = T.shape
    X = np.random.default_rng(s).standard_normal((s, m if adjoint else n))
    out = np.full((s, n if adjoint else m), np.nan)
    (_tlrmvm.tlr_rmatmat if adjoint else _tlrmvm.tlr_matmat)(
        T.U, T.V, T.row_ptr, T.col_ptr, T.u_off, T.v_off, T.krow_ptr, T.kcol_ptr, T.perm,
        X, out, *T._items(2, adjoint), 2, 1)
    dense = T.toarray()
    assert np.allclose(out, X @ (dense.conj() if adjoint else dense.T))


_SMALL_TEAM = """
import json, numpy as np
from wsesparse import TLRMatrix
from wsesparse._kernels import _spmm
from wsesparse.datasets import random_csr
rng = np.random.default_rng(0)
A = rng.standard_normal((700, 600)) @ rng.standard_normal((600, 650)) / 30
T = TLRMatrix.from_dense(A.astype(np.complex64) * (1 + 0.5j), nb=64, tol=1e-3)
X = (rng.standard_normal((650, 5)) + 1j).astype(np.complex64)
Y = (rng.standard_normal((700, 5)) + 1j).astype(np.complex64)
same = []
for s in (1, 5):
    f1, a1 = T.matvec(X[:, :s], n_threads=1), T.rmatvec(Y[:, :s], n_threads=1)
    for nt in (3, 16):
        same.append(bool(np.array_equal(T.matvec(X[:, :s], n_threads=nt), f1)))
        same.append(bool(np.array_equal(T.rmatvec(Y[:, :s], n_threads=nt), a1)))
S = random_csr(3000, 3000, 0.01, np.float64, seed=1)
x = rng.standard_normal(3000)
for nt in (3, 16):
    y1, y = np.full(3000, np.nan), np.full(3000, np.nan)
    _spmm.csr_spmv(S.indptr, S.indices, S.data, x, y1, 4 * nt, 1)
    _spmm.csr_spmv(S.indptr, S.indices, S.data, x, y, 4 * nt, nt)
    same.append(y.tobytes() == y1.tobytes())
print(json.dumps(same))
"""


def test_teams_smaller_than_asked_take_every_item():
    """Under OMP_THREAD_LIMIT=2 a call that asks 3 or 16 threads gets 2: the work items of
    the queues of threads that never came are taken from the others' (the TLR phases depend
    on that, _part_queues.h; the SpMV's loop runs their iterations on the threads it has).
    The products are one thread's, bit for bit."""
    if not _tlrmvm.openmp_enabled():
        pytest.skip("wsesparse was built without OpenMP")
    res = subprocess.run([sys.executable, "-c", _SMALL_TEAM], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, OMP_THREAD_LIMIT="2",
                                               WSESPARSE_LOAD_AWARE="0"))
    assert res.returncode == 0, res.stderr
    same = json.loads(res.stdout)
    assert len(same) == 10 and all(same), same


@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("s", [1, 5])
def test_part_trace_records_the_three_phases(adjoint, n_threads, s):
    """Armed, the next product records its phases as one sweep: phase 1's items, phase 2's
    blocks of positions, phase 3's items, each taken once by a thread of the team and
    within the call; a phase starts after the last item of the one before ends (the
    barrier between them). Unarmed, a product leaves the trace as it was."""
    T = _random_tlr(np.complex64, m=300, n=280, nb=40)
    items1, items3 = T._items(n_threads, adjoint)
    m, n = T.shape
    K = T.perm.shape[0]
    X = _rand(np.random.default_rng(s), (s, m if adjoint else n), np.complex64)

    def call():
        out = np.empty((s, n if adjoint else m), np.complex64)
        (_tlrmvm.tlr_rmatmat if adjoint else _tlrmvm.tlr_matmat)(
            T.U, T.V, T.row_ptr, T.col_ptr, T.u_off, T.v_off, T.krow_ptr, T.kcol_ptr,
            T.perm, X, out, items1, items3, n_threads, 1)

    n1, n2, n3 = len(items1), -(-K // _tlrmvm.shuffle_block(K, n_threads)), len(items3)
    _tlrmvm.part_trace_arm(n1 + n2 + n3)
    assert _tlrmvm.part_trace() is None
    call()
    parts, joined, phases = _tlrmvm.part_trace()
    assert parts.shape == (n1 + n2 + n3, 3) and phases == (n1, n1 + n2)
    assert 16 <= _tlrmvm.shuffle_block(K, n_threads) <= 512
    assert ((parts[:, 0] >= 0) & (parts[:, 0] < n_threads)).all()
    assert (parts[:, 1] >= 0).all() and (parts[:, 1] <= parts[:, 2]).all()
    assert (parts[:, 2] <= joined).all()
    for a, b, c in [(0, n1, n1 + n2), (n1, n1 + n2, n1 + n2 + n3)]:
        assert parts[a:b, 2].max() <= parts[b:c, 1].min()
    call()
    np.testing.assert_array_equal(_tlrmvm.part_trace()[0], parts)
    _tlrmvm.part_trace_arm(n1 + n2 + n3 - 1)  # (too few parts: taken, nothing recorded)
    call()
    assert _tlrmvm.part_trace() is None
