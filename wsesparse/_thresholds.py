"""Measured thresholds of the CPU kernels' dispatch, one line each.

Every number here was measured; docs/tuning.md has the measurements (command,
sizes, machine) under the constant's name. The dense-dispatch crossovers
depend on the vectors the kernels were compiled for, so their tables are keyed
by ``HardwareProfile.vector_bytes`` (64: AVX-512 tiles; 32: AVX2; the 16-byte tiles of
the portable build without AVX take the 32-byte table),
and every build's table can be tested on any machine. Nothing here reads the
machine (``wsesparse._hardware`` does).
"""

from __future__ import annotations

import numpy as np

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)

# -- threads ----------------------------------------------------------------------
MIN_WORK_PER_THREAD = 32_768   # multiply-adds below which one thread does a call
TEAM_GROWTH = 4                # a parallel call takes a thread per MIN_WORK_PER_THREAD / 4
PARTS_PER_THREAD = 4           # row ranges per thread: own queue first, then the others'
SPMV_WORK = 4                  # multiply-adds one SpMV nonzero weighs, for the thread count
COLD_TEAM_SECONDS = 0.03       # this long without a call that could take a team: ...
COLD_MAX_WORK = 1 << 22        # ... and calls below this many multiply-adds (a team of 2;
                               # 2x fewer per 2x the threads: cold_max_work) ...
COLD_RUN_SECONDS = 0.002       # ... run on one thread for this long (docs/tuning.md)
COLD_SECONDS_PER_WORK = 1e-9   # one thread's time per multiply-add after such a spell (the
                               # slowest measured): the limit grows to what a wake cost

# -- panels, prefetch, packing, streaming stores (kernel drivers) ----------------
SHORT_ROW_NNZ = 32             # rows averaging at most this many nonzeros: one sweep over X
LONG_ROW_NNZ = 160             # with a fast L3, rows this long still take L2-sized panels
PACK_MIN_REUSE = 24            # X rows used this often are read from an aligned copy
PANEL_MIN_REUSE = 4            # X rows used less often: one sweep, no panels or column
                               # blocks (docs/tuning.md, "Few nonzeros per row of X")
L3_PANEL_FRACTION = 4          # a sweep may take 1/4 of L3 where L3 is fast ...
L3_PANEL_MAX_BYTES = 8 << 20   # ... at most 8 MiB
L3_FAST_RATIO = 0.5            # L3 is fast if read at >= this fraction of L2's rate
PREFETCH_MIN_ROW_BYTES = 32    # software prefetch only for panel rows of more than this ...
PREFETCH_MAX_ROW_BYTES = 1024  # ... and at most this many bytes
STREAM_MIN_L3_SHARE = 0.25     # results of short rows from 1/4 of L3 on: streaming stores
STREAM_DEFAULT_L3_BYTES = 32 << 20  # the L3 assumed for that where none is reported
SPMV_BLOCK_X_LINES = 0.5       # a prepared SpMV streamed from DRAM takes short rows in blocks
#                                where 64-row blocks read x in runs: distinct 64-byte lines of
#                                x per distinct column at most this (stencils ~0.15, random ~1)
SPMV_CACHED_L3_SHARE = 0.5     # a SpMV matrix of at most this share of L3 (values and 4-byte
#                                indices) stays in cache: csr_spmv's far_matrix otherwise
SPMV_CODED_AFTER = 2           # a prepared SpMV that may take value codes (_drivers.spmv_coded)
#                                makes them on its call after this many (they cost 2-3 SpMVs)

# -- column blocks (ws_spmm_rows_kb) ----------------------------------------------
KB_MIN_NNZ = 96                # nonzeros per row and block for column blocks at all
KB_DENSE_NNZ = 256             # ... or this many where the K x tile slice fits in L2
KB_MIN_SLICE_L2 = 4            # a K x tile slice of X of this many L2s needs blocks

# -- transposed products (scatter) and copies ---------------------------------------
SCATTER_MAX_PANELS = 2         # one-shot X @ W_csr scatters in at most this many token panels:
SCATTER2_MIN_NNZ_PER_ROW = 64  # ... two from this many nonzeros per output row ...
SCATTER2_L3_SHARE = 4          # ... and a result of at most 1/4 of L3 (docs/tuning.md),
SCATTER_PAD_MIN_USES = 2       # ... rows padded to lines where X's rows are read this often
SCATTER_MIN_ITEMS = 2          # work items a transposed product aims at: the cores, at least this
SCATTER_CHUNK_NNZ = 4          # row chunks: at least this many nonzeros per output row per chunk
SCATTER_SCRATCH_BYTES = 64 << 20  # ... and chunk copies of at most this many bytes
SCATTER_COPY_L2S = 2           # ... each copy at most this many L2 caches
SCATTER_ZONE_MIN_WORK = 1 << 16  # one-chunk scatters of this many multiply-adds try zones
SCATTER_ZONE_GAP_SHARE = 8     # ... kept where the rows outside every zone are <= 1/this
SCATTER_ZONE_SAMPLE_ROWS = 64  # ... tried where 3 windows of this many rows of B each read
                               #     a span of at most 1/SCATTER_ZONE_GAP_SHARE of the rows
BLOCKED_COPY_MIN = 1 << 15     # transposing copies of this many elements ...
BLOCKED_COPY_STRIDE = 512      # ... with rows a multiple of this apart: blocked kernel

# -- scipy's own products of other formats (method="auto") -------------------------
# A COO, BSR or DIA operand times a dense one of several columns is scipy's own product
# (the format as stored, no conversion to CSR) up to this much work: stored values x
# columns, keyed by (format, the sparse operand on the right). 0: never (docs/tuning.md,
# "Other formats with several vectors"). One vector: always (COO, BSR; DIA if finite).
SCIPY_OWN_WORK = {("coo", False): 1 << 18, ("coo", True): 0, ("bsr", False): 1 << 18,
                  ("bsr", True): 1 << 20, ("dia", False): 1 << 19, ("dia", True): 1 << 20}
SCIPY_OWN_COO_RIGHT = (1 << 16, 8)  # X @ COO: scipy's own from this many entries with fewer
                                    # rows in X (sorting them by column costs more)

# -- dense dispatch (method="auto") -------------------------------------------------
KEEP_DENSE_BYTES = 256 << 20   # dense copies kept (prepared) / built for N < DENSE_WIDE_TOKENS
DENSE_MIN_TOKENS = 64          # a one-shot product goes dense only from this many columns
DENSE_WIDE_TOKENS = 256        # from this many columns the DENSE_DENSITY_WIDE crossovers hold
_NEVER = 1.01                  # a density no matrix reaches: that bucket never goes dense

# One-shot crossovers (densify + BLAS vs the AXPY kernel), N = 64..255 and >= 256.
DENSE_DENSITY = {
    64: {_F32: _NEVER, _F64: _NEVER, _C64: 0.38, _C128: 0.37},
    32: {_F32: 0.60, _F64: 0.55, _C64: 0.38, _C128: 0.37},
}
DENSE_DENSITY_WIDE = {
    64: {_F32: 0.60, _F64: 0.60, _C64: 0.25, _C128: 0.24},
    32: {_F32: 0.40, _F64: 0.33, _C64: 0.25, _C128: 0.24},
}
# A prepared CSR keeps its dense copy: crossovers for N = 1 / 2..63 / 64..255 / >= 256.
DENSE_DENSITY_PREPARED = {
    64: {_F32: (0.23, 0.57, 0.36, 0.25), _F64: (0.38, _NEVER, 0.20, 0.24),
         _C64: (0.14, _NEVER, 0.22, 0.23), _C128: (0.46, _NEVER, 0.21, 0.21)},
    32: {_F32: (0.26, _NEVER, 0.25, 0.35), _F64: (0.36, _NEVER, 0.28, 0.30),
         _C64: (0.14, _NEVER, 0.22, 0.23), _C128: (0.46, _NEVER, 0.21, 0.21)},
}


def _table_width(vector_bytes: int) -> int:
    """The table a build uses: 64-byte (AVX-512) tiles, or the 32-byte one for the rest."""
    return 64 if vector_bytes >= 64 else 32


def dense_threshold(dtype: np.dtype, n_tokens: int, prepared: bool, vector_bytes: int) -> float:
    """Density from which ``method="auto"`` uses dense BLAS (inf: never).

    Examples
    --------
    >>> f32 = np.dtype(np.float32)
    >>> dense_threshold(f32, 256, False, 32), dense_threshold(f32, 256, False, 64)
    (0.4, 0.6)
    >>> dense_threshold(f32, 8, False, 32)   # one-shot, few columns: never
    inf
    """
    width = _table_width(vector_bytes)
    if prepared:
        bucket = (0 if n_tokens == 1 else 1 if n_tokens < DENSE_MIN_TOKENS
                  else 2 if n_tokens < DENSE_WIDE_TOKENS else 3)
        return DENSE_DENSITY_PREPARED[width][dtype][bucket]
    if n_tokens < DENSE_MIN_TOKENS:
        return float("inf")
    return (DENSE_DENSITY_WIDE if n_tokens >= DENSE_WIDE_TOKENS else DENSE_DENSITY)[width][dtype]
