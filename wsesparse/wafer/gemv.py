"""GEMV with resident weights: ``y = A @ x`` with A block-distributed over the grid.

Input features (columns of A) go to grid columns and output features (rows of
A) to grid rows, both through a balancer, so core (r, c) holds the block
``A[rows of r, columns of c]``. ``x_j`` is broadcast down grid column c; each
arriving ``x_j`` triggers one AXPY over the core's nonzeros of column j. The
partial ``y`` segments of a grid row are then reduced along the row with one
of three schemes, costed per grid row (``t`` = cycles to send the segment over
one link, ``h`` = hop latency, ``C`` = columns):

* ``chain``: store-and-forward from column 0 to C-1: ``(C-1) * (t + h)``;
* ``ring``: reduce-scatter around the row ring, C chunks of ``t / C``:
  ``(C-1) * (ceil(t / C) + h)``; y ends up spread over the row's cores;
* ``tree``: binary tree, level l spans ``2**l`` hops: ``ceil(log2 C) * t + (C-1) * h``.

Per core compute: ``sum_j ceil(nnz(block, j) / fmac)`` cycles, overlapped with the
x stream (``ceil(|cols of c| * bytes / payload)`` cycles) plus ``R * h`` of fill.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import as_dense_operand, describe
from wsesparse.wafer.balance import check_method
from wsesparse.wafer.balance import balance as make_assignment
from wsesparse.wafer.estimate import as_csr_pattern
from wsesparse.wafer.machine import DEFAULT_DTYPE, DTYPE_BYTES, WSE2, Machine, check_dtype

REDUCTIONS = ("chain", "ring", "tree")


@dataclass(frozen=True)
class GemvReport:
    """Cycles of ``y = A @ x`` with resident A, for each reduction scheme.

    Attributes
    ----------
    compute_cycles : int
        Broadcast + AXPY phase (slowest core).
    reduce_cycles : dict
        Reduction phase (slowest grid row) per scheme.
    cycles : dict
        ``compute_cycles + reduce_cycles[scheme]``.
    best : str
        Scheme with the fewest cycles.
    core_nnz_max, core_nnz_mean : float
        Nonzeros on the fullest and the average core.
    sram_bytes_per_core : int
        Fullest core's block (CSC: value + 16-bit index) plus its x and y segments.
    """

    machine: str
    dtype: str
    shape: tuple
    nnz: int
    balance: str
    compute_cycles: int
    reduce_cycles: dict
    cycles: dict
    best: str
    core_nnz_max: int
    core_nnz_mean: float
    sram_bytes_per_core: int
    sram_fits: bool

    def __str__(self) -> str:
        m, n = self.shape
        lines = [f"GEMV on {self.machine}: A {m} x {n}, nnz {self.nnz:,}, {self.dtype}, "
                 f"balance {self.balance}",
                 f"  core nnz max {self.core_nnz_max:,} (mean {self.core_nnz_mean:,.1f}); SRAM "
                 f"{self.sram_bytes_per_core:,} B per core ({'fits' if self.sram_fits else 'DOES NOT FIT'})",
                 f"  broadcast + AXPY phase {self.compute_cycles:,} cycles"]
        for k in REDUCTIONS:
            lines.append(f"  {k:<5} reduction {self.reduce_cycles[k]:>10,} -> total "
                         f"{self.cycles[k]:>10,}{'  (best)' if k == self.best else ''}")
        return "\n".join(lines)


def _reduce_cycles(machine: Machine, seg_len: int, dtype: str) -> dict:
    C, h = machine.cols, machine.cycles_per_hop
    t = math.ceil(seg_len * DTYPE_BYTES[dtype] / machine.payload_bytes)
    if C == 1:
        return {k: 0 for k in REDUCTIONS}
    return {"chain": (C - 1) * (t + h),
            "ring": (C - 1) * (math.ceil(t / C) + h),
            "tree": math.ceil(math.log2(C)) * t + (C - 1) * h}


def _plan(A, machine, balance, dtype):
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a wafer.Machine, got {type(machine).__name__}")
    dtype = check_dtype(dtype)
    check_method(balance, "balance")
    csr = as_csr_pattern(A, "A")
    csc = sp.csc_array(csr)
    cols = make_assignment(np.diff(csc.indptr), machine.cols, balance)
    rows = make_assignment(np.diff(csr.indptr), machine.rows, balance)
    return csr, dtype, rows, cols


def _cost(csr, dtype, rows, cols, machine, balance) -> GemvReport:
    R, C, f = machine.rows, machine.cols, machine.fmac(dtype)
    coo = csr.tocoo()
    r_of, c_of = rows.row_of_feature[coo.row], cols.row_of_feature[coo.col]
    # AXPY work per core: one vector op per (core, column j) with ceil(nnz / f) cycles.
    key = (r_of.astype(np.int64) * C + c_of) * csr.shape[1] + coo.col
    uniq, counts = np.unique(key, return_counts=True)
    core = uniq // csr.shape[1]
    work = np.bincount(core, weights=-(-counts // f), minlength=R * C)
    core_nnz = np.bincount(r_of.astype(np.int64) * C + c_of, minlength=R * C)
    b = DTYPE_BYTES[dtype]
    stream = np.ceil(cols.features_per_row * b / machine.payload_bytes)   # per grid column
    compute = int(max(work.reshape(R, C).max(axis=0).max(initial=0), stream.max())
                  + R * machine.cycles_per_hop)
    seg = int(rows.features_per_row.max())
    red = _reduce_cycles(machine, seg, dtype)
    total = {k: compute + v for k, v in red.items()}
    sram = int(core_nnz.max() * (b + 2) + cols.features_per_row.max() * b + seg * 4)
    return GemvReport(machine.name, dtype, csr.shape, int(csr.nnz), balance, compute, red, total,
                      min(total, key=total.get), int(core_nnz.max()), float(core_nnz.mean()),
                      sram, sram <= machine.sram_bytes)


def estimate_gemv(A, machine: Machine = WSE2, balance: str = "round_robin",
                  dtype=DEFAULT_DTYPE) -> GemvReport:
    """Cycle estimate of ``y = A @ x`` with A resident on the grid; compares reductions.

    Parameters
    ----------
    A : scipy sparse matrix or 2-D array, shape (m, n)
    machine : Machine
    balance : str
        Balancer for both A's rows (over grid rows) and columns (over grid columns).
    dtype : {'float16', 'float32'}, default 'float16'
        ``machine.DEFAULT_DTYPE``, shared by the GEMM/GEMV/gradient estimate_* and
        execute_* calls.

    Returns
    -------
    GemvReport

    Examples
    --------
    >>> import dataclasses, numpy as np
    >>> from wsesparse import wafer
    >>> m = dataclasses.replace(wafer.WSE2, rows=4, cols=16)
    >>> rep = wafer.estimate_gemv(np.ones((64, 256)), machine=m)
    >>> rep.best, rep.reduce_cycles["chain"] > rep.reduce_cycles["tree"]
    ('ring', True)
    """
    csr, dtype, rows, cols = _plan(A, machine, balance, dtype)
    return _cost(csr, dtype, rows, cols, machine, balance)


def execute_gemv(A, x, machine: Machine = WSE2, balance: str = "round_robin",
                 dtype=DEFAULT_DTYPE, reduction: str = "ring"):
    """Run ``y = A @ x`` block by block with the chosen reduction; return ``(y, report)``.

    Each core computes its partial ``y`` segment from its block and x segment
    (fp32 accumulation); the grid row's partial segments are then combined in
    the order the scheme combines them (chain: left to right; ring: per chunk,
    starting after the chunk's owner; tree: pairwise by distance 1, 2, 4, ...).
    As in :func:`execute_gemm`, a segment crosses each link in ``dtype`` (the
    cost counts ``dtype``'s bytes on the wire): fp16 partial sums are rounded
    at every hop and added in fp32 on arrival.

    Parameters
    ----------
    A : scipy sparse matrix or 2-D array, shape (m, n)
        Real values only (the wafer model raises TypeError on complex ones).
    x : array_like, shape (n,)
    machine, balance, dtype
        As in :func:`estimate_gemv`.
    reduction : {'chain', 'ring', 'tree'}, default 'ring'
        How a grid row combines its partial segments (``REDUCTIONS``); another value raises
        ValueError.

    Returns
    -------
    y : ndarray of ``dtype``, shape (m,)
    report : GemvReport
        The report :func:`estimate_gemv` gives for the same arguments.

    Examples
    --------
    >>> import dataclasses, numpy as np
    >>> from wsesparse import wafer
    >>> m = dataclasses.replace(wafer.WSE2, rows=3, cols=5)
    >>> A = np.arange(60.0).reshape(6, 10); x = np.ones(10)
    >>> y, rep = wafer.execute_gemv(A, x, machine=m, reduction="tree")
    >>> bool(np.allclose(y, A @ x))
    True
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    csr, dtype, rows, cols = _plan(A, machine, balance, dtype)
    xa = as_dense_operand(x, "x")
    if xa.ndim != 1 or xa.shape[0] != csr.shape[1]:
        raise ValueError(f"x must be 1-D of length {csr.shape[1]} to match A, got {describe(xa)}")
    for name, arr in (("A", csr), ("x", xa)):
        if arr.dtype.kind == "c":
            raise TypeError(f"the wafer model runs real dtypes only, {name} is {describe(arr)}")
    R, C = machine.rows, machine.cols
    Ad = csr.astype(np.float32)
    Ad.data = csr.data.astype(dtype).astype(np.float32)  # values rounded to dtype
    xd = xa.astype(dtype).astype(np.float32)
    y = np.zeros(csr.shape[0], dtype=np.float32)

    def wire(v):  # a segment as it crosses a link
        return v.astype(dtype).astype(np.float32)

    for r in range(R):
        I = np.flatnonzero(rows.row_of_feature == r)
        if I.size == 0:
            continue
        Ar = Ad[I]
        parts = []
        for c in range(C):
            J = np.flatnonzero(cols.row_of_feature == c)
            parts.append((Ar[:, J].astype(np.float32) @ xd[J]).astype(np.float32))
        if reduction == "chain":
            acc = parts[0]
            for p in parts[1:]:
                acc = wire(acc) + p
        elif reduction == "tree":
            step = 1
            while step < C:
                for c in range(0, C - step, 2 * step):
                    parts[c] = parts[c] + wire(parts[c + step])
                step *= 2
            acc = parts[0]
        else:
            acc = np.empty_like(parts[0])
            for k, chunk in enumerate(np.array_split(np.arange(I.size), C)):
                s = parts[(k + 1) % C][chunk]
                for step in range(2, C + 1):
                    s = wire(s) + parts[(k + step) % C][chunk]
                acc[chunk] = s
        y[I] = acc
    return y.astype(dtype), _cost(csr, dtype, rows, cols, machine, balance)
