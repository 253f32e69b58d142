"""Published figures (DESIGN.md, seed 003) as tests with stated tolerances.

Where the model does not reproduce a figure, the test asserts what the model
does and the docstring states the gap and its cause. Nothing here is hard-coded
model output: every number is computed by ``estimate_gemm``.
"""

import dataclasses
import time

import pytest

from wsesparse import wafer

# GPT-3 (d_model 12,288, FFN 49,152) and its critical batch of ~3.2 M tokens.
GPT3_DOWN = (12288, 49152)   # W: outputs x inputs of the FFN down projection
BATCH = 3_200_000

# A 1/10-scale wafer (75 x 100 cores) that keeps the GPT-3 features per row
# (K / rows) and tokens per core, so speedups match the full grid within ~2 %
# (full grid 90 %: 8.52x down, 6.32x up; this grid: 8.62x, 6.42x) at 1/100 the cost.
SMALL = dataclasses.replace(wafer.WSE2, name="WSE-2 1/10", rows=75, cols=100)
SCALED_DOWN = (1229, 4915)
SCALED_UP = (4915, 1229)
SPARSITIES = (0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9997)


@pytest.fixture(scope="module")
def gpt3_down_90():
    W = wafer.random_weights(*GPT3_DOWN, 0.9, seed=0)
    t0 = time.perf_counter()
    rep = wafer.estimate_gemm(W, BATCH, machine=wafer.WSE2)
    return rep, time.perf_counter() - t0


def test_gpt3_over_70k_nonzeros_per_row(gpt3_down_90):
    """Seed 003: 600 M values at 90 % -> "over 70 thousand non-zeros sent to each row".
    Model: 60.4 M nonzeros over 750 rows, every row between ~79,800 and ~81,300."""
    rep, _ = gpt3_down_90
    assert rep.row_nnz.min() > 70_000
    assert rep.row_nnz.sum() == rep.nnz


def test_gpt3_about_10x_at_90_percent(gpt3_down_90):
    """Seed 003: 90 % sparsity gives about 10x (5.8 -> 58 PFLOP/s). Tolerance: 8x-12x.

    Model on the full WSE-2 (750 x 994), fp16, 3.2 M tokens (12 passes of ~269 tokens
    per core): 8.5x, AXPY-bound. It falls short of 10x because a row's work per output
    is a sum of ~6.5 random AXPYs and, with double-buffered partial sums, a row
    cannot bank slack for more than 2 outputs (buffer depth 4 gives ~9.0x, 16 gives
    ~9.7x in our runs). The estimate runs in seconds (requirement: GPT-3 layer on the
    full grid "in seconds"; the bound here is 30 s to stay robust on slow CI).
    """
    rep, seconds = gpt3_down_90
    assert rep.bound == "axpy compute"
    assert 8.0 <= rep.speedup <= 12.0
    assert seconds < 30.0
    assert rep.sram_fits and rep.passes == 12


def _sweep(shape, machine, tokens, engines):
    return [wafer.estimate_gemm(wafer.random_weights(*shape, s, seed=1), tokens,
                                machine=machine, engines=engines).speedup for s in SPARSITIES]


@pytest.fixture(scope="module")
def sweeps():
    """Speedup per sparsity: (reading, engines) -> list, down projection, 1/10 grid,
    100,000 tokens (1 engine: 1000 tokens per core in 4 passes; 16 engines: 63)."""
    out = {}
    for wire in (True, False):
        m = dataclasses.replace(SMALL, psum_on_wire=wire)
        for engines in (1, 16):
            out[wire, engines] = _sweep(SCALED_DOWN, m, 100_000, engines)
    return out


@pytest.mark.parametrize("wire", [True, False])
def test_speedup_monotone_and_saturating(sweeps, wire):
    """Seed 003: speedup grows with sparsity and saturates (Amdahl: partial sums do not
    shrink). Tolerance for monotonicity: 0.5 % (random patterns differ per sparsity).

    Our reading (partial sums are fabric traffic, ``psum_on_wire=True``): a partial
    sum of L fp16 tokens occupies a ring link L/2 cycles per output, as much as two
    AXPYs (L/4 each), so speedup saturates at ~33x once a row gets fewer than ~2
    nonzeros per output: density ~0.03 here (report.saturation_density), not the
    seed's ~1/3,000. The seed's literal four cycles (``psum_on_wire=False``) saturate
    far later: still growing at density 1/3,333 (>100x there).
    """
    s = sweeps[wire, 1]
    assert all(b >= a * 0.995 for a, b in zip(s, s[1:]))
    assert s[2] == pytest.approx(8.6, rel=0.1)       # 90 %: ~10x-class
    if wire:
        assert s[-1] / s[4] < 1.1                    # 99 % -> 99.97 %: < 10 % more
        assert 25 < s[-1] < 45
    else:
        assert s[-1] / s[4] > 2.0                    # still growing beyond 99 %
        assert s[-1] > 100


@pytest.mark.parametrize("wire", [True, False])
def test_sixteen_engines_below_one(sweeps, wire):
    """Seed 003, Figure 5: 16 engines sharing a batch get less speedup than 1 engine.

    Met at 100,000 tokens for every sparsity >= 90 % in both readings (16 engines: 63
    tokens per core, so the fixed per-output costs weigh more). GAP: at GPT-3's 3.2 M
    tokens with our on-wire reading the two are equal within 0.5 %, because the ring
    cost grows with tokens per core exactly like the AXPYs and a single engine also
    runs ~269-token passes (SRAM-bound), so only constant costs differ.
    """
    one, sixteen = sweeps[wire, 1], sweeps[wire, 16]
    for a, b in zip(one[2:], sixteen[2:]):
        assert b < a
    assert sixteen[-1] < 0.98 * one[-1]


def test_up_projection_is_ring_bound_gap():
    """GAP: the GPT-3 up projection (W 49,152 x 12,288) has only ~16 input features per
    row, so at 90 % a row does ~1.6 AXPYs per output (~110 cycles) while the ring link
    needs ~135 cycles for the fp16 partial sum: the model gives ~6.4x (full grid 6.32x),
    ring-bound, below the published ~10x. Under the seed's four-cycle reading the ring
    is not the bound and the speedup is higher.
    """
    W = wafer.random_weights(*SCALED_UP, 0.9, seed=1)
    wire = wafer.estimate_gemm(W, 322_000, machine=SMALL)
    seed_reading = wafer.estimate_gemm(
        W, 322_000, machine=dataclasses.replace(SMALL, psum_on_wire=False))
    assert wire.bound == "partial-sum ring"
    assert 5.0 < wire.speedup < 8.0
    assert seed_reading.speedup > wire.speedup
