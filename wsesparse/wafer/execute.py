"""Run the streamed sparse GEMM numerically, tile by tile, with the same cycle accounting.

Precision: weights and activations are rounded to ``dtype`` (fp16 or fp32),
every AXPY accumulates in fp32, and a partial sum crosses each ring link in
``dtype`` (fp16 partial sums are rounded at every hop, as two of them share a
32-bit payload), is added in fp32 on arrival, and the output tile stores ``dtype``.

This module re-implements the event recurrence of ``estimate.py`` in plain
Python while it moves the numbers, so that the tests comparing the two check
the compiled estimator against an independent implementation.
"""

from __future__ import annotations

import math

import numpy as np

from wsesparse._checks import as_dense_operand, check_allocation, describe
from wsesparse.wafer.balance import Assignment
from wsesparse.wafer.estimate import (build_report, check_cycles_fit,
                                      pass_parameters, plan_gemm)
from wsesparse.wafer.machine import DEFAULT_DTYPE, WSE2, Machine, with_psum
from wsesparse.wafer.report import GemmReport


def _arrival(message: int, rate: float) -> int:
    # Same expression as the compiled estimator, so both round identically.
    return math.ceil(message / rate - 1e-9)


class _Schedule:
    """Event times of one pass (the recurrence in ``estimate.py``'s docstring)."""

    def __init__(self, machine: Machine, pp: dict):
        R = machine.rows
        self.m, self.pp = machine, pp
        self.fc = [0] * R
        self.rfree = [0] * R
        self.ehist = [[0] * machine.psum_buffer_depth for _ in range(R)]
        self.busy = np.zeros(R, dtype=np.int64)
        self.stall = np.zeros(R, dtype=np.int64)
        self.end = 0
        self.before = 0   # messages streamed so far

    def output(self, i: int, counts) -> None:
        m, pp, R = self.m, self.pp, self.m.rows
        q, hop, B = m.intake_messages_per_cycle, m.cycles_per_hop, m.psum_buffer_depth
        n_i = int(sum(counts))
        t_first = _arrival(self.before + 1, q)
        t_ctrl = _arrival(self.before + n_i + 1, q)
        self.before += n_i + 1
        slot = i % B
        for r in range(R):
            work = int(counts[r]) * pp["axpy"]
            lat = hop * (r + m.cols)
            start = max(self.fc[r], t_first + lat)
            ready = max(start + work, t_ctrl + lat)
            fin = max(ready, self.ehist[r][slot]) + pp["overhead"]
            self.stall[r] += fin - self.fc[r] - work - pp["overhead"]
            self.busy[r] += work + pp["overhead"]
            self.fc[r] = fin
        r = (i % R + 1) % R
        prev_g = e = 0
        for p in range(R):
            g = max(self.fc[r], self.rfree[r])
            if p > 0:
                g = max(g, prev_g + hop)
            e = g + pp["reduce"]
            self.rfree[r] = e
            self.ehist[r][slot] = e
            prev_g = g
            r = (r + 1) % R
        self.end = max(self.end, e)


def _run_engine(csr, Xe, assign, machine, widths, dtype, want_dense):
    """One engine: tiles, stream, AXPYs, ring. Returns (Y_e, cycles, dense, busy, stall)."""
    R, C = machine.rows, machine.cols
    M, K = csr.shape
    Lt = sum(w * n for w, n in widths)
    ne = Xe.shape[1]
    Xp = np.zeros((K, C * Lt), dtype=dtype)
    Xp[:, :ne] = Xe
    rows_of, slots = assign.row_of_feature, assign.slot_of_feature
    # Input tiles: tile[r][c] = X[features of row r (slot order), tokens of group c].
    feats = [np.flatnonzero(rows_of == r) for r in range(R)]
    for r in range(R):
        feats[r] = feats[r][np.argsort(slots[feats[r]])]
    tiles = [Xp[f].reshape(len(f), C, Lt).transpose(1, 0, 2).copy() for f in feats]
    n_slots = -(-M // R)
    out_tiles = [np.zeros((C, n_slots, Lt), dtype=dtype) for _ in range(R)]
    wire = np.dtype(dtype)
    total = dense_total = 0
    busy = np.zeros(R, dtype=np.int64)
    stall = np.zeros(R, dtype=np.int64)
    offset = 0
    for width, count in widths:
        pp = pass_parameters(machine, str(wire), width)
        check_cycles_fit(csr.shape, machine, pp, ne)
        for _ in range(count):
            sched = _Schedule(machine, pp)
            lo, hi = offset, offset + width
            for i in range(M):
                acc = [np.zeros((C, width), dtype=np.float32) for _ in range(R)]
                counts = np.zeros(R, dtype=np.int64)
                for p in range(csr.indptr[i], csr.indptr[i + 1]):
                    j = csr.indices[p]
                    r = rows_of[j]
                    counts[r] += 1
                    # Every core (r, c) of the row does acc[0:L] += w * X[j, tile c].
                    acc[r] += np.float32(csr.data[p]) * tiles[r][:, slots[j], lo:hi]
                sched.output(i, counts)
                # Control message: copy + reset, then the ring from d+1 around to d.
                d = i % R
                r = (d + 1) % R
                running = acc[r]
                for _step in range(R - 1):
                    r = (r + 1) % R
                    running = running.astype(wire).astype(np.float32) + acc[r]
                out_tiles[d][:, i // R, lo:hi] = running.astype(wire)
            total += sched.end
            busy += sched.busy
            stall += sched.stall
            offset = hi
        if want_dense:
            dsched = _Schedule(machine, pp)
            for i in range(M):
                dsched.output(i, assign.features_per_row)
            dense_total += count * dsched.end
    Y = np.empty((M, C * Lt), dtype=dtype)
    for i in range(M):
        Y[i] = out_tiles[i % R][:, i // R, :].reshape(-1)
    return Y[:, :ne], total, dense_total, busy, stall


def _check_memory(w_shape, n_tokens: int, machine: Machine, per_core: int, dtype) -> None:
    """MemoryError now if Y, X in ``dtype`` and one engine's padded tiles do not fit."""
    (M, K), R, C = w_shape, machine.rows, machine.cols
    item = np.dtype(dtype).itemsize
    padded = C * per_core   # tokens per engine, padded to whole column groups
    # Y and X in dtype; per engine: padded X and its tiles (K rows each), the
    # output tiles and the engine's Y (rows padded to whole tile rows).
    tiles = (2 * K + 2 * R * -(-M // R)) * padded * item
    total = (M + K) * n_tokens * item + tiles
    check_allocation(total, f"execute_gemm of W {M} x {K} and X {K} x {n_tokens} in {dtype} "
                     f"(Y, X and one engine's tiles of {padded} padded tokens)")


def execute_gemm(W, X, machine: Machine = WSE2, balance="round_robin", engines: int = 1,
                 dtype=DEFAULT_DTYPE, psum: str | None = None) -> tuple[np.ndarray, GemmReport]:
    """Run ``Y = W @ X`` through the simulated wafer and return ``(Y, report)``.

    The activations are cut into per-core tiles; each nonzero is routed to the
    row holding its input feature, where every core does its AXPY on its own
    tile; on the control message the partial sums are reduced around the column
    ring to the destination row ``i mod rows``; Y is assembled from the output
    tiles. The report's cycles equal ``estimate_gemm``'s for the same inputs.
    Meant for small grids (pure Python loops per output and row).

    Parameters
    ----------
    W : scipy sparse matrix or 2-D array, shape (M, K)
    X : array_like, shape (K, N)
    machine, balance, engines, dtype, psum
        As in :func:`estimate_gemm` (dtype defaults to float16 in both, so the
        same call with defaults gives the same cycle count). Tokens are split across engines; tokens
        beyond N in the last column group are zero padding.

    Returns
    -------
    Y : ndarray of ``dtype``, shape (M, N)
    report : GemmReport

    Raises
    ------
    MemoryError
        Before allocating anything, if Y, X and the per-core tiles of one
        engine would need more memory than is available.

    Examples
    --------
    >>> import dataclasses, numpy as np, scipy.sparse as sp
    >>> from wsesparse import wafer
    >>> m = dataclasses.replace(wafer.WSE2, rows=4, cols=3)
    >>> W = sp.random(20, 12, density=0.3, format="csr", random_state=1)
    >>> X = np.random.default_rng(0).standard_normal((12, 9))
    >>> Y, rep = wafer.execute_gemm(W, X, machine=m, dtype="float32")
    >>> bool(np.allclose(Y, W @ X, rtol=1e-4, atol=1e-5))
    True
    >>> rep.cycles == wafer.estimate_gemm(W, 9, machine=m, dtype="float32").cycles
    True
    >>> # Defaults agree: both run float16 (``machine.DEFAULT_DTYPE``).
    >>> wafer.execute_gemm(W, X, machine=m)[1].cycles == wafer.estimate_gemm(W, 9, machine=m).cycles
    True
    """
    machine = with_psum(machine, psum) if isinstance(machine, Machine) else machine
    Xa = as_dense_operand(X, "X")
    if Xa.ndim != 2:
        raise ValueError(f"X must be 2-D (features x tokens), got {describe(Xa)}")
    csr, assign, lay, dtype = plan_gemm(W, Xa.shape[1] if Xa.shape[1] else 1, machine,
                                        balance, engines, dtype)
    if Xa.shape[0] != csr.shape[1]:
        raise ValueError(f"W and X do not chain: W is {describe(csr)}, X is {describe(Xa)}")
    if Xa.shape[1] == 0:
        raise ValueError(f"X has no tokens (columns): {describe(Xa)}")
    if Xa.dtype.kind == "c":
        raise TypeError(f"the wafer model runs real dtypes only, X is {describe(Xa)}")
    if csr.dtype.kind == "c":
        raise TypeError(f"the wafer model runs real dtypes only, W is {describe(csr)}")
    name = balance.method if isinstance(balance, Assignment) else balance
    _check_memory(csr.shape, Xa.shape[1], machine, lay.tokens_per_core, dtype)
    csr = csr.copy()
    csr.data = csr.data.astype(dtype)   # weights stream in the engine's dtype
    Xd = Xa.astype(dtype)
    N, per = Xd.shape[1], lay.tokens_per_engine
    Y = np.empty((csr.shape[0], N), dtype=dtype)
    cycles = dense = 0
    busy = stall = None
    for e in range(engines):
        # an even split (ceil(N / engines) = per at most, every engine at least one token;
        # chunks of per left the last engines empty: 10 tokens on 7 went 2,2,2,2,2,0,0)
        lo, hi = e * N // engines, (e + 1) * N // engines
        assert 0 < hi - lo <= per
        # (an inf weight times the tiles' zero padding made NaN lanes that Y drops, and a
        # RuntimeWarning numpy's and scipy's products do not give: a review)
        with np.errstate(invalid="ignore"):
            Ye, c, d, b, s = _run_engine(csr, Xd[:, lo:hi], assign, machine, lay.pass_widths,
                                         dtype, want_dense=(e == 0))
        Y[:, lo:hi] = Ye
        if e == 0:
            cycles, dense, busy, stall = c, d, b, s
        # Every engine runs the same padded schedule, so engine 0's count stands for all.
        assert c == cycles
    return Y, build_report(machine, csr, assign, lay, name, cycles, dense, busy, stall)
