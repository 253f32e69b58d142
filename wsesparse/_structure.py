"""Structure checks of scipy.sparse operands in the formats CSR does not check itself.

scipy trusts the index arrays of a sparse matrix once it is built: its
conversions (``tocsr``) and products index memory with them unchecked. A COO
matrix whose ``row`` was changed in place, a BSR matrix with a bad ``indptr``,
a DIA matrix with fewer diagonals than offsets or a LIL matrix with an
out-of-range column then crash the process or return garbage. These checks run
in O(nnz) before any such conversion or product; CSR and CSC structures are
checked by :class:`wsesparse.CSR` itself.

Every failure is a ValueError (TypeError for non-integer index arrays) that
names the operand, its format and what is wrong.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import describe
from wsesparse._kernels import _csr_tools


def _index_array(arr, name: str, fmt: str, what: str) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{name} ({fmt}) has a corrupt structure: {what} must be a 1-D integer "
                        f"array, got shape {arr.shape} and dtype {arr.dtype}")
    return arr


def _in_range(arr: np.ndarray, bound: int, name: str, fmt: str, what: str) -> None:
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= bound):
        raise ValueError(f"{name} ({fmt}) has a corrupt structure: a {what} is negative or "
                         f"not below {bound}")


def _check_coo_layout(S, name: str) -> None:
    """One coordinate array per dimension and 1-D data (scipy's 2-D product takes the last
    two arrays of ``coords`` unchecked)."""
    if len(S.coords) != len(S.shape):
        raise ValueError(f"{name} (coo) has a corrupt structure: {len(S.coords)} coordinate "
                         f"arrays for {len(S.shape)} dimensions")
    if np.ndim(S.data) != 1:
        raise ValueError(f"{name} (coo) has a corrupt structure: data must be 1-D, got shape "
                         f"{np.shape(S.data)}")


def _check_coo(S, name: str) -> None:
    if len(S.shape) == 2:
        row, col = _coo_coords(S, name)  # (checks the layout too)
        _raise_coo_code(_csr_tools.coo_check(row, col, *S.shape), S.shape, name)
        return
    _check_coo_layout(S, name)
    n = len(S.data)
    for axis, (idx, bound) in enumerate(zip(S.coords, S.shape)):
        idx = _coo_index(idx, n, name, f"coords[{axis}]")
        _in_range(idx, bound, name, "coo", f"coords[{axis}] index")


def _coo_index(idx, n: int, name: str, what: str) -> np.ndarray:
    idx = _index_array(idx, name, "coo", what)
    if idx.size != n:
        raise ValueError(f"{name} (coo) has a corrupt structure: {what} has {idx.size} "
                         f"entries but data has {n}")
    return idx


# (type numbers, what _csr_tools' COO functions take: on Linux longlong is another, equal
# dtype of int64 that they refuse)
_COO_ITYPES = (np.dtype(np.int32).num, np.dtype(np.int64).num)


def _coo_coords(S, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` of a 2-D COO operand, of one index type ``_csr_tools``' COO functions
    take (int32 where both are, else int64: uint64 values beyond int64 wrap negative and
    fail the range check), after the checks of their number, types and lengths."""
    _check_coo_layout(S, name)
    coords, data = S.coords, S.data
    row, col = coords
    n = len(data)
    if (type(row) is np.ndarray and type(col) is np.ndarray
            and row.dtype.num == col.dtype.num and row.dtype.num in _COO_ITYPES
            and row.dtype.isnative and col.dtype.isnative and row.shape == col.shape == (n,)
            and row.flags.c_contiguous and col.flags.c_contiguous):
        return row, col  # (what scipy builds: 2.4 -> 0.8 us a call)
    row, col = (_coo_index(idx, n, name, what) for idx, what in zip(coords, ("row", "col")))
    itype = np.int32 if row.dtype == col.dtype == np.int32 else np.int64
    return np.ascontiguousarray(row, dtype=itype), np.ascontiguousarray(col, dtype=itype)


def _raise_coo_code(code: int, shape: tuple[int, int], name: str, fmt: str = "coo") -> None:
    """The error of a ``_csr_tools.coo_check`` code (none for ``COO_OK``)."""
    if code:
        axis = 0 if code == _csr_tools.COO_BAD_ROW else 1
        what = ("row", "col" if fmt == "coo" else "column")[axis]
        raise ValueError(f"{name} ({fmt}) has a corrupt structure: a {what} index is negative "
                         f"or not below {shape[axis]}")


def _check_bsr(S, name: str) -> None:
    R, C = S.blocksize
    M, N = S.shape
    data = np.asarray(S.data)
    if data.ndim != 3 or data.shape[1:] != (R, C) or M % R or N % C:
        raise ValueError(f"{name} (bsr) has a corrupt structure: data of shape {data.shape} "
                         f"does not hold {R}x{C} blocks of a {M}x{N} matrix")
    indptr = _index_array(S.indptr, name, "bsr", "indptr")
    indices = _index_array(S.indices, name, "bsr", "indices")
    if len(indptr) != M // R + 1:
        raise ValueError(f"{name} (bsr) has a corrupt structure: indptr has {len(indptr)} "
                         f"entries, expected {M // R + 1} for {M // R} block rows")
    itype = np.int32 if indptr.dtype == indices.dtype == np.int32 else np.int64
    code = _csr_tools.csr_check(np.ascontiguousarray(indptr, dtype=itype),
                                np.ascontiguousarray(indices, dtype=itype), N // C, 1)
    reasons = {_csr_tools.CSR_BAD_START: "indptr[0] is not 0",
               _csr_tools.CSR_DECREASING: "indptr decreases somewhere",
               _csr_tools.CSR_SHORT: ("indptr[-1] exceeds the number of stored block indices "
                                      f"({len(indices)})"),
               _csr_tools.CSR_BAD_INDEX: ("a stored block column index is negative or not "
                                          f"below {N // C}")}
    if code:
        raise ValueError(f"{name} (bsr) has a corrupt structure: {reasons[code]}")
    if data.shape[0] < int(indptr[-1]):
        raise ValueError(f"{name} (bsr) has a corrupt structure: indptr[-1] = {int(indptr[-1])} "
                         f"but data has only {data.shape[0]} blocks")


def _check_dia(S, name: str) -> None:
    data = np.asarray(S.data)
    offsets = _index_array(S.offsets, name, "dia", "offsets")
    if data.ndim != 2 or data.shape[0] != offsets.size:
        raise ValueError(f"{name} (dia) has a corrupt structure: data of shape {data.shape} "
                         f"for {offsets.size} offsets (expected one row per offset)")


def _check_lil(S, name: str) -> None:
    M, N = S.shape
    rows, data = S.rows, S.data
    for what, lists in (("rows", rows), ("data", data)):
        # (what scipy's tocsr takes; else its own unnamed TypeError after the check)
        if not (type(lists) is np.ndarray and lists.dtype == object and lists.ndim == 1):
            raise TypeError(f"{name} (lil) has a corrupt structure: {what} must be a 1-D "
                            f"object array of lists, got {describe(lists)}")
    if len(rows) != M or len(data) != M:
        raise ValueError(f"{name} (lil) has a corrupt structure: rows and data must have "
                         f"{M} entries, got {len(rows)} and {len(data)}")
    # (lists of Python ints, what scipy builds, in one pass in C; anything else in Python)
    code = _csr_tools.lil_check(rows, data, N)
    if code == _csr_tools.LIL_OK:
        return
    if code == _csr_tools.LIL_BAD_COL:
        raise ValueError(f"{name} (lil) has a corrupt structure: a column index is negative "
                         f"or not below {N}")
    for what, lists in (("rows", rows), ("data", data)):
        for x in lists:
            if type(x) is not list:
                raise TypeError(f"{name} (lil) has a corrupt structure: {what}[i] must be a "
                                f"list, got {type(x).__name__} for some i")
    def lengths(lists):
        return np.fromiter(map(len, lists), dtype=np.int64, count=M)

    if code == _csr_tools.LIL_LENGTHS or not np.array_equal(lengths(rows), lengths(data)):
        raise ValueError(f"{name} (lil) has a corrupt structure: rows[i] and data[i] differ in "
                         "length for some row i")
    cols = np.array(list(itertools.chain.from_iterable(rows)))
    _in_range(_index_array(cols, name, "lil", "rows[i]"), N, name, "lil", "column index")


def lil_csr_arrays(S, name: str) -> tuple[tuple, bool]:
    """``((indptr, indices, data), checked)``: the CSR arrays of a 2-D LIL operand, each
    row's entries in list order. Lists that are what scipy builds (lists of Python ints,
    values ``_csr_tools.lil_tocsr`` reads in C) are checked and copied in C (``checked``).
    Anything else, or lists another thread changed between its two passes, is checked in
    Python (``check_sparse_structure``, whose errors name ``name``) and copied from a
    snapshot of the lists in Python, whose arrays the caller checks as a CSR's: never by
    scipy's ``tocsr``, whose two passes another thread can make write past their buffer
    (a review crashed it so through this fallback).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> L = sp.lil_array((2, 3))
    >>> L[1, 2], L[0, 0] = 5.0, 1.0
    >>> arrays, checked = lil_csr_arrays(L, "L")
    >>> [a.tolist() for a in arrays], checked
    ([[0, 1, 2], [0, 2], [1.0, 5.0]], True)
    """
    M, N = S.shape
    dtype = np.dtype(S.dtype)  # (scipy's tocsr takes None as float64 too)
    if len(S.rows) == M:
        code, indptr, indices, data = _csr_tools.lil_tocsr(S.rows, S.data, N, dtype)
        if code == _csr_tools.LIL_OK:
            return (indptr, indices, data), True
    _check_lil(S, name)
    rows, data = [list(r) for r in S.rows], [list(d) for d in S.data]
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    if len(rows) != M or not np.array_equal(lengths, [len(d) for d in data]):
        raise ValueError(f"{name} (lil) has a corrupt structure: its lists changed while "
                         "they were read")
    indptr = np.zeros(M + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    nnz = int(indptr[-1])
    indices = np.array(list(itertools.chain.from_iterable(rows)), dtype=np.int64)
    values = np.fromiter(itertools.chain.from_iterable(data), dtype=dtype, count=nnz)
    return (indptr, indices.reshape(nnz), values), False


def _dok_items(S, name: str) -> tuple:
    """``(row, col, data)`` of a 2-D DOK operand's dict: int64 coordinates, not yet checked
    against the shape (-1 for one beyond int64), and the values as an array. One pass in
    C (``_csr_tools.dok_items``) where the keys and values are what scipy stores (tuples
    of Python ints or numpy integer scalars; numpy scalars of the dtype); else a walk in
    Python over a snapshot of the items, which takes any pair of integers (Python's bools
    too: a dict holds ``(True, 2)`` as ``(1, 2)``), refuses anything else, and lets
    numpy convert the values."""
    ok, row, col, data = _csr_tools.dok_items(getattr(S, "_dict", S), S.dtype)
    if ok:
        return row, col, data
    items = list(S.items())
    coords = []
    for key, _ in items:
        try:
            r, c = key
            coords.append((operator.index(r), operator.index(c)))
        except (TypeError, ValueError):
            raise ValueError(f"{name} (dok) has a corrupt structure: keys must be (row, col) "
                             f"pairs of ints, got {key!r}") from None
    i64 = np.iinfo(np.int64)
    row, col = (np.array([k[axis] if i64.min <= k[axis] <= i64.max else -1 for k in coords],
                         dtype=np.int64) for axis in (0, 1))
    return row, col, np.fromiter((v for _, v in items), dtype=S.dtype, count=len(items))


def _check_dok(S, name: str) -> None:
    row, col, _ = _dok_items(S, name)
    _raise_coo_code(_csr_tools.coo_check(row, col, *S.shape), S.shape, name, "dok")


def _check_csc(S, name: str) -> None:
    # Only the index types: the rest is checked as the CSR arrays of S.T (CSR._csc_view),
    # whose integer copies would truncate float indices (0.6, 1.6 -> 0, 1) where scipy's
    # own product raises (a review found it, when scipy's S.T made those copies).
    _index_array(S.indptr, name, "csc", "indptr")
    _index_array(S.indices, name, "csc", "indices")


_CHECKS = {"coo": _check_coo, "bsr": _check_bsr, "dia": _check_dia, "lil": _check_lil,
           "dok": _check_dok, "csc": _check_csc}


def check_sparse_structure(S, name: str) -> None:
    """Raise if the arrays of scipy sparse ``S`` (COO/BSR/DIA/LIL/DOK) are inconsistent.

    CSR (checked by :class:`wsesparse.CSR`) and unknown formats pass through unchecked;
    of a CSC, only the index types (its transpose's arrays are checked as a CSR).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.coo_array(np.eye(3))
    >>> A.row[0] = 7          # scipy does not re-check after the constructor
    >>> check_sparse_structure(A, "A")
    Traceback (most recent call last):
    ...
    ValueError: A (coo) has a corrupt structure: a row index is negative or not below 3
    """
    check = _CHECKS.get(getattr(S, "format", None))
    if check is not None:
        check(S, name)


def _triplets(S, name: str) -> tuple:
    """``(row, col, data)`` of a 2-D COO or DOK operand: index arrays that
    ``_csr_tools``' COO functions take, the coordinates not yet checked against the shape."""
    if S.format == "coo":
        return (*_coo_coords(S, name), np.asarray(S.data))
    return _dok_items(S, name)


def triplet_csr_arrays(S, name: str, transpose: bool = False) -> tuple:
    """``(indptr, indices, data)``: the CSR arrays of the 2-D COO or DOK operand ``S`` (of
    ``S.T`` with ``transpose``), each row's entries in storage order (a DOK's: its dict's),
    duplicates kept (see :func:`tocsr_keeping_duplicates`), the coordinates checked on the
    way (errors name ``name``). One counting sort, O(nnz): the stable argsort it replaces
    took 0.6 ms for 10,000 COO entries in random order, about 7x scipy's whole product
    with 8 columns. A DOK's keys are read in one pass in C (``_csr_tools.dok_items``):
    scipy's DOK ``tocoo``, where its ``tocsr`` starts, took 6.9 ms for 10,000 keys, as
    long as scipy's own DOK product with one vector, a loop in Python (6.4 ms).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.coo_array(([1.0, 2.0, 3.0], ([1, 0, 1], [0, 1, 0])), shape=(2, 2))
    >>> [a.tolist() for a in triplet_csr_arrays(A, "A")]
    [[0, 1, 3], [1, 0, 0], [2.0, 1.0, 3.0]]
    >>> D = sp.dok_array((2, 3))
    >>> D[1, 0], D[0, 2] = 2.0, 1.0
    >>> [a.tolist() for a in triplet_csr_arrays(D, "D", transpose=True)]  # D.T's arrays
    [[0, 1, 1, 2], [1, 0], [2.0, 1.0]]
    """
    row, col, data = _triplets(S, name)
    shape = S.shape[::-1] if transpose else S.shape
    if transpose:
        row, col = col, row
    fast = data.dtype.kind in "biufc" and data.dtype.itemsize in (1, 2, 4, 8, 16)
    if fast:
        code, indptr, indices, values = _csr_tools.coo_tocsr(
            row, col, np.ascontiguousarray(data), *shape)
    else:  # other value types (long double complex, ...): numpy's stable sort, after the check
        code = _csr_tools.coo_check(row, col, *shape)
    if code and transpose:  # (a code about the transposed coordinates: name S's own axis)
        code = {_csr_tools.COO_BAD_ROW: _csr_tools.COO_BAD_COL,
                _csr_tools.COO_BAD_COL: _csr_tools.COO_BAD_ROW}[code]
    _raise_coo_code(code, S.shape, name, S.format)
    if fast:
        return indptr, indices, values
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=shape[0]), out=indptr[1:])
    order = np.argsort(row, kind="stable")
    return indptr, col[order], data[order]


def tocsr_keeping_duplicates(S):
    """``S.tocsr()`` for a checked scipy sparse matrix or array, except that a COO operand
    keeps its duplicate entries (in their order within each row) instead of summing them
    (COO and DOK operands go through :func:`triplet_csr_arrays`).

    scipy's ``tocsr`` of a COO matrix sums duplicates in the stored dtype: bool entries
    are OR-ed, int8 ones wrap around and float32 ones round, where scipy's own COO
    product multiplies every entry in the result dtype and adds the products. A CSR
    with the duplicates kept sums them in the product, as scipy's product does.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.coo_array((np.array([True, True]), ([0, 0], [1, 1])), shape=(1, 2))
    >>> A.tocsr().data, tocsr_keeping_duplicates(A).data
    (array([ True]), array([ True,  True]))
    """
    if S.format not in ("coo", "dok"):
        return S.tocsr()
    indptr, indices, data = triplet_csr_arrays(S, "A")
    cls = sp.csr_matrix if isinstance(S, sp.spmatrix) else sp.csr_array
    return cls((data, indices, indptr), shape=S.shape)
