"""Event-level cycle estimate of the streamed sparse GEMM (no arithmetic).

The model, per pass of width L (tokens per core) and per output feature i in
stream order, for every physical row r (all cores of a row do the same work):

* intake: messages (nonzero weights in output-major order, plus one control
  message per output) arrive at ``ceil(k / q)`` for the k-th message, q =
  ``machine.intake_messages_per_cycle``; a row sees them ``hop * (r + cols)``
  cycles later (down the intake column, then across the row to its last core);
* compute thread: ``start = max(F[i-1, r], first weight of i arrives)``,
  ``F[i, r] = max(start + n_ir * a, control arrives, E[i-B, r]) + copy + reset``
  with ``a = ceil(L / fmac)`` cycles per AXPY, ``n_ir`` the nonzeros of output i
  on row r and ``E[i-B, r]`` the time the buffer it reuses was drained (B =
  ``psum_buffer_depth``: a fast row runs ahead at most B outputs);
* reduction ring (per column, its own thread): output i ends on row
  ``d = i mod rows`` and starts on ``d + 1``; at ring step p on row r,
  ``G = max(F[i, r], E[i-1 on r], G_prev + hop)`` (cut-through) and
  ``E[i, r] = G + t`` with ``t = max(psum_add, ceil(L * bytes / payload))``
  under the ``psum="fabric"`` reading, or ``psum_add`` alone under ``psum="seed"``
  (the seed's literal four cycles; see ``machine.PSUM_READINGS``);
* the pass ends when the last output's ring ends; passes run back to back.

``dense_cycles`` runs the same recurrence with every weight nonzero.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import check_allocation, check_int, check_numeric_dtype, check_real, describe
from wsesparse._kernels import _wafer
from wsesparse._structure import check_sparse_structure
from wsesparse.csr import CSR
from wsesparse.wafer.balance import Assignment, check_assignment, check_method
from wsesparse.wafer.balance import balance as make_assignment
from wsesparse.wafer.layout import Layout, make_layout
from wsesparse.wafer.machine import DEFAULT_DTYPE, DTYPE_BYTES, WSE2, Machine, check_dtype, with_psum
from wsesparse.wafer.report import GemmReport


def as_csr_pattern(W, name: str = "W") -> sp.csr_array:
    """Validate ``W`` (scipy sparse or 2-D dense) and return it as a canonical CSR
    (duplicates summed, indices sorted: on a copy where ``W`` is not, so ``W`` itself is
    never changed). The pattern is the stored entries: a stored zero (in BSR blocks, say)
    is a weight the cores hold and stream."""
    if W is None:
        raise TypeError(f"{name} is None; expected a 2-D sparse or dense matrix")
    if isinstance(W, CSR):
        W = W.to_scipy()
    if sp.issparse(W):
        if W.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got {describe(W)}")
        check_numeric_dtype(W.dtype, name)
        # The compiled stream indexes memory with indptr and indices: check the
        # structure before scipy or the kernel trusts it.
        try:
            if W.format in ("csr", "csc"):
                CSR(W if W.format == "csr" else W.T)
            else:
                check_sparse_structure(W, name)
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            raise type(exc)(name + msg[1:] if msg.startswith("A ") else msg) from None
        # Duplicates summed on a copy: a CSR input's arrays are the caller's, and
        # sum_duplicates sorts and sums in place (sddmm rewrote W and any matrix sharing
        # its arrays; a duplicate was counted as two nonzeros; a review found both). A
        # canonical W (the usual one, GPT-3-sized ones too) is used as it is.
        csr = sp.csr_array(W)
        if not csr.has_canonical_format:
            csr = csr.copy()
            csr.sum_duplicates()
    else:
        if np.isscalar(W):
            raise ValueError(f"{name} must be 2-D, got a scalar {W!r}")
        try:
            arr = np.asarray(W)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} cannot be converted to an array: {exc}") from None
        check_numeric_dtype(arr.dtype, name)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got {describe(arr)}")
        if arr.dtype == np.float16:  # not a scipy.sparse dtype; only the pattern matters
            arr = arr.astype(np.float32)
        csr = sp.csr_array(arr)
    if csr.shape[0] < 1 or csr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got {describe(csr)}")
    if csr.nnz and (csr.indices.min() < 0 or csr.indices.max() >= csr.shape[1]):
        raise ValueError(f"{name} has a column index outside [0, {csr.shape[1]})")
    return csr


def pass_parameters(machine: Machine, dtype: str, width: int) -> dict:
    """Per-pass cycle constants of the recurrence for ``width`` tokens per core, and
    ``wire``: the payloads one partial sum takes over a link. The psum reading changes what
    a hop costs (``reduce``), not what moves: under 'seed' too the partial sums cross the
    fabric (a review found 'seed' reporting no partial-sum wavelets)."""
    wire = math.ceil(width * DTYPE_BYTES[dtype] / machine.payload_bytes)
    return dict(
        axpy=math.ceil(width / machine.fmac(dtype)),
        overhead=machine.psum_copy_cycles + machine.psum_reset_cycles,
        reduce=max(machine.psum_add_cycles, wire) if machine.psum_on_wire
        else machine.psum_add_cycles,
        wire=wire,
    )


def plan_gemm(W, n_tokens, machine: Machine, balance, engines, dtype):
    """The checked inputs of a GEMM model run: ``(csr, assignment, layout, dtype)``.

    What ``estimate_gemm``, ``execute_gemm`` and ``estimate_gradient`` share: W as a
    canonical CSR pattern (:func:`as_csr_pattern`), the dtype name, the features
    assigned to rows by ``balance`` (a method name or an ``Assignment``) and the
    activation layout for ``n_tokens`` split over ``engines``; TypeError or
    ValueError naming the bad argument otherwise.
    """
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a wafer.Machine, got {type(machine).__name__}")
    csr = as_csr_pattern(W)
    dtype = check_dtype(dtype)
    n_tokens = check_int(n_tokens, "n_tokens", minimum=1)
    engines = check_int(engines, "engines", minimum=1)
    feature_nnz = np.bincount(csr.indices[:csr.nnz], minlength=csr.shape[1])
    if isinstance(balance, Assignment):
        assign = check_assignment(balance, feature_nnz, machine.rows)
    else:
        check_method(balance, "balance", "an Assignment or ")
        assign = make_assignment(feature_nnz, machine.rows, balance)
    lay = make_layout(machine, csr.shape[0], csr.shape[1], n_tokens,
                      int(assign.features_per_row.max()), engines, dtype)
    return csr, assign, lay, dtype


def build_report(machine: Machine, csr, assign: Assignment, lay: Layout, balance_name: str,
                 cycles: int, dense_cycles: int, busy, stall) -> GemmReport:
    """Assemble the report; shared by the estimator and the executor."""
    M, K = csr.shape
    nnz = int(csr.nnz)
    q = machine.intake_messages_per_cycle
    ring = intake = 0
    wavelets = 0
    for width, count in lay.pass_widths:
        pp = pass_parameters(machine, lay.dtype, width)
        ring += count * M * pp["reduce"]
        intake += count * math.ceil((nnz + M) / q - 1e-9)
        wavelets += count * M * (machine.rows - 1) * machine.cols * pp["wire"]
    bounds = {"axpy compute": int(busy.max()), "partial-sum ring": int(ring),
              "weight intake": int(intake)}
    bound = max(bounds, key=bounds.get)
    messages = lay.passes * (nnz + M)
    pp = pass_parameters(machine, lay.dtype, lay.pass_widths[0][0])
    # Speedup stops growing once a row's AXPY work per output, density *
    # (K/rows) * a, falls below the fixed per-output cost.
    fixed = max(pp["reduce"], pp["overhead"])
    sat = min(1.0, fixed / (K / machine.rows * pp["axpy"]))
    return GemmReport(
        machine=machine.name, dtype=lay.dtype, shape=(M, K), n_tokens=lay.n_tokens,
        engines=lay.engines, nnz=nnz, density=nnz / (M * K), balance=balance_name,
        cycles=int(cycles), seconds=cycles / machine.clock_hz, dense_cycles=int(dense_cycles),
        speedup=(dense_cycles / cycles if cycles else math.inf if dense_cycles else 1.0),
        tokens_per_core=lay.tokens_per_core, passes=lay.passes,
        pass_widths=lay.pass_widths, sram_bytes_per_core=lay.sram_bytes_per_core,
        sram_bytes_available=lay.sram_bytes_available, sram_fits=lay.fits,
        layout_note=lay.note, bound=bound, bounds=bounds, saturation_density=sat,
        weight_messages=messages, psum_wavelets=int(wavelets),
        # weights are multicast to every core of their row; wavelets are one payload each
        fabric_bytes=int(messages * machine.weight_message_bytes * machine.cols
                         + wavelets * machine.payload_bytes),
        imbalance=assign.max_over_mean, efficiency=assign.efficiency,
        row_nnz=assign.row_nnz, row_cycles=np.asarray(busy, dtype=np.int64),
        row_stall_cycles=np.asarray(stall, dtype=np.int64), psum=machine.psum)


def estimate_gemm(W, n_tokens: int, machine: Machine = WSE2, balance="round_robin",
                  engines: int = 1, dtype=DEFAULT_DTYPE, psum: str | None = None) -> GemmReport:
    """Cycle estimate of ``Y = W @ X`` streamed through the wafer, without the arithmetic.

    Event-level (per output feature x physical row, see the module docstring),
    compiled; a GPT-3 FFN layer (60 M nonzeros) on the full WSE-2 takes a few seconds.

    Parameters
    ----------
    W : scipy sparse matrix or 2-D array, shape (M, K)
        Weights; only the sparsity pattern matters.
    n_tokens : int
        Columns of X (the batch) over all engines.
    machine : Machine
    balance : str or Assignment
        'identity', 'contiguous', 'round_robin' (default, published), 'serpentine' or
        'greedy' (:func:`wsesparse.wafer.balance`), or an ``Assignment``.
    engines : int
        Engines sharing the batch; weights are broadcast to all of them.
    dtype : {'float16', 'float32'}, default 'float16'
        ``machine.DEFAULT_DTYPE``, shared by the GEMM/GEMV/gradient estimate_* and
        execute_* calls.
    psum : {'fabric', 'seed'}, optional
        Reading of the partial-sum cost (default: the machine's, 'fabric' for the
        presets). 'fabric': a partial sum of L tokens occupies a ring link for
        ``L * bytes / payload`` cycles; it reproduces the seed's ~10x at 90 % on the
        GPT-3 FFN down projection and saturates at tens. 'seed': the seed's literal
        four cycles per output; it reproduces 16 engines below 1 engine in the seed's
        sparsity-to-acceleration figure, and for 16 engines a flattening near 1/3,000
        density (1 engine keeps growing there).
        See ``wafer.machine.PSUM_READINGS`` and docs/wafer_model.md.

    Returns
    -------
    GemmReport

    Examples
    --------
    >>> import dataclasses, scipy.sparse as sp
    >>> from wsesparse import wafer
    >>> m = dataclasses.replace(wafer.WSE2, rows=8, cols=4)
    >>> W = sp.random(64, 48, density=0.1, format="csr", random_state=0)
    >>> r = wafer.estimate_gemm(W, 32, machine=m)
    >>> r.cycles < r.dense_cycles
    True
    """
    machine = with_psum(machine, psum) if isinstance(machine, Machine) else machine
    csr, assign, lay, dtype = plan_gemm(W, n_tokens, machine, balance, engines, dtype)
    name = balance.method if isinstance(balance, Assignment) else balance
    indptr = np.ascontiguousarray(csr.indptr)
    indices = np.ascontiguousarray(csr.indices)
    cycles = dense = 0
    busy = np.zeros(machine.rows, dtype=np.int64)
    stall = np.zeros(machine.rows, dtype=np.int64)
    for width, count in lay.pass_widths:
        pp = pass_parameters(machine, dtype, width)
        check_cycles_fit(csr.shape, machine, pp, n_tokens)
        args = (assign.row_of_feature, assign.features_per_row, machine.rows, machine.cols)
        rest = (pp["axpy"], pp["overhead"], pp["reduce"], machine.cycles_per_hop,
                machine.psum_buffer_depth, machine.intake_messages_per_cycle)
        c, b, s = _wafer.stream_gemm(indptr, indices, *args, False, *rest)
        d, _, _ = _wafer.stream_gemm(indptr, indices, *args, True, *rest)
        if max(cycles + count * c, dense + count * d,
               int(busy.max()) + count * int(b.max()), int(stall.max()) + count * int(s.max())) \
                >= 2**63:
            raise ValueError(f"n_tokens={n_tokens} is too large: the cycle counts overflow int64")
        cycles += count * c
        dense += count * d
        busy += count * b
        stall += count * s
    return build_report(machine, csr, assign, lay, name, cycles, dense, busy, stall)


def check_cycles_fit(shape, machine: Machine, pp: dict, n_tokens: int) -> None:
    """ValueError unless one pass of ``_wafer.stream_gemm`` (or of ``execute_gemm``'s
    schedule) keeps its 64-bit cycle counts:
    a float upper bound of its last cycle (every weight nonzero) below 2**62. Extreme
    machine descriptions (an intake of 1e-12 B/s, 2**62 B of SRAM) wrapped silently."""
    M, K = shape
    arrival = (M * K + M + 1) / machine.intake_messages_per_cycle
    work = M * K * float(pp["axpy"]) + M * float(pp["overhead"])
    ring = M * machine.rows * float(machine.cycles_per_hop + pp["reduce"])
    if arrival + work + ring + machine.cycles_per_hop * (machine.rows + machine.cols) >= 2**62:
        raise ValueError(f"the cycle counts of this estimate overflow int64 (W {M} x {K}, "
                         f"n_tokens={n_tokens}, machine {machine.name}: weight intake "
                         f"{machine.weight_intake_bytes_per_s:g} B/s, {machine.sram_bytes} B "
                         "of SRAM a core); use a smaller problem or a realistic machine")


def random_weights(n_out: int, n_in: int, sparsity: float, seed: int = 0) -> sp.csr_array:
    """Uniformly random sparsity pattern (values 1) for cost estimates at GPT-3 scale.

    Parameters
    ----------
    n_out, n_in : int
        Shape of W.
    sparsity : float in [0, 1)
        Fraction of zero weights.
    seed : int

    Raises
    ------
    MemoryError
        At once, if the pattern would not fit in the memory available.

    Examples
    --------
    >>> W = random_weights(1000, 200, 0.9)
    >>> W.shape, abs(W.nnz / 200_000 - 0.1) < 0.01
    ((1000, 200), True)
    """
    n_out = check_int(n_out, "n_out", minimum=1)
    n_in = check_int(n_in, "n_in", minimum=1)
    seed = check_int(seed, "seed", minimum=0, maximum=2**63 - 1)  # (the generator's int64)
    sparsity = check_real(sparsity, "sparsity", minimum=0, maximum=1, inclusive=(True, False))
    if n_in >= 2**31:
        raise ValueError(f"n_in must be < 2**31, got {n_in}")
    # int64 indptr, then int32 indices and float32 values for ~1.01 * the expected nnz.
    nnz = (1.0 - float(sparsity)) * n_out * n_in * 1.01 + 1024
    check_allocation(8 * (n_out + 1) + int(8 * nnz),
                     f"random_weights({n_out}, {n_in}, sparsity={sparsity}) with "
                     f"~{int(nnz):,} nonzeros")
    indptr, indices = _wafer.random_pattern(n_out, n_in, 1.0 - float(sparsity), seed)
    data = np.ones(indices.size, dtype=np.float32)
    return sp.csr_array((data, indices, indptr), shape=(n_out, n_in))
