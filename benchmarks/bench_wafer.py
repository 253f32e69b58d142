"""asv benchmarks for the wafer model (``wsesparse.wafer``).

``track_*`` record the simulated cycle counts, speedups and TLR-MVM bandwidths. The model is
deterministic (seeded random sparsity patterns, fixed TLR ranks), so any change in a tracked
value is a change in the model, not noise: asv shows it as a step at the commit that made it.
``time_*`` time the estimator itself. Every setup takes well under a second.

Layers: the two FFN matrices of GPT-3 XL (d_model 2048, d_ff 8192) with its batch size in the
GPT-3 paper (Brown et al. 2020, Table 2.1: 1M tokens); the down projection is compute-bound at
low sparsity, the up projection (few features per core row) partial-sum-ring-bound. asv runs
every parameter combination in its own process (about 0.7 s each here), which is what keeps
the grids small.
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

from wsesparse import TLRMatrix
from wsesparse.wafer import WSE2, estimate_gemm, estimate_tlrmvm, random_weights

# "MxK" of W (outputs x inputs) -> tokens in the batch
LAYERS = {
    "2048x8192": 1_048_576,  # GPT-3 XL, FFN down projection
    "8192x2048": 1_048_576,  # GPT-3 XL, FFN up projection
}
SPARSITIES = [0.5, 0.9, 0.99]
ENGINES = [1, 16]


def _shape(layer: str) -> tuple[int, int]:
    m, k = layer.split("x")
    return int(m), int(k)


class WaferGemm:
    """Cycles and speedup over dense of ``estimate_gemm`` (WSE-2, float16, round-robin)."""

    params = (list(LAYERS), SPARSITIES, ENGINES)
    param_names = ["layer", "sparsity", "engines"]

    def setup_cache(self):
        # All points at once (about 0.5 s): each track_* below only looks its point up.
        out = {}
        for layer, tokens in LAYERS.items():
            for s in SPARSITIES:
                W = random_weights(*_shape(layer), s, seed=0)
                for e in ENGINES:
                    r = estimate_gemm(W, tokens, machine=WSE2, engines=e)
                    out[(layer, s, e)] = (r.cycles, r.speedup)
        return out

    def track_cycles(self, cache, layer, sparsity, engines):
        return cache[(layer, sparsity, engines)][0]

    track_cycles.unit = "cycles"

    def track_speedup(self, cache, layer, sparsity, engines):
        return cache[(layer, sparsity, engines)][1]

    track_speedup.unit = "x over dense"


def tlr_fixed_ranks(n: int = 9801, nb: int = 256, dtype=np.complex64) -> TLRMatrix:
    """A TLR matrix of the issue's shape (9801 x 9801, nb 256) with fixed, seismic-like ranks.

    Rank 24 on the diagonal, 2 fewer per tile away from it, at least 2; the factor values do
    not matter to the estimate, so the tracked numbers do not depend on a compression.
    """
    def tile(i, j):
        k = max(2, 24 - 2 * abs(i - j))
        h, w = min(nb, n - i * nb), min(nb, n - j * nb)
        return np.ones((h, k), dtype), np.ones((w, k), dtype)

    return TLRMatrix.from_tiles((n, n), nb, tile)


class WaferTLRMVM:
    """``estimate_tlrmvm`` on 1 and 48 WSE-2 systems (the SC23 run used 48 CS-2)."""

    params = [1, 48]
    param_names = ["systems"]

    def setup_cache(self):
        return tlr_fixed_ranks()

    def setup(self, T, systems):
        self.est = estimate_tlrmvm(T, WSE2, systems=systems)

    def track_total_cycles(self, T, systems):
        return self.est.total_cycles

    track_total_cycles.unit = "cycles"

    def track_bandwidth(self, T, systems):
        return self.est.bandwidth_bytes_per_s / 1e15

    track_bandwidth.unit = "PB/s"

    def time_estimate_tlrmvm(self, T, systems):
        estimate_tlrmvm(T, WSE2, systems=systems)


@functools.lru_cache(maxsize=None)
def _weights(layer):
    return random_weights(*_shape(layer), 0.9, seed=0)


class WaferEstimator:
    """Run time of the event-level GEMM estimator (90 % sparse layers, full WSE-2 grid)."""

    params = ["2048x8192", "4096x16384"]
    param_names = ["layer"]

    def setup(self, layer):
        # (asv_runner runs setup before every timed call: the weights are made once.)
        self.W = _weights(layer)

    def time_estimate_gemm(self, layer):
        estimate_gemm(self.W, 1_048_576, machine=WSE2, engines=16)
