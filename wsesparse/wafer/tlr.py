"""TLR-MVM mapped onto wafer-scale engines: per-core chunks, cycle accounting, bandwidth.

Mapping ("tile-column chunks", the layout that makes phase 2 local): the
bases of tile column j are cut into per-core chunks along the rank. A chunk
holds, for some tiles (i, j) of that column, a slice of ``k'`` ranks of both
``V_ij`` (w_j x k') and ``U_ij`` (h_i x k'), plus the input segment x_j, the
k' intermediate values and a partial y_i per tile it touches. Every core then

1. receives x_j (broadcast down the cores of tile column j; each arriving
   x value triggers one AXPY over the k' ranks, so receive and compute overlap),
2. keeps its k' phase-1 outputs where phase 3 needs them (the reshuffle is a
   relabelling inside the core: 0 cycles and no fabric traffic), and
3. does one AXPY of length h_i per rank (phase 3), giving a partial y_i;
4. the partial y_i of all chunks of tile row i are summed by a pipelined
   chain over the fabric (the y reduction).

The alternative with V and U on different cores moves every phase-1 output
over the fabric; with ranks << nb that is cheap in bytes but needs a global
permutation, so this estimator uses the local layout above. (The SC23 paper's
abstract calls its TLR-MVM "embarrassingly parallel", which suggests a layout
without a fabric reshuffle; its exact mapping is not in our sources.)

Costs per core (cycles), all parameters from :class:`Machine` or arguments:

- complex single precision: one complex multiply-add = 4 fp32 FMACs, so an
  element of U or V costs ``4 / machine.fmac_fp32`` cycles (real: 1/fmac);
- receiving x_j: ``w_j * itemsize / payload_bytes`` cycles, overlapped with
  phase 1 (the larger of the two counts);
- broadcast latency: ``rows + cols`` hops to reach the farthest core once;
- y reduction: ``h * itemsize / payload_bytes + (p - 1) * cycles_per_hop``
  for a pipelined chain over the p chunks of a tile row;
- if the copies do not fit the cores at once they run in waves, and the
  bases of all but one wave stream in through ``weight_intake_bytes_per_s``.

Sustained bandwidth = (bytes of U and V + x and y once) / modelled time, the
measure of the 92.58 PB/s record (48 CS-2, 35,784,000 cores).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wsesparse._checks import check_int
from wsesparse.wafer.machine import WSE2, Machine

__all__ = ["TLRMVMEstimate", "estimate_tlrmvm", "PUBLISHED_TLRMVM_BYTES_PER_S"]

# Seed 001 / SC23 Gordon Bell finalist: sustained bandwidth on 48 CS-2 systems.
PUBLISHED_TLRMVM_BYTES_PER_S = 92.58e15
PUBLISHED_TLRMVM_SYSTEMS = 48

# SRAM kept back for code, stacks and fabric queues (inferred: SDK examples
# leave several KB to the program; 8 KB is our assumption).
DEFAULT_RESERVED_BYTES = 8 * 1024


@dataclass(frozen=True)
class TLRMVMEstimate:
    """Result of :func:`estimate_tlrmvm` (all times for one product of every copy)."""

    machine: str
    systems: int
    copies: int
    cores_per_matrix: int
    cores_available: int
    fits: bool
    max_chunk_bytes: int
    bytes_per_product: int          # U + V + x + y of one matrix
    phase1_cycles: int              # x receive / stacked-V AXPYs (slowest core)
    phase2_cycles: int              # reshuffle (local in this mapping)
    phase3_cycles: int              # stacked-U AXPYs (slowest core)
    broadcast_cycles: int           # latency of the x broadcast
    reduction_cycles: int           # y reduction (slowest tile row)
    total_cycles: int
    time_s: float
    bandwidth_bytes_per_s: float    # copies * bytes_per_product / time_s
    bytes_per_core_cycle: float
    notes: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        """A few lines for reports."""
        one = (self.phase1_cycles + self.phase2_cycles + self.phase3_cycles
               + self.broadcast_cycles + self.reduction_cycles)
        # (copies in waves: the terms are one wave's; the total adds the waves and the
        # bases streamed through the intake, see the notes)
        total = (f"{one}" if one == self.total_cycles else
                 f"{one} a wave; {self.total_cycles} in all with the waves and the streamed "
                 "bases")
        return (
            f"TLR-MVM on {self.systems} x {self.machine}: {self.copies} matrix copies x "
            f"{self.cores_per_matrix} cores (of {self.cores_available}), fits={self.fits}\n"
            f"  cycles: phase1 {self.phase1_cycles} + phase2 {self.phase2_cycles} + phase3 "
            f"{self.phase3_cycles} + broadcast {self.broadcast_cycles} + reduction "
            f"{self.reduction_cycles} = {total} ({self.time_s * 1e6:.2f} us)\n"
            f"  sustained bandwidth {self.bandwidth_bytes_per_s / 1e15:.2f} PB/s "
            f"({self.bytes_per_core_cycle:.2f} B per core per cycle over the cores in use); "
            f"published 92.58 PB/s on 48 CS-2"
        )


def _matrices(T):
    mats = getattr(T, "matrices", None)
    if mats is not None:
        return list(mats)
    if not hasattr(T, "ranks") or not hasattr(T, "row_ptr"):
        raise TypeError(f"T must be a TLRMatrix or TLRBatch, got {type(T).__name__}")
    return [T]


def _pack(T, itemsize: int, budget: int):
    """Greedy chunking of one matrix: per-core element counts and reduction fan-in.

    Returns (per-core V+U elements, per-core x length, cores per tile row,
    max bytes of a chunk).
    """
    h = np.diff(T.row_ptr)
    w = np.diff(T.col_ptr)
    R = np.asarray(T.ranks)
    core_elems: list[int] = []
    core_x: list[int] = []
    contrib = np.zeros(len(h), dtype=np.int64)
    max_bytes = 0
    for j in range(R.shape[1]):
        fixed = int(w[j]) * itemsize          # x_j, shared by the core's pieces
        cap = budget - fixed
        used, elems, open_ = 0, 0, False
        for i in range(R.shape[0]):
            k = int(R[i, j])
            per_rank = (int(h[i]) + int(w[j]) + 1) * itemsize   # U row, V column, yv value
            y_buf = int(h[i]) * itemsize                         # partial y_i
            if k and y_buf + per_rank > cap:
                raise ValueError(
                    f"one rank of a {h[i]}x{w[j]} tile ({y_buf + per_rank + fixed} bytes with its "
                    f"vectors) does not fit the {budget} bytes of SRAM per core available for "
                    "data; use a smaller nb"
                )
            while k > 0:
                if not open_:
                    used, elems, open_ = 0, 0, True
                    contrib_seen = False
                room = cap - used - y_buf
                n = min(k, room // per_rank) if room > 0 else 0
                if n == 0:
                    core_elems.append(elems)
                    core_x.append(int(w[j]))
                    max_bytes = max(max_bytes, used + fixed)
                    open_ = False
                    continue
                used += y_buf + n * per_rank
                elems += n * (int(h[i]) + int(w[j]))
                if not contrib_seen:
                    contrib[i] += 1
                    contrib_seen = True
                k -= n
            # the next tile is new to this core: it needs its own y buffer
            contrib_seen = False
        if open_:
            core_elems.append(elems)
            core_x.append(int(w[j]))
            max_bytes = max(max_bytes, used + fixed)
    return np.array(core_elems, dtype=np.int64), np.array(core_x, dtype=np.int64), contrib, max_bytes


def estimate_tlrmvm(T, machine: Machine = WSE2, systems: int = 1, *, copies: int | None = None,
                    reserved_bytes: int = DEFAULT_RESERVED_BYTES,
                    chunk_bytes: int | None = None) -> TLRMVMEstimate:
    """Estimate one TLR-MVM (``y = A x``) on ``systems`` wafer-scale engines.

    Parameters
    ----------
    T : TLRMatrix or TLRBatch
        The compressed operator (its ranks and tile sizes are what matter).
        float32 / complex64 are costed as such; double-precision matrices are
        costed as their single-precision counterparts (the wafer's fp32 path),
        which is noted in the result.
    machine : Machine
        Machine description (default the WSE-2 preset). Used fields: ``rows``,
        ``cols``, ``sram_bytes``, ``clock_hz``, ``fmac_fp32``,
        ``payload_bits``, ``cycles_per_hop``, ``weight_intake_bytes_per_s``
        (bases streamed in when the copies run in waves) and ``max_engines``
        (the bound on ``systems``).
    systems : int
        Number of engines working together, 1 to ``machine.max_engines``.
    copies : int, optional
        Independent matrices of the same shape and ranks processed at once
        (seismic: frequency slices). Default: as many as fit on all cores,
        which is how a full frequency batch fills the machines. At most 2**53.
    reserved_bytes : int
        SRAM per core kept back for code and queues (assumption: 8 KB).
    chunk_bytes : int, optional
        Cap on the data bytes per core (default: all SRAM left after
        ``reserved_bytes``). Smaller chunks spread a matrix over more cores:
        shorter phases, but the fixed broadcast and reduction costs weigh more.

    Returns
    -------
    TLRMVMEstimate

    Examples
    --------
    >>> import numpy as np
    >>> from wsesparse import TLRMatrix
    >>> from wsesparse.wafer.tlr import estimate_tlrmvm
    >>> from wsesparse.datasets import seismic_slice
    >>> T = TLRMatrix.from_dense(seismic_slice(nx=16, ny=16), nb=64, tol=1e-3)
    >>> est = estimate_tlrmvm(T, copies=1)
    >>> est.fits, est.phase2_cycles
    (True, 0)
    >>> est.bandwidth_bytes_per_s > 0
    True
    """
    mats = _matrices(T)
    if not mats:
        raise ValueError("T is an empty TLRBatch; there is nothing to estimate")
    if len({M.dtype.kind for M in mats}) > 1:
        raise ValueError("T mixes real and complex matrices; estimate them as separate batches")
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a wafer.Machine, got {type(machine).__name__}")
    systems = check_int(systems, "systems", minimum=1, maximum=machine.max_engines)
    # (beyond 2**53 the float times and rates below overflowed: a bare OverflowError)
    copies = check_int(copies, "copies", minimum=1, maximum=2**53, allow_none=True)
    reserved_bytes = check_int(reserved_bytes, "reserved_bytes", minimum=0,
                               maximum=machine.sram_bytes - 1)
    notes = []
    complex_ = mats[0].dtype.kind == "c"
    double = sorted({str(M.dtype) for M in mats if M.dtype.itemsize > (8 if complex_ else 4)})
    if double:
        notes.append(f"{' and '.join(double)} costed as single precision (fp32 on the wafer)")
    itemsize = 8 if complex_ else 4
    # one complex multiply-add = 4 real FMACs
    cyc_per_elem = (4 if complex_ else 1) / machine.fmac_fp32
    words_per_value = itemsize / machine.payload_bytes
    budget = machine.sram_bytes - reserved_bytes
    if chunk_bytes is not None:
        # at most the SRAM left after reserved_bytes
        budget = check_int(chunk_bytes, "chunk_bytes", minimum=1, maximum=budget)

    cores_avail = machine.cores * int(systems)
    cores_per_matrix = 0
    p1 = p3 = red = 0
    max_chunk = 0
    bytes_one = 0
    for M in mats:
        elems, xlen, contrib, mb = _pack(M, itemsize, budget)
        cores_per_matrix += len(elems)
        max_chunk = max(max_chunk, mb)
        bytes_one += M.mvm_bytes() // M.dtype.itemsize * itemsize
        # Split each core's elements back into its V part (phase 1) and U part
        # (phase 3): both are proportional to ranks x (w resp. h); for square
        # tiles half each. Use the exact ratio of this matrix's totals.
        v_share = M.V.size / max(M.V.size + M.U.size, 1)
        comp1 = elems * v_share * cyc_per_elem
        recv = xlen * words_per_value
        p1 = max(p1, int(math.ceil(np.max(np.maximum(comp1, recv)))) if len(elems) else 0)
        p3 = max(p3, int(math.ceil(np.max(elems * (1 - v_share) * cyc_per_elem))) if len(elems) else 0)
        h = np.diff(M.row_ptr)
        red_rows = np.where(contrib > 1, np.ceil(h * words_per_value)
                            + (contrib - 1) * machine.cycles_per_hop, 0)
        red = max(red, int(red_rows.max()) if red_rows.size else 0)
    if cores_per_matrix == 0:   # all ranks 0: no bases to hold, the product is zero
        copies = copies or 1
        notes.append("T has no bases (every tile of rank 0): the product is zero; only the "
                     "broadcast of x is costed")
    # A copy lives on one engine: an engine holds cores // cores_per_matrix of them (counting
    # the cores of all engines together put 24 more copies on 48 WSE-2s than fit on each: a
    # review). A matrix larger than one engine is spread over several (resident = 0).
    resident = systems * (machine.cores // cores_per_matrix) if cores_per_matrix else 0
    if copies is None and cores_per_matrix:
        copies = max(1, resident or cores_avail // cores_per_matrix)
    fits = copies <= resident if resident else copies * cores_per_matrix <= cores_avail
    bcast = (machine.rows + machine.cols) * machine.cycles_per_hop
    total = p1 + 0 + p3 + bcast + red
    time_s = total / machine.clock_hz
    if not fits:
        # The copies run in waves; every wave but the one left resident must
        # stream its bases in through the weight intake of the systems.
        waves = -(-copies // resident) if resident else -(-copies * cores_per_matrix
                                                           // cores_avail)
        # (the copies past the resident ones; waves of equal size, copies * (waves - 1) /
        # waves, streamed 1,800x too much one copy past a wave boundary: a review)
        streamed = ((copies - resident) if resident else copies * (waves - 1) / waves) \
            * bytes_one
        time_s = waves * time_s + streamed / (systems * machine.weight_intake_bytes_per_s)
        total = int(math.ceil(time_s * machine.clock_hz))
        held = (f"{resident} copies fit at once ({resident // systems} per engine)" if resident
                else f"needs {copies * cores_per_matrix} cores, only {cores_avail} available")
        notes.append(f"{held}: {waves} waves, {streamed / 1e9:.2f} GB of bases streamed "
                     "through the weight intake per product")
    bw = copies * bytes_one / time_s if time_s > 0 else float("inf")
    cores_used = min(copies, resident) * cores_per_matrix if resident \
        else min(copies * cores_per_matrix, cores_avail)
    return TLRMVMEstimate(
        machine=machine.name, systems=int(systems), copies=int(copies),
        cores_per_matrix=int(cores_per_matrix), cores_available=int(cores_avail), fits=bool(fits),
        max_chunk_bytes=int(max_chunk), bytes_per_product=int(bytes_one),
        phase1_cycles=int(p1), phase2_cycles=0, phase3_cycles=int(p3),
        broadcast_cycles=int(bcast), reduction_cycles=int(red), total_cycles=int(total),
        time_s=float(time_s), bandwidth_bytes_per_s=float(bw),
        bytes_per_core_cycle=float(copies * bytes_one / max(total, 1) / max(cores_used, 1)),
        notes=tuple(notes),
    )
