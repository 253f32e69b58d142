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
from hypothesis import given
from hypothesis import strategies as st

from matmul_helpers import assert_matches, random_sparse
from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _csr_tools
from wsesparse._structure import check_sparse_structure, triplet_csr_arrays


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
    elif how == "coo_data_2d":
        S = sp.coo_array(A, copy=True)
        S.data = S.data.reshape(-1, 1)
    elif how == "coo_extra_coords":
        S = sp.coo_array(A, copy=True)
        S.coords = (*S.coords, np.full(S.nnz, 10**9))  # (scipy's product read the last two)
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
                     "coo_data_2d", "coo_extra_coords",
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


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("check", ["C", "python"])
def test_lil_column_indices(rng, check, side, monkeypatch):
    """A LIL's lists are checked in one pass in C where they are what scipy builds (lists
    of Python ints), else in Python: either way a float, NaN, a string or an object that
    changes the lists as it converts is a TypeError naming the operand (a first version ran
    scipy's own LIL loops, which let a row grown meanwhile overflow their buffer: a
    review); an index out of range or lists of two lengths a ValueError. An int beyond
    int64 is out of range for the C pass and of no integer dtype for the Python check."""
    if check == "python":
        monkeypatch.setattr(_csr_tools, "lil_check", lambda *a: _csr_tools.LIL_OTHER)
    name = "A" if side == "left" else "B"

    def corrupt(bad_rows, bad_data):
        S = sp.lil_array(_base(rng) if side == "left" else _base(rng).T)
        S.rows[0], S.data[0] = bad_rows, bad_data
        return S

    def product(S):
        if side == "left":
            return sparse_matmul(S, np.arange(S.shape[1] * 1.0))
        return sparse_matmul(np.arange(S.shape[0] * 1.0), S)

    class Grows:  # (changes the lists when it is converted)
        def __index__(self):
            S.rows[1].extend([2] * 1000)
            S.data[1].extend([1.0] * 1000)
            return 1

        __int__ = __index__

    for bad in ([1.5], [float("nan")], ["a"], [Grows()]):
        S = corrupt(bad, [1.0])
        with pytest.raises(TypeError, match=rf"^{name} \(lil\) has a corrupt structure"):
            product(S)
    S = corrupt([2**70], [1.0])
    with pytest.raises(ValueError if check == "C" else TypeError,
                       match=rf"^{name} \(lil\) has a corrupt structure"):
        product(S)
    for bad_rows, bad_data in (([0, 99], [1.0, 1.0]), ([-1], [1.0]), ([0, 1], [1.0])):
        with pytest.raises(ValueError, match=rf"^{name} \(lil\) has a corrupt structure"):
            product(corrupt(bad_rows, bad_data))
    S = sp.lil_array(np.eye(3))
    S.rows = S.rows.reshape(3, 1)  # (not a 1-D object array)
    with pytest.raises(TypeError, match=r"^B \(lil\) has a corrupt structure: rows must be"):
        sparse_matmul(np.ones(3), S)


def test_lil_lists_of_other_types(rng):
    """rows / data other than scipy's 1-D object arrays of lists (a tuple, an ndarray, a
    list subclass or None as a row, a Python list of rows) passed the check and then failed
    in scipy's ``tocsr`` with an unnamed TypeError ("Expected list, got tuple"); now a
    TypeError naming the operand. numpy integers as indices still give scipy's product."""
    class Sub(list):
        pass

    for what, bad in (("rows", (0,)), ("rows", np.array([0])), ("rows", Sub([0])),
                      ("rows", None), ("data", (1.0,))):
        S = sp.lil_array(np.eye(3))
        getattr(S, what)[0] = bad
        with pytest.raises(TypeError, match=rf"^A \(lil\) has a corrupt structure: {what}"):
            sparse_matmul(S, np.arange(3.0))
    S = sp.lil_array(np.eye(3))
    S.rows = [list(r) for r in S.rows]
    with pytest.raises(TypeError, match=r"rows must be a 1-D object array of lists"):
        CSR(S)
    S = sp.lil_array(np.eye(3))
    S.rows[0] = [np.int64(0)]
    np.testing.assert_array_equal(sparse_matmul(S, np.arange(3.0)), np.arange(3.0))


def test_coo_coordinates_of_equal_int64_types(rng):
    """longlong coordinates (on Linux another dtype equal to int64, which the C functions
    refused) and byte-swapped ones give scipy's product."""
    S = sp.coo_array(_base(rng))
    x = np.arange(8.0)
    ref = S @ x
    for t in (np.longlong, np.dtype(">i4"), np.dtype(">i8")):
        S.coords = tuple(c.astype(t) for c in S.coords)
        np.testing.assert_allclose(sparse_matmul(S, x), ref, rtol=1e-13)
        np.testing.assert_allclose(sparse_matmul(S, np.ones((8, 3))), S.tocsr() @ np.ones((8, 3)))
        np.testing.assert_allclose(CSR(S).to_scipy() @ x, ref, rtol=1e-13)


@pytest.mark.parametrize("fmt", ["coo", "bsr", "dia", "lil", "dok"])
def test_valid_other_formats_still_pass(rng, fmt):
    """The structure checks accept every valid matrix (incl. duplicates in COO)."""
    A = _base(rng)
    S = sp.bsr_array(A, blocksize=(2, 2)) if fmt == "bsr" else A.asformat(fmt)
    X = rng.standard_normal((8, 3))
    assert_matches(sparse_matmul(S, X), S @ X, S, X)
    dup = sp.coo_array((np.ones(3), (np.array([0, 0, 1]), np.array([2, 2, 0]))), shape=(2, 3))
    np.testing.assert_array_equal(sparse_matmul(dup, np.ones(3)), [2.0, 1.0])


# -- COO: one counting sort instead of numpy's stable argsort (triplet_csr_arrays) ---------
COO_VALUE_DTYPES = [np.bool_, np.int8, np.float16, np.float32, np.float64, np.complex64,
                    np.complex128, np.longdouble, np.clongdouble]


def _shuffled_coo(rng, m, n, nnz, dtype, coord_dtypes=(np.int32, np.int32)):
    """A COO array of ``nnz`` entries in random order, with duplicates where nnz > m * n."""
    row = rng.integers(0, m, nnz) if m else np.zeros(0, int)
    col = rng.integers(0, n, nnz) if n else np.zeros(0, int)
    if not (m and n):
        nnz = 0
    S = sp.coo_array((np.ones(nnz), (row[:nnz], col[:nnz])), shape=(m, n))
    S.data = random_values_any(rng, nnz, dtype)   # (float16: scipy's constructor refuses it)
    S.coords = (S.row.astype(coord_dtypes[0]), S.col.astype(coord_dtypes[1]))
    return S


def random_values_any(rng, n, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(n) < 0.5
    v = rng.integers(-9, 10, n) if dtype.kind in "iu" else rng.standard_normal(n)
    if dtype.kind == "c":
        v = v + 1j * rng.standard_normal(n)
    return v.astype(dtype)


def _reference_csr(row, col, data, m):
    order = np.argsort(row, kind="stable")
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=m), out=indptr[1:])
    return indptr, col[order], data[order]


@given(m=st.integers(0, 30), n=st.integers(0, 30), nnz=st.integers(0, 200),
       dtype=st.sampled_from(COO_VALUE_DTYPES), transpose=st.booleans(),
       coords=st.sampled_from([(np.int32, np.int32), (np.int64, np.int64), (np.int32, np.int64),
                               (np.uint16, np.int64)]),
       seed=st.integers(0, 2**32 - 1))
def test_triplet_csr_arrays_is_a_stable_sort(m, n, nnz, dtype, transpose, coords, seed):
    """Each row's entries in storage order, duplicates kept, values bit for bit, int32
    indices, for every value dtype (32-byte ones through numpy's sort) and index type."""
    S = _shuffled_coo(np.random.default_rng(seed), m, n, nnz, dtype, coords)
    row, col = (S.col, S.row) if transpose else (S.row, S.col)
    rows = n if transpose else m
    want = _reference_csr(row.astype(np.int64), col.astype(np.int64), S.data, rows)
    got = triplet_csr_arrays(S, "A", transpose)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert got[2].dtype == S.data.dtype and got[2].tobytes() == want[2].tobytes()
    if dtype != np.clongdouble:    # (numpy's sort keeps the coordinates' type)
        assert got[0].dtype == got[1].dtype == np.int32


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("n_tokens", [None, 1, 8])
def test_shuffled_coo_with_duplicates_products(rng, side, n_tokens):
    """Entries in random order with duplicates: the same product as scipy's, and the same
    ``CSR`` as one built from scipy's own (summed) conversion."""
    S = _shuffled_coo(rng, 40, 30, 500, np.float64)
    k = 40 if side == "right" else 30
    X = rng.standard_normal((k,) if n_tokens is None else (n_tokens, k) if side == "right"
                            else (k, n_tokens))
    args = (S, X) if side == "left" else (X, S)
    assert_matches(sparse_matmul(*args), args[0] @ args[1], *args)
    np.testing.assert_allclose(CSR(S).to_scipy().toarray(), S.toarray(), rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float64, np.clongdouble], ids=str)
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("which, value", [("row", 12), ("row", -1), ("col", 8), ("col", -3)])
def test_triplet_csr_arrays_names_the_bad_coordinate(rng, which, value, transpose, dtype):
    """The error names the coordinate as the operand stores it, also when the product
    converts its transpose (``X @ A``), and for the values numpy sorts (clongdouble: the
    transposed case named the other axis and bound)."""
    S = sp.coo_array(_base(rng))
    S.data = S.data.astype(dtype)
    getattr(S, which)[len(S.data) // 2] = value
    bound = S.shape[0 if which == "row" else 1]
    with pytest.raises(ValueError, match=rf"^B \(coo\) has a corrupt structure: a {which} "
                                         rf"index is negative or not below {bound}$"):
        triplet_csr_arrays(S, "B", transpose)
    with pytest.raises(ValueError, match=rf"a {which} index is negative or not below {bound}$"):
        check_sparse_structure(S, "B")


def test_coo_check_codes():
    i32 = np.int32
    ok, bad_row, bad_col = _csr_tools.COO_OK, _csr_tools.COO_BAD_ROW, _csr_tools.COO_BAD_COL
    assert _csr_tools.coo_check(np.array([0, 2], i32), np.array([1, 0], i32), 3, 2) == ok
    assert _csr_tools.coo_check(np.array([0, 3], i32), np.array([1, 0], i32), 3, 2) == bad_row
    assert _csr_tools.coo_check(np.array([0, 2], i32), np.array([-1, 0], i32), 3, 2) == bad_col
    assert _csr_tools.coo_check(np.array([5], i32), np.array([5], i32), 3, 2) == bad_row
    assert _csr_tools.coo_check(np.zeros(0, i32), np.zeros(0, i32), 0, 0) == ok
    assert _csr_tools.coo_check(np.array([0], np.int64), np.array([0], np.int64), 0, 1) == bad_row
    with pytest.raises(ValueError, match="must both be int32 or both int64"):
        _csr_tools.coo_check(np.array([0], i32), np.array([0], np.int64), 1, 1)
    with pytest.raises(ValueError, match="one length"):
        _csr_tools.coo_check(np.array([0, 0], i32), np.array([0], i32), 1, 1)
    code, *arrays = _csr_tools.coo_tocsr(np.array([0, 4], i32), np.array([0, 0], i32),
                                         np.ones(2), 3, 1)
    assert code == bad_row and arrays == [None, None, None]
    rc = (np.array([0, 1], i32), np.array([0, 0], i32))
    with pytest.raises(ValueError, match="one value per entry"):
        _csr_tools.coo_tocsr(*rc, np.ones(3), 3, 1)
    with pytest.raises(ValueError, match="one value per entry"):
        _csr_tools.coo_tocsr(*rc, np.ones(4)[::2], 3, 1)
    with pytest.raises(TypeError, match="32-byte values"):
        _csr_tools.coo_tocsr(*rc, np.ones(2, np.clongdouble), 3, 1)
    with pytest.raises(ValueError, match="nonnegative"):
        _csr_tools.coo_tocsr(*rc, np.ones(2), -1, 1)


def test_coo_uint64_coordinates_give_scipy_s_product(rng):
    """scipy's own product rejects uint64 coordinates ("unsupported data types in input",
    naming nothing); the vector takes the kernels' path, which converts them."""
    S = sp.coo_array(_base(rng))
    ref = S @ np.arange(8.0)
    S.coords = tuple(c.astype(np.uint64) for c in S.coords)
    np.testing.assert_allclose(sparse_matmul(S, np.arange(8.0)), ref, rtol=1e-13)
    np.testing.assert_allclose(sparse_matmul(np.arange(12.0), S), np.arange(12.0) @ S.tocsr(),
                               rtol=1e-13)


def test_coo_tocsr_while_another_thread_writes_the_coordinates():
    """coo_tocsr reads the coordinates twice without the GIL. A thread that changes them
    in between (here a row index between 5 and 10**12) made the second pass write out of
    bounds (a segfault in a review's reproducer); now it reads each once, and the call
    returns a code or arrays that are a valid CSR structure, never indices out of
    range."""
    import threading
    n, m = 200_000, 1000
    row = np.random.default_rng(0).integers(0, m, n)
    col, data = row.copy(), np.ones(n)
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            row[n // 2] = 10**12
            row[n // 2] = 5

    t = threading.Thread(target=writer)
    t.start()
    codes = set()
    try:
        for _ in range(100):
            code, indptr, indices, _values = _csr_tools.coo_tocsr(row, col, data, m, m)
            codes.add(code)
            if code == _csr_tools.COO_OK:
                assert indptr[0] == 0 and indptr[-1] == n and (np.diff(indptr) >= 0).all()
                assert indices.min() >= 0 and indices.max() < m
    finally:
        stop.set()
        t.join()
    assert codes <= {_csr_tools.COO_OK, _csr_tools.COO_BAD_ROW}


def test_coo_uint64_coordinates_beyond_int64_are_rejected(rng):
    S = sp.coo_array(_base(rng))
    row = S.row.astype(np.uint64)
    row[0] = np.uint64(2**63 + 5)   # (wraps negative as int64)
    S.coords = (row, S.col)         # (the row setter would convert it to S.col's type)
    with pytest.raises(ValueError, match="a row index is negative"):
        sparse_matmul(S, np.ones(8))
    with pytest.raises(ValueError, match="a row index is negative"):
        CSR(S)


# -- DOK: the keys read in one pass in C (_csr_tools.dok_items) -------------------------------
DOK_KEY_TYPES = [int, np.int8, np.int16, np.int32, np.int64, np.longlong, np.uint8, np.uint16,
                 np.uint32, np.uint64, np.ulonglong]


def _dok_with_keys(rng, m, n, nnz, key_type, dtype=np.float64):
    """A DOK array whose keys are pairs of ``key_type``, entries in random order."""
    S = sp.dok_array((m, n), dtype=dtype)
    d = getattr(S, "_dict", S)
    for r, c, v in zip(rng.integers(0, m, nnz), rng.integers(0, n, nnz),
                       random_values_any(rng, nnz, dtype)):
        d[(key_type(r), key_type(c))] = v
    return S


@pytest.mark.parametrize("key_type", DOK_KEY_TYPES, ids=lambda t: t.__name__)
@pytest.mark.parametrize("transpose", [False, True])
def test_dok_arrays_are_its_entries_in_dict_order(rng, key_type, transpose):
    """Keys of Python ints and of every numpy integer type: the CSR arrays hold each row's
    entries in the dict's order, the values bit for bit (a stable sort of the items)."""
    S = _dok_with_keys(rng, 13, 9, 60, key_type, np.complex64)
    d = getattr(S, "_dict", S)
    row = np.array([int(k[1 if transpose else 0]) for k in d], dtype=np.int64)
    col = np.array([int(k[0 if transpose else 1]) for k in d], dtype=np.int64)
    data = np.array(list(d.values()), dtype=np.complex64)
    want = _reference_csr(row, col, data, 9 if transpose else 13)
    got = triplet_csr_arrays(S, "A", transpose)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert got[2].dtype == np.complex64


@pytest.mark.parametrize("key_type", [int, np.int32, np.uint64], ids=lambda t: t.__name__)
@pytest.mark.parametrize("n_tokens", [None, 1, 8])
def test_dok_products(rng, key_type, n_tokens):
    """``D @ X``, ``X @ D`` and ``CSR(D)`` against scipy's products of ``D.tocsr()``."""
    S = _dok_with_keys(rng, 40, 30, 300, key_type)
    C = S.tocsr()
    X = rng.standard_normal((30,) if n_tokens is None else (30, n_tokens))
    Y = rng.standard_normal((40,) if n_tokens is None else (n_tokens, 40))
    assert_matches(sparse_matmul(S, X), C @ X, C, X)
    assert_matches(sparse_matmul(Y, S), Y @ C, Y, C)
    np.testing.assert_array_equal(CSR(S).to_scipy().toarray(), C.toarray())


@pytest.mark.parametrize("key, which, bound", [
    ((13, 0), "row", 13), ((-1, 0), "row", 13), ((0, 9), "column", 9),
    ((np.int8(-3), np.int8(0)), "row", 13), ((np.uint64(2**64 - 1), 0), "row", 13),
    ((0, np.uint64(2**63)), "column", 9), ((2**70, 0), "row", 13), ((0, -2**70), "column", 9)])
@pytest.mark.parametrize("side", ["left", "right"])
def test_dok_key_out_of_range(rng, key, which, bound, side):
    """A key past the shape (scipy's own setter refuses it; the dict does not), also beyond
    int64: a ValueError naming the operand, the format and the axis, on either side."""
    S = _dok_with_keys(rng, 13, 9, 20, int)
    getattr(S, "_dict", S)[key] = 1.0
    args, name = ((S, np.ones((9, 2))), "A") if side == "left" else ((np.ones((2, 13)), S), "B")
    with pytest.raises(ValueError, match=rf"^{name} \(dok\) has a corrupt structure: a {which} "
                                         rf"index is negative or not below {bound}$"):
        sparse_matmul(*args)
    with pytest.raises(ValueError, match=rf"a {which} index is negative or not below {bound}$"):
        check_sparse_structure(S, "A")


@pytest.mark.parametrize("key", [(1.0, 2), (1, 2, 3), (1,), "ab", (None, 1), ("1", 2),
                                 (np.float32(1), 2), (np.bool_(True), 2)], ids=repr)
@pytest.mark.parametrize("side", ["left", "right"])
def test_dok_keys_that_are_not_pairs_of_ints(rng, key, side):
    """Keys the C pass does not take go to a walk in Python, which refuses all but pairs of
    integers with a ValueError naming the operand, its format and the key."""
    assert _csr_tools.dok_items({key: 1.0}, np.float64)[0] is False
    S = _dok_with_keys(rng, 13, 9, 20, int)
    getattr(S, "_dict", S)[key] = 1.0
    args, name = ((S, np.ones(9)), "A") if side == "left" else ((np.ones((2, 13)), S), "B")
    with pytest.raises(ValueError, match=rf"^{name} \(dok\) has a corrupt structure: keys must "
                                         rf"be \(row, col\) pairs of ints, got"):
        sparse_matmul(*args)


class _Dict(dict):
    pass


@pytest.mark.parametrize("how", ["bool keys", "dict subclass"])
def test_dok_keys_the_python_walk_takes(rng, how):
    """Python's bools are integers (``(True, 2)`` is the key ``(1, 2)`` to a dict) and a dict
    subclass may hold valid keys: both through the Python walk, products as scipy's of
    ``D.tocsr()``. (numpy's bools are not integers to numpy: refused above.)"""
    S = _dok_with_keys(rng, 13, 9, 40, np.int32)
    d = getattr(S, "_dict", S)
    if how == "bool keys":
        d[(True, False)] = 5.0
        d[(False, 8)] = -1.0
    elif hasattr(S, "_dict"):
        S._dict = _Dict(d)
    assert _csr_tools.dok_items(getattr(S, "_dict", S), S.dtype)[0] is False
    C = S.tocsr()
    X = rng.standard_normal((9, 3))
    assert_matches(sparse_matmul(S, X), C @ X, C, X)
    assert_matches(sparse_matmul(X.T, S.T), X.T @ C.T, X.T, C.T)


# -- LIL: checked and converted in C (_csr_tools.lil_tocsr) -----------------------------------
LIL_DTYPES = [np.float64, np.float32, np.complex128, np.complex64, np.int64, np.int8,
              np.bool_, np.longdouble]


@pytest.mark.parametrize("dtype", LIL_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("values", ["tolil", "assigned", "mixed"])
def test_lil_tocsr_is_scipys_tocsr(rng, dtype, values):
    """The CSR arrays scipy's ``tocsr`` builds, values equal, whether the lists hold Python
    scalars (``tolil``), numpy scalars (item assignment) or both, all read in C."""
    A = random_sparse(rng, 30, 20, 0.3, np.float64)
    L = sp.lil_array(A.astype(dtype)) if values != "assigned" else sp.lil_array(A.shape,
                                                                               dtype=dtype)
    if values != "tolil":
        for i, j in zip(*A.nonzero()):
            if values == "assigned" or (i + j) % 2:
                L[i, j] = dtype(A[i, j] * 3)
    C = L.tocsr()
    code, indptr, indices, data = _csr_tools.lil_tocsr(L.rows, L.data, L.shape[1], L.dtype)
    assert code == _csr_tools.LIL_OK
    np.testing.assert_array_equal(indptr, C.indptr)
    np.testing.assert_array_equal(indices, C.indices)
    assert data.dtype == C.data.dtype
    np.testing.assert_array_equal(data, C.data)
    assert indptr.dtype == indices.dtype == np.int32


@pytest.mark.parametrize("dtype, value", [(np.int8, 300), (np.uint16, -1), (np.uint64, 2**64),
                                          (np.complex64, np.float64(1.5)), (np.float64, 1),
                                          (np.int64, True), (np.bool_, 1)])
def test_lil_values_the_c_pass_leaves_to_numpy(dtype, value):
    """Values of another kind than the dtype's own or out of its range: ``LIL_VALUES``, and
    the product converts them as numpy (and scipy's ``tocsr``) do: or raises as they do."""
    L = sp.lil_array((1, 2), dtype=dtype)
    L.rows[0], L.data[0] = [0, 1], [dtype(1), value]
    assert _csr_tools.lil_tocsr(L.rows, L.data, 2, L.dtype)[0] == _csr_tools.LIL_VALUES
    try:
        want = np.array([dtype(1), value], dtype=dtype)
    except OverflowError:
        with pytest.raises(OverflowError):
            sparse_matmul(L, np.ones(2))
        return
    np.testing.assert_array_equal(CSR(L).to_scipy().toarray(), [want])


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_lil_python_values_round_as_numpy(dtype):
    """Python floats and complexes into float32 and complex64: the C cast rounds as numpy."""
    vals = [0.1, 1 / 3, 1e-46, 3.4e38, 3.5e38, float("nan"), -0.0]
    if dtype == np.complex64:
        vals = [complex(v, -v) for v in vals]
    L = sp.lil_array((1, len(vals)), dtype=dtype)
    L.rows[0], L.data[0] = list(range(len(vals))), list(vals)
    code, _, _, data = _csr_tools.lil_tocsr(L.rows, L.data, L.shape[1], L.dtype)
    assert code == _csr_tools.LIL_OK
    with np.errstate(over="ignore"):
        want = np.array(vals, dtype=dtype)
    assert data.tobytes() == want.tobytes()


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("n_tokens", [None, 1, 8])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int8])
def test_lil_products(rng, side, n_tokens, dtype):
    """``L @ X``, ``X @ L`` and ``CSR(L)`` against scipy's products of ``L.tocsr()``, also
    for lists scipy's own conversion reads (Python ints as int8 values) and a row whose
    values are numpy scalars of another type (a float64 scalar in a complex64 LIL)."""
    A = random_sparse(rng, 40, 30, 0.2, np.float64)
    L = sp.lil_array(A.astype(dtype))
    L.data[3] = [np.float64(2.5)] * len(L.rows[3])
    C = L.tocsr()
    k = 40 if side == "right" else 30
    X = rng.standard_normal((k,) if n_tokens is None else (n_tokens, k) if side == "right"
                            else (k, n_tokens))
    args, ref = ((L, X), (C, X)) if side == "left" else ((X, L), (X, C))
    assert_matches(sparse_matmul(*args), ref[0] @ ref[1], *ref)
    np.testing.assert_array_equal(CSR(L).to_scipy().toarray(), C.toarray())


# -- found by a review of the DOK / LIL passes ------------------------------------------------
@pytest.mark.parametrize("fmt", ["dok", "lil"])
@pytest.mark.parametrize("dtype", [">f8", ">f4", ">c16", ">i8"])
def test_byte_swapped_dtype_attribute(rng, fmt, dtype):
    """A DOK or LIL whose ``dtype`` attribute says big-endian while its values are Python or
    native numpy scalars: the values as numpy converts them (the C pass wrote native bytes
    into a byte-swapped array, which the CSR then swapped: garbage)."""
    A = random_sparse(rng, 12, 8, 0.4, np.dtype(dtype).newbyteorder("="))
    S = A.asformat(fmt)
    S.dtype = np.dtype(dtype)
    x = rng.standard_normal(8)
    np.testing.assert_allclose(sparse_matmul(S, x), A @ x, rtol=1e-6)
    y = rng.standard_normal(12)
    np.testing.assert_allclose(sparse_matmul(y, S), y @ A, rtol=1e-6)


def test_lil_rows_of_another_count_and_no_dtype(rng):
    """rows / data with another number of lists than the shape's rows: the LIL check's error
    (the C pass's arrays made CSR report an indptr the user never had); a ``dtype`` of None
    is float64, as scipy's ``tocsr`` takes it (an AttributeError before)."""
    S = sp.lil_array(_base(rng))
    S.rows, S.data = S.rows[:-1], S.data[:-1]
    with pytest.raises(ValueError, match=r"^A \(lil\) has a corrupt structure: rows and data "
                                         r"must have 12 entries, got 11 and 11$"):
        sparse_matmul(S, np.ones(8))
    S = sp.lil_array(np.eye(3))
    S.dtype = None
    np.testing.assert_array_equal(sparse_matmul(S, np.arange(3.0)), np.arange(3.0))
    np.testing.assert_array_equal(CSR(S).toarray(), np.eye(3))


@pytest.mark.parametrize("fmt", ["lil", "dok"])
def test_lists_changed_by_a_finalizer_while_read(fmt):
    """A garbage-collection finalizer (a reference cycle with ``__del__``, collections after
    every allocation) changes the LIL lists or the DOK dict while they are read, also
    between the C passes and while the output arrays are allocated: every product is that
    of one state the matrix went through, or a ValueError; never a crash. (The fallback of
    a first version called scipy's ``tocsr``, which another thread crashed so: a review.)"""
    import gc
    import random
    rnd = random.Random(0)
    M, N = 8, 6
    state = {"S": None, "left": 0, "states": []}

    def dense(S):
        D = np.zeros((M, N))
        if fmt == "lil":
            for i in range(M):
                if len(S.rows[i]) != len(S.data[i]):
                    return None
                for c, v in zip(S.rows[i], S.data[i]):
                    D[i, c] += v
        else:
            for (i, c), v in S._dict.items():
                D[i, c] = v
        return D

    def mutate(S):
        i = rnd.randrange(M)
        if fmt == "lil":
            op = rnd.randrange(4)
            if op == 0:
                S.rows[i].append(rnd.randrange(N))
                S.data[i].append(1.0)
            elif op == 1 and S.rows[i]:
                S.rows[i].pop()
                S.data[i].pop()
            elif op == 2:
                S.rows[i], S.data[i] = list(range(N)), [0.5] * N
            else:
                S.rows[i][:], S.data[i][:] = [], []
        elif rnd.random() < 0.5:
            S._dict[(i, rnd.randrange(N))] = float(rnd.randrange(9))
        elif S._dict:
            S._dict.pop(next(iter(S._dict)))

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            if state["S"] is not None and state["left"] > 0:
                state["left"] -= 1
                mutate(state["S"])
                state["states"].append(dense(state["S"]))
            Cycle()  # (armed again for the next collection)

    thresholds = gc.get_threshold()
    Cycle()
    try:
        gc.set_threshold(1, 1, 1)
        for trial in range(200):
            S = (sp.lil_array if fmt == "lil" else sp.dok_array)((M, N))
            if fmt == "dok" and not hasattr(S, "_dict"):  # pragma: no cover (scipy < 1.12)
                pytest.skip("this scipy's DOK has no _dict")
            for i, j in zip(rnd.choices(range(M), k=20), rnd.choices(range(N), k=20)):
                S[i, j] = rnd.randrange(1, 9) + 0.5
            state.update(S=S, left=rnd.randint(1, 5), states=[dense(S)])
            left = trial % 2 == 0
            x = np.ones(N if left else M)
            try:
                got = sparse_matmul(S, x) if left else sparse_matmul(x, S)
            except ValueError:
                continue
            finally:
                state["S"] = None
            wants = [D @ x if left else x @ D for D in state["states"] if D is not None]
            assert any(np.allclose(got, w) for w in wants), trial
    finally:
        gc.set_threshold(*thresholds)
        state["left"] = 0
