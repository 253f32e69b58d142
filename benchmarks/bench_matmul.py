"""asv benchmarks for ``wsesparse.sparse_matmul`` and the prepared ``wsesparse.CSR`` operand.

The parameter grids straddle the regime boundaries (SpMV vs SpMM, cache- vs DRAM-resident
matrices, the sparse/dense dispatch crossover), so a regression shows up there first.
Matrices are random with a fixed seed; every benchmark uses all cores (as users do).

asv_runner (0.3 and later) runs ``setup`` again before every timed call. The operands are
therefore built once per process (``functools.lru_cache``) and ``setup`` only looks them
up: every call then sees the same operands as its predecessor, warm, as in a user's loop
(building them afresh each time made 16384^2 density 0.001 SpMV read 265 us instead of
~90, and took most of the run). Benchmarks must not modify the cached operands.
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np

try:
    import wsesparse  # noqa: F401
except ImportError:  # `asv run --python=same` from a source tree built in place
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from wsesparse import CSR, datasets, sparse_matmul


@functools.lru_cache(maxsize=None)
def random_csr(m, k, density, dtype, seed=0):
    """Random m x k CSR matrix (canonical: sorted, no duplicates): exactly
    round(density * m * k) nonzeros placed by scipy.sparse.random, uniform values in [0, 1)
    (``datasets.random_csr(method="scipy")``, the suite's matrices since it began)."""
    return datasets.random_csr(m, k, density, dtype, seed, method="scipy")


@functools.lru_cache(maxsize=None)
def random_dense(k, n, dtype, seed=1):
    """Standard normal k x n array, drawn in float64 (``datasets.random_dense``)."""
    return datasets.random_dense(k, n, dtype, seed, draws=np.float64)


@functools.lru_cache(maxsize=None)
def random_vector(k, dtype):
    """A contiguous random vector of length k (the first column of ``random_dense``)."""
    return random_dense(k, 1, dtype)[:, 0].copy()


@functools.lru_cache(maxsize=None)
def prepared(tag, m, k, density, dtype):
    """``CSR(random_csr(...))``, one per ``tag``: a prepared operand caches things (row
    partitions, its transpose, a dense copy), so benchmarks that probe those keep their own."""
    return CSR(random_csr(m, k, density, dtype))


@functools.lru_cache(maxsize=None)
def _placed_dense(k, n, offset):
    """``random_dense(k, n, "float32")`` starting ``offset`` bytes after a 64-byte line."""
    X = random_dense(k, n, "float32")
    buf = np.empty(X.nbytes + 128, dtype=np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start:start + X.nbytes].view(np.float32).reshape(X.shape)
    out[...] = X
    return out


@functools.lru_cache(maxsize=None)
def _transposed_dense(k, n, dtype):
    """A C-contiguous (n, k) array: the tokens-by-features activations of X @ W."""
    return np.ascontiguousarray(random_dense(k, n, dtype).T)


class SparseMatmul:
    """Y = A @ X, one-shot (scipy CSR in, validated every call), M = K = 4096."""

    params = ([0.1, 0.01, 0.001], [8, 64, 256], ["float32", "float64"])
    param_names = ["density", "n_tokens", "dtype"]
    timeout = 120

    def setup(self, density, n_tokens, dtype):
        self.A = random_csr(4096, 4096, density, dtype)
        self.X = random_dense(4096, n_tokens, dtype)
        self.P = prepared("SparseMatmul", 4096, 4096, density, dtype)

    def time_sparse_matmul(self, density, n_tokens, dtype):
        sparse_matmul(self.A, self.X)

    def time_csr_prepared(self, density, n_tokens, dtype):
        self.P @ self.X


class ThreadScaling:
    """Prepared products on 1, 2, 4, 8, 16 threads and all cores (``method="sparse"``):
    the thread scaling of ``benchmarks/scaling.py`` tracked commit by commit. Counts above
    the machine's cores are skipped. 16384^2, density 0.001 (SpMV from DRAM) and 0.01.
    """

    params = ([1, 2, 4, 8, 16, "all"], [0.01, 0.001], [1, 8, 64])
    param_names = ["threads", "density", "n_tokens"]
    timeout = 120

    def setup(self, threads, density, n_tokens):
        from wsesparse._hardware import available_cores
        cores = available_cores()
        self.n = cores if threads == "all" else threads
        if self.n > cores:
            raise NotImplementedError(f"{threads} threads on {cores} cores")  # asv: skipped
        self.P = prepared("ThreadScaling", 16384, 16384, density, "float32")
        self.X = (random_vector(16384, "float32") if n_tokens == 1
                  else random_dense(16384, n_tokens, "float32"))

    def time_prepared(self, threads, density, n_tokens):
        sparse_matmul(self.P, self.X, n_threads=self.n, method="sparse")


class SparseMatmulComplex:
    """Complex products (the TLR/seismic use case) at one density."""

    params = ([8, 64], ["complex64", "complex128"])
    param_names = ["n_tokens", "dtype"]

    def setup(self, n_tokens, dtype):
        self.P = prepared("Complex", 4096, 4096, 0.01, dtype)
        self.X = random_dense(4096, n_tokens, dtype)

    def time_csr_prepared(self, n_tokens, dtype):
        self.P @ self.X


class NarrowTokens(SparseMatmulComplex):
    """Token counts that are not whole vectors (the last columns of each row go
    through the fixed-width remainder loops): 3, 4, 12 against the 8 of SparseMatmul."""

    params = ([3, 4, 12], ["float32", "float64"])


class _SpMV:
    """y = A @ x one-shot (scipy CSR) and prepared, on the operands ``_operands`` sets."""

    def _operands(self, size, density, dtype):
        self.A = random_csr(size, size, density, dtype)
        self.P = prepared("GEMV", size, size, density, dtype)
        self.x = random_vector(size, dtype)

    def time_spmv(self, *params):
        sparse_matmul(self.A, self.x)

    def time_spmv_csr_prepared(self, *params):
        self.P @ self.x


class GEMV(_SpMV):
    """SpMV (N = 1): memory-bound; 4096 fits in cache, 16384 streams from DRAM."""

    params = ([4096, 16384], [0.01, 0.001], ["float32", "float64"])
    param_names = ["size", "density", "dtype"]
    timeout = 120

    def setup(self, size, density, dtype):
        self._operands(size, density, dtype)


class GEMVRowLength(_SpMV):
    """SpMV by nonzeros per row, around the kernel's switches (16384^2, x beyond L1):
    rows under 8 nonzeros take one scalar chain, 8-23 (float32) / 8-15 (float64) the
    16-byte vector steps, longer ones the 32-byte steps. One-shot products check the
    indices of parts averaging under 40 (float32) / 24 (float64) per row a block at
    a time before the product, of longer ones in the loop."""

    params = ([4, 8, 12, 16, 24, 32, 48], ["float32", "float64"])
    param_names = ["nnz_per_row", "dtype"]

    def setup(self, nnz_per_row, dtype):
        self._operands(16384, nnz_per_row / 16384, dtype)


class GEMVRunsOfOneLength(_SpMV):
    """SpMV of rows all of one length (16384^2), beside GEMVRowLength's Poisson-distributed
    lengths of the same means: the scalar loop guesses its exit right on such rows, so
    Intel AVX-512 builds sum the short ones by scalar loads instead of gathers
    (``_spmm.SPMV_RUN_SCALAR``; docs/tuning.md, "Intel: scalar loads for runs of one row
    length")."""

    params = ([4, 8, 16], ["float32", "float64"])
    param_names = ["nnz_per_row", "dtype"]

    def setup(self, nnz_per_row, dtype):
        import scipy.sparse as sp
        n = 16384
        rng = np.random.default_rng(0)
        indices = np.sort(rng.integers(0, n, (n, nnz_per_row)), axis=1).astype(np.int32)
        self.A = sp.csr_array((rng.standard_normal(n * nnz_per_row).astype(dtype),
                               indices.ravel(), np.arange(0, n * nnz_per_row + 1,
                                                          nnz_per_row)), shape=(n, n))
        self.P = CSR(self.A)
        self.x = random_vector(n, dtype)


@functools.lru_cache(maxsize=None)
def _stencil(kind, dtype):
    """The 5-point (2-D, 1000^2 grid) or 7-point (3-D, 100^3 grid) Laplacian, 10^6 rows,
    CSR with int32 indices (as scipy builds it), its prepared ``CSR`` and a vector."""
    import scipy.sparse as sp
    from wsesparse.bench.workflows import poisson_2d
    if kind == "2d":
        A = poisson_2d(1000)
    else:
        eye = sp.identity(100, format="csr")
        T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(100, 100), format="csr")
        A = sp.csr_array(sp.kron(sp.kron(T, eye), eye) + sp.kron(sp.kron(eye, T), eye)
                         + sp.kron(sp.kron(eye, eye), T))
    A = A.astype(dtype)
    return A, CSR(A), random_vector(A.shape[1], dtype)


class StencilSpMV(_SpMV):
    """SpMV of PDE stencils (10^6 rows, 5 or 7 per row, x of 4-8 MB): a prepared operand
    whose values and indices exceed L3 reads its short rows in 64-row blocks
    (``_drivers.spmv_blocks``; docs/tuning.md, "Prepared short rows in blocks"), the
    one-shot product checks them in the same blocks."""

    params = (["2d", "3d"], ["float32", "float64"])
    param_names = ["stencil", "dtype"]
    timeout = 120

    def setup(self, stencil, dtype):
        self.A, self.P, self.x = _stencil(stencil, dtype)


class SpMMRowLength:
    """N = 8 float32 (one 32-byte tile per row: its own row loop, no software
    prefetch) against N = 12 (a tile plus 4 scalar columns: the per-row dispatch), by
    nonzeros per row; 16384^2, so X (512 / 768 KiB) is beyond half of L2."""

    params = ([4, 16, 64], [8, 12])
    param_names = ["nnz_per_row", "n_tokens"]

    def setup(self, nnz_per_row, n_tokens):
        self.P = prepared("SpMM", 16384, 16384, nnz_per_row / 16384, "float32")
        self.X = random_dense(16384, n_tokens, "float32")

    def time_spmm_csr_prepared(self, nnz_per_row, n_tokens):
        self.P @ self.X


class ComplexGEMV(_SpMV):
    """Complex SpMV (the TLR/seismic use case; real-arithmetic dot products, ws_cdots)."""

    params = ([0.01, 0.001], ["complex64", "complex128"])
    param_names = ["density", "dtype"]

    def setup(self, density, dtype):
        self._operands(4096, density, dtype)


class Dispatch:
    """Around the sparse/dense crossover: method="auto" must track the faster of the two."""

    params = ([0.1, 0.3, 0.5], ["auto", "sparse", "dense"])
    param_names = ["density", "method"]
    timeout = 120

    def setup(self, density, method):
        self.A = random_csr(2048, 2048, density, "float32")
        self.X = random_dense(2048, 256, "float32")

    def time_sparse_matmul(self, density, method):
        sparse_matmul(self.A, self.X, method=method)


class PanelSweep:
    """Wide N: short rows are swept once over all columns, longer rows in panels
    (``_drivers.panel_width``), M = K = 4096, N = 1024, float32: density 0.001 (4 per row, one
    sweep), 0.01 (41: half of L2, or the L3 slice where L3 is fast), 0.05 (205: half of L2,
    or all of L2 where L3 is fast). ``l3`` pins the L3 probe's answer (``slow``: panels in
    L2; ``probed``: this machine's)."""

    params = ([0.001, 0.01, 0.05], ["slow", "probed"])
    param_names = ["density", "l3"]
    timeout = 120

    def setup(self, density, l3):
        from dataclasses import replace

        from wsesparse import _hardware
        self._saved = _hardware.current()
        _hardware._current = replace(self._saved, fast_l3=False if l3 == "slow" else None)
        self.P = prepared(f"PanelSweep-{l3}", 4096, 4096, density, "float32")
        self.X = random_dense(4096, 1024, "float32")
        self.P @ self.X  # the probe runs here, not in the timing

    def teardown(self, density, l3):
        from wsesparse import _hardware
        _hardware._current = self._saved

    def time_csr_prepared(self, density, l3):
        self.P @ self.X


class AlignedCopy:
    """One sweep over X (N = 64, float32, M = K = 4096): X rows off 64-byte lines are read
    from an aligned copy once each is used by ``_thresholds.PACK_MIN_REUSE`` (24) nonzeros or more
    (density 0.004: 16 per row, in place; 0.01: 41, copied); ``offset`` 0 puts X on the lines
    (never copied), 16 bytes off is where numpy's allocator puts it."""

    params = ([0.004, 0.01], [0, 16])
    param_names = ["density", "offset"]

    def setup(self, density, offset):
        self.P = prepared("AlignedCopy", 4096, 4096, density, "float32")
        self.X = _placed_dense(4096, 64, offset)

    def time_csr_prepared(self, density, offset):
        self.P @ self.X


class _SwitchedOff:
    """Prepared products of a 4096^2 CSR of ``density`` (``dtype``) times N columns, with
    the module constant ``wsesparse.<_module>.<_attr>`` set to infinity (the feature off)
    where the second parameter is "off", and restored afterwards."""

    _module = _attr = dtype = ""
    density = 0.001

    def setup(self, n_tokens, switch):
        self.P = prepared(f"{type(self).__name__}-{switch}", 4096, 4096, self.density,
                          self.dtype)
        self.X = random_dense(4096, n_tokens, self.dtype)
        self._switch(switch)

    def _switch(self, switch):
        import importlib
        self._mod = importlib.import_module(f"wsesparse.{self._module}")
        self._saved = getattr(self._mod, self._attr)
        if switch == "off":
            setattr(self._mod, self._attr, float("inf"))

    def teardown(self, *params):
        setattr(self._mod, self._attr, self._saved)

    def time_csr_prepared(self, n_tokens, switch):
        self.P @ self.X


class LargeOutput(_SwitchedOff):
    """Results on both sides of the output pool's 32 MiB threshold (wsesparse/_outputs.py):
    M = K = 4096, density 0.001, N = 512 / 1024 float64 (16 / 32 MiB results), ``pool``
    off means the result is written into fresh pages every call (as without the pool).
    (The pool is not emptied in teardown: asv tears down and sets up again between the
    timed calls, and an emptied pool would time fresh pages with the pool on.)"""

    params = ([512, 1024], ["on", "off"])
    param_names = ["n_tokens", "pool"]
    timeout = 120
    _module, _attr, dtype = "_outputs", "_POOL_MIN_BYTES", "float64"


class StreamingStores(_SwitchedOff):
    """Short rows (density 0.001, 4 per row, M = K = 4096, float32) on both sides of the
    streaming-store bound (``_thresholds.STREAM_MIN_L3_SHARE``, a quarter of L3): N = 256 (4 MiB
    result) and 1024 (16 MiB); ``stream`` off keeps plain stores at every size."""

    params = ([256, 1024], ["auto", "off"])
    param_names = ["n_tokens", "stream"]
    _module, _attr, dtype = "_thresholds", "STREAM_MIN_L3_SHARE", "float32"


class ColumnBlocks(_SwitchedOff):
    """Column blocks for dense-ish rows (``_drivers.k_block``): M = K = 4096, float32, N one
    column-block tile wide (``kblock_tile_bytes / 4``: 64 with AVX2's 256-byte tiles, 128
    with AVX-512's 512; at N = 64 an AVX-512 build never blocked, so "auto" and "off" timed
    the same code: a review), method="sparse", densities 0.1 (whole rows by the rule: too
    few nonzeros per row and block on a 1 MiB L2), 0.25 and 0.5 (blocks); ``blocks`` "off"
    sets ``_thresholds.KB_MIN_NNZ`` to infinity (whole rows everywhere)."""

    params = ([0.1, 0.25, 0.5], ["auto", "off"])
    param_names = ["density", "blocks"]
    timeout = 120
    _module, _attr, dtype = "_thresholds", "KB_MIN_NNZ", "float32"

    def setup(self, density, blocks):
        from wsesparse import _hardware
        self.P = prepared("ColumnBlocks", 4096, 4096, density, self.dtype)
        self.X = random_dense(4096, _hardware.current().kblock_tile_bytes // 4, self.dtype)
        self._switch(blocks)

    def time_csr_prepared(self, density, blocks):
        sparse_matmul(self.P, self.X, method="sparse")


class StencilSpMVCodes(_SwitchedOff):
    """Prepared float64 SpMV of the stencils (StencilSpMV's) with value codes ("auto": a
    byte a nonzero for values with at most 256 distinct bit patterns, where the matrix
    exceeds L3; ``_drivers.spmv_coded``) and without ("off": ``_thresholds.SPMV_CODED_AFTER``
    infinite); docs/tuning.md, "Value codes"."""

    params = (["2d", "3d"], ["auto", "off"])
    param_names = ["stencil", "codes"]
    timeout = 120
    _module, _attr = "_thresholds", "SPMV_CODED_AFTER"

    def setup(self, stencil, codes):
        A, _, self.x = _stencil(stencil, "float64")
        self.P = CSR(A)   # (caches of its own: the codes made, or not, under this switch)
        self._switch(codes)
        for _ in range(3):   # past SPMV_CODED_AFTER
            self.P @ self.x

    def time_csr_prepared(self, stencil, codes):
        self.P @ self.x


class PreparedDispatch:
    """A prepared CSR switches to its cached dense copy from DENSE_DENSITY_PREPARED (float32:
    0.23 with AVX-512 tiles / 0.26 with AVX2 at N = 1; 0.57 / never at N = 8): densities on
    both sides of those crossovers."""

    params = ([0.2, 0.35, 0.6], [1, 8])
    param_names = ["density", "n_tokens"]
    timeout = 120

    def setup(self, density, n_tokens):
        self.P = prepared("PreparedDispatch", 2048, 2048, density, "float32")
        self.X = random_vector(2048, "float32") if n_tokens == 1 else random_dense(
            2048, n_tokens, "float32")
        self.P @ self.X  # the first call builds the dense copy where auto picks dense

    def time_csr_prepared(self, density, n_tokens):
        self.P @ self.X


class DenseTimesSparse:
    """Z = X @ W (activations times weights), W scipy CSR: one-shot by scatter while a
    token row fits one panel (32 float32 tokens: SCATTER_MAX_PANELS), by transposing W
    beyond; prepared: the cached transpose. 4 and 12 tokens end in a part vector (the
    scatter's remainder steps), 24 and 32 take one 128-byte panel (docs/tuning.md,
    "Transposed products (scatter) and copies")."""

    params = ([1, 4, 8, 12, 24, 32, 64], ["float32"])
    param_names = ["n_tokens", "dtype"]

    def setup(self, n_tokens, dtype):
        self.W = random_csr(4096, 4096, 0.01, dtype)
        self.P = prepared("DenseTimesSparse", 4096, 4096, 0.01, dtype)
        self.Xt = _transposed_dense(4096, n_tokens, dtype)
        self.P.T  # noqa: B018 (the transpose is cached on first use)

    def time_dense_times_sparse(self, n_tokens, dtype):
        sparse_matmul(self.Xt, self.W)

    def time_dense_times_prepared(self, n_tokens, dtype):
        sparse_matmul(self.Xt, self.P)


class DenseTimesSparseTwoPanels:
    """Z = X @ W one-shot with token rows of two scatter panels (48 and 64 float32 tokens,
    24 and 32 float64), W 16384^2 with about 82 nonzeros per output row: scattered
    (``matmul._scatter_ok``) where it transposed W before session 23 (docs/tuning.md,
    "Transposed products (scatter) and copies")."""

    params = ([24, 32, 48, 64], ["float32", "float64"])
    param_names = ["n_tokens", "dtype"]

    def setup(self, n_tokens, dtype):
        if n_tokens > 32 and dtype == "float64":
            raise NotImplementedError   # (three panels: transposed; asv skips the point)
        self.W = random_csr(16384, 16384, 0.005, dtype)
        self.Xt = _transposed_dense(16384, n_tokens, dtype)

    def time_dense_times_sparse(self, n_tokens, dtype):
        sparse_matmul(self.Xt, self.W)


class BandedCSCTimesDense:
    """A CSC stencil matrix (Poisson 1000^2, 5 per column) times N columns, one-shot:
    a scatter with one row chunk by the chunk rule (5 nonzeros per output row), in zones
    at every N (from 24-byte rows, N = 3 and 8, until session 28; docs/tuning.md,
    "Transposed products")."""

    params = ([1, 3, 8], ["float64"])
    param_names = ["n_tokens", "dtype"]
    timeout = 120

    def setup(self, n_tokens, dtype):
        self.A = _stencil_csc(dtype)
        self.X = random_dense(self.A.shape[1], n_tokens, dtype)
        if n_tokens == 1:
            self.X = random_vector(self.A.shape[1], dtype)

    def time_csc_times_dense(self, n_tokens, dtype):
        sparse_matmul(self.A, self.X)


@functools.lru_cache(maxsize=None)
def _stencil_csc(dtype):
    """``_stencil("2d", dtype)``'s matrix as a scipy CSC array."""
    return _stencil("2d", dtype)[0].tocsc()


class PrepareAndOverhead:
    """Fixed costs: preparing a CSR operand, and calls on a tiny problem (64 x 64,
    N = 1 and 8), where the per-call Python work is most of the time; scipy's own
    product on the same operands is the yardstick (the call should cost less)."""

    def setup(self):
        self.A = random_csr(4096, 4096, 0.01, "float32")
        self.small = random_csr(64, 64, 0.1, "float64")
        self.small_P = prepared("Overhead", 64, 64, 0.1, "float64")
        self.x = np.ones(64)
        self.X8 = np.ones((64, 8))

    def time_prepare_csr(self):
        CSR(self.A)

    def time_tiny_call(self):
        sparse_matmul(self.small, self.x)

    def time_tiny_call_prepared(self):
        self.small_P @ self.x

    def time_tiny_call_scipy(self):
        self.small @ self.x

    def time_tiny_spmm(self):
        sparse_matmul(self.small, self.X8)

    def time_tiny_spmm_prepared(self):
        self.small_P @ self.X8

    def time_tiny_spmm_scipy(self):
        self.small @ self.X8


@functools.lru_cache(maxsize=None)
def _other_format(fmt, n):
    """An n x n float64 operand in scipy format ``fmt``: 10 nonzeros a row at random
    (``random_csr``; BSR of 2 x 2 blocks), DIA banded (11 diagonals, what DIA is for)."""
    import scipy.sparse as sp

    if fmt == "dia":
        rng = np.random.default_rng(0)
        bands = [rng.standard_normal(n - abs(k)) for k in range(-5, 6)]
        return sp.dia_array(sp.diags_array(bands, offsets=range(-5, 6), shape=(n, n)))
    A = random_csr(n, n, 10 / n, "float64")
    return A.tobsr(blocksize=(2, 2)) if fmt == "bsr" else A.asformat(fmt)


class OtherFormats:
    """One-shot products of the formats converted or handed to scipy on every call (COO,
    BSR, DIA, LIL, DOK; docs/tuning.md, "Other formats with one vector" and "... several
    vectors"), 1,000 rows, one and 8 columns, with scipy's own product as the yardstick."""

    params = (["coo", "bsr", "dia", "lil", "dok"], [1, 8])
    param_names = ["format", "n_tokens"]

    def setup(self, fmt, n_tokens):
        self.A = _other_format(fmt, 1000)
        self.X = random_vector(1000, "float64") if n_tokens == 1 else \
            random_dense(1000, n_tokens, "float64")

    def time_sparse_matmul(self, fmt, n_tokens):
        sparse_matmul(self.A, self.X)

    def time_scipy(self, fmt, n_tokens):
        self.A @ self.X


class PeakMemory:
    """Peak memory of a big product: M = K = 16384, density 1 %, N = 256, float32.

    A holds 2.7 M nonzeros (~21 MB), X and Y 16 MB each: the product should add about one
    output array to the process, not a densified A (1 GB) or a copy of X.
    """

    timeout = 300

    def setup(self):
        self.A = random_csr(16384, 16384, 0.01, "float32")
        self.X = random_dense(16384, 256, "float32")

    def peakmem_sparse_matmul_big(self):
        sparse_matmul(self.A, self.X)

    def peakmem_gemv_big(self):
        sparse_matmul(self.A, self.X[:, 0])
