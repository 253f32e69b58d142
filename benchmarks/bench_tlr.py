"""TLR-MVM benchmarks: compression, kernel bandwidth, wafer estimate.

asv suites below; run this file directly for the full report of issue 4
(Hilbert-ordered 9801 x 9801 complex64 seismic slice, nb=256, tol=1e-3)::

    python benchmarks/bench_tlr.py            # full size (about 1-2 minutes)
    python benchmarks/bench_tlr.py --nx 40    # quick
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time

import numpy as np

try:
    import wsesparse  # noqa: F401
except ImportError:  # `asv run --python=same` / `python benchmarks/bench_tlr.py` in a source tree
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from wsesparse import TLRMatrix
from wsesparse._hardware import available_cores
from wsesparse._timing import best_time
from wsesparse.bench import format_rates, tlr_rates
from wsesparse.datasets import seismic_slice


def stream_triad_bytes_per_s(n: int = 1 << 26, repeats: int = 10) -> float:
    """STREAM triad ``a = b + s*c`` on all cores (OpenMP kernel), 24 bytes per element.

    Arrays of 512 MB each are far larger than any cache, as STREAM requires. The triad of
    ``wsesparse bench`` (``wsesparse.bench.triad_bandwidth_kernel``), with a warm-up pass
    and ``repeats`` timed ones.
    """
    from wsesparse._threads import resolve_n_threads
    from wsesparse.bench import triad_bandwidth_kernel

    gbs = triad_bandwidth_kernel(resolve_n_threads(None), n, repeats, warmup=True)
    if gbs is None:
        raise ImportError("wsesparse._kernels._tlrmvm has no stream_triad (rebuild the kernels)")
    return gbs * 1e9


_NX = 50  # the slice is _NX**2 x _NX**2


# asv_runner (0.3 and later) runs setup again before every timed call: the operands are built
# once per process and only looked up there (compressing the slice took far longer than the
# products timed). Benchmarks must not modify them.
@functools.lru_cache(maxsize=None)
def _slice(dtype):
    return seismic_slice(nx=_NX, ny=_NX, frequency=15.0, dtype=dtype)


@functools.lru_cache(maxsize=None)
def _operator(dtype):
    """The slice compressed at nb=256, tol=1e-3."""
    return TLRMatrix.from_dense(_slice(dtype), nb=256, tol=1e-3)


@functools.lru_cache(maxsize=None)
def _right_hand_sides(dtype, n_rhs):
    """(X, Y): random right-hand sides of ``T @ X`` and ``T.H @ Y``, (_NX**2, n_rhs) each."""
    n = _NX * _NX
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, n_rhs)).astype(dtype),
            rng.standard_normal((n, n_rhs)).astype(dtype))


class TLRMVM:
    """asv: TLR-MVM on a Hilbert-ordered seismic slice (2500 x 2500, bases in cache), forward
    and adjoint, for the right-hand side counts of ``wsesparse bench --tlr``."""

    params = (["complex64", "float32", "complex128"], [1, 4, 16, 64])
    param_names = ["dtype", "n_rhs"]
    timeout = 300

    def setup_cache(self):
        # asv runs every parameter combination of every method in a process of its own:
        # compressing once per dtype here (asv pickles the result; unpickling restores the
        # bases' alignment) instead of 36 times took about 30 s off the suite's smoke run
        # (2 cores).
        return {dtype: _operator(dtype) for dtype in self.params[0]}

    def setup(self, operators, dtype, n_rhs):
        self.T = operators[dtype]
        self.X, self.Y = _right_hand_sides(dtype, n_rhs)

    def time_matmat(self, operators, dtype, n_rhs):
        self.T @ self.X

    def time_adjoint(self, operators, dtype, n_rhs):
        self.T.H @ self.Y

    def track_compression_ratio(self, operators, dtype, n_rhs):
        return self.T.compression_ratio


class TLRCacheResident:
    """asv: the cache-resident ``T @ x`` of ``wsesparse bench --tlr`` against the numpy
    three-phase product from the same factors (complex64, 2500 x 2500 slice)."""

    timeout = 300

    def setup(self):
        from wsesparse.bench.tlr_numpy import NumpyThreePhase

        from wsesparse.bench.bandwidth import read_kernel_pass

        self.T = _operator("complex64")
        X, _ = _right_hand_sides("complex64", 1)
        self.x = X[:, 0].copy()
        self.three = NumpyThreePhase(self.T)
        # A plain OpenMP read of as many bytes as the bases: what the caches deliver.
        read = read_kernel_pass(available_cores(), self.T.nbytes)
        self.read = read[0] if read is not None else (lambda: None)

    def time_wsesparse(self):
        self.T @ self.x

    def time_numpy_three_phase(self):
        self.three(self.x)

    def time_read_of_as_many_bytes(self):
        self.read()


class TLRCompress:
    """asv: compression time of a 2500 x 2500 slice."""

    params = [1e-2, 1e-3, 1e-4]
    param_names = ["tol"]
    timeout = 300

    def setup(self, tol):
        self.A = _slice("complex64")

    def time_from_dense(self, tol):
        TLRMatrix.from_dense(self.A, nb=256, tol=tol)


def compare_allocations(A: np.ndarray, nb: int, tol: float) -> None:
    """Total rank: randomized + global greedy vs full SVD + global greedy vs per-tile tol."""
    from wsesparse.tlr import compression

    t = time.perf_counter()
    T = TLRMatrix.from_dense(A, nb=nb, tol=tol)
    t_rand = time.perf_counter() - t
    orig = compression._adaptive_factors
    compression._adaptive_factors = lambda blk, stop2, rng: compression._svd_factors(blk)
    try:
        t = time.perf_counter()
        S = TLRMatrix.from_dense(A, nb=nb, tol=tol)
        t_svd = time.perf_counter() - t
    finally:
        compression._adaptive_factors = orig
    # Same tol for every tile relative to the tile's own norm (the simple allocation).
    uniform = 0
    for i in range(T.ranks.shape[0]):
        for j in range(T.ranks.shape[1]):
            blk = A[i * nb:(i + 1) * nb, j * nb:(j + 1) * nb].astype(np.complex128)
            sv = np.linalg.svd(blk, compute_uv=False)
            tail = np.sqrt(np.cumsum(sv[::-1] ** 2))[::-1]
            uniform += int(np.argmax(np.append(tail, 0) <= tol * np.linalg.norm(blk)))
    print(f"total rank: randomized+greedy {T.ranks.sum()} ({t_rand:.1f} s), full SVD+greedy "
          f"{S.ranks.sum()} ({t_svd:.1f} s), per-tile tol {uniform}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nx", type=int, default=99, help="grid side (matrix is nx^2 x nx^2)")
    ap.add_argument("--nb", type=int, default=256)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--frequency", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=20,
                    help="interleaved rounds of the forward/adjoint/many-rhs rates")
    ap.add_argument("--compare", action="store_true",
                    help="also compress with full SVDs and with a per-tile tolerance")
    args = ap.parse_args()

    from wsesparse.wafer.machine import WSE2
    from wsesparse.wafer.tlr import estimate_tlrmvm

    n = args.nx * args.nx
    t = time.perf_counter()
    A = seismic_slice(nx=args.nx, ny=args.nx, frequency=args.frequency, order="hilbert",
                      dtype=np.complex64)
    print(f"seismic_slice {n}x{n} complex64 (Hilbert, {args.frequency} Hz): "
          f"{time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    T = TLRMatrix.from_dense(A, nb=args.nb, tol=args.tol, progress=None)  # bar on a terminal
    tc = time.perf_counter() - t
    err = np.linalg.norm(A - T.toarray()) / np.linalg.norm(A)
    print(f"compression nb={args.nb} tol={args.tol:g}: {tc:.1f} s, error {err:.3e}, {T!r}")
    print(f"  ranks: mean {T.ranks.mean():.2f}, median {np.median(T.ranks):.0f}, "
          f"max {T.ranks.max()}, diagonal mean {np.diag(T.ranks).mean():.1f}")
    print(f"  storage {T.nbytes / 1e6:.1f} MB vs dense {T.dense_nbytes / 1e6:.1f} MB "
          f"({T.compression_ratio:.1f}x)")

    if args.compare:
        compare_allocations(A, args.nb, args.tol)

    x = np.random.default_rng(0).standard_normal(n).astype(np.complex64)
    _, t_tlr = best_time(lambda: T @ x, 50)
    _, t_dense = best_time(lambda: A @ x, 10)
    triad = stream_triad_bytes_per_s()
    bw = T.mvm_bytes() / t_tlr
    print(f"TLR-MVM: {t_tlr * 1e3:.3f} ms, {bw / 1e9:.2f} GB/s sustained "
          f"(U+V+x+y = {T.mvm_bytes() / 1e6:.1f} MB)")
    # Cold-cache figure: the bases (tens of MB) may partly survive in L3
    # between back-to-back calls, so also time each call after streaming a
    # 256 MB buffer through the caches.
    junk = np.ones(1 << 25)
    cold = []
    for _ in range(10):
        junk *= 1.0
        t = time.perf_counter()
        T @ x
        cold.append(time.perf_counter() - t)
    t_cold = min(cold)
    print(f"TLR-MVM after cache flush: {t_cold * 1e3:.3f} ms, "
          f"{T.mvm_bytes() / t_cold / 1e9:.2f} GB/s")
    _, t_adj = best_time(lambda: T.H @ x, 50)
    print(f"adjoint: {t_adj * 1e3:.3f} ms, {T.mvm_bytes() / t_adj / 1e9:.2f} GB/s")
    print(f"dense GEMV (numpy/OpenBLAS): {t_dense * 1e3:.2f} ms, "
          f"{A.nbytes / t_dense / 1e9:.2f} GB/s; TLR speedup {t_dense / t_tlr:.1f}x")
    print(f"STREAM triad: {triad / 1e9:.2f} GB/s; TLR-MVM reaches {bw / triad:.0%} of it "
          f"({T.mvm_bytes() / t_cold / triad:.0%} with cold caches)")

    # The right-hand side table of `wsesparse bench --tlr` (forward, adjoint, s = 1..64,
    # interleaved with a triad pass and the dense GEMM of the s = 64 product's size).
    print("right-hand sides:")
    print(format_rates(tlr_rates(T, rounds=args.rounds)))

    for systems in (1, 48):
        est = estimate_tlrmvm(T, WSE2, systems=systems)
        print(est.summary())
    est2 = estimate_tlrmvm(T, dataclasses.replace(WSE2, fmac_fp32=2), systems=48)
    print(f"  with 2 fp32 FMAC/cycle/core: {est2.bandwidth_bytes_per_s / 1e15:.2f} PB/s")


if __name__ == "__main__":
    main()
