"""A validated CSR operand, prepared once and multiplied many times."""

from __future__ import annotations

import operator
import os

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import (array_nbytes, check_array_allocation, check_numeric_dtype,
                               csr_error_message, describe)
from wsesparse._kernels import _spmm
from wsesparse._outputs import empty_output
from wsesparse._structure import check_sparse_structure
from wsesparse._threads import resolve_n_threads

# Work of a row beyond its nonzeros when rows are split among threads (the
# kernels cut rows themselves for one-shot products, with the same value).
_ROW_COST = _spmm.ROW_COST
# A prepared CSR keeps its densified form (for dense dispatch) up to this size.
_KEEP_DENSE_BYTES = 256 << 20
# Rows are cut into this many parts per thread, handed out dynamically, so a
# thread whose core is busy with another process delays the call only a little.
_PARTS_PER_THREAD = 4
# A nonzero of a matrix-vector product costs about as much as this many
# multiply-adds of a wider product (an x load it cannot share), so SpMV goes
# parallel from ~16k nonzeros + rows: K = 4096, 16.8k nonzeros, float32:
# 11.4 us on one thread, 7.3 on two; 2048 rows, 4.2k nonzeros: no gain.
_SPMV_WORK = 4


def _cache_bytes(level: int, default: int) -> int:
    """Size of the level-``level`` data/unified cache of CPU 0, from sysfs or sysconf."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            with open(f"{base}/{entry}/level") as f:
                if int(f.read()) != level:
                    continue
            with open(f"{base}/{entry}/type") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(f"{base}/{entry}/size") as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        pass
    try:  # glibc exposes these where sysfs is missing
        size = os.sysconf(f"SC_LEVEL{level}_CACHE_SIZE")
    except (ValueError, OSError, AttributeError):
        size = 0
    return size if size and size > 0 else default


_L2_BYTES = _cache_bytes(2, 1 << 20)
_L3_BYTES = _cache_bytes(3, 0)
# Rows with at most this many nonzeros on average are swept once over all
# token columns (see _panel_width).
_SHORT_ROW_NNZ = 32
# With a fast L3, rows with at least this many nonzeros on average still take
# L2-sized panels (see _panel_width).
_LONG_ROW_NNZ = 160
# A product sweeping all of X at once reads it from a copy with rows on
# 64-byte lines when it is not laid out so, once X rows are used by this many
# nonzeros each on average (see _pack_single_panel).
_PACK_MIN_REUSE = 24
# The slice of X a sweep may take when L3 is fast: a quarter of L3 (the two
# cores share it with A's stream and Y), at most 8 MiB.
_L3_PANEL_MAX_BYTES = 8 << 20
# Results of at least this many bytes (a quarter of L3, or 8 MiB) of short
# rows (at most _SHORT_ROW_NNZ nonzeros on average, where writing Y is most of
# the work) are written with streaming stores, which do not read each line of
# Y before writing it (a later reader of Y then finds it in DRAM, not L3). C
# harness, K = 4096, 2 threads, AVX2 Zen 3, us plain / streaming: 4 nonzeros
# per row, float32 N = 1024 (16 MiB) 1700-2730 / 1200-1810, float64 N = 1024
# 5860-6250 / 4010-4650, N = 256 (8 MiB) 524-626 / 430-479; float32 N = 256
# (4 MiB) 161-212 / 194-211 (slower: kept plain); 41 per row unchanged. Python,
# prepared, same build, alternated, best ms plain / streaming: K = 4096,
# density 0.01 (41 per row), N = 1024: float32 10.1 / 9.6, float64 24.8 /
# 27.1; density 0.1 float32 67.5 / 66.3 (no gain to be had in long rows).
_STREAM_MIN_BYTES = (_L3_BYTES or 32 << 20) // 4
# L3 counts as fast when one core reads _l3_panel_bytes() from it at least
# this fraction as fast as half of L2 (on the AMD EPYC of the benchmarks,
# 8 MiB, fresh processes: 0.66-0.92; 64 MiB, from DRAM: ~0.33).
_FAST_L3_RATIO = 0.5
_l3_panel: int | None = None  # bytes; 0: L3 not counted on; None: not probed yet


def _l3_panel_bytes() -> int:
    """The slice of X a sweep may take from L3, or 0 where L3 is not fast.

    Measured once per process (``_spmm.read_bandwidth``, a few milliseconds)
    the first time a product asks, unless ``WSESPARSE_FAST_L3`` says ``1`` or
    ``0``. Some machines report an L3 that comes at DRAM speed (a VM shown a
    host's shared cache): there panels must fit in L2. The answer only picks
    panel widths; these set which register tile sums a column, so they may
    change the last bits of a real-type product (never with the thread count).
    """
    global _l3_panel
    if _l3_panel is None:
        size = _L3_BYTES // 4
        size = size if size < _L3_PANEL_MAX_BYTES else _L3_PANEL_MAX_BYTES
        forced = os.environ.get("WSESPARSE_FAST_L3", "").strip()
        if size <= _L2_BYTES or forced == "0":
            _l3_panel = 0
        elif forced == "1":
            _l3_panel = size
        else:
            # Best of 5 passes: in a fresh process the first passes over a new
            # buffer ran at a third of the later ones' rate.
            near = _spmm.read_bandwidth(_L2_BYTES // 2, 5)
            far = _spmm.read_bandwidth(size, 5)
            _l3_panel = size if far >= _FAST_L3_RATIO * near > 0 else 0
    return _l3_panel


def balanced_row_bounds(indptr: np.ndarray, n_parts: int, row_cost: int = _ROW_COST) -> np.ndarray:
    """Split rows into ``n_parts`` contiguous ranges of about equal work.

    Work of row ``i`` is ``nnz(i) + row_cost``. Returns an int64 array ``b`` of
    ``n_parts + 1`` nondecreasing boundaries, ``b[0] = 0``, ``b[-1] = n_rows``.

    Examples
    --------
    >>> import numpy as np
    >>> balanced_row_bounds(np.array([0, 10, 10, 10, 20]), 2, row_cost=0).tolist()
    [0, 1, 4]
    """
    n_rows = len(indptr) - 1
    if n_parts <= 1 or n_rows <= 1:
        return np.array([0, n_rows], dtype=np.int64)
    if indptr.dtype not in (np.int32, np.int64):
        indptr = indptr.astype(np.int64)
    return _spmm.balanced_bounds(np.ascontiguousarray(indptr), n_parts, row_cost)


# Blocks of columns of A (_spmm.csr_spmm's kblock, ws_spmm_rows_kb): a panel
# one KBLOCK_TILE_VECTORS-vector tile wide (256 bytes of a row of X with AVX2:
# 64 float32 or 32 float64 columns) is summed kb columns of A at a time, kb
# such that the kb x tile slice of X fills half of L2, where the whole K x tile
# slice would not fit and each row then holds enough nonzeros per block (every
# block loads and stores every row's tile). Panels as _panel_width cuts them
# do well enough where a slice of X for K = 4096 fits in L2 with 32 float32
# columns. Prepared operands, 2 threads, AVX2 Zen 3 (L2 512 KiB, so kb =
# 1024), method="sparse", whole panels / kb blocks alternated in one process,
# best of 6, GFLOP/s, float32 N = 64 unless said: K = 4096 density 0.5 24.7 /
# 40.2 (float64 11.4 / 16.9), 0.25 26.2 / 47.0 (float64 18.5 / 21.5), 0.1 43.0
# / 35.3 (float64 19.2 / 17.3); K = 8192 density 0.1 26.9 / 52.3, 0.05 30.9 /
# 24.9; K = 16384 density 0.5 28.0 / 34.5, 0.1 24.5 / 39.7 (N = 256 27.8 /
# 42.9; float64 N = 32 12.9 / 19.2), 0.05 22.8 / 28.4 (float64 16.4 / 17.0).
# So: at least _KB_MIN_NNZ nonzeros per row and block, and either a K x tile
# slice of at least _KB_MIN_SLICE_L2 times L2 or _KB_DENSE_NNZ per block.
_KB_TILE_BYTES = _spmm.KBLOCK_TILE_VECTORS * _spmm.TILE_VECTOR_BYTES
_KB_MIN_NNZ = 96
_KB_DENSE_NNZ = 256
_KB_MIN_SLICE_L2 = 4


def _k_block(shape: tuple[int, int], nnz: int, n_tokens: int, dtype: np.dtype) -> int:
    """Columns of A per block for ``ws_spmm_rows_kb``, or 0 to sum whole rows."""
    n_rows, n_cols = shape
    kb = _L2_BYTES // 2 // _KB_TILE_BYTES
    if (dtype.char not in "fd" or n_tokens * dtype.itemsize < _KB_TILE_BYTES
            or n_cols <= kb or nnz <= 0):
        return 0
    per_block = nnz * kb / (n_rows * n_cols)  # nonzeros per row and block
    if per_block < _KB_MIN_NNZ:
        return 0
    if n_cols * _KB_TILE_BYTES < _KB_MIN_SLICE_L2 * _L2_BYTES and per_block < _KB_DENSE_NNZ:
        return 0
    return kb


def _panel_width(shape: tuple[int, int], nnz: int, n_tokens: int, itemsize: int) -> int:
    """Token columns per sweep over the rows of an (M, K) matrix times (K, N).

    A sweep streams the matrix once and reads ``X[:, panel]`` (packed into an
    aligned buffer by the kernel when ``panel < N``) once per nonzero. Short
    rows (at most ``_SHORT_ROW_NNZ`` nonzeros) reuse little of X and gain most
    from long contiguous X-row reads and Y-row writes, and a panel's copy of X
    costs them as much as it saves: one sweep over all columns. Longer rows
    take the widest whole number of 64-byte lines per X row (at least one)
    whose slice of X fits a budget:

    * half of L2 where L3 is not fast (``_l3_panel_bytes()`` is 0). Measured
      on the 2-core AVX-512 machine whose L3 came at DRAM speed (2 threads,
      GFLOP/s, prepared operand, float32): K = 4096, density 0.1, N = 256:
      64-column panels (1 MiB) 99, one sweep 42; density 0.01, N = 1024: 64
      columns 69, 32 columns 60, one sweep 21; K = 16384, density 0.01,
      N = 1024: 16 columns (1 MiB) 61, 32 columns 49, one sweep 26.
    * with a fast L3: all of L2 for rows of at least ``_LONG_ROW_NNZ``
      nonzeros whose one-line slice fits in half of L2, else the L3 slice.
      Measured on the 2-core AMD EPYC (AVX2, L2 512 KiB, L3 32 MiB), same
      units, half of L2 / all of L2 / 8 MiB of L3: K = 4096 float32 N = 256,
      density 0.01: 47 / 53 / 60; 0.03 (123 per row): 60 / 62 / 65; 0.05: 45
      / 55 / 47; 0.1: 58 / 67 / 59; 0.5: 47 / 56 / 45; K = 16384 density 0.01
      N = 1024: 28 / 29 / 48; K = 8192 density 0.03: 28 / 29 / 41.
    """
    n_rows, n_cols = shape
    # (Conditionals, not min()/max(): a small product notices the builtins' cost.)
    if nnz <= _SHORT_ROW_NNZ * n_rows:
        return n_tokens
    line = 64 // itemsize if itemsize < 64 else 1
    row_bytes = n_cols * itemsize or 1
    budget = _L2_BYTES // 2
    if budget // row_bytes // line * line < n_tokens:  # (only then can L3 widen it)
        l3 = _l3_panel_bytes()
        if l3:
            long_rows = nnz >= _LONG_ROW_NNZ * n_rows and line * row_bytes <= budget
            budget = _L2_BYTES if long_rows else l3
    fit = budget // row_bytes // line * line
    panel = fit if fit > line else line
    return panel if panel < n_tokens else n_tokens


# Value sizes the compiled transposition moves (every numpy dtype scipy.sparse
# takes but clongdouble).
_TRANSPOSE_ITEMSIZES = (1, 2, 4, 8, 16)


class CSR:
    """A sparse matrix in validated CSR form, ready for repeated products.

    Converting and checking a scipy matrix costs O(nnz); ``sparse_matmul``
    does it on every call. Wrap the matrix once in ``CSR`` when it is
    multiplied many times (as weights are in training and inference loops):
    the structure is checked once and the thread partition is cached.

    Parameters
    ----------
    A : scipy.sparse matrix or array (any format), or CSR
        The matrix. Formats other than CSR are converted; duplicate and
        unsorted indices are kept as they are (duplicates add up in products).
    copy : bool, default False
        Copy the arrays instead of referencing the input's. Without a copy,
        changing ``A``'s arrays afterwards changes this operand without a new
        check, so only do that if you keep the structure valid.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    nnz : int
        Stored entries (duplicates counted).
    indptr, indices, data : ndarray
        The CSR arrays (indices are int32 or int64).

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
            S = CSR(A.T).T
            self._set(S.indptr, S.indices, S.data, S.shape, check=False, copy=False)
            return
        check_sparse_structure(A, "A")  # COO/BSR/DIA/LIL/DOK: before scipy converts it
        S = A if A.format == "csr" else A.tocsr()
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

    def _set(self, indptr, indices, data, shape, *, check: bool, copy: bool) -> None:
        try:
            n_rows, n_cols = (operator.index(s) for s in shape)  # no floats
        except (TypeError, ValueError):
            raise ValueError(f"shape must be a pair of ints, got {shape!r}") from None
        if n_rows < 0 or n_cols < 0:
            raise ValueError(f"shape must be nonnegative, got {shape!r}")
        for name, arr in (("indptr", indptr), ("indices", indices)):
            if arr.ndim != 1 or arr.dtype.kind not in "iu":
                raise TypeError(f"A.{name} must be a 1-D integer array, got {describe(arr)}")
        if data.ndim != 1:
            raise ValueError(f"A.data must be 1-D, got {describe(data)}")
        check_numeric_dtype(data.dtype, "A.data")
        if len(indptr) != n_rows + 1:
            raise ValueError(
                f"A has a corrupt compressed structure: indptr has {len(indptr)} entries, "
                f"expected {n_rows + 1} for shape {(n_rows, n_cols)}")
        # One index type for both arrays, and one the kernels are compiled for.
        # (uint64 values beyond int64 wrap negative and fail the check below.)
        both32 = indptr.dtype == np.int32 and indices.dtype == np.int32
        itype = np.int32 if both32 else np.int64
        conv = np.array if copy else np.ascontiguousarray
        self.indptr = conv(indptr, dtype=itype)
        self.indices = conv(indices, dtype=itype)
        self.data = conv(data)
        self.shape = (n_rows, n_cols)
        if check:
            nnz = int(self.indptr[-1])
            # The check streams the indices once; threads pay off only for big matrices.
            code = _spmm.csr_check(self.indptr, self.indices, n_cols,
                                   resolve_n_threads(None, nnz // 16))
            if code:
                raise ValueError(csr_error_message(code, "A", self.shape, len(self.indices)))
            if len(self.data) < nnz:
                raise ValueError(
                    f"A has a corrupt compressed structure: indptr[-1] = {nnz} but data "
                    f"has only {len(self.data)} entries")
        self._clear_caches()

    def _clear_caches(self) -> None:
        self._bounds: dict[int, np.ndarray] = {}
        self._data_as: dict[np.dtype, np.ndarray] = {}
        self._dense: np.ndarray | None = None
        self._finite: bool | None = None
        self._transpose: CSR | None = None

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
        if self._transpose is None:
            n_rows, n_cols = self.shape
            if self.data.itemsize in _TRANSPOSE_ITEMSIZES:
                # A parallel counting sort; the same arrays as scipy's A.T.tocsr().
                indptr, indices, data = _spmm.csr_transpose(
                    self.indptr, self.indices, self.data, n_cols,
                    resolve_n_threads(None, self.nnz))
            else:  # clongdouble
                t = self.to_scipy().T.tocsr()
                indptr, indices, data = t.indptr, t.indices, t.data
            self._transpose = CSR.__new__(CSR)
            self._transpose._set(indptr, indices, data, (n_cols, n_rows), check=False,
                                 copy=False)
        return self._transpose

    def to_scipy(self) -> sp.csr_array:
        """The matrix as a ``scipy.sparse.csr_array`` (shares the arrays)."""
        nnz = self.nnz
        return sp.csr_array((self.data[:nnz], self.indices[:nnz], self.indptr), shape=self.shape)

    def __repr__(self) -> str:
        return (f"<wsesparse.CSR {self.shape[0]}x{self.shape[1]}, nnz={self.nnz}, "
                f"dtype={self.dtype}, index dtype={self.indices.dtype}>")

    def __matmul__(self, other):
        from wsesparse.matmul import sparse_matmul
        return sparse_matmul(self, other)

    def __rmatmul__(self, other):
        from wsesparse.matmul import sparse_matmul
        return sparse_matmul(other, self)

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
            self._finite = bool(np.isfinite(self.data[:self.nnz]).all())
        return self._finite

    def _densified(self, dtype: np.dtype, keep: bool) -> np.ndarray:
        """The matrix as a dense array of ``dtype`` (duplicates summed).

        What scipy's ``toarray`` gives, bit for bit (``_spmm.densify_into``),
        into a pooled buffer when large (``empty_output``: warm pages in a loop).
        On one thread: BLAS's threads still spin after the previous product's
        GEMM, and two threads here then lost to one (4096^2, density 0.5, N =
        256, one-shot calls in a loop, 10 rounds alternating, min / median ms:
        float32 scipy toarray 68.1 / 73.4, two threads 74.1 / 80.8, one 69.3 /
        71.6; float64 138.7 / 142.5, 138.6 / 142.2, 134.4 / 135.6), though
        alone they build it twice as fast (float32 20.6 -> 10.6 ms). With
        ``keep``, the latest one is cached, if it takes at most
        ``_dense_keep_bytes()``: a prepared operand that auto-dispatch sends to
        dense BLAS again and again then pays the densify cost once.
        """
        if self._dense is not None and self._dense.dtype == dtype:
            return self._dense
        check_array_allocation(self.shape, dtype, "the densified sparse operand (method='dense')")
        dense = empty_output(self.shape, dtype, array_nbytes(self.shape, dtype))
        # The values are cast first: duplicates must add up in ``dtype`` (as scipy's
        # product does), not in a narrower stored dtype (found by tests/test_fuzz.py).
        # The kernel checks the column indices again (arrays shared with the caller
        # may have changed since the operand was checked, see ``copy``).
        code = _spmm.densify_into(self.indptr, self.indices, self._values(dtype), dense, 1)
        if code:
            raise ValueError(csr_error_message(code, "A", self.shape, len(self.indices)))
        if keep and dense.nbytes <= self._dense_keep_bytes():
            self._dense = dense
        return dense

    def _dense_keep_bytes(self) -> int:
        """The largest densified form kept: ``_KEEP_DENSE_BYTES``, or as much as
        the operand's own values and column indices take (memory at most doubles)."""
        size = self.data.nbytes + self.indices.nbytes
        return size if size > _KEEP_DENSE_BYTES else _KEEP_DENSE_BYTES

    def _multiply_into(self, X: np.ndarray, Y: np.ndarray, n_threads: int | None) -> None:
        """Y = self @ X with X (n_cols,) or (n_cols, N) and Y alike, C-contiguous, same dtype."""
        _product_into(self.indptr, self.indices, self._values(X.dtype), self.shape, self.nnz,
                      X, Y, n_threads, self._bounds)


def _scatter_into(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                  shape: tuple[int, int], nnz: int, X: np.ndarray, Y: np.ndarray,
                  n_threads: int | None, check_cols: bool = False, name: str = "A") -> None:
    """Y = B.T @ X by scatter, for the CSR arrays of B (``shape``, valid indptr): X
    (n_rows,) or (n_rows, N) and Y (n_cols,) or (n_cols, N) alike, C-contiguous, of
    data's dtype, not overlapping. ``check_cols``: the column indices have not been
    checked; the kernel checks them (ValueError naming ``name`` if one is out of range)."""
    n_tokens = 1 if X.ndim == 1 else X.shape[1]
    chunks = _scatter_chunks(nnz, shape[1], n_tokens, X.dtype.itemsize)
    scratch = np.empty((chunks - 1,) + Y.shape, dtype=Y.dtype) if chunks > 1 else None
    code = _spmm.csr_spmm_t(indptr, indices, data, X, Y,
                            resolve_n_threads(n_threads, nnz * n_tokens + shape[1]),
                            chunks, scratch, check_cols)
    if code:
        raise ValueError(csr_error_message(code, name, shape, len(indices)))


# A transposed product (scatter) with fewer token panels than this is also
# cut into ranges of rows, each summed into its own copy of the output and
# added up at the end, so that several threads have work (the cut depends on
# the matrix and the token count alone: results stay the same for any thread
# count). Only where the nonzeros outweigh the copies: at least
# _SCATTER_CHUNK_NNZ nonzeros per output row per chunk, copies of at most
# _SCATTER_SCRATCH_BYTES.
_SCATTER_ITEMS = 4
_SCATTER_CHUNK_NNZ = 4
_SCATTER_SCRATCH_BYTES = 64 << 20


def _scatter_chunks(nnz: int, n_out: int, n_tokens: int, itemsize: int) -> int:
    """Row chunks of a transposed product with ``n_out`` output rows (see above)."""
    panels = -(-n_tokens // _spmm.scatter_panel_width(itemsize))
    if panels >= _SCATTER_ITEMS or panels == 0:  # (no tokens: nothing to cut)
        return 1
    chunks = -(-_SCATTER_ITEMS // panels)
    if (nnz < _SCATTER_CHUNK_NNZ * n_out * chunks
            or (chunks - 1) * n_out * n_tokens * itemsize > _SCATTER_SCRATCH_BYTES):
        return 1
    return chunks


def _product_into(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                  shape: tuple[int, int], nnz: int, X: np.ndarray, Y: np.ndarray,
                  n_threads: int | None, bounds: dict[int, np.ndarray] | None) -> None:
    """Y = A @ X for the CSR arrays of A, X (n_cols,) or (n_cols, N) and Y alike.

    All C-contiguous and of one kernel dtype. ``bounds`` caches the row
    partition per thread count (a prepared ``CSR``, whose column indices have
    been checked); ``None`` means a one-shot product: the kernel cuts the rows
    itself (no array to make) and checks the column indices as it goes,
    raising ValueError for one out of range.
    """
    n_rows, n_cols = shape
    check_cols = n_cols if bounds is None else 0
    if X.ndim == 1:
        threads = resolve_n_threads(n_threads, _SPMV_WORK * (nnz + n_rows))
        code = _spmm.csr_spmv(indptr, indices, data, X, Y,
                              _row_bounds(indptr, threads, bounds), threads, check_cols)
    else:
        N = X.shape[1]
        threads = resolve_n_threads(n_threads, nnz * N + n_rows)
        short_rows = nnz <= _SHORT_ROW_NNZ * n_rows
        # (Short rows never hold _KB_MIN_NNZ per block: small products skip the call.)
        kblock = 0 if short_rows else _k_block(shape, nnz, N, X.dtype)
        panel = (_KB_TILE_BYTES // X.dtype.itemsize if kblock
                 else _panel_width(shape, nnz, N, X.dtype.itemsize))
        # Software prefetch of X rows pays when the panel misses L2, and only
        # for panels of more than 32 bytes and up to 1 KiB per row, in rows
        # of more than _SHORT_ROW_NNZ nonzeros: on wider panels the hardware
        # prefetcher does better alone (K = 4096, N = 1024, float32, density
        # 0.1, 512-column panels: 36 GFLOP/s without, 22 with); on 32-byte
        # ones, or in short rows (it fetches within a row, 8 nonzeros ahead),
        # its instructions cost more than it saves (C harness, 2 threads, AVX2
        # Zen 3, K = 16384, Poisson rows, us without / with: float32 N = 8
        # mean 16 170 / 193, mean 164 1350 / 1510; float64 N = 4 mean 16 174 /
        # 204-311; float32 N = 16 mean 16 213 / 235, mean 164 1870 / 1870).
        row_bytes = panel * X.dtype.itemsize
        prefetch = (n_cols * row_bytes > _L2_BYTES // 2 and 32 < row_bytes <= 1024
                    and not short_rows)
        code = _spmm.csr_spmm(indptr, indices, data, X, Y, _row_bounds(indptr, threads, bounds),
                              panel, threads, prefetch, check_cols,
                              _pack_single_panel(X, nnz),
                              short_rows and Y.nbytes >= _STREAM_MIN_BYTES, kblock)
    if code:
        raise ValueError(csr_error_message(code, "A", shape, len(indices)))


def _pack_single_panel(X: np.ndarray, nnz: int) -> bool:
    """Whether a product sweeping X (K, N) whole should still read it from an
    aligned copy: when some of its rows straddle 64-byte cache lines and
    each X row is used by at least ``_PACK_MIN_REUSE`` nonzeros on average."""
    if nnz < _PACK_MIN_REUSE * X.shape[0]:
        return False  # (first: a small product notices the address look-up)
    row_bytes = X.shape[1] * X.itemsize
    return not (X.ctypes.data % 64 == 0 and (row_bytes % 64 == 0 or 64 % row_bytes == 0))


def _row_bounds(indptr: np.ndarray, threads: int,
                cache: dict[int, np.ndarray] | None) -> np.ndarray | int:
    """The row partition for a call on ``threads`` threads, from ``cache``; or,
    without a cache (an operand used once), the number of parts: the kernel
    cuts the rows itself, a few microseconds less than making the array."""
    n_parts = 1 if threads == 1 else threads * _PARTS_PER_THREAD
    if cache is None:
        return n_parts
    b = cache.get(threads)
    if b is None:
        b = cache[threads] = balanced_row_bounds(indptr, n_parts)
    return b
