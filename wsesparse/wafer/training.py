"""A whole training run of a sparse transformer on 1 to ``max_engines`` engines.

Weight streaming (seeds 002, 003, 004): activations stay on the wafer, the weights
of one layer after another stream in from the model memory (MemoryX), forward,
then backward; the backward pass streams the weights again for the delta pass
``dX = W^T dY`` and only the sparsity mask for the weight gradient, whose values
flow out to the optimizer, which runs on the model memory. With several engines
(data parallel), every engine holds a copy of the activations of its share of the
batch; SwarmX broadcasts the weight stream to all of them (a tree: each link
carries the stream once) and reduces their gradients on the way back.

One training step on one engine (all engines run the same schedule) is built
from the layer estimators, per weight matrix of the network and per phase:

* forward: :func:`estimate_gemm` (event-level; bound = AXPY compute, partial-sum
  ring or weight intake);
* delta: the delta pass of :func:`estimate_gradient` (event-level);
* weight gradient: the SDDMM of :func:`estimate_gradient` (dot products,
  dY broadcast or mask intake); its gradient values leave through the outlet at
  the intake bandwidth (never the bound at 2-byte gradients);
* attention scores (``Q K^T`` and ``A V``, dense, activations resident) and the
  elementwise work at ``dense_utilization`` of the peak FMAC rate, backward = 2 x
  forward;
* the SwarmX tree: ``ceil(log_fanout(engines))`` hops of ``swarmx_hop_s`` per
  streamed phase (the pipeline fill of the broadcast or the reduction), and the
  weight stream into each engine at ``min(weight intake, swarmx link)``;
* the optimizer step on the model memory: ``optimizer_bytes_per_param`` per
  trained parameter (nonzeros of the sparse matrices, every other parameter) at
  ``memory_bytes_per_s``; it overlaps the backward pass layer by layer (gradients
  arrive layer after layer), so only what the backward pass cannot hide and the
  update of the first layer (needed before the next forward) are exposed.

Layer shapes repeat, so each distinct (shape, phase) is estimated once (and
cached). Matrices above ``max_scaled_weights`` weights are estimated on a wafer
scaled down by a factor f in rows and columns that keeps the features per row,
the tokens per core and the intake rate per output (W scaled by f in both
dimensions, the token batch by f, the intake by f); the cycle count is scaled
back by f. This reproduces the full-grid estimate of the GPT-3 175B FFN within
~1.5 % at f = 10 (see tests/wafer/test_training.py).

Not costed: activation storage for the backward pass (assumed held on the wafer
or recomputed off the critical path), the data loader, the input embedding
lookup, and stragglers between engines (all engines run the same schedule).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

from wsesparse._checks import check_allocation, check_int, check_real
from wsesparse.wafer.estimate import estimate_gemm, random_weights
from wsesparse.wafer.gradient import estimate_gradient
from wsesparse.wafer.machine import DEFAULT_DTYPE, WSE2, Machine, check_dtype, with_psum
from wsesparse.wafer.report import strict_json
from wsesparse.wafer.transformer import TransformerConfig

PHASES = ("forward", "delta", "weight gradient")
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class PhaseEstimate:
    """One phase of one weight matrix (or dense part) on one engine, one step."""

    matrix: str
    phase: str
    seconds: float
    bound: str
    bounds: dict
    intake_bytes: float
    scale: float = 1.0


@dataclass(frozen=True)
class LayerEstimate:
    """A repeated block of the network: ``count`` copies of these phases per step."""

    name: str
    count: int
    phases: tuple

    @property
    def seconds(self) -> float:
        """Seconds of one copy of the block, all phases."""
        return sum(p.seconds for p in self.phases)

    def phase_seconds(self, phase: str) -> float:
        """Seconds of one copy in ``phase`` ('forward', 'delta', 'weight gradient')."""
        return sum(p.seconds for p in self.phases if p.phase == phase)


@dataclass(frozen=True)
class TrainingReport:
    """Estimate of a training run; see :func:`estimate_training`.

    ``seconds``, ``days``: the whole run; ``step_seconds``: one step; ``steps``:
    ``tokens / batch_tokens`` (fractional: the time is proportional to the tokens);
    ``speedup_vs_dense``: the same run with every weight nonzero divided by this one (nan,
    and ``dense_step_seconds`` nan, where ``compare_dense=False`` left it out);
    ``layers``: the per-block, per-phase breakdown of one engine's step.
    """

    config: TransformerConfig
    machine: str
    engines: int
    sparsity: float
    psum: str
    dtype: str
    tokens: float
    batch_tokens: int
    tokens_per_engine: float
    steps: float
    step_seconds: float
    seconds: float
    engine_seconds: float
    swarmx_seconds: float
    optimizer_seconds: float
    optimizer_exposed_seconds: float
    weight_bytes_per_engine: float
    trained_params: int
    dense_step_seconds: float
    speedup_vs_dense: float
    layers: tuple = field(repr=False)
    notes: tuple = field(default=(), repr=False)

    @property
    def days(self) -> float:
        """The run in days."""
        return self.seconds / SECONDS_PER_DAY

    @property
    def years(self) -> float:
        """The run in (365-day) years."""
        return self.days / 365.0

    def phase_seconds(self) -> dict:
        """Seconds per step by phase (forward, delta, weight gradient), all blocks."""
        return {ph: sum(b.count * b.phase_seconds(ph) for b in self.layers) for ph in PHASES}

    def bound_seconds(self) -> dict:
        """Seconds per step by the bound each phase hit."""
        out: dict = {}
        for b in self.layers:
            for p in b.phases:
                out[p.bound] = out.get(p.bound, 0.0) + b.count * p.seconds
        return out

    def to_dict(self) -> dict:
        """Plain dict: scalars, the config and the breakdown (``speedup_vs_dense`` nan where
        not computed; :meth:`to_json` writes strict JSON)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("config", "layers", "notes")}
        d["config"] = dataclasses.asdict(self.config)
        d["days"] = self.days
        d["layers"] = [dict(name=b.name, count=b.count,
                            phases=[dataclasses.asdict(p) for p in b.phases]) for b in self.layers]
        d["notes"] = list(self.notes)
        return d

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON string; ``speedup_vs_dense`` not computed (nan) is null."""
        return strict_json(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        c = self.config
        lines = [
            ("model", str(c)),
            ("machine", f"{self.machine} x {self.engines} engine(s), {self.dtype}, "
                        f"partial sums: {self.psum} reading"),
            ("sparsity", f"{self.sparsity:g} of the transformer weights "
                         f"({self.trained_params / 1e9:,.4g} B trained parameters)"),
            ("tokens", f"{self.tokens:,.4g} in {self.steps:,.1f} steps of {self.batch_tokens:,} "
                       f"({self.tokens_per_engine:,.0f} per engine)"),
            ("step", f"{self.step_seconds:.4g} s = engine {self.engine_seconds:.4g} s + SwarmX "
                     f"{self.swarmx_seconds:.3g} s + optimizer exposed "
                     f"{self.optimizer_exposed_seconds:.3g} s (optimizer total "
                     f"{self.optimizer_seconds:.3g} s)"),
            ("weights in", f"{self.weight_bytes_per_engine / 1e9:,.4g} GB per engine per step"),
            ("run", f"{self.seconds:.4g} s = {self.days:,.4g} days"),
        ]
        if not math.isnan(self.speedup_vs_dense):
            lines.append(("vs dense", f"{self.speedup_vs_dense:.3g}x faster (dense step "
                                      f"{self.dense_step_seconds:.4g} s)"))
        ph = self.phase_seconds()
        lines.append(("phases", ", ".join(f"{k} {v:.4g} s" for k, v in ph.items())))
        lines.append(("bounds", ", ".join(f"{k} {v:.4g} s" for k, v in
                                          sorted(self.bound_seconds().items(),
                                                 key=lambda kv: -kv[1]))))
        w = max(len(k) for k, _ in lines)
        out = [f"{k:<{w}}  {v}" for k, v in lines]
        out.append("per block and phase (one copy, seconds, bound):")
        for b in self.layers:
            out.append(f"  {b.name} x {b.count}:")
            for p in b.phases:
                scale = f" (scaled estimate, f={p.scale:.3g})" if p.scale > 1 else ""
                out.append(f"    {p.matrix:<15} {p.phase:<16} {p.seconds:10.4g}  {p.bound}{scale}")
        out.extend(f"note: {n}" for n in self.notes)
        return "\n".join(out)


def _scaled_problem(machine: Machine, M: int, K: int, n_tokens: int, budget: float,
                    engines: int = 1):
    """(machine', M', K', n', f) with W' of at most ~``budget`` weights, same features per
    row, tokens per core and intake per output; f = M / M' scales cycles back. Each of the
    ``engines`` keeps at least one token: where n / f would leave fewer, every busy core
    holds one token on the full machine too (a batch of 2048 tokens on 192 engines failed
    with 167 tokens left; keeping the machine whole for it took minutes)."""
    f = math.sqrt(M * K / budget)
    f = min(f, machine.rows / 8, machine.cols / 8)
    if f <= 1.0:
        return machine, M, K, n_tokens, 1.0
    R = max(1, round(machine.rows / f))
    C = max(1, round(machine.cols / f))
    Mp = max(1, round(M * R / machine.rows))
    Kp = max(1, round(K * R / machine.rows))
    n = max(engines, round(n_tokens * C / machine.cols))
    mm = dataclasses.replace(machine, rows=R, cols=C,
                             weight_intake_bytes_per_s=machine.weight_intake_bytes_per_s * Kp / K)
    return mm, Mp, Kp, n, M / Mp


@functools.lru_cache(maxsize=512)
def _matrix_phases(machine: Machine, M: int, K: int, n_tokens: int, engines: int,
                   sparsity: float, dtype: str, budget: float, seed: int):
    """Cycles of forward, delta and weight gradient of an M x K matrix (cached)."""
    mm, Mp, Kp, n, f = _scaled_problem(machine, M, K, n_tokens, budget, engines)
    if Kp >= 2**31:
        raise ValueError(f"the model is too large to estimate: its {float(M):.3g} x "
                         f"{float(K):.3g} matrices scale to {float(Kp):.3g} columns at least, "
                         "and a pattern needs fewer than 2**31")
    # random_weights checks its pattern (8 bytes a nonzero); the two estimates then copy,
    # transpose and reorder it: a peak of 4.5x the pattern at --model 3e16 (session 33)
    nnz = (1.0 - float(sparsity)) * Mp * Kp
    check_allocation(int(40 * nnz) + 8 * Mp,
                     f"the estimate of a {M} x {K} matrix, scaled to {Mp} x {Kp} with "
                     f"~{int(nnz):,} nonzeros (the pattern and its copies)")
    W = random_weights(Mp, Kp, sparsity, seed=seed)
    fwd = estimate_gemm(W, n, machine=mm, engines=engines, dtype=dtype)
    grad = estimate_gradient(W, n, machine=mm, engines=engines, dtype=dtype)
    fd = K / Kp if f > 1 else 1.0
    nnz = W.nnz * (M * K) / (Mp * Kp)
    return dict(
        forward=(fwd.cycles * f, fwd.bound, {k: v * f for k, v in fwd.bounds.items()}),
        delta=(grad.delta.cycles * fd, grad.delta.bound,
               {k: v * fd for k, v in grad.delta.bounds.items()}),
        wgrad=(grad.sddmm_cycles * f, grad.sddmm_bound,
               {k: v * f for k, v in grad.sddmm_bounds.items()}),
        passes=fwd.passes, delta_passes=grad.delta.passes, nnz=nnz, scale=f,
        fits=fwd.sram_fits, layout_note=fwd.layout_note)


def _tree_hops(machine: Machine, engines: int) -> int:
    hops, reach = 0, 1
    while reach < engines:
        reach *= machine.swarmx_fanout
        hops += 1
    return hops


def _step(config: TransformerConfig, machine: Machine, engines: int, batch: int,
          sparsity: float, dtype: str, sparse_unembedding: bool, budget: float, seed: int):
    """One step on one engine: (layers, engine_s, swarmx_s, opt_s, opt_exposed_s, bytes, params,
    misfits), misfits the notes of the matrices whose layout does not fit the SRAM."""
    clock = machine.clock_hz
    stream = min(machine.weight_intake_bytes_per_s, machine.swarmx_link_bytes_per_s)
    m = machine if stream >= machine.weight_intake_bytes_per_s else dataclasses.replace(
        machine, weight_intake_bytes_per_s=stream)
    tokens_e = batch / engines
    hops = _tree_hops(machine, engines)
    blocks = []
    weight_bytes = 0.0
    trained = 0
    streamed_phases = 0
    misfits = {}

    def matrix_phases(name, M, K, s):
        nonlocal weight_bytes, trained, streamed_phases
        r = _matrix_phases(m, M, K, batch, engines, float(s), dtype, budget, seed)
        if not r["fits"]:
            misfits[name] = r["layout_note"]
        # weights (value + index) and a control message per output, forward (M outputs) and
        # again for the delta pass (W.T: K outputs; it was counted with M, a review), the mask
        # (2-byte indices) for the weight gradient; once per pass of each layout.
        b_fwd = (r["nnz"] + M) * m.weight_message_bytes * r["passes"]
        b_dl = (r["nnz"] + K) * m.weight_message_bytes * r["delta_passes"]
        b_wg = r["nnz"] * 2 * r["passes"]
        out = []
        for phase, key, b in (("forward", "forward", b_fwd), ("delta", "delta", b_dl),
                              ("weight gradient", "wgrad", b_wg)):
            cyc, bound, bounds = r[key]
            out.append(PhaseEstimate(name, phase, cyc / clock, bound,
                                     {k: v / clock for k, v in bounds.items()}, b, r["scale"]))
        return out, r["nnz"], b_fwd + b_dl + b_wg

    # Decoder layer: four streamed matrices + attention scores + elementwise work.
    phases, layer_nnz, layer_bytes = [], 0.0, 0.0
    for name, M, K in config.layer_matrices():
        ps, nnz, b = matrix_phases(name, M, K, sparsity)
        phases += ps
        layer_nnz += nnz
        layer_bytes += b
    peak = machine.cores * machine.fmac(dtype) * machine.dense_utilization * clock
    att = tokens_e * config.attention_macs_per_token() / peak
    elt = tokens_e * config.elementwise_ops_per_token() / peak
    for phase, mult in (("forward", 1.0), ("delta", 1.0), ("weight gradient", 1.0)):
        # backward of Q K^T and A V: dQ, dK (delta) and dA, dV (delta and gradient of the
        # activations): 2 x forward in all, split here as 1 x delta + 1 x "weight gradient"
        # phase time (the dense parts have no weights; the split only places the time).
        phases.append(PhaseEstimate("attention scores", phase, att * mult, "dense compute",
                                    {"dense compute": att * mult}, 0.0))
    phases.append(PhaseEstimate("elementwise", "forward", elt, "dense compute",
                                {"dense compute": elt}, 0.0))
    phases.append(PhaseEstimate("elementwise", "delta", 2 * elt, "dense compute",
                                {"dense compute": 2 * elt}, 0.0))
    blocks.append(LayerEstimate("decoder layer", config.n_layers, tuple(phases)))
    weight_bytes += config.n_layers * layer_bytes
    dense_layer_params = config.layer_params - config.layer_weights
    trained += config.n_layers * (int(round(layer_nnz)) + dense_layer_params)
    streamed_phases += config.n_layers * 3 * 4

    # Unembedding (tied with the token embedding): vocab x d_model, dense unless asked.
    s_u = sparsity if sparse_unembedding else 0.0
    ps, nnz_u, b_u = matrix_phases("unembedding", config.vocab, config.d_model, s_u)
    blocks.append(LayerEstimate("unembedding", 1, tuple(ps)))
    weight_bytes += b_u
    trained += int(round(nnz_u)) + config.seq_len * config.d_model + 2 * config.d_model
    streamed_phases += 3

    engine_s = sum(b.count * b.seconds for b in blocks)
    swarmx_s = streamed_phases * hops * machine.swarmx_hop_s
    opt_s = trained * machine.optimizer_bytes_per_param / machine.memory_bytes_per_s
    backward_s = sum(b.count * (b.phase_seconds("delta") + b.phase_seconds("weight gradient"))
                     for b in blocks)
    first_layer_s = (int(round(layer_nnz)) + dense_layer_params) \
        * machine.optimizer_bytes_per_param / machine.memory_bytes_per_s
    # The first layer's update waits for the end of the backward pass; the rest hides behind
    # it as far as it lasts (adding the first layer's to the unhidden rest counted it twice
    # and exposed more than opt_s: a review).
    exposed = max(opt_s - backward_s, min(first_layer_s, opt_s))
    notes = tuple(f"{name} {note}; its time assumes it fits"   # (note: "does NOT fit: ...")
                  for name, note in misfits.items())
    return tuple(blocks), engine_s, swarmx_s, opt_s, exposed, weight_bytes, trained, notes


def estimate_training(config: TransformerConfig, tokens: float | None = None,
                      batch_tokens: int | None = None, engines: int = 1,
                      sparsity: float = 0.0, machine: Machine = WSE2,
                      psum: str | None = None, dtype=DEFAULT_DTYPE,
                      sparse_unembedding: bool = False, compare_dense: bool = True,
                      max_scaled_weights: float = 4e6, seed: int = 0) -> TrainingReport:
    """Estimate a weight-streamed training run of ``config`` on ``engines`` engines.

    Parameters
    ----------
    config : TransformerConfig
        The network (``TransformerConfig.gpt3("175B")``, ``TransformerConfig.scaled(1e12)``).
    tokens : float, optional
        Training tokens (default 300 B, GPT-3's).
    batch_tokens : int, optional
        Global batch in tokens (default ``config.batch_tokens``, else 1 M), split evenly
        over the engines (data parallel).
    engines : int
        Engines (CS-2 systems) in the cluster, 1 to ``machine.max_engines``.
    sparsity : float in [0, 1)
        Unstructured sparsity of the transformer weight matrices (the unembedding
        stays dense unless ``sparse_unembedding``).
    machine : Machine
    psum : {'fabric', 'seed'}, optional
        Partial-sum reading (``wafer.PSUM_READINGS``; default the machine's, 'fabric').
    dtype : {'float16', 'float32'}
    sparse_unembedding : bool, default False
        Make the unembedding (d_model x vocabulary) as sparse as the other matrices.
    compare_dense : bool
        Also estimate the same run with every weight nonzero (``speedup_vs_dense``).
    max_scaled_weights : float
        Matrices with more weights are estimated on a proportionally scaled wafer
        (module docstring); smaller ones on the full grid.
    seed : int
        Seed of the random sparsity patterns.

    Returns
    -------
    TrainingReport

    Examples
    --------
    >>> from wsesparse import wafer
    >>> cfg = wafer.TransformerConfig.gpt3("125M")
    >>> r = wafer.estimate_training(cfg, tokens=1e9, engines=2, sparsity=0.9)
    >>> r.steps, r.speedup_vs_dense > 1, sorted(r.phase_seconds())
    (2000.0, True, ['delta', 'forward', 'weight gradient'])
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a wafer.TransformerConfig, got {type(config).__name__}")
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a wafer.Machine, got {type(machine).__name__}")
    machine = with_psum(machine, psum)
    dtype = check_dtype(dtype)
    tokens = 300e9 if tokens is None else check_real(tokens, "tokens", minimum=0,
                                                     inclusive=(False, True))
    if batch_tokens is None:
        batch_tokens = config.batch_tokens or 1_000_000
    batch_tokens = check_int(batch_tokens, "batch_tokens", minimum=1)
    engines = check_int(engines, "engines", minimum=1)
    if engines > machine.max_engines:
        raise ValueError(f"engines must be at most machine.max_engines = {machine.max_engines} "
                         f"for {machine.name}, got {engines}")
    if engines > batch_tokens:
        raise ValueError(f"batch_tokens ({batch_tokens}) must give every engine at least one "
                         f"token, got engines={engines}")
    sparsity = check_real(sparsity, "sparsity", minimum=0, maximum=1, inclusive=(True, False))
    budget = check_real(max_scaled_weights, "max_scaled_weights", minimum=1e4)
    seed = check_int(seed, "seed", minimum=0)

    def run(s):
        return _step(config, machine, engines, batch_tokens, s, dtype, bool(sparse_unembedding),
                     float(budget), seed)

    layers, eng, swx, opt, exposed, wbytes, trained, misfits = run(float(sparsity))
    step = eng + swx + exposed
    if compare_dense and sparsity > 0:
        _, deng, dswx, _, dexp, _, _, _ = run(0.0)
        dense_step = deng + dswx + dexp
    elif compare_dense:  # (sparsity 0: this run is the dense one)
        dense_step = step
    else:  # not estimated: no made-up 1.0 (a review found "1x faster" printed)
        dense_step = math.nan
    steps = tokens / batch_tokens
    notes = misfits + (
        "attention scores computed over the full context (causal masking not exploited)",
        "activation storage for the backward pass not costed",
        "SwarmX hop latency, fanout and link bandwidth are inferred (machine description)")
    return TrainingReport(
        config=config, machine=machine.name, engines=engines, sparsity=float(sparsity),
        psum=machine.psum, dtype=dtype, tokens=float(tokens), batch_tokens=batch_tokens,
        tokens_per_engine=batch_tokens / engines, steps=steps, step_seconds=step,
        seconds=steps * step, engine_seconds=eng, swarmx_seconds=swx, optimizer_seconds=opt,
        optimizer_exposed_seconds=exposed, weight_bytes_per_engine=wbytes,
        trained_params=int(trained), dense_step_seconds=dense_step,
        speedup_vs_dense=dense_step / step, layers=layers, notes=notes)


def scaling_curve(config: TransformerConfig, engines=(1, 2, 4, 8, 16, 32, 64, 128, 192),
                  **kwargs) -> list:
    """``estimate_training`` over ``engines``: a list of dicts with ``engines``, ``speedup``
    (time on 1 engine / time on e), ``efficiency`` (speedup / e) and the report."""
    base = estimate_training(config, engines=1, **kwargs)
    out = []
    for e in engines:
        r = base if e == 1 else estimate_training(config, engines=e, **kwargs)
        sp = base.seconds / r.seconds
        out.append(dict(engines=e, speedup=sp, efficiency=sp / e, report=r))
    return out
