# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Cluster scaling: a whole sparse-transformer training run on 1 to 192 engines
#
# The seeds' larger story (seeds 002, 003, 004): weight streaming of a whole network, layer
# after layer, forward, delta and weight gradient; MemoryX holding the weights and running the
# optimizer; SwarmX broadcasting the weights to every engine and reducing the gradients on the
# way back; the batch split over the engines (data parallel). Their claims: near-linear
# speedup as CS-2 systems are added, "linear improvement all the way up" to 192 systems for
# 120-trillion-parameter networks; "the bigger the model, the further the linear trend persists
# to larger cluster sizes"; "10x from a conservative 90 % sparsity"; "a trillion parameters in
# just a few days"; a brain-scale model 600x GPT-3 on a thousand engines in about a year, a
# month with 100x sparsity.
#
# `wafer.estimate_training` builds one training step from the layer estimators
# (`estimate_gemm` for the forward pass, `estimate_gradient` for the delta pass and the masked
# weight gradient, per weight matrix), the dense attention scores, the weight intake of each
# engine (1.2 Tb/s), the SwarmX tree and the optimizer on the model memory (4 TB/s); see
# `wsesparse/wafer/training.py` and `docs/wafer_model.md`.
#
# **Assumptions** unless a row says otherwise: WSE-2 preset, float16, 300 B training tokens
# (GPT-3's), each model's batch (GPT-3 paper Table 2.1; `TransformerConfig.scaled` models:
# 175B's 3.2 M tokens times the ratio of Kaplan et al. 2020's critical batches), the `"fabric"`
# partial-sum reading, the unembedding dense.
#
# Set `WSESPARSE_SMALL=1` for a quick run (smaller models, fewer points); figures go to
# `$WSESPARSE_FIGURES` (default `notebooks/figures/`).

# %%
import dataclasses
import os
import time
from pathlib import Path

import matplotlib.pyplot as plt

from wsesparse import wafer

SMALL = os.environ.get("WSESPARSE_SMALL", "") not in ("", "0")
_here = Path(__file__).parent if "__file__" in globals() else Path.cwd()
FIGURES = Path(os.environ.get("WSESPARSE_FIGURES") or _here / "figures")
FIGURES.mkdir(parents=True, exist_ok=True)

T = wafer.TransformerConfig
MODELS = [T.gpt3("1.3B"), T.gpt3("13B"), T.gpt3("175B"), T.scaled(1e12, name="1T"),
          T.scaled(120e12, name="120T")]
ENGINES = [1, 2, 4, 8, 16, 32, 64, 128, 192]
if SMALL:
    MODELS = [T.gpt3("125M"), T.gpt3("1.3B"), T.gpt3("13B")]
    ENGINES = [1, 4, 16, 64, 192]
SPARSITIES = (0.0, 0.9)
for c in MODELS:
    print(f"{c}; batch {c.batch_tokens:,} tokens")

# %% [markdown]
# ## Speedup vs engines
# For each model and sparsity, the time of the whole run on e engines against 1 engine of the
# same sparsity (left), and the run time in days (right; dense solid, 90 % dashed: the gap
# between them is the speedup from sparsity).

# %%
t0 = time.perf_counter()
curves = {}
for c in MODELS:
    for s in SPARSITIES:
        curves[c.name, s] = wafer.scaling_curve(c, engines=ENGINES, sparsity=s,
                                                compare_dense=False)
print(f"{len(curves) * len(ENGINES)} training estimates in {time.perf_counter() - t0:.1f} s")
print(f"{'model':<12} {'sparsity':>8} " + " ".join(f"{e:>6}" for e in ENGINES) + "  (efficiency)")
for (name, s), cur in curves.items():
    print(f"{name:<12} {s:>8.2f} " + " ".join(f"{d['efficiency']:>6.2f}" for d in cur))

# %%
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
for color, c in zip(colors, MODELS):
    for s, style in zip(SPARSITIES, ("-", "--")):
        cur = curves[c.name, s]
        label = f"{c.name} ({c.n_params / 1e9:,.3g} B, batch {c.batch_tokens / 1e6:.3g} M)"
        ax.plot([d["engines"] for d in cur], [d["speedup"] for d in cur], style, color=color,
                marker="o", ms=3, label=label + (", dense" if s == 0 else f", {s:.0%} sparse"))
        ax2.plot([d["engines"] for d in cur], [d["report"].days for d in cur], style,
                 color=color, marker="o", ms=3)
ax.plot(ENGINES, ENGINES, color="grey", lw=0.8, label="linear")
for a in (ax, ax2):
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("engines (WSE-2 / CS-2 systems)")
ax.set_ylabel("speedup over 1 engine (same sparsity)")
ax.set_title("WSE-2 cluster model: data-parallel weight streaming\n"
             "the bigger the model (and its batch), the further the linear range", fontsize=9)
ax.legend(fontsize=6, loc="upper left")
ax2.set_ylabel("training time, 300 B tokens (days)")
ax2.set_title("run time: dense (solid) and 90 % sparse (dashed)", fontsize=9)
fig.tight_layout()
fig.savefig(FIGURES / "cluster_scaling.png", dpi=90)
print("wrote", FIGURES / "cluster_scaling.png")

# %% [markdown]
# ## The seeds' claims against the model
# One row per claim: the model's number, the assumptions, and whether it is met. The tests in
# `tests/wafer/test_training.py` hold the same numbers with tolerances and state each gap.

# %%
rows = []


def claim(text, value, assumptions, met):
    rows.append((text, value, assumptions, met))


big = T.gpt3("175B") if not SMALL else T.gpt3("13B")
for psum in wafer.PSUM_READINGS:
    r = wafer.estimate_training(big, engines=16, sparsity=0.9, psum=psum)
    claim("10x from a conservative 90 % sparsity (seeds 003, 004)",
          f"{r.speedup_vs_dense:.2f}x", f"{big.name}, 16 engines, psum={psum}",
          "no: dense attention, ring-bound narrow matrices, dY broadcast (see test)")
for s in SPARSITIES:
    e16 = next(d["efficiency"] for d in curves[big.name, s] if d["engines"] == 16)
    claim("near-linear speedup as CS-2s are added (seeds 002, 004)",
          f"efficiency {e16:.2f} at 16", f"{big.name}, {s:.0%} sparse",
          "yes" if e16 > 0.95 else "no")
knees = {}
for c in MODELS:
    cur = curves[c.name, 0.0]
    knees[c.name] = max(d["engines"] for d in cur if d["efficiency"] >= 0.9)
claim("the bigger the model, the further the linear trend persists (seeds 003, 004)",
      ", ".join(f"{k}: {v}" for k, v in knees.items()),
      "largest cluster with efficiency >= 0.9, dense",
      "yes" if list(knees.values()) == sorted(knees.values()) else "no")
if not SMALL:
    c120 = MODELS[-1]
    e192 = curves[c120.name, 0.0][-1]["efficiency"]
    claim("linear all the way up to 192 systems for 120T (seed 002)",
          f"efficiency {e192:.2f} at 192", f"{c120.name}, dense, batch {c120.batch_tokens:,}",
          "yes" if e192 >= 0.9 else "no")
    one_t = wafer.estimate_training(T.scaled(1e12, name="1T"), engines=192, sparsity=0.9)
    claim("a trillion parameters in just a few days (seeds 003, 004)", f"{one_t.days:.1f} days",
          "1T, 192 engines, 90 % sparse, 300 B tokens (dense: "
          f"{one_t.days * one_t.speedup_vs_dense:.0f} days)", "yes" if one_t.days < 7 else "no")
    m1000 = dataclasses.replace(wafer.WSE2, max_engines=1000)
    brain = T.scaled(600 * T.gpt3("175B").n_params, name="brain scale")
    for s, text in ((0.0, "brain scale (600x GPT-3) on 1000 engines in about a year (seed 003)"),
                    (0.9, "brain scale at 90 % sparsity"),
                    (0.99, "... a month with 100x sparsity (seed 003)")):
        r = wafer.estimate_training(brain, engines=1000, sparsity=s, machine=m1000,
                                    compare_dense=False)
        claim(text, f"{r.years:.2f} years = {r.days:.0f} days",
              f"{brain.n_params / 1e12:.0f} T params, 1000 engines, {s:.0%} sparse, 300 B tokens",
              "order of magnitude (tokens not given by the seed)")
w = max(len(r[0]) for r in rows)
for text, value, assumptions, met in rows:
    print(f"{text:<{w}} | {value:<28} | {assumptions} | {met}")
