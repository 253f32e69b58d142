"""Kernel drivers: how a product is cut (threads, row ranges, token panels,
column blocks, scatter chunks) and handed to the compiled kernels.

Every function takes plain arrays (operands already validated by the caller,
except where a ``check`` argument says the kernel checks the column indices)
and, where the cut depends on the machine, a ``HardwareProfile``. The rules'
measured constants live in ``wsesparse._thresholds``; their measurements in
docs/tuning.md.
"""

from __future__ import annotations

import numpy as np

from wsesparse import _thresholds as th
from wsesparse._checks import check_array_allocation, csr_error_message
from wsesparse._hardware import HardwareProfile, available_cores, current, l3_panel_bytes
from wsesparse._kernels import _csr_tools, _scatter, _spmm
from wsesparse._outputs import empty_output
from wsesparse._threads import resolve_n_threads

# Work of a row beyond its nonzeros when rows are split among threads (the
# kernels cut rows themselves for one-shot products, with the same value).
ROW_COST = _spmm.ROW_COST


def balanced_row_bounds(indptr: np.ndarray, n_parts: int, row_cost: int = ROW_COST) -> np.ndarray:
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


def row_bounds(indptr: np.ndarray, threads: int,
               cache: dict | None) -> np.ndarray | int:
    """The row partition for a call on ``threads`` threads, from ``cache``; or,
    without a cache (an operand used once), the number of parts: the kernel
    cuts the rows itself, a few microseconds less than making the array."""
    n_parts = 1 if threads == 1 else threads * th.PARTS_PER_THREAD
    if cache is None:
        return n_parts
    b = cache.get(threads)
    if b is None:
        b = cache[threads] = balanced_row_bounds(indptr, n_parts)
    return b


def spmv_blocks(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int], nnz: int,
                itemsize: int, hw: HardwareProfile) -> bool:
    """Whether a prepared SpMV takes its short rows in blocks, each block's index lines
    prefetched first (``csr_spmv(blocks=True)``; the same sums).

    Measured faster only where the matrix streams from DRAM (its values and indices
    exceed L3), x is beyond ``_spmm.SPMV_FAR_X_BYTES`` and the rows read x in runs, as
    stencils do: the columns of 64-row blocks (a sample of up to 32) lie on at most
    ``SPMV_BLOCK_X_LINES`` distinct 64-byte lines of x per distinct column, by the median.
    Where x is read at random, even within a band, the blocks cost 1-12 % (docs/tuning.md,
    "Prepared short rows in blocks"). Never in builds that gather x (``_spmm.SPMV_GATHER``:
    Intel AVX-512), whose short rows were not measured so.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from wsesparse._hardware import HardwareProfile
    >>> hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=1 << 20, vector_bytes=64)
    >>> band = sp.diags([1.0, 2.0, 1.0], [-1, 0, 1], shape=(200_000, 200_000), format="csr")
    >>> spmv_blocks(band.indptr, band.indices, band.shape, band.nnz, 8, hw) == (
    ...     not _spmm.SPMV_GATHER)
    True
    >>> spread = band[:, np.random.default_rng(0).permutation(200_000)]  # x read at random
    >>> spmv_blocks(spread.indptr, spread.indices, spread.shape, spread.nnz, 8, hw)
    False
    """
    n_rows, n_cols = shape
    l3 = hw.l3_bytes or th.STREAM_DEFAULT_L3_BYTES
    rows = _spmm.CHECK_ROWS
    if (_spmm.SPMV_GATHER or n_cols * itemsize <= _spmm.SPMV_FAR_X_BYTES or n_rows < rows
            or nnz * (itemsize + indices.itemsize) < l3):
        return False
    per_line = max(1, 64 // itemsize)
    lines = []
    for r in np.linspace(0, n_rows - rows, num=min(32, n_rows // rows), dtype=np.int64):
        block = indices[indptr[r]:indptr[r + rows]]
        if block.size:
            cols = np.unique(block)
            lines.append(np.unique(cols // per_line).size / cols.size)
    return bool(lines) and float(np.median(lines)) <= th.SPMV_BLOCK_X_LINES


def spmv_coded(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
               shape: tuple[int, int], nnz: int, hw: HardwareProfile,
               n_threads: int | None = None) -> tuple | None:
    """``(codes, table)`` for a prepared SpMV by ``_spmm.csr_spmv_coded``, or None
    (made on ``n_threads`` threads at most).

    A value-indexed CSR (one byte a nonzero for the value, instead of 4 or 8) pays where
    the matrix streams from DRAM (its values and indices exceed L3), its values take at
    most 256 distinct bit patterns (``_csr_tools.value_codes``: stencils, graph Laplacians,
    0/1 patterns), and the product's bits stay those of ``csr_spmv``: real values, x beyond
    ``_spmm.SPMV_FAR_X_BYTES``, every row under ``_spmm.SPMV_FAR_VEC_NNZ`` nonzeros, a
    build that does not gather (there ``csr_spmv`` sums every row as one FMA chain in
    storage order, as the coded rows do). From cache the coded rows ran slower (a table
    load more a nonzero): Poisson 300^2 370 against 300 us on one thread (docs/tuning.md,
    "Value codes").

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from wsesparse._hardware import HardwareProfile
    >>> hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=1 << 20, vector_bytes=32)
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(200_000, 200_000), format="csr")
    >>> coded = spmv_coded(A.indptr, A.indices, A.data, A.shape, A.nnz, hw)
    >>> coded is None or bool((coded[1][coded[0]] == A.data).all())
    True
    >>> A.data[:] = np.arange(A.nnz)   # 600,000 distinct values
    >>> spmv_coded(A.indptr, A.indices, A.data, A.shape, A.nnz, hw) is None
    True
    """
    n_rows, n_cols = shape
    itemsize = data.itemsize
    l3 = hw.l3_bytes or th.STREAM_DEFAULT_L3_BYTES
    if (_spmm.SPMV_GATHER or data.dtype.char not in "fd" or nnz <= 0
            or n_cols * itemsize <= _spmm.SPMV_FAR_X_BYTES
            or nnz * (itemsize + indices.itemsize) < l3
            or int(np.diff(indptr).max()) >= _spmm.SPMV_FAR_VEC_NNZ):
        return None
    # (value_codes reads aligned values only: a CSR's are; a direct caller's may not be)
    values = np.require(data[:nnz], requirements="CA")
    return _csr_tools.value_codes(values, resolve_n_threads(n_threads, nnz))


def k_block(shape: tuple[int, int], nnz: int, n_tokens: int, dtype: np.dtype,
            hw: HardwareProfile) -> int:
    """Columns of A per block for ``ws_spmm_rows_kb``, or 0 to sum whole rows.

    A panel one ``hw.kblock_tile_bytes`` wide is summed ``kb`` columns of A at
    a time, ``kb`` such that the kb x tile slice of X fills half of L2, where
    the whole K x tile slice would not fit and each row holds enough nonzeros
    per block (every block loads and stores every row's tile).

    Examples
    --------
    >>> from wsesparse._hardware import HardwareProfile
    >>> hw = HardwareProfile(l2_bytes=512 << 10, l3_bytes=0, vector_bytes=32)
    >>> k_block((4096, 16384), 4096 * 1638, 64, np.dtype(np.float32), hw)   # 256 KiB / 128 B
    2048
    >>> k_block((4096, 16384), 4096 * 16, 64, np.dtype(np.float32), hw)   # too sparse
    0
    """
    n_rows, n_cols = shape
    tile = hw.kblock_tile_bytes
    kb = hw.l2_bytes // 2 // tile
    if (dtype.char not in "fd" or n_tokens * dtype.itemsize < tile
            or n_cols <= kb or nnz <= 0):
        return 0
    per_block = nnz * kb / (n_rows * n_cols)  # nonzeros per row and block
    if per_block < th.KB_MIN_NNZ:
        return 0
    if n_cols * tile < th.KB_MIN_SLICE_L2 * hw.l2_bytes and per_block < th.KB_DENSE_NNZ:
        return 0
    return kb


def panel_width(shape: tuple[int, int], nnz: int, n_tokens: int, itemsize: int,
                hw: HardwareProfile) -> int:
    """Token columns per sweep over the rows of an (M, K) matrix times (K, N).

    A sweep streams the matrix once and reads ``X[:, panel]`` (packed into an
    aligned buffer by the kernel when ``panel < N``) once per nonzero. Short
    rows (at most ``SHORT_ROW_NNZ`` nonzeros) reuse little of X and gain most
    from long contiguous X-row reads and Y-row writes: one sweep over all
    columns. Longer rows take the widest whole number of 64-byte lines per X
    row (at least one) whose slice of X fits a budget: half of L2 where L3 is
    not fast; with a fast L3, all of L2 for rows of at least ``LONG_ROW_NNZ``
    nonzeros whose one-line slice fits in half of L2, else the L3 slice.

    Examples
    --------
    >>> from wsesparse._hardware import HardwareProfile
    >>> hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=0, vector_bytes=64)
    >>> panel_width((1000, 4096), 1000 * 100, 1024, 4, hw)   # 64 float32 = 1 MiB / 2
    32
    >>> panel_width((1000, 4096), 1000 * 4, 1024, 4, hw)     # short rows: one sweep
    1024
    """
    n_rows, n_cols = shape
    # (Conditionals, not min()/max(): a small product notices the builtins' cost.)
    if nnz <= th.SHORT_ROW_NNZ * n_rows:
        return n_tokens
    line = 64 // itemsize if itemsize < 64 else 1
    row_bytes = n_cols * itemsize or 1
    l2 = hw.l2_bytes
    budget = l2 // 2
    if budget // row_bytes // line * line < n_tokens:  # (only then can L3 widen it)
        l3 = l3_panel_bytes(hw)
        if l3:
            long_rows = nnz >= th.LONG_ROW_NNZ * n_rows and line * row_bytes <= budget
            budget = l2 if long_rows else l3
    fit = budget // row_bytes // line * line
    panel = fit if fit > line else line
    return panel if panel < n_tokens else n_tokens


def pack_single_panel(X: np.ndarray, nnz: int) -> bool:
    """Whether a product sweeping X (K, N) whole should still read it from an
    aligned copy: when some of its rows straddle 64-byte cache lines and
    each X row is used by at least ``PACK_MIN_REUSE`` nonzeros on average."""
    if nnz < th.PACK_MIN_REUSE * X.shape[0]:
        return False  # (first: a small product notices the address look-up)
    row_bytes = X.shape[1] * X.itemsize
    return not (X.ctypes.data % 64 == 0 and (row_bytes % 64 == 0 or 64 % row_bytes == 0))


def _coded(indptr, indices, data, shape, nnz, bounds: dict, hw,
           n_threads: int) -> tuple | None:
    """The value codes of a prepared SpMV (``spmv_coded``), kept in ``bounds`` under
    ``("coded", dtype character)``: a count of the calls before they are made
    (``SPMV_CODED_AFTER``), then the codes, or False where they do not apply. (By dtype,
    not size: float64 codes given to a complex64 product were refused, a review found.)"""
    key = ("coded", data.dtype.char)
    state = bounds.get(key, 0)
    if state is False or type(state) is tuple:
        return state or None
    if state < th.SPMV_CODED_AFTER:
        bounds[key] = state + 1
        return None
    coded = spmv_coded(indptr, indices, data, shape, nnz, hw, n_threads)
    bounds[key] = coded if coded is not None else False
    return coded


def product_into(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                 shape: tuple[int, int], nnz: int, X: np.ndarray, Y: np.ndarray,
                 n_threads: int | None, bounds: dict | None,
                 hw: HardwareProfile) -> None:
    """Y = A @ X for the CSR arrays of A, X (n_cols,) or (n_cols, N) and Y alike.

    All C-contiguous and of one kernel dtype. ``bounds`` caches the row
    partition per thread count (a prepared ``CSR``, whose column indices have
    been checked), under ``("blocks", itemsize)`` its :func:`spmv_blocks`, and under
    ``("coded", dtype.char)`` its :func:`spmv_coded` (a SpMV by value codes); ``None``
    means a one-shot product: the kernel cuts the rows itself (no array to make) and
    checks the column indices as it goes, raising ValueError for one out of range.
    A SpMV tells the kernel whether the matrix stays in cache (``csr_spmv``'s
    ``far_matrix``: values and 4-byte indices beyond ``SPMV_CACHED_L3_SHARE`` of L3), which
    decides how some long rows are summed on AMD AVX-512 builds.
    """
    n_rows, n_cols = shape
    check_cols = n_cols if bounds is None else 0
    if X.ndim == 2 and X.shape[1] == 1 and X.flags.c_contiguous and Y.flags.c_contiguous:
        # One column is a vector in memory (both C-contiguous): the SpMV kernel, so A @ X
        # gives the bits of A @ X[:, 0], and its speed (the row tiles took (n, 1) products
        # up to 3x longer; docs/tuning.md, "One column").
        # (views as ndarray: an np.matrix out reshapes to (1, m), not to a vector)
        X, Y = np.asarray(X).reshape(-1), np.asarray(Y).reshape(-1)
    if X.ndim == 1:
        threads = resolve_n_threads(n_threads, th.SPMV_WORK * (nnz + n_rows), idle_rule=True)
        blocks = streamed = False
        l3 = hw.l3_bytes or th.STREAM_DEFAULT_L3_BYTES
        streams = nnz * (X.itemsize + indices.itemsize) >= l3
        # (4-byte indices whatever the width, so that a one-shot product of int64 indices
        # and its prepared CSR, narrowed to int32, sum the same way)
        far_matrix = nnz * (X.itemsize + 4) > th.SPMV_CACHED_L3_SHARE * l3
        if bounds is not None:
            # (the L3 condition of spmv_coded first: 0.7 us a call for the rest, a fifth
            # of a small product's time)
            coded = _coded(indptr, indices, data, shape, nnz, bounds, hw,
                           threads) if streams else None
            if coded is not None:
                _spmm.csr_spmv_coded(indptr, indices, coded[0], coded[1], X, Y,
                                     row_bounds(indptr, threads, bounds), threads)
                return
            key = ("blocks", X.itemsize)
            blocks = bounds.get(key)
            if blocks is None:
                blocks = bounds[key] = spmv_blocks(indptr, indices, shape, nnz, X.itemsize, hw)
        else:
            # A one-shot product whose indices and values stream from DRAM: the kernel may
            # check those indices in the row loops (_spmm.csr_spmv's streamed).
            streamed = streams
        code = _spmm.csr_spmv(indptr, indices, data, X, Y, row_bounds(indptr, threads, bounds),
                              threads, check_cols=check_cols, blocks=blocks, streamed=streamed,
                              far_matrix=far_matrix)
    else:
        N = X.shape[1]
        itemsize = X.dtype.itemsize
        threads = resolve_n_threads(n_threads, nnz * N + n_rows, idle_rule=True)
        short_rows = nnz <= th.SHORT_ROW_NNZ * n_rows
        # Panels and column blocks read all K rows of X once per sweep (copying them where
        # they pack), which pays only where X's rows are used several times: a 1 x 100,000
        # row of 10,000 nonzeros times 65 columns took 33 ms in blocks against 0.36 ms in one
        # sweep, scipy 0.27 ms (docs/tuning.md, "Few nonzeros per row of X").
        few_uses = nnz < th.PANEL_MIN_REUSE * n_cols
        # (Short rows never hold KB_MIN_NNZ per block: small products skip the call.)
        kblock = 0 if short_rows or few_uses else k_block(shape, nnz, N, X.dtype, hw)
        panel = (N if few_uses else hw.kblock_tile_bytes // itemsize if kblock
                 else panel_width(shape, nnz, N, itemsize, hw))
        # Software prefetch of X rows pays when the panel misses L2, for panel
        # rows of 32 bytes to 1 KiB in rows of more than SHORT_ROW_NNZ nonzeros.
        row_bytes = panel * itemsize
        prefetch = (not short_rows and n_cols * row_bytes > hw.l2_bytes // 2
                    and th.PREFETCH_MIN_ROW_BYTES < row_bytes <= th.PREFETCH_MAX_ROW_BYTES)
        stream = short_rows and Y.nbytes >= ((hw.l3_bytes or th.STREAM_DEFAULT_L3_BYTES)
                                             * th.STREAM_MIN_L3_SHARE)
        code = _spmm.csr_spmm(indptr, indices, data, X, Y, row_bounds(indptr, threads, bounds),
                              panel, threads, prefetch=prefetch, check_cols=check_cols,
                              pack=pack_single_panel(X, nnz), stream=stream, kblock=kblock)
    if code:
        raise ValueError(csr_error_message(code, "A", shape, len(indices)))


def scatter_panels(n_tokens: int, itemsize: int) -> int:
    """Token panels (sweeps over the sparse operand) of a scatter of ``n_tokens``
    columns of ``itemsize`` bytes: one per ``_scatter.scatter_panel_width`` (128 bytes
    with AVX, 64 without).

    Examples
    --------
    >>> scatter_panels(1, 8), scatter_panels(_scatter.scatter_panel_width(8) + 1, 8)
    (1, 2)
    """
    return -(-n_tokens // _scatter.scatter_panel_width(itemsize))


def scatter_chunks(nnz: int, n_out: int, n_tokens: int, itemsize: int,
                   items: int | None = None, l2_bytes: int | None = None) -> int:
    """Row chunks of a transposed product (scatter) with ``n_out`` output rows.

    With fewer token panels than ``items`` work items (default: the cores this
    process may run on, at least ``SCATTER_MIN_ITEMS``) the rows are also cut
    into ranges, each summed into its own copy of the output and added up at
    the end, so that several threads have work: as many chunks as fill the
    items, but no more than leave each chunk ``SCATTER_CHUNK_NNZ`` nonzeros per
    output row and keep the copies within ``SCATTER_SCRATCH_BYTES``; none where
    one copy would exceed ``SCATTER_COPY_L2S`` times ``l2_bytes``
    (default: this machine's L2). The cut depends on the matrix, the token count,
    ``items`` and ``l2_bytes`` alone: results stay the same for any thread count
    (docs/tuning.md, "Transposed products (scatter) and copies").

    Examples
    --------
    >>> scatter_chunks(10**6, 1000, 1, 8, items=4, l2_bytes=2**20)
    4
    >>> scatter_chunks(10**4, 1000, 1, 8, items=4, l2_bytes=2**20)  # 10 per output row
    2
    >>> scatter_chunks(100, 1000, 1, 8, items=4, l2_bytes=2**20)    # too few nonzeros
    1
    >>> scatter_chunks(10**8, 10**6, 1, 8, items=4, l2_bytes=2**20)  # copies beyond L2
    1
    """
    if items is None:
        items = available_cores()
    if l2_bytes is None:
        l2_bytes = current().l2_bytes
    items = max(th.SCATTER_MIN_ITEMS, items)
    panels = scatter_panels(n_tokens, itemsize)
    if (panels >= items or panels == 0 or n_out == 0  # (nothing to cut)
            or n_out * n_tokens * itemsize > th.SCATTER_COPY_L2S * l2_bytes):
        return 1
    copy = n_out * n_tokens * itemsize
    return max(1, min(-(-items // panels), nnz // (th.SCATTER_CHUNK_NNZ * n_out),
                      1 + th.SCATTER_SCRATCH_BYTES // max(copy, 1)))


def scatter_zones(indptr: np.ndarray, indices: np.ndarray, nnz: int, n_out: int,
                  n_tokens: int, dtype: np.dtype, items: int | None = None) -> int:
    """Zones for a one-chunk scatter (``csr_spmm_t(zones=...)``), or 0.

    Row chunks that sum into the output itself where no other chunk writes: as
    many as the cores (``items``, at least ``SCATTER_MIN_ITEMS``), for real values
    in one token panel (one column too: on 2 to 16 threads zones took 0.11-0.84x
    one chunk's time on 2-D Poisson matrices, 0.39-1.03x on 3-D, and 1.1-1.4x on
    one thread; docs/tuning.md), from
    ``SCATTER_ZONE_MIN_WORK`` multiply-adds, where 3 windows of
    ``SCATTER_ZONE_SAMPLE_ROWS`` rows of B (at a quarter, half and three quarters
    of its rows; ``_scatter.banded_sample``) each read column indices within a
    span of ``n_out / SCATTER_ZONE_GAP_SHARE``: banded matrices, whose chunks
    write nearly disjoint ranges. Depends on the matrix, the token count and
    ``items`` alone, never on the thread count.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> B = sp.diags_array([1.0, 2.0, 1.0], offsets=[-1, 0, 1], shape=(10**5, 10**5)).tocsr()
    >>> f64 = np.dtype(np.float64)
    >>> scatter_zones(B.indptr, B.indices, B.nnz, 10**5, 4, f64, items=4)
    4
    >>> scatter_zones(B.indptr, B.indices, B.nnz, 10**5, 1, f64, items=4)  # one column
    4
    >>> R = sp.random_array((10**5, 10**5), density=1e-5, format="csr", rng=0)
    >>> scatter_zones(R.indptr, R.indices, R.nnz, 10**5, 4, f64, items=4)
    0
    """
    if items is None:
        items = max(th.SCATTER_MIN_ITEMS, available_cores())
    if (items < 2 or dtype.kind != "f" or nnz * n_tokens < th.SCATTER_ZONE_MIN_WORK
            or n_tokens > _scatter.scatter_panel_width(dtype.itemsize)):
        return 0
    banded = _scatter.banded_sample(indptr, indices, th.SCATTER_ZONE_SAMPLE_ROWS,
                                    n_out // th.SCATTER_ZONE_GAP_SHARE)
    return items if banded else 0


def scatter_tokens(n_tokens: int, itemsize: int, nnz: int, n_rows: int) -> int:
    """The token columns a scatter of ``n_tokens`` computes: as many, or, where they take
    two 128-byte token panels or more and B's ``nnz`` nonzeros read each of X's
    ``n_rows`` rows ``SCATTER_PAD_MIN_USES`` times on average, a row of a multiple of 64
    bytes. The panels of a row go to different threads, which would otherwise write the
    same lines at the panel boundaries; the extra columns are zeros, and the sums of the
    others keep their bits. The read-count floor keeps the padded copy of X smaller than
    the work (a tall X with few nonzeros paid 1.6x; helper review, session 23); the
    portable build's 64-byte panels are not padded (unmeasured there). 16384^2 with
    82-164 nonzeros per row, 2 threads: 40 float32 tokens padded to 48 took 0.67 the time
    (docs/tuning.md, "Transposed products (scatter) and copies").

    Examples
    --------
    >>> pw = _scatter.scatter_panel_width(4)
    >>> scatter_tokens(pw, 4, 10**6, 1000) == pw      # one panel: as it is
    True
    >>> pw * 4 < 128 or scatter_tokens(40, 4, 10**6, 1000) == 48
    True
    >>> scatter_tokens(40, 4, 1000, 1000)              # X's rows read once: not padded
    40
    """
    row = n_tokens * itemsize
    width = _scatter.scatter_panel_width(itemsize)
    if (n_tokens <= width or row % 64 == 0 or width * itemsize < 128
            or nnz < th.SCATTER_PAD_MIN_USES * n_rows):
        return n_tokens
    return -(-row // 64) * 64 // itemsize


def scatter_into(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                 shape: tuple[int, int], nnz: int, X: np.ndarray, Y: np.ndarray,
                 n_threads: int | None, check_cols: bool = False, name: str = "A",
                 csc: bool = False) -> None:
    """Y = B.T @ X by scatter, for the CSR arrays of B (``shape``, valid indptr): X
    (n_rows,) or (n_rows, N) and Y (n_cols,) or (n_cols, N) alike, C-contiguous, of
    data's dtype, not overlapping. ``check_cols``: the column indices have not been
    checked; the kernel checks them (ValueError naming ``name`` if one is out of range,
    worded for a CSC operand ``B.T`` with ``csc``).
    Row chunks by ``scatter_chunks``; where it gives one, zones by ``scatter_zones``;
    tokens padded by ``scatter_tokens``."""
    n_tokens = 1 if X.ndim == 1 else X.shape[1]
    padded = scatter_tokens(n_tokens, X.dtype.itemsize, nnz, X.shape[0])
    if padded != n_tokens:   # rows to a line multiple: X and Y padded, Y copied back
        check_array_allocation((X.shape[0], padded), X.dtype, "a padded copy of X")
        Xp = np.zeros((X.shape[0], padded), dtype=X.dtype)
        Xp[:, :n_tokens] = X
        Yp = empty_output((Y.shape[0], padded), Y.dtype, Y.shape[0] * padded * Y.itemsize,
                          aligned=True)
        scatter_into(indptr, indices, data, shape, nnz, Xp, Yp, n_threads, check_cols, name,
                     csc)
        Y[...] = Yp[:, :n_tokens]
        return
    chunks = scatter_chunks(nnz, shape[1], n_tokens, X.dtype.itemsize)
    # (on a line, as the result: two panels of one copy go to two threads)
    scratch = (empty_output((chunks - 1,) + Y.shape, Y.dtype,
                            (chunks - 1) * Y.nbytes, aligned=True) if chunks > 1 else None)
    zones = (scatter_zones(indptr, indices, nnz, shape[1], n_tokens, X.dtype)
             if chunks == 1 else 0)
    threads = resolve_n_threads(n_threads, nnz * n_tokens + shape[1], idle_rule=True)
    code = _scatter.csr_spmm_t(indptr, indices, data, X, Y, threads,
                               n_chunks=chunks, scratch=scratch, check_cols=check_cols,
                               zones=zones, max_gap_rows=shape[1] // th.SCATTER_ZONE_GAP_SHARE,
                               max_zone_bytes=th.SCATTER_SCRATCH_BYTES)
    if code:
        raise ValueError(csr_error_message(code, name, shape, len(indices), csc=csc))


def contiguous_operand(D: np.ndarray, dtype: np.dtype, n_threads: int | None) -> np.ndarray:
    """``np.ascontiguousarray(D, dtype)``, by a blocked copy where numpy's is slow.

    Numpy's strided copy of a transposed array whose rows are a multiple of
    ``BLOCKED_COPY_STRIDE`` bytes apart maps the rows it reads to a few L1 sets
    and misses on nearly every element.
    """
    src = D.T  # C-contiguous when D is a transposed (Fortran-ordered) array
    if (D.ndim == 2 and D.dtype == dtype and src.flags.c_contiguous
            and not D.flags.c_contiguous and D.size >= th.BLOCKED_COPY_MIN
            and src.strides[0] % th.BLOCKED_COPY_STRIDE == 0):
        X = np.empty(D.shape, dtype=dtype)
        _csr_tools.transpose_into(src, X, resolve_n_threads(n_threads, D.size))
        return X
    return np.ascontiguousarray(D, dtype=dtype)
