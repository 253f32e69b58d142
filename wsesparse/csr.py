"""A validated CSR operand, prepared once and multiplied many times."""

from __future__ import annotations

import operator
import weakref
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from wsesparse import _thresholds as th
from wsesparse._checks import (array_nbytes, check_array_allocation, check_numeric_dtype,
                               csr_error_message, describe)
from wsesparse._drivers import product_into
from wsesparse._hardware import HardwareProfile
from wsesparse._kernels import _csr_tools
from wsesparse._outputs import empty_output
from wsesparse._structure import (check_sparse_structure, lil_csr_arrays,
                                  tocsr_keeping_duplicates, triplet_csr_arrays)
from wsesparse._threads import resolve_n_threads

# The array namespace scipy >= 1.18 gives a LinearOperator in __init__ (None before 1.18).
_SCIPY_XP = getattr(LinearOperator((1, 1), matvec=lambda x: x, dtype=np.float64), "_xp", None)

# Value sizes the compiled transposition moves (every numpy dtype scipy.sparse
# takes but clongdouble).
_TRANSPOSE_ITEMSIZES = (1, 2, 4, 8, 16)

_INT32_MAX = int(np.iinfo(np.int32).max)


def _NOBODY() -> None:  # (a dead weak reference: no operand this one came from)
    return None


class CSR(LinearOperator):
    """A sparse matrix in validated CSR form, ready for repeated products.

    Converting and checking a scipy matrix costs O(nnz); ``sparse_matmul``
    does it on every call. Wrap the matrix once in ``CSR`` when it is
    multiplied many times (as weights are in training and inference loops):
    the structure is checked once and the thread partition is cached.

    A ``CSR`` is a ``scipy.sparse.linalg.LinearOperator``: solvers
    (``cg``, ``minres``, ``lsqr``, ``eigsh``, ...) take it as it is, and
    ``aslinearoperator`` returns it unchanged. ``matvec``/``matmat`` are
    ``self @ x``; ``rmatvec``/``rmatmat`` and ``H`` use the conjugate
    transpose, computed once and kept (for real values it is ``T``). As for
    any LinearOperator, ``+``, ``-`` and ``*`` by a scalar build lazy
    operators, ``*`` by an array is the matrix product, and ``@`` or ``*``
    with another LinearOperator builds scipy's lazy product. ``CSR @ CSR``
    computes the sparse product (scipy's) and returns it as a ``CSR``, so the
    adjoints and powers scipy builds from products stay LinearOperators.

    Parameters
    ----------
    A : scipy.sparse matrix or array (any format), or CSR
        The matrix. Formats other than CSR are converted; duplicate and
        unsorted indices are kept as they are (duplicates add up in products).
    copy : bool, default False
        Copy the arrays instead of referencing the input's. Without a copy,
        do not change ``A``'s arrays while this operand is in use: it keeps
        what it derives from them (index arrays narrowed to int32, see
        ``indices``; the transpose and conjugate transpose; values cast to
        another dtype; a dense copy; one-byte codes of the values where a
        large matrix has at most 256 distinct ones, made on its third
        matrix-vector product), so some products would see a change and
        others would not; and its products read the indices checked once
        here, so a column index changed out of range can crash the process,
        as it does scipy's own product. After changing ``A``, make a new ``CSR``.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
        The values' dtype; float16 values are stored as float32 (scipy.sparse has no
        float16, and products of them are float32).
    nnz : int
        Stored entries (duplicates counted).
    indptr, indices, data : ndarray
        The CSR arrays, as read-only views (of the input's where they were not
        copied). Both index arrays are int32 whenever the number of
        columns and of stored entries are below 2**31 (int64 or other integer
        inputs are narrowed: 4 bytes less to read per nonzero in every
        product), else int64.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse import CSR
    >>> W = CSR(sp.random(50, 40, density=0.1, format="csr", random_state=0))
    >>> X = np.ones((40, 8))
    >>> np.allclose(W @ X, W.to_scipy() @ X)
    True
    """

    # ndarray @ CSR must call CSR.__rmatmul__ rather than treat CSR as an object scalar.
    __array_ufunc__ = None
    ndim = 2
    # (LinearOperator.__init__ is not called: shape and dtype come from the arrays. What
    # else it sets, scipy's methods read: scipy 1.18's array namespace ``_xp`` is one.)
    if _SCIPY_XP is not None:
        _xp = _SCIPY_XP

    def __init__(self, A, *, copy: bool = False):
        if isinstance(A, CSR):
            self._set(A.indptr, A.indices, A.data, A.shape, check=False, copy=copy)
            return
        if not sp.issparse(A):
            raise TypeError(f"A must be a scipy.sparse matrix or array, got {describe(A)}")
        if A.ndim != 2:
            raise ValueError(f"A must be 2-D, got a sparse operand of shape {A.shape}")
        if A.format == "csc":
            # The CSC arrays are the CSR arrays of A.T: check them, then transpose.
            check_sparse_structure(A, "A")  # (the index types)
            S = CSR._csc_view(A).T
            self._set(S.indptr, S.indices, S.data, S.shape, check=False, copy=False)
            return
        if A.format in ("coo", "dok"):  # (the conversion checks the coordinates as it goes)
            self._set(*triplet_csr_arrays(A, "A"), A.shape, check=False, copy=False)
            return
        if A.format == "lil":  # (checked and converted in C where it can)
            arrays, checked = lil_csr_arrays(A, "A")
            self._set(*arrays, A.shape, check=not checked, copy=False)
            return
        check_sparse_structure(A, "A")  # BSR/DIA: before scipy converts it
        S = A if A.format == "csr" else tocsr_keeping_duplicates(A)
        self._set(S.indptr, S.indices, S.data, S.shape, check=True, copy=copy)

    @classmethod
    def from_arrays(cls, data, indices, indptr, shape, *, copy: bool = False) -> "CSR":
        """Build from raw CSR arrays, checking the structure in O(nnz).

        Examples
        --------
        >>> CSR.from_arrays([1.0, 2.0], [1, 0], [0, 1, 2], (2, 2)).to_scipy().toarray()
        array([[0., 1.],
               [2., 0.]])
        """
        obj = cls.__new__(cls)
        obj._set(np.asarray(indptr), np.asarray(indices), np.asarray(data), shape,
                 check=True, copy=copy)
        return obj

    @classmethod
    def _from_triplets(cls, A, name: str, transpose: bool = False) -> "CSR":
        """The CSR operand of the 2-D scipy COO or DOK ``A`` (of ``A.T`` with ``transpose``),
        duplicates kept, coordinates checked by the conversion (errors name ``name``)."""
        obj = cls.__new__(cls)
        shape = A.shape[::-1] if transpose else A.shape
        obj._set(*triplet_csr_arrays(A, name, transpose), shape, check=False, copy=False)
        return obj

    @classmethod
    def _csc_view(cls, A) -> "CSR":
        """The CSR operand of ``A.T`` from the arrays of scipy CSC ``A`` (index types
        already checked), structure checked, errors worded for ``A`` as a CSC operand."""
        obj = cls.__new__(cls)
        obj._set(A.indptr, A.indices, A.data, A.shape[::-1], check=True, copy=False, csc=True)
        return obj

    def _set(self, indptr, indices, data, shape, *, check: bool, copy: bool,
             csc: bool = False) -> None:
        try:
            n_rows, n_cols = (operator.index(s) for s in shape)  # no floats
        except (TypeError, ValueError):
            raise ValueError(f"shape must be a pair of ints, got {shape!r}") from None
        if n_rows < 0 or n_cols < 0:
            raise ValueError(f"shape must be nonnegative, got {shape!r}")
        for name, arr in (("indptr", indptr), ("indices", indices)):
            # (an empty list arrives as an empty float64 array, as scipy takes it; None, a
            # corrupted scipy matrix's, gave an AttributeError)
            if (not isinstance(arr, np.ndarray) or arr.ndim != 1
                    or (arr.dtype.kind not in "iu" and arr.size)):
                raise TypeError(f"A.{name} must be a 1-D integer array, got {describe(arr)}")
        if data.ndim != 1:
            raise ValueError(f"A.data must be 1-D, got {describe(data)}")
        check_numeric_dtype(data.dtype, "A.data")
        if data.dtype == np.float16:
            # (scipy.sparse has no float16: toarray, to_scipy and wsesparse.dask failed on it;
            # products were float32 already)
            data = data.astype(np.float32)
        if len(indptr) != n_rows + 1:
            raise ValueError(
                f"A has a corrupt compressed structure: indptr has {len(indptr)} entries, "
                f"expected {n_rows + 1} for shape "
                + (f"{(n_cols, n_rows)} (CSC)" if csc else f"{(n_rows, n_cols)}"))
        # One index type for both arrays, and one the kernels are compiled for: int64
        # here, narrowed below where the values allow it.
        # (uint64 values beyond int64 wrap negative and fail the check below.)
        both32 = (indptr.dtype == np.int32 and indices.dtype == np.int32
                  and n_cols <= _INT32_MAX)  # (the kernels compare indices with n_cols)
        itype = np.int32 if both32 else np.int64
        conv = np.array if copy else np.ascontiguousarray
        self.indptr = conv(indptr, dtype=itype)
        self.indices = conv(indices, dtype=itype)
        # (the kernels read native, aligned values: big-endian ones are converted here,
        # once, and values off their alignment copied: reading them is undefined in C,
        # which a UBSan build reported)
        self.data = conv(data) if data.dtype.isnative else \
            np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("="))
        if not self.data.flags.aligned:
            self.data = np.require(self.data, requirements="CA")
        self.shape = (n_rows, n_cols)
        nnz = int(self.indptr[-1])
        if check:
            # The check streams the indices once; threads pay off only for big matrices.
            code = _csr_tools.csr_check(self.indptr, self.indices, n_cols,
                                        resolve_n_threads(None, nnz // 16))
            if code:
                raise ValueError(csr_error_message(code, "A", self.shape, len(self.indices),
                                                   csc=csc))
            if len(self.data) < nnz:
                raise ValueError(
                    f"A has a corrupt compressed structure: indptr[-1] = {nnz} but data "
                    f"has only {len(self.data)} entries")
        if itype is np.int64 and max(n_cols, nnz) <= _INT32_MAX:
            # Narrowed copies (after the check, so the values fit): every product then
            # reads 4 bytes less per nonzero; SpMV with int64 indices ran 1.15-1.31x
            # slower (docs/tuning.md, "Index width").
            self.indptr = self.indptr.astype(np.int32)
            self.indices = self.indices[:nnz].astype(np.int32)
        self._freeze()
        self._clear_caches()

    def _freeze(self) -> None:
        # Read-only views as the attributes (the arrays themselves stay as they were):
        # products read the checked indices unchecked, so a write through P.indices crashed
        # the process (a review).
        for name in ("indptr", "indices", "data"):
            view = getattr(self, name).view()
            view.flags.writeable = False
            setattr(self, name, view)

    # Pickling and copy.copy/deepcopy (Dask sends operands to workers and hashes them for
    # its keys): the arrays and the shape only; the caches (transposes, dense copy, cast
    # values, bounds) are made again when needed. With them, a pickle after one dense
    # product was 600x the arrays, its Dask key changed once caches filled, and copy.copy
    # pointed the original's transpose back at the copy (a review found all three).
    _STATE = ("indptr", "indices", "data", "shape")

    def __getstate__(self) -> dict:
        return {name: self.__dict__[name] for name in self._STATE}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({name: state[name] for name in self._STATE})
        self._freeze()
        self._clear_caches()

    def _clear_caches(self) -> None:
        # row partitions by thread count; ("blocks", itemsize): _drivers.spmv_blocks;
        # ("coded", dtype.char): _drivers.spmv_coded's value codes
        self._bounds: dict[int | tuple[str, int | str], np.ndarray | bool | int | tuple] = {}
        self._data_as: dict[np.dtype, np.ndarray] = {}
        self._dense: np.ndarray | None = None
        self._finite: bool | None = None
        self._canonical: bool | None = None   # sorted indices, no duplicates (to_scipy)
        self._t: CSR | None = None  # the transpose, once computed
        self._h: CSR | None = None  # the conjugate transpose (complex values)
        # The operand this one is the (conjugate) transpose of, while it lives: T.T is it.
        self._t_of = self._h_of = _NOBODY

    # -- properties ---------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def density(self) -> float:
        """Stored entries over ``rows * cols`` (duplicates counted)."""
        size = self.shape[0] * self.shape[1]
        return self.nnz / size if size else 0.0

    @property
    def T(self) -> "CSR":
        """The transpose, as a CSR operand (computed once, then cached)."""
        if self._t is None:
            back = self._t_of()
            if back is not None:
                return back  # (T.T is self: no second transposition)
            n_rows, n_cols = self.shape
            if self.data.itemsize in _TRANSPOSE_ITEMSIZES:
                # A parallel counting sort; the same arrays as scipy's A.T.tocsr().
                indptr, indices, data = _csr_tools.csr_transpose(
                    self.indptr, self.indices, self.data, n_cols,
                    resolve_n_threads(None, self.nnz))
            else:  # clongdouble
                t = self._scipy_view().T.tocsr()
                indptr, indices, data = t.indptr, t.indices, t.data
            t = CSR.__new__(CSR)
            t._set(indptr, indices, data, (n_cols, n_rows), check=False, copy=False)
            t._t_of = weakref.ref(self)
            # Published whole (a thread that finds _t set uses it at once; assigned before
            # _set, another thread saw an object without its arrays), and held one way:
            # a back reference made a cycle that kept a dropped operand and its transpose
            # for the cyclic collector, tens of MB each (review sessions found both).
            self._t = t
        return self._t

    def _adjoint(self) -> "CSR":
        """The conjugate transpose (``H``), computed once and kept."""
        if self.data.dtype.kind != "c":
            return self.T
        if self._h is None:
            back = self._h_of()
            if back is not None:
                return back
            t = self.T
            h = CSR.__new__(CSR)
            h._set(t.indptr, t.indices, np.conjugate(t.data[:t.nnz]), t.shape,
                   check=False, copy=False)
            h._h_of = weakref.ref(self)
            self._h = h  # (published whole, one way: see T)
        return self._h

    def _transpose(self) -> "CSR":
        return self.T

    # LinearOperator's matvec/matmat/rmatvec/rmatmat check the shape, then call these.
    def _matvec(self, x):
        return self._matmul(x)

    def _matmat(self, X):
        # (np.matrix in, np.matrix out: as aslinearoperator of a scipy matrix gives it)
        Y = self._matmul(X)
        return np.asmatrix(Y) if isinstance(X, np.matrix) else Y

    def _rmatvec(self, x):
        return self._adjoint()._matmul(x)

    def _rmatmat(self, X):
        Y = self._adjoint()._matmul(X)
        return np.asmatrix(Y) if isinstance(X, np.matrix) else Y

    def toarray(self) -> np.ndarray:
        """The matrix as a dense ndarray (duplicates summed), as scipy's ``toarray``.

        Examples
        --------
        >>> CSR.from_arrays([1.0, 2.0, 3.0], [1, 1, 0], [0, 2, 3], (2, 2)).toarray()
        array([[0., 3.],
               [3., 0.]])
        """
        return self._scipy_view().toarray()

    def to_scipy(self) -> sp.csr_array:
        """The matrix as a ``scipy.sparse.csr_array``: sharing this operand's arrays, read-only,
        where its indices are sorted and without duplicates (scipy's methods then never write
        them); otherwise a copy, which scipy's ``max()``, ``abs()``, ``spsolve``, ... sort in
        place. (Shared writeable arrays failed or, sorted in place, left this operand's cached
        cast values and value codes stale: wrong products, a review.) Take a ``.copy()`` of
        the result to change it."""
        S = self._scipy_view()
        if self._canonical is None:
            self._canonical = bool(S.has_canonical_format)
        return S if self._canonical else S.copy()

    def _scipy_view(self) -> sp.csr_array:
        """The matrix as a ``csr_array`` over the read-only arrays (for reading only)."""
        nnz = self.nnz
        return sp.csr_array((self.data[:nnz], self.indices[:nnz], self.indptr), shape=self.shape)

    def __repr__(self) -> str:
        return (f"<wsesparse.CSR {self.shape[0]}x{self.shape[1]}, nnz={self.nnz}, "
                f"dtype={self.dtype}, index dtype={self.indices.dtype}>")

    # ``sparse_matmul``, installed by ``wsesparse.matmul`` (the dispatch layer above
    # this module), so that the operand imports nothing from there.
    _matmul: Callable | None = None

    def __matmul__(self, other):
        if isinstance(other, LinearOperator):
            if isinstance(other, CSR):  # the sparse product, itself an operator
                return CSR(self._matmul(other))
            return LinearOperator.__matmul__(self, other)  # scipy's lazy product
        return self._matmul(other)

    def __rmatmul__(self, other):
        if isinstance(other, LinearOperator):  # (CSR @ CSR never gets here)
            return LinearOperator.__rmatmul__(self, other)
        return type(self)._matmul(other, self)

    # -- kernel calls (operands already checked by sparse_matmul) ------------
    def _values(self, dtype: np.dtype) -> np.ndarray:
        if self.data.dtype == dtype:
            return self.data
        vals = self._data_as.get(dtype)
        if vals is None:
            vals = self._data_as[dtype] = self.data[: self.nnz].astype(dtype)
        return vals

    def _all_finite(self) -> bool:
        """Whether every stored value is finite (computed once, like the dense copy)."""
        if self._finite is None:
            self._finite = _csr_tools.all_finite(self.data[:self.nnz])
        return self._finite

    def _densified(self, dtype: np.dtype, keep: bool) -> np.ndarray:
        """The matrix as a dense array of ``dtype`` (duplicates summed).

        What scipy's ``toarray`` gives, bit for bit (``_csr_tools.densify_into``),
        into a pooled buffer when large (``empty_output``: warm pages in a loop).
        On one thread: BLAS's threads still spin after the previous product's
        GEMM (docs/tuning.md, "Dense dispatch"). With
        ``keep``, the latest one is cached, if it takes at most
        ``_dense_keep_bytes()``: a prepared operand that auto-dispatch sends to
        dense BLAS again and again then pays the densify cost once.
        """
        if self._keeps_dense(dtype):
            return self._dense
        check_array_allocation(self.shape, dtype, "the densified sparse operand (method='dense')")
        dense = empty_output(self.shape, dtype, array_nbytes(self.shape, dtype))
        # The values are cast first: duplicates must add up in ``dtype`` (as scipy's
        # product does), not in a narrower stored dtype (found by tests/test_fuzz.py).
        # The kernel checks the column indices again (arrays shared with the caller
        # may have changed since the operand was checked, see ``copy``).
        code = _csr_tools.densify_into(self.indptr, self.indices, self._values(dtype), dense, 1)
        if code:
            raise ValueError(csr_error_message(code, "A", self.shape, len(self.indices)))
        if keep and dense.nbytes <= self._dense_keep_bytes():
            self._dense = dense
        return dense

    def _keeps_dense(self, dtype: np.dtype) -> bool:
        """Whether a densified form of ``dtype`` is cached (``_densified`` with ``keep``)."""
        return self._dense is not None and self._dense.dtype == dtype

    def _dense_keep_bytes(self) -> int:
        """The largest densified form kept: ``KEEP_DENSE_BYTES``, or as much as
        the operand's own values and column indices take (memory at most doubles)."""
        size = self.data.nbytes + self.indices.nbytes
        return size if size > th.KEEP_DENSE_BYTES else th.KEEP_DENSE_BYTES

    def _multiply_into(self, X: np.ndarray, Y: np.ndarray, n_threads: int | None,
                       hw: HardwareProfile) -> None:
        """Y = self @ X with X (n_cols,) or (n_cols, N) and Y alike, C-contiguous, same dtype."""
        product_into(self.indptr, self.indices, self._values(X.dtype), self.shape, self.nnz,
                     X, Y, n_threads, self._bounds, hw)
