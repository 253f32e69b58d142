"""Gradient pass of a sparse layer ``Y = W @ X`` (beyond the seeds' forward pass).

* Delta pass ``dX = W.T @ dY``: the forward dataflow in reverse. The stream
  now runs input-feature-major (column j of W, then "feature j complete"); each
  nonzero ``w_ij`` is fanned out to the row holding ``dY[i]`` (output i lives on
  row ``i mod rows`` after the forward pass) and the partial sums are reduced
  around the column ring to the row that holds ``X[j]``. It is costed by the
  same event-level estimator, with W.T streamed in an order whose k-th feature
  lands on row ``k mod rows``; this is exactly the forward balancer's row when
  every row holds the same number of features (always true for round_robin when
  ``rows`` divides K), otherwise dX lands on a neighbouring row and one extra
  relocation, not costed, would be needed (``delta_lands_in_place`` says which).
* Weight gradient (SDDMM) ``dW = (dY @ X.T)`` only at W's nonzeros: the model
  memory streams the mask (indices only, output-major); ``dY[i]`` is broadcast
  down each column from its row (the forward reduction becomes a broadcast); each
  row does one L-token dot product per masked (i, j) it holds, and the scalars
  are reduced along the row to the outlet. Costed from three lower bounds (not
  event-level): AXPY-equivalent work of the busiest row, column-broadcast link
  occupancy ``M * ceil(L * bytes / payload)``, and mask intake (2-byte indices);
  plus the pipeline fill ``hop * (rows + cols)`` per pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import as_dense_operand, describe
from wsesparse._kernels import _sddmm
from wsesparse._threads import resolve_n_threads
from wsesparse.matmul import sparse_matmul
from wsesparse.wafer.balance import balance as make_assignment
from wsesparse.wafer.estimate import as_csr_pattern, estimate_gemm, pass_parameters, plan_gemm
from wsesparse.wafer.machine import DEFAULT_DTYPE, DTYPE_BYTES, WSE2, Machine, with_psum
from wsesparse.wafer.report import GemmReport

# Mask messages carry only a 16-bit index (no value): two per 32-bit payload.
MASK_INDEX_BYTES = 2


def delta(W, dY) -> np.ndarray:
    """CPU kernel for the delta pass, ``W.T @ dY`` (one AXPY per nonzero).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> W = sp.random(6, 4, density=0.5, format="csr", random_state=0)
    >>> dY = np.ones((6, 3))
    >>> bool(np.allclose(delta(W, dY), W.T @ dY))
    True
    """
    csr = as_csr_pattern(W)
    if dY is None:
        raise TypeError("dY is None; expected an array-like operand")
    shape = np.shape(dY)
    if len(shape) not in (1, 2) or shape[0] != csr.shape[0]:
        # (sparse_matmul's message named W.T as "A" and dY as "B")
        raise ValueError(f"dY must have {csr.shape[0]} rows to match W of shape {csr.shape}, "
                         f"got {describe(dY)}")
    return sparse_matmul(csr.T, dY)


def sddmm(W, dY, X, n_threads: int | None = None) -> sp.csr_array:
    """Masked weight gradient ``(dY @ X.T)`` at the nonzeros of W, as CSR with W's pattern.

    Parameters
    ----------
    W : sparse or dense (M, K); only its pattern is used.
    dY : array_like (M, N)
    X : array_like (K, N)
    n_threads : int, optional

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> W = sp.random(5, 4, density=0.5, format="csr", random_state=1)
    >>> rng = np.random.default_rng(0)
    >>> dY, X = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    >>> G = sddmm(W, dY, X)
    >>> bool(np.allclose(G.toarray(), (dY @ X.T) * (W.toarray() != 0)))
    True
    """
    csr = as_csr_pattern(W)
    dYa, Xa = as_dense_operand(dY, "dY"), as_dense_operand(X, "X")
    M, K = csr.shape
    if dYa.ndim != 2 or dYa.shape[0] != M:
        raise ValueError(f"dY must be 2-D with {M} rows to match W, got {describe(dYa)}")
    if Xa.ndim != 2 or Xa.shape != (K, dYa.shape[1]):
        raise ValueError(f"X must be 2-D of shape ({K}, {dYa.shape[1]}) to match W and dY, "
                         f"got {describe(Xa)}")
    dt = np.result_type(dYa.dtype, Xa.dtype, np.float32)
    if dt.kind == "c" or dt not in (np.float32, np.float64):
        raise TypeError(f"sddmm supports float32/float64, got dY {dYa.dtype} and X {Xa.dtype}")
    dYc, Xc = np.ascontiguousarray(dYa, dtype=dt), np.ascontiguousarray(Xa, dtype=dt)
    out = np.empty(csr.nnz, dtype=dt)
    idx = np.result_type(csr.indptr.dtype, csr.indices.dtype)
    _sddmm.sddmm(csr.indptr.astype(idx), csr.indices.astype(idx), dYc, Xc, out,
                 resolve_n_threads(n_threads, csr.nnz * dYc.shape[1], idle_rule=True))
    return sp.csr_array((out, csr.indices.copy(), csr.indptr.copy()), shape=csr.shape)


@dataclass(frozen=True)
class GradientReport:
    """Cycle estimates of one training step's backward pass through a sparse layer."""

    delta: GemmReport
    delta_lands_in_place: bool
    sddmm_cycles: int
    sddmm_bounds: dict
    sddmm_bound: str
    seconds: float

    def __str__(self) -> str:
        b = ", ".join(f"{k} {v:,}" for k, v in self.sddmm_bounds.items())
        return (f"delta pass dX = W.T @ dY\n{self.delta}\n"
                f"{'lands in place':<15}  {self.delta_lands_in_place}\n"
                f"weight gradient (SDDMM at W's nonzeros): {self.sddmm_cycles:,} cycles, "
                f"bound {self.sddmm_bound} ({b})\n"
                f"backward total {self.delta.cycles + self.sddmm_cycles:,} cycles "
                f"({self.seconds * 1e3:.4g} ms)")


def estimate_gradient(W, n_tokens: int, machine: Machine = WSE2, balance="round_robin",
                      engines: int = 1, dtype=DEFAULT_DTYPE,
                      psum: str | None = None) -> GradientReport:
    """Cycle estimate of the delta pass and the masked weight gradient.

    Parameters are those of :func:`estimate_gemm` (the forward pass of the same layer);
    ``psum`` ('fabric' or 'seed') applies to the delta pass's ring reduction.

    Examples
    --------
    >>> import dataclasses, scipy.sparse as sp
    >>> from wsesparse import wafer
    >>> m = dataclasses.replace(wafer.WSE2, rows=8, cols=4)
    >>> W = sp.random(64, 48, density=0.2, format="csr", random_state=0)
    >>> g = wafer.estimate_gradient(W, 32, machine=m)
    >>> g.delta.shape, g.delta_lands_in_place
    ((48, 64), True)
    """
    machine = with_psum(machine, psum) if isinstance(machine, Machine) else machine
    csr, assign, lay, dtype = plan_gemm(W, n_tokens, machine, balance, engines, dtype)
    M, K = csr.shape
    R = machine.rows
    # Stream W.T so that the k-th feature's result lands on row k mod R.
    order = np.lexsort((assign.row_of_feature, assign.slot_of_feature))
    in_place = bool(np.all(assign.row_of_feature[order] == np.arange(K) % R))
    WT = sp.csr_array(csr.T)[order]
    # The delta pass's "input features" are W's outputs, resident where the forward ring left them.
    out_rows = make_assignment(np.diff(csr.indptr), R, "identity")
    delta_rep = estimate_gemm(WT, n_tokens, machine=machine, balance=out_rows,
                              engines=engines, dtype=dtype)
    # SDDMM: rows hold the X features of the mask entries they compute.
    compute = ring = intake = 0
    q = machine.weight_intake_bytes_per_s / machine.clock_hz / MASK_INDEX_BYTES
    fill = machine.cycles_per_hop * (R + machine.cols)
    for width, count in lay.pass_widths:
        pp = pass_parameters(machine, dtype, width)
        compute += count * (int(assign.row_nnz.max()) * pp["axpy"] + fill)
        ring += count * (M * math.ceil(width * DTYPE_BYTES[dtype] / machine.payload_bytes) + fill)
        intake += count * (math.ceil(csr.nnz / q) + fill)
    bounds = {"dot products": compute, "dY column broadcast": ring, "mask intake": intake}
    bound = max(bounds, key=bounds.get)
    total = bounds[bound]
    return GradientReport(delta_rep, in_place, int(total), bounds, bound,
                          (delta_rep.cycles + total) / machine.clock_hz)
