"""Whole-network training estimates (wafer.estimate_training) against the seeds' cluster
claims (seeds 002, 003, 004), each with a stated tolerance, or the gap and its cause.

Assumptions everywhere unless a test says otherwise: WSE-2 preset, float16, 300 B training
tokens (GPT-3's), each model's own batch (GPT-3 paper Table 2.1; Kaplan's critical-batch
ratio for the scaled models, TransformerConfig.scaled), the default partial-sum reading
('fabric'), the unembedding dense.
"""

import dataclasses
import json
import time

import pytest

from wsesparse import wafer
from wsesparse.wafer import training
from wsesparse.wafer.transformer import GPT3_TABLE

T = wafer.TransformerConfig
ENGINES = (1, 16, 64, 192)


@pytest.fixture(scope="module")
def curves():
    """(model, sparsity) -> {engines: efficiency}; efficiency = t(1) / (e * t(e))."""
    out = {}
    for cfg in (T.gpt3("1.3B"), T.gpt3("13B"), T.gpt3("175B"), T.scaled(1e12, name="1T")):
        for s in (0.0, 0.9):
            cur = wafer.scaling_curve(cfg, engines=ENGINES, sparsity=s, compare_dense=False)
            out[cfg.name, s] = {d["engines"]: d["efficiency"] for d in cur}
    return out


# -- the model description ------------------------------------------------------------------
@pytest.mark.parametrize("name", list(GPT3_TABLE))
def test_gpt3_table_parameter_counts(name):
    """n_params (embeddings included) matches the GPT-3 paper's model names within 5 %."""
    c = T.gpt3(name)
    nominal = float(name[:-1]) * (1e9 if name.endswith("B") else 1e6)
    assert c.n_params == pytest.approx(nominal, rel=0.05)
    assert c.n_params - c.non_embedding_params == c.vocab * c.d_model + c.seq_len * c.d_model
    assert T.gpt3("GPT-3 " + name) == c
    # any case, as `wsesparse train --model` takes them (a review: gpt3("1.3b") was refused)
    assert T.gpt3(name.lower()) == T.gpt3("gpt3-" + name.lower()) == c


def test_more_heads_than_d_model_is_an_error():
    """A review: n_heads=8, d_model=4 made heads 1 wide and Q, K, V 8 wide (not d_model)."""
    with pytest.raises(ValueError, match=r"n_heads \(8\) exceeds d_model \(4\)"):
        T("x", n_layers=1, d_model=4, n_heads=8)
    assert T("x", n_layers=1, d_model=4, n_heads=8, d_head=2).d_head == 2
    assert T("x", n_layers=1, d_model=4, n_heads=4).d_head == 1


def test_scaled_models():
    one_t = T.scaled(1e12, name="1T")
    brain = T.scaled(600 * T.gpt3("175B").n_params, name="brain")
    assert one_t.n_params == pytest.approx(1e12, rel=0.05)
    assert brain.n_params / T.gpt3("175B").n_params == pytest.approx(600, rel=0.05)
    assert T.gpt3("175B").batch_tokens < one_t.batch_tokens < brain.batch_tokens
    assert one_t.d_model / one_t.n_layers == pytest.approx(128, rel=0.02)
    with pytest.raises(ValueError, match="GPT-3 model must be one of"):
        T.gpt3("1T")


def test_report_breakdown_and_json():
    r = wafer.estimate_training(T.gpt3("125M"), tokens=1e9, engines=4, sparsity=0.9)
    assert [b.name for b in r.layers] == ["decoder layer", "unembedding"]
    assert r.layers[0].count == 12
    mats = {p.matrix for p in r.layers[0].phases}
    assert {"attention qkv", "attention out", "ffn up", "ffn down", "attention scores"} <= mats
    assert set(r.phase_seconds()) == set(training.PHASES)
    assert sum(r.phase_seconds().values()) == pytest.approx(r.engine_seconds, rel=1e-9)
    assert r.step_seconds == pytest.approx(r.engine_seconds + r.swarmx_seconds
                                           + r.optimizer_exposed_seconds)
    assert r.days == pytest.approx(r.seconds / 86400) and r.steps == 2000
    assert r.tokens_per_engine == 125_000 and r.weight_bytes_per_engine > 0
    text = str(r)
    for word in ("vs dense", "SwarmX", "optimizer", "axpy compute", "weight gradient"):
        assert word in text
    json.dumps(r.to_dict())


@pytest.mark.parametrize("kwargs,exc,word", [
    (dict(engines=193), ValueError, "max_engines"),
    (dict(engines=8, batch_tokens=4), ValueError, "batch_tokens"),
    (dict(sparsity=1.0), ValueError, "sparsity"),
    (dict(psum="wire"), ValueError, "psum"),
    (dict(tokens=0), ValueError, "tokens"),
])
def test_bad_arguments_name_themselves(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        wafer.estimate_training(T.gpt3("125M"), **kwargs)
    with pytest.raises(TypeError, match="config"):
        wafer.estimate_training("175B")


# -- properties -------------------------------------------------------------------------------
def test_time_proportional_to_tokens():
    """Steps are tokens / batch (fractional), so the run time is exactly proportional."""
    c = T.gpt3("350M")
    a = wafer.estimate_training(c, tokens=1e10, engines=8, sparsity=0.75)
    b = wafer.estimate_training(c, tokens=3e10, engines=8, sparsity=0.75)
    assert b.seconds == pytest.approx(3 * a.seconds, rel=1e-12)
    assert b.step_seconds == a.step_seconds


@pytest.mark.parametrize("psum", list(wafer.PSUM_READINGS))
@pytest.mark.parametrize("engines", [1, 16])
def test_sparsity_never_slower(psum, engines):
    """More sparsity never makes a step slower (tolerance 1 % between random patterns)."""
    c = T.gpt3("350M")
    steps = [wafer.estimate_training(c, sparsity=s, engines=engines, psum=psum,
                                     compare_dense=False).step_seconds
             for s in (0.0, 0.5, 0.75, 0.9, 0.99, 0.999)]
    assert all(b <= a * 1.01 for a, b in zip(steps, steps[1:])), steps
    assert steps[-1] < steps[0]


@pytest.mark.parametrize("n_tokens,engines,min_scale,rel", [
    (1_000_000, 1, 3, 0.03),
    # 256 tokens on 64 engines: scaled by 4.1, 62 tokens would be left for 64 engines (a
    # ValueError naming n_tokens, which the caller never passed); each engine keeps one.
    (256, 64, 4, 0.02),
])
def test_scaled_estimate_matches_full_grid(n_tokens, engines, min_scale, rel):
    """The scaled-wafer estimate of a big matrix (module docstring) agrees with the
    full-grid estimate for all three phases (GPT-3 XL FFN down projection)."""
    args = (wafer.WSE2, 2048, 8192, n_tokens, engines, 0.9, "float16")
    full = training._matrix_phases(*args, 1e9, 0)
    small = training._matrix_phases(*args, 1e6, 0)
    assert full["scale"] == 1.0 and small["scale"] > min_scale
    for key in ("forward", "delta", "wgrad"):
        assert small[key][0] == pytest.approx(full[key][0], rel=rel), key


def test_175b_batch_of_2048_on_192_engines():
    """(It raised: the scaled problem left 167 tokens for 192 engines.)"""
    r = training.estimate_training(training.TransformerConfig.gpt3("175B"), batch_tokens=2048,
                                   engines=192, sparsity=0.9, compare_dense=False)
    assert 0 < r.step_seconds < float("inf")


def test_layers_beyond_the_sram_are_noted():
    """A layer whose layout does not fit the SRAM is named in the notes (its time was
    reported with no word of it; estimate_gemm says so for the same matrix)."""
    cfg = training.TransformerConfig("ffwide", n_layers=1, d_model=1000, n_heads=10,
                                     d_ff=20_000_000, seq_len=128, vocab=100)
    r = training.estimate_training(cfg, tokens=1e9, batch_tokens=100_000, sparsity=0.9,
                                   compare_dense=False)
    assert any(n.startswith("ffn up does NOT fit") for n in r.notes)
    assert "note: ffn up does NOT fit" in str(r)
    small = training.estimate_training(training.TransformerConfig.gpt3("125M"), tokens=1e9,
                                       sparsity=0.9, compare_dense=False)
    assert not any("does NOT fit" in n for n in small.notes)


def test_kaplan_critical_batch_needs_a_positive_count():
    """(-1 gave a complex number, 0 a ZeroDivisionError.)"""
    from wsesparse.wafer.transformer import kaplan_critical_batch
    for bad in (-1, 0, float("nan")):
        with pytest.raises(ValueError, match="n_params must be a positive finite number"):
            kaplan_critical_batch(bad)


def test_175b_step_estimate_in_seconds():
    """A 175B step (and its dense twin) from a cold cache: ~1.5 s on one core here; the
    bound is 30 s to stay robust on slow CI."""
    training._matrix_phases.cache_clear()
    t0 = time.perf_counter()
    r = wafer.estimate_training(T.gpt3("175B"), engines=16, sparsity=0.9)
    assert time.perf_counter() - t0 < 30
    assert r.trained_params < 0.2 * r.config.n_params


# -- the seeds' claims ------------------------------------------------------------------------
def test_175b_90_percent_about_10x_gap():
    """Seed 004 / 003: "the 10x in the legend indicates the speed up we achieve from a
    conservative 90 % sparsity". Model, GPT-3 175B on 16 engines: 6.4x ('fabric'), 6.7x
    ('seed'); tolerance asserted: 5x-12x. GAP, causes (see the breakdown of str(report)):
    the QKV, attention-out and FFN-up matrices have only 16 input features per row, so at
    90 % a row does ~1.6 AXPYs per output and the per-output partial-sum work binds
    (ring-bound ~6x under 'fabric'); the weight gradient's dY broadcast down the columns
    does not shrink with sparsity; the attention scores (dense, ~3 % of the dense step,
    ~17 % of the sparse one) and the dense unembedding do not shrink at all. The forward
    pass of the FFN down projection alone is ~8.5x (test_published_figures)."""
    for psum, lo, hi in (("fabric", 5.5, 7.5), ("seed", 5.5, 8.5)):
        r = wafer.estimate_training(T.gpt3("175B"), engines=16, sparsity=0.9, psum=psum)
        assert 5.0 <= r.speedup_vs_dense <= 12.0
        assert lo <= r.speedup_vs_dense <= hi, (psum, r.speedup_vs_dense)
        assert r.bound_seconds()["dense compute"] > 0.1 * r.engine_seconds


def test_175b_linear_up_to_16_engines(curves):
    """Seeds 002/004: near-linear speedup as CS-2s are added. Model, GPT-3 175B (batch 3.2 M):
    efficiency >= 0.95 up to 16 engines, dense and 90 % sparse (0.99 in our runs)."""
    for s in (0.0, 0.9):
        assert curves["GPT-3 175B", s][16] >= 0.95


def test_linear_range_grows_with_model_size(curves):
    """Seed 003/004: "the bigger the model, the further the linear trend persists to larger
    cluster sizes". Model: efficiency at 64 and 192 engines rises with model size (1.3B <
    13B < 175B < 1T), dense and 90 %. Cause in the model: every engine must take in the
    whole weight stream each step at 1.2 Tb/s whatever the cluster size, while its compute
    shrinks with its share of the batch; bigger models train at bigger batches (GPT-3
    table, Kaplan's critical batch), so the intake binds later. Tolerance: strict order."""
    names = ["GPT-3 1.3B", "GPT-3 13B", "GPT-3 175B", "1T"]
    for s in (0.0, 0.9):
        for e in (64, 192):
            eff = [curves[n, s][e] for n in names]
            assert all(a < b for a, b in zip(eff, eff[1:])), (s, e, eff)
    assert curves["1T", 0.9][64] >= 0.95


def test_120t_linear_to_192_engines():
    """Seed 002: simulated "linear improvement all the way up to 120-trillion parameter
    networks" on 192 systems. Model, 120T (GPT-3 aspect, batch ~33 M tokens by Kaplan's
    critical-batch ratio), dense and 90 %: efficiency at 192 engines >= 0.9."""
    c = T.scaled(120e12, name="120T")
    for s in (0.0, 0.9):
        one = wafer.estimate_training(c, engines=1, sparsity=s, compare_dense=False)
        full = wafer.estimate_training(c, engines=192, sparsity=s, compare_dense=False)
        assert one.seconds / (192 * full.seconds) >= 0.9


def test_trillion_parameters_in_a_few_days():
    """Seed 003/004: "it's possible to train a model with a trillion parameters in just a
    few days". Model: 1T (172 layers, d_model 22,016, batch ~6 M), 90 % sparsity, 192
    engines, 300 B tokens: ~4.3 days. Tolerance: 1-7 days. Dense: ~39 days."""
    r = wafer.estimate_training(T.scaled(1e12, name="1T"), engines=192, sparsity=0.9)
    assert 1.0 <= r.days <= 7.0
    assert r.days * r.speedup_vs_dense > 20


def test_brain_scale_year_and_month():
    """Seed 003: a brain-scale model 600x GPT-3 on a thousand engines "will complete with
    only a year of training time"; with 100x sparsity "the runtime shrinks to a month".
    The seed gives neither the tokens nor the sparsity of the year. Model, 105 T parameters
    (811 layers, d_model 103,808, batch ~32 M), 300 B tokens, 1000 engines (beyond WSE-2's
    192: max_engines raised): dense ~2.1 years, 90 % ~78 days, 99 % (100x) ~10 days, all
    bound by the weight intake (32 k tokens per engine). Tolerances: dense 0.5-4 years
    (the seed's year within 4x), 99 % between 3 days and 2 months (a month within 3x). GAP:
    the model's 100x run is ~3x faster than the seed's month and its dense run ~2x slower
    than its year; the seed's 12x from a year to a month matches neither dense (our ~77x,
    the intake shrinks with the nonzeros) nor 90 % (our ~8x) as the starting point."""
    m = dataclasses.replace(wafer.WSE2, max_engines=1000)
    brain = T.scaled(600 * T.gpt3("175B").n_params, name="brain")
    dense = wafer.estimate_training(brain, engines=1000, machine=m, compare_dense=False)
    s99 = wafer.estimate_training(brain, engines=1000, machine=m, sparsity=0.99,
                                  compare_dense=False)
    assert 0.5 <= dense.years <= 4.0
    assert 3.0 <= s99.days <= 60.0
    assert "weight intake" == max(s99.bound_seconds(), key=s99.bound_seconds().get)


def test_no_dense_comparison_is_not_a_speedup_of_one():
    """compare_dense=False printed "vs dense 1x faster" with the sparse step as the dense."""
    import math
    T = wafer.TransformerConfig
    r = wafer.estimate_training(T.gpt3("125M"), tokens=1e9, sparsity=0.9, compare_dense=False)
    assert math.isnan(r.speedup_vs_dense) and math.isnan(r.dense_step_seconds)
    assert "vs dense" not in str(r)
    r0 = wafer.estimate_training(T.gpt3("125M"), tokens=1e9, sparsity=0.0)
    assert r0.speedup_vs_dense == 1.0 and "vs dense" in str(r0)


_TINY_CFG = dict(n_layers=2, d_model=64, n_heads=4, seq_len=128, vocab=500)


def test_exposed_optimizer_time_is_at_most_its_total():
    """With slow model memory the optimizer outlasts the backward pass: the first layer's
    update was added to the unhidden rest that already held it, and the exposed time exceeded
    the optimizer's total (0.206 against 0.187 s in a review)."""
    cfg = wafer.TransformerConfig("tiny", **_TINY_CFG)
    m = dataclasses.replace(wafer.WSE2, rows=16, cols=16, memory_bytes_per_s=1e7)
    r = wafer.estimate_training(cfg, tokens=1e6, batch_tokens=4096, machine=m, sparsity=0.9,
                                compare_dense=False)
    backward = sum(b.count * (b.phase_seconds("delta") + b.phase_seconds("weight gradient"))
                   for b in r.layers)
    assert r.optimizer_seconds > backward   # (the case)
    assert r.optimizer_exposed_seconds == pytest.approx(r.optimizer_seconds - backward)
    assert r.optimizer_exposed_seconds <= r.optimizer_seconds


def test_weight_bytes_add_up_the_matrices_streams():
    """The delta pass streams W.T: a control message per each of its K outputs (the delta
    report's own count), which the training estimate counted with M."""
    cfg = wafer.TransformerConfig("tiny", **{**_TINY_CFG, "n_layers": 1})
    m = dataclasses.replace(wafer.WSE2, rows=16, cols=16)   # small enough: no scaling
    N = 4096
    r = wafer.estimate_training(cfg, tokens=1e6, batch_tokens=N, machine=m, sparsity=0.9,
                                compare_dense=False)
    total = 0
    for name, M, K in list(cfg.layer_matrices()) + [("unembedding", cfg.vocab, cfg.d_model)]:
        W = wafer.random_weights(M, K, 0.9 if name != "unembedding" else 0.0, seed=0)
        fwd = wafer.estimate_gemm(W, N, machine=m)
        g = wafer.estimate_gradient(W, N, machine=m)
        assert M == K or fwd.weight_messages != g.delta.weight_messages
        total += ((fwd.weight_messages + g.delta.weight_messages) * m.weight_message_bytes
                  + W.nnz * 2 * fwd.passes)   # (+ the mask's 2-byte indices)
    assert r.weight_bytes_per_engine == total
