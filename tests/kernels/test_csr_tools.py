"""``wsesparse._kernels._csr_tools``: the structure check ``csr_check`` and its return codes,
the transposes (``csr_transpose``, ``transpose_into``) and ``densify_into``, bit for bit
against scipy, and their re-checks of their operands."""

import numpy as np
import pytest
import scipy.sparse as sp

from kernel_helpers import with_duplicates
from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _csr_tools
from wsesparse._kernels._csr_tools import (CSR_BAD_INDEX, CSR_BAD_START, CSR_DECREASING,
                                           CSR_OK, CSR_SHORT)


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


def test_csr_check_can_leave_the_indices_to_the_product():
    ok = np.array([0, 1, 2], dtype=np.int32)
    wild = np.array([0, 99], dtype=np.int32)
    assert _csr_tools.csr_check(ok, wild, 5, 1, check_indices=False) == CSR_OK
    assert _csr_tools.csr_check(ok, wild, 5, 1, check_indices=True) == CSR_BAD_INDEX
    # indptr is still checked:
    assert _csr_tools.csr_check(ok + 1, wild, 5, 1, check_indices=False) == CSR_BAD_START


# -- transposes --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, bool,
                                   np.int8, np.int16, np.uint64, np.longdouble])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(300, 200), (1, 500), (500, 1), (0, 5), (5, 0), (40, 40)])
def test_transpose_is_scipys(dtype, itype, shape):
    """csr_transpose gives scipy's B.T.tocsr() arrays exactly (stable: rows of B.T by
    column of B, duplicates in storage order), for unsorted and duplicate entries, empty
    rows, any thread count, values longer than nnz."""
    rng = np.random.default_rng(5)
    B = with_duplicates(sp.random(*shape, density=0.1, format="csr", random_state=5)
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


# -- densify_into ------------------------------------------------------------------------------
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_value_codes_give_the_values_back_bit_for_bit(dtype):
    """``value_codes``: ``table[codes]`` has the bytes of the values (-0.0 apart from 0.0,
    NaN payloads, infinities), the table in order of first appearance then zeros; None
    from the 257th distinct bit pattern on, also where each thread's chunk has 256 or
    fewer; the same result for every thread count."""
    rng = np.random.default_rng(0)
    real = np.dtype(dtype)
    nan2 = (np.uint32(0x7FC12345) if real == np.float32
            else np.uint64(0x7FF0000000000001)).view(real)
    special = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, nan2], dtype=dtype)
    for n in (0, 1, 5, 70_000, 300_001):
        v = np.concatenate([special, rng.integers(-100, 150, n).astype(dtype)])[:n]
        results = [_csr_tools.value_codes(v, threads) for threads in (1, 2, 3, 8)]
        codes, table = results[0]
        assert codes.dtype == np.uint8 and codes.shape == (n,)
        assert table.dtype == real and table.shape == (_csr_tools.VALUE_CODES,)
        assert table[codes].tobytes() == v.tobytes()
        distinct = len({b for b in v.view(np.uint32 if real == np.float32 else np.uint64)})
        assert not table[distinct:].any()
        for c, t in results[1:]:
            assert c.tobytes() == codes.tobytes() and t.tobytes() == table.tobytes()
    assert _csr_tools.value_codes(np.arange(256, dtype=dtype))[1][-1] == 255
    assert _csr_tools.value_codes(np.arange(257, dtype=dtype)) is None
    halves = np.concatenate([np.repeat(np.arange(200), 700), np.repeat(np.arange(200, 400), 700)])
    for threads in (1, 2, 4):
        assert _csr_tools.value_codes(halves.astype(dtype), threads) is None
    for threads in (0, -1, -(1 << 31)):   # (as one thread; -1 aborted the interpreter)
        c, t = _csr_tools.value_codes(halves[:1000].astype(dtype), threads)
        assert t[c].tobytes() == halves[:1000].astype(dtype).tobytes()


def test_value_codes_refuse_other_arrays():
    for bad in (np.arange(4), np.ones(4, np.complex128), np.ones((2, 2)), np.ones(8)[::2],
                np.ones(4, ">f8")):
        with pytest.raises(TypeError, match="float32 or float64"):
            _csr_tools.value_codes(bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128], ids=str)
def test_all_finite_matches_numpy(dtype):
    """``all_finite`` is ``np.isfinite(x).all()``: inf, -inf and NaN anywhere (either part of
    a complex; NaNs with other payloads; the last entry of an odd length), for 0-D to 2-D
    arrays; strided, byte-swapped and integer arrays go to numpy."""
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 8, 33, 1001):
        x = (rng.standard_normal(n) * 1e30).astype(dtype)
        assert _csr_tools.all_finite(x) is True
        real = np.finfo(dtype).dtype
        bits = (np.uint32(0x7FC12345) if real == np.float32
                else np.uint64(0x7FF0000000000001))  # (a NaN with another payload)
        nan2 = bits.view(real)
        for pos in {0, n // 2, n - 1} if n else ():
            for v in (np.inf, -np.inf, np.nan, nan2):
                for part in range(2 if x.dtype.kind == "c" else 1):
                    y = x.copy()
                    y.view(real).reshape(-1, 2 if y.dtype.kind == "c" else 1)[pos, part] = v
                    assert not np.isfinite(y).all()
                    assert _csr_tools.all_finite(y) is False
    X = rng.standard_normal((5, 4)).astype(dtype)
    assert _csr_tools.all_finite(X) and _csr_tools.all_finite(np.asarray(X[0, 0]))
    X[4, 3] = np.inf
    assert not _csr_tools.all_finite(X)
    assert not _csr_tools.all_finite(X[:, 3])             # (strided: numpy)
    assert not _csr_tools.all_finite(X.astype(X.dtype.newbyteorder()))
    assert _csr_tools.all_finite(np.arange(3)) and _csr_tools.all_finite(np.zeros(2, np.float16))
    buf = np.zeros(8 * 5 + 1, np.uint8)
    odd = np.frombuffer(buf.data, np.float64, count=5, offset=1)  # (misaligned: numpy's)
    assert _csr_tools.all_finite(odd)
    with pytest.raises(TypeError):
        _csr_tools.all_finite(None)


def test_lil_check_codes():
    """``lil_check``: OK, unequal lengths, an index out of range (negative, the width, beyond
    int64); anything but 1-D object arrays of exact lists of Python ints of one length is
    LIL_OTHER, for the caller's Python check (never an exception or a crash)."""
    def lists(*rows):
        a = np.empty(len(rows), object)
        a[:] = [list(r) for r in rows]
        return a

    ok, lengths = _csr_tools.LIL_OK, _csr_tools.LIL_LENGTHS
    bad, other = _csr_tools.LIL_BAD_COL, _csr_tools.LIL_OTHER
    rows, data = lists([0, 2], [], [1]), lists([1.0, 2.0], [], [3.0])
    assert _csr_tools.lil_check(rows, data, 3) == ok
    assert _csr_tools.lil_check(lists(), lists(), 0) == ok
    assert _csr_tools.lil_check(rows, data, 2) == bad
    assert _csr_tools.lil_check(rows, lists([1.0], [], [3.0]), 3) == lengths
    for col in (-1, 2**63, 2**70):
        assert _csr_tools.lil_check(lists([col]), lists([1.0]), 3) == bad
    for col in (np.int64(1), 1.0, True, "1", None):
        assert _csr_tools.lil_check(lists([col]), lists([1.0]), 3) == other
    tuples = np.empty(1, object)
    tuples[0] = (0,)
    assert _csr_tools.lil_check(tuples, lists([1.0]), 3) == other
    assert _csr_tools.lil_check(list(rows), data, 3) == other          # (a Python list)
    assert _csr_tools.lil_check(rows.reshape(3, 1), data, 3) == other  # (2-D)
    assert _csr_tools.lil_check(rows, data[:2], 3) == other            # (two lengths)
    assert _csr_tools.lil_check(None, None, 3) == other
