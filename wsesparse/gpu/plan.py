"""Launch geometry of the GPU kernels, decided on the host (plain Python, tested without cupy).

:func:`csr_launch` maps a CSR x dense product onto ``csr_dense`` (kernels.cu): a group of
lanes per row, split into column lanes (each owning ``vec`` consecutive columns) and nonzero
lanes; :func:`tlr_forward_tables` and :func:`tlr_adjoint_tables` list the segments of the
TLR-MVM kernels for one or several matrices (a batch) so that each phase is one launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

BLOCK = 256            # threads per block of every kernel
TLR_COLS = 32          # columns of a segment per block of seg_gemv_t (one warp)
TLR_ROW_GROUPS = (8, 16)   # blockDim.y of seg_gemv_t: row groups summed in shared memory


@dataclass(frozen=True)
class CsrLaunch:
    """How ``csr_dense`` covers an ``n_rows x n_cols`` output.

    ``2**gs_log`` lanes per row = ``2**q_log`` column lanes x ``2**(gs_log - q_log)`` nonzero
    lanes; every column lane owns ``vec`` consecutive columns; ``grid = (x, y)`` blocks of
    :data:`BLOCK` threads, ``y`` over blocks of ``2**q_log * vec`` columns.
    """

    gs_log: int
    q_log: int
    vec: int
    grid: tuple[int, int]

    @property
    def lanes_per_row(self) -> int:
        return 1 << self.gs_log

    @property
    def column_lanes(self) -> int:
        return 1 << self.q_log

    @property
    def nonzero_lanes(self) -> int:
        return 1 << (self.gs_log - self.q_log)


def _log2_ceil(n: int) -> int:
    return max(0, (int(n) - 1).bit_length())


def _log2_floor(n: int) -> int:
    return max(0, int(n).bit_length() - 1)


@lru_cache(maxsize=256)      # a solver loop asks for the same launch every step
def csr_launch(n_rows: int, n_cols: int, nnz: int, vec: int) -> CsrLaunch:
    """The launch of ``csr_dense`` for ``n_rows`` rows, ``n_cols`` output columns, ``nnz``
    stored entries and loads of ``vec`` elements (1 where X's rows are not 16-byte aligned).

    Column lanes: enough to cover the columns with ``vec`` each, at most a warp. Nonzero
    lanes fill the rest of the row's group, at most a quarter of the mean row length (each
    lane then has a few nonzeros to load; a group of 2 or more lanes keeps the index loads
    of a warp on few cache lines). Output columns beyond one warp's ``32 * vec`` go to
    ``grid[1]``.

    Examples
    --------
    >>> csr_launch(16384, 256, 16384 * 16, 4)      # 16 nonzeros a row, 256 columns
    CsrLaunch(gs_log=5, q_log=5, vec=4, grid=(2048, 2))
    >>> csr_launch(16384, 1, 16384 * 16, 1)        # SpMV: 4 lanes a row, 8 rows a warp
    CsrLaunch(gs_log=2, q_log=0, vec=1, grid=(256, 1))
    >>> csr_launch(16384, 8, 16384 * 1638, 4)      # long rows, 8 columns: 2 x 16 lanes
    CsrLaunch(gs_log=5, q_log=1, vec=4, grid=(2048, 1))
    """
    if vec < 1 or vec & (vec - 1):
        raise ValueError(f"vec must be a power of two, got {vec}")
    q_log = min(5, _log2_ceil(-(-max(n_cols, 1) // vec)))
    mean = nnz / max(n_rows, 1)
    p_log = min(5 - q_log, _log2_floor(max(1, int(mean // 4))))
    if q_log + p_log == 0 and mean > 1:
        p_log = 1
    gs_log = q_log + p_log
    threads = max(n_rows, 1) << gs_log
    y = -(-max(n_cols, 1) // ((1 << q_log) * vec))
    return CsrLaunch(gs_log, q_log, vec, (-(-threads // BLOCK), y))


#: Mean stored entries a row from which an SpMV (one output column) takes ``csr_spmv4`` (a
#: warp a row, 16-byte loads of 4 nonzeros) instead of ``csr_dense``. On an H200 (16384^2,
#: float32 and float64) it took 0.85-1.0x csr_dense's time at 49-4915 a row and tied at 16
#: (docs/gpu.md, "Session 28").
SPMV4_MIN_MEAN = 32
#: Value dtypes that take ``csr_spmv4``: prepared (checked on the host) and one-shot (the
#: kernel checks). Measured there: complex128 took 1.06-1.27x csr_dense's time (one 16-byte
#: load a nonzero already), the checking float64 kernel 0.98-1.03x.
SPMV4_PREPARED = frozenset(map(np.dtype, ("float32", "float64", "complex64")))
SPMV4_ONE_SHOT = frozenset(map(np.dtype, ("float32", "complex64")))


def spmv4_grid(n_rows: int) -> int:
    """Blocks of ``csr_spmv4`` for ``n_rows`` rows: one warp a row, ``BLOCK`` threads a block.

    Examples
    --------
    >>> spmv4_grid(16384), spmv4_grid(1), spmv4_grid(0)
    (2048, 1, 0)
    """
    return -(-max(n_rows, 0) * 32 // BLOCK)


def uses_spmv4(n_rows: int, n_cols: int, n_stored: int, dtype, checking: bool) -> bool:
    """Whether a product of ``n_rows`` rows, ``n_cols`` output columns and ``n_stored``
    stored entries in ``dtype`` takes ``csr_spmv4``: an SpMV of rows long enough, in a dtype
    where it was faster (``checking``: the one-shot kernel that checks the structure). The
    host also needs 16-byte aligned index and value arrays.

    Examples
    --------
    >>> f32 = np.dtype(np.float32)
    >>> uses_spmv4(16384, 1, 16384 * 49, f32, True), uses_spmv4(16384, 1, 16384 * 16, f32, True)
    (True, False)
    >>> uses_spmv4(16384, 2, 16384 * 4915, f32, False)
    False
    >>> f64 = np.dtype(np.float64)
    >>> uses_spmv4(16384, 1, 16384 * 49, f64, False), uses_spmv4(16384, 1, 16384 * 49, f64, True)
    (True, False)
    """
    kinds = SPMV4_ONE_SHOT if checking else SPMV4_PREPARED
    return (n_cols == 1 and n_rows > 0 and n_stored >= SPMV4_MIN_MEAN * n_rows
            and np.dtype(dtype) in kinds)


def covered_cells(launch: CsrLaunch, n_rows: int, n_cols: int):
    """The (row, column) cells that the writing lanes of ``launch`` store (for tests): the
    mapping of kernels.cu's ``csr_dense`` from thread to row and columns, replayed."""
    cells = []
    G, Q = launch.lanes_per_row, launch.column_lanes
    for by in range(launch.grid[1]):
        for tid in range(launch.grid[0] * BLOCK):
            row, lane = tid >> launch.gs_log, (tid % BLOCK) & (G - 1)
            q, p = lane & (Q - 1), lane >> launch.q_log
            col = (by * Q + q) * launch.vec
            if p == 0 and row < n_rows and col < n_cols:
                cells += [(row, c) for c in range(col, min(col + launch.vec, n_cols))]
    return cells


# --------------------------------------------------------------------------------- TLR tables
@dataclass(frozen=True)
class Segments:
    """One launch of ``seg_gemv_t`` or ``seg_gemv_h``: segment g is the row-major
    ``rows[g] x cols[g]`` block of the bases at ``m_off[g]``; ``x_off``/``y_off`` its first
    input and output row; ``perm`` (or None) the gather of the input rows. ``work_a`` and
    ``work_b`` are the block table (``seg_gemv_t``: segment and first column of each block)
    or the output-row table (``seg_gemv_h``: segment and row of each warp)."""

    m_off: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    x_off: np.ndarray
    y_off: np.ndarray
    work_a: np.ndarray
    work_b: np.ndarray
    perm: np.ndarray | None
    row_groups: int = 8


def _blocks(cols: np.ndarray):
    per = -(-cols // TLR_COLS)
    seg = np.repeat(np.arange(len(cols), dtype=np.int32), per)
    first = np.repeat(np.cumsum(per) - per, per)
    c0 = ((np.arange(len(seg)) - first) * TLR_COLS).astype(np.int32)
    return seg, c0


def _row_table(rows: np.ndarray):
    seg = np.repeat(np.arange(len(rows), dtype=np.int32), rows)
    first = np.repeat(np.cumsum(rows) - rows, rows)
    return seg, (np.arange(len(seg)) - first).astype(np.int32)


def _blocks_of(matrices):
    """The stacked bases of ``matrices`` as blocks: per tile column the V block and per tile
    row the U block, each ``(m_off, rows, cols, rank offset, vector offset)`` with the
    offsets of matrix f after those of f - 1; and each matrix's (rank offset, perm)."""
    u_base = np.cumsum([0] + [T.U.size for T in matrices])
    v_base = np.cumsum([0] + [T.V.size for T in matrices])
    k_base = np.cumsum([0] + [int(T.kcol_ptr[-1]) for T in matrices])
    col_base = np.cumsum([0] + [T.shape[1] for T in matrices])
    row_base = np.cumsum([0] + [T.shape[0] for T in matrices])
    vs, us, perms = [], [], []
    for f, T in enumerate(matrices):
        vs.append((v_base[f] + T.v_off[:-1], np.diff(T.col_ptr), T.ranks.sum(axis=0),
                   k_base[f] + T.kcol_ptr[:-1], col_base[f] + T.col_ptr[:-1]))
        us.append((u_base[f] + T.u_off[:-1], T.ranks.sum(axis=1), np.diff(T.row_ptr),
                   k_base[f] + T.krow_ptr[:-1], row_base[f] + T.row_ptr[:-1]))
        perms.append((k_base[f], T.perm))
    return vs, us, perms


def _reading_vectors(blocks):      # input: the vector; output: the rank vector
    return [(m, r, c, vec, k) for m, r, c, k, vec in blocks]


def _reading_ranks(blocks):        # input: the rank vector; output: the vector
    return [(m, r, c, k, vec) for m, r, c, k, vec in blocks]


def tlr_forward_tables(matrices) -> tuple[Segments, Segments]:
    """Phase 1 (``yv = V^T x`` per tile column) and phase 3 (``y = U^T yv[perm]`` per tile
    row, the gather fused) of ``T_f @ x_f`` for every matrix f, stacked: the bases, inputs,
    outputs and rank vectors of matrix f follow those of f - 1.

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRMatrix
    >>> T = TLRMatrix.from_dense(np.eye(6), nb=4, tol=1e-6)
    >>> p1, p3 = tlr_forward_tables([T])
    >>> p1.rows.tolist(), p1.cols.tolist(), p3.rows.tolist(), p3.cols.tolist()
    ([4, 2], [4, 2], [4, 2], [4, 2])
    """
    vs, us, perms = _blocks_of(matrices)
    perm = np.concatenate([kb + p for kb, p in perms])
    return _segments(_reading_vectors(vs), None, transposed=True), \
        _segments(_reading_ranks(us), perm, transposed=True)


def tlr_adjoint_tables(matrices) -> tuple[Segments, Segments]:
    """Phase 1 (``zu = conj(U) y`` per tile row) and phase 3 (``x = conj(V) zu[inv]`` per
    tile column, the inverse gather fused) of ``T_f^H @ y_f`` for every matrix f, stacked.

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRMatrix
    >>> T = TLRMatrix.from_dense(np.eye(6), nb=4, tol=1e-6)
    >>> p1, p3 = tlr_adjoint_tables([T])
    >>> p1.work_a.size, p3.work_a.size      # one warp per output row
    (6, 6)
    """
    vs, us, perms = _blocks_of(matrices)
    inv = []
    for kb, p in perms:
        iv = np.empty_like(p)
        iv[p] = np.arange(p.size)
        inv.append(kb + iv)
    return _segments(_reading_vectors(us), None, transposed=False), \
        _segments(_reading_ranks(vs), np.concatenate(inv), transposed=False)


def _segments(parts, perm, transposed: bool) -> Segments:
    m_off, rows, cols, x_off, y_off = (np.concatenate([p[i] for p in parts]) for i in range(5))
    rows, cols = rows.astype(np.int32), cols.astype(np.int32)
    work = _blocks(cols) if transposed else _row_table(rows)
    # Long segments: 16 row groups (more, shorter blocks: less of a tail at the end of the
    # launch); see docs/gpu.md.
    weight = rows.astype(np.int64) * cols
    mean_rows = weight.sum() / max(cols.sum(), 1)
    groups = TLR_ROW_GROUPS[1] if mean_rows >= 128 else TLR_ROW_GROUPS[0]
    return Segments(m_off.astype(np.int64), rows, cols, x_off.astype(np.int64),
                    y_off.astype(np.int64), work[0], work[1],
                    None if perm is None else perm.astype(np.int64), groups)


def run_segments_numpy(seg: Segments, M: np.ndarray, x: np.ndarray, y: np.ndarray,
                       transposed: bool) -> None:
    """What ``seg_gemv_t`` (``transposed``) or ``seg_gemv_h`` computes, in numpy (for tests
    of the tables; the kernels' own arithmetic is tested on the GPU)."""
    for g in range(len(seg.rows)):
        R, C = int(seg.rows[g]), int(seg.cols[g])
        Mg = M[seg.m_off[g]:seg.m_off[g] + R * C].reshape(R, C)
        n_in = R if transposed else C
        idx = np.arange(seg.x_off[g], seg.x_off[g] + n_in)
        xs = x[seg.perm[idx] if seg.perm is not None else idx]
        out = Mg.T @ xs if transposed else Mg.conj() @ xs
        y[seg.y_off[g]:seg.y_off[g] + out.shape[0]] = out
