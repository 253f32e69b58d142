"""``wsesparse simulate`` (one sparse GEMM) and ``wsesparse train`` (a whole training run)
on the simulated wafer, from the shell."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import time
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from wsesparse._checks import check_int, check_real
from wsesparse.wafer.balance import BALANCERS
from wsesparse.wafer.estimate import as_csr_pattern, estimate_gemm, random_weights
from wsesparse.wafer.machine import PRESETS, PSUM_READINGS
from wsesparse.wafer.report import strict_json


def parse_shape(text: str) -> tuple[int, int]:
    """Parse ``MxK`` (e.g. ``49152x12288``) into two positive ints.

    Examples
    --------
    >>> parse_shape("49152x12288")
    (49152, 12288)
    """
    parts = text.lower().replace("*", "x").split("x")
    try:
        m, k = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"--shape must look like MxK (e.g. 49152x12288), got {text!r}") from None
    if m < 1 or k < 1:
        raise ValueError(f"--shape needs positive sizes, got {text!r}")
    return m, k


def load_matrix(path: str) -> sp.csr_array:
    """Load W from a scipy ``.npz`` (save_npz) or a Matrix Market file."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"--matrix file not found: {path}")
    if not p.is_file():
        raise ValueError(f"--matrix {path} is not a regular file")
    import zipfile
    try:
        if p.suffix == ".npz":
            W = sp.load_npz(p)
        else:
            W = scipy.io.mmread(p)
            W = W if sp.issparse(W) else np.asarray(W)
    except (ValueError, TypeError, EOFError, KeyError, OSError, zipfile.BadZipFile) as exc:
        kind = "a scipy.sparse .npz (save_npz)" if p.suffix == ".npz" else "a Matrix Market file"
        raise ValueError(f"--matrix {path} is not {kind}: {type(exc).__name__}: {exc}") from None
    # The structure is checked (as_csr_pattern) before scipy converts it.
    return as_csr_pattern(W, "--matrix")


def plot_rows(report, path: str) -> None:
    """Write a PNG heatmap of per-row busy cycles (rows folded into a near-square image)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vals = report.row_cycles.astype(float)
    side = int(np.ceil(np.sqrt(vals.size)))
    img = np.full(side * side, np.nan)
    img[:vals.size] = vals
    fig, ax = plt.subplots(figsize=(5, 4))
    im = ax.imshow(img.reshape(side, side), cmap="viridis")
    fig.colorbar(im, ax=ax, label="compute-thread busy cycles")
    ax.set_title(f"{report.machine}: busy cycles per physical row\n"
                 f"(row r at ({'r // %d' % side}, r % {side})), imbalance {report.imbalance:.3f}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def add_psum_argument(p) -> None:
    """Add ``--psum fabric|seed`` (the two readings of the partial-sum cost) to parser ``p``."""
    p.add_argument("--psum", choices=sorted(PSUM_READINGS), default="fabric",
                   help="partial-sum cost: 'fabric' (default; partial sums occupy ring links, "
                        "L*bytes/4 cycles per output: the seed's ~10x at 90 %%, saturates at "
                        "tens) or 'seed' (the seed's literal 4 cycles per output: its "
                        "sparsity-to-acceleration figure, 16 engines below 1; 16 engines "
                        "flatten near 1/3,000, 1 engine does not)")


def run(args: argparse.Namespace) -> int:
    """Run ``wsesparse simulate`` with parsed arguments."""
    # (the options' names in the errors: the estimate would name n_tokens, engines, seed)
    check_int(args.tokens, "--tokens", minimum=1)
    check_int(args.engines, "--engines", minimum=1)
    check_int(args.seed, "--seed", minimum=0, maximum=2**63 - 1)
    check_real(args.sparsity, "--sparsity", minimum=0, maximum=1, inclusive=(True, False))
    machine = PRESETS[args.machine]
    if args.matrix:
        W = load_matrix(args.matrix)
    else:
        m, k = parse_shape(args.shape)
        W = random_weights(m, k, args.sparsity, seed=args.seed)
    t0 = time.perf_counter()
    try:
        rep = estimate_gemm(W, args.tokens, machine=machine, balance=args.balance,
                            engines=args.engines, dtype=args.dtype, psum=args.psum)
    except ValueError as exc:   # (the option's name, not the argument's)
        if str(exc).startswith("n_tokens="):
            raise ValueError("--tokens " + str(exc).removeprefix("n_tokens=")) from None
        raise
    elapsed = time.perf_counter() - t0
    if args.json:
        print(rep.to_json())
    else:
        print(rep)
        print(f"{'estimator time':<15}  {elapsed:.2f} s")
    if args.plot:
        plot_rows(rep, args.plot)
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "simulate", help="estimate a sparse GEMM on a simulated wafer-scale engine",
        description="Event-level cycle estimate of Y = W @ X streamed through a wafer-scale "
                    "engine (weights streaming, tiled activations, ring reduction).",
        epilog="example: wsesparse simulate --shape 49152x12288 --sparsity 0.9 --tokens 3200000")
    p.add_argument("--machine", choices=sorted(PRESETS), default="wse2",
                   help="machine description (default wse2)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--shape", default="12288x49152",
                     help="MxK of a random W (outputs x inputs; default 12288x49152)")
    src.add_argument("--matrix", help="W from a .npz (scipy.sparse.save_npz) or Matrix Market file")
    p.add_argument("--sparsity", type=float, default=0.9, help="for --shape (default 0.9)")
    p.add_argument("--tokens", type=int, default=3_200_000,
                   help="batch over all engines (default 3,200,000 = GPT-3's batch)")
    p.add_argument("--engines", type=int, default=1, help="engines sharing the tokens (default 1)")
    p.add_argument("--balance", choices=BALANCERS, default="round_robin",
                   help="rows to cores (default round_robin)")
    p.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                   help="value type (default float16)")
    add_psum_argument(p)
    p.add_argument("--seed", type=int, default=0, help="for --shape (default 0)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--plot", metavar="FILE", help="write a PNG heatmap of per-row busy cycles")
    p.set_defaults(func=run)
    register_train(sub)


_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_count(text: str, name: str) -> float:
    """Parse ``300e9``, ``300B``, ``1.5T``, ``32M`` or ``2000`` into a positive number.

    Examples
    --------
    >>> parse_count("300B", "--tokens"), parse_count("1.5t", "--model"), parse_count("2e6", "x")
    (300000000000.0, 1500000000000.0, 2000000.0)
    """
    t = str(text).strip().lower().replace("_", "").replace(",", "")
    m = re.fullmatch(r"([0-9.]+(?:e[+]?[0-9]+)?)([kmbt]?)", t)
    try:
        if not m:
            raise ValueError
        value = float(m.group(1)) * _SUFFIX.get(m.group(2), 1.0)
    except ValueError:
        raise ValueError(f"{name} must be a number like 300e9, 300B or 1.5T, "
                         f"got {text!r}") from None
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {text!r}")
    if not math.isfinite(value):  # (1e400: an OverflowError in int() further on)
        raise ValueError(f"{name} must be finite, got {text!r}")
    return value


def model_config(text: str):
    """``--model``: a GPT-3 paper model ('125M' ... '175B') or a parameter count ('1T',
    '120T', '1e12') for ``TransformerConfig.scaled``."""
    from wsesparse.wafer.transformer import GPT3_TABLE, TransformerConfig, gpt3_name

    key, paper = gpt3_name(text)
    # (any case: '1.3b' ran a scaled model of 1.3e9 parameters, not the paper's 1.3B)
    if paper is not None:
        return TransformerConfig.gpt3(paper)
    try:
        n = parse_count(key, "--model")
    except ValueError as exc:
        if "positive" in str(exc):
            raise
        raise ValueError(f"--model must be a GPT-3 paper model ({', '.join(GPT3_TABLE)}) or "
                         f"a parameter count like 300e9, 300B or 1.5T, got {text!r}") from None
    if n < 1e6:  # (TransformerConfig.scaled's bound, which named its n_params)
        raise ValueError(f"--model must count at least 1e6 parameters (1M), got {text!r}")
    return TransformerConfig.scaled(n, name=f"{key} (scaled GPT-3)")


def run_train(args: argparse.Namespace) -> int:
    """Run ``wsesparse train`` with parsed arguments."""
    from wsesparse.wafer.training import estimate_training

    cfg = model_config(args.model)
    try:  # (empty items, as in "1,,2", are refused as `curve --engines` refuses them)
        engines = [int(t) for t in args.engines.split(",")]
    except ValueError:
        raise ValueError(f"--engines must be comma-separated ints, got {args.engines!r}") from None
    machine = PRESETS[args.machine]
    if args.max_engines is not None:
        check_int(args.max_engines, "--max-engines", minimum=1)
        machine = dataclasses.replace(machine, max_engines=args.max_engines)
    # (the options' names in the errors: the estimate would name sparsity and engines)
    check_real(args.sparsity, "--sparsity", minimum=0, maximum=1, inclusive=(True, False))
    for e in engines:
        if not 1 <= e <= machine.max_engines:
            raise ValueError(f"--engines must be between 1 and the machine's {machine.max_engines}"
                             f" (--max-engines) for {machine.name}, got {e}")
    tokens = parse_count(args.tokens, "--tokens")
    batch = None
    if args.batch is not None:
        batch = parse_count(args.batch, "--batch")
        if batch != int(batch):   # (0.5 became 0 and 1.5 became 1)
            raise ValueError(f"--batch must be a whole number of tokens, got {args.batch!r}")
        batch = int(batch)
        if batch < max(engines):   # (the estimate named its batch_tokens and engines)
            raise ValueError(f"--batch ({batch:,}) must give every engine at least one token, "
                             f"got --engines {max(engines)}")
    t0 = time.perf_counter()
    reps = [estimate_training(cfg, tokens=tokens, batch_tokens=batch, engines=e,
                              sparsity=args.sparsity, machine=machine, psum=args.psum,
                              dtype=args.dtype) for e in engines]
    elapsed = time.perf_counter() - t0
    if args.json:
        print(strict_json([r.to_dict() for r in reps]) if len(reps) > 1 else reps[0].to_json())
        return 0
    if len(reps) == 1:
        print(reps[0])
    else:
        # Speedup and efficiency over the fewest engines listed (1 engine: the usual ones).
        base = min(reps, key=lambda r: r.engines)
        print(f"{cfg}\n{machine.name}, sparsity {args.sparsity:g}, {args.psum} partial-sum "
              f"reading, {tokens:,.4g} tokens, batch {base.batch_tokens:,}")
        vs = "" if base.engines == 1 else f" (speedup and efficiency over {base.engines} engines)"
        print(f"{'engines':>8} {'days':>10} {'step s':>9} {'speedup':>8} {'efficiency':>10} "
              f"{'vs dense':>8}  main bound{vs}")
        for r in reps:
            sp = base.seconds / r.seconds
            bounds = r.bound_seconds()
            print(f"{r.engines:>8} {r.days:>10.4g} {r.step_seconds:>9.4g} {sp:>7.3g}x "
                  f"{sp * base.engines / r.engines:>10.3f} {r.speedup_vs_dense:>7.3g}x  "
                  f"{max(bounds, key=bounds.get)}")
    print(f"{'estimator time':<15}  {elapsed:.2f} s")
    return 0


def register_train(sub) -> None:
    """Add the ``train`` subcommand to ``sub``."""
    p = sub.add_parser(
        "train", help="estimate a whole sparse-transformer training run on 1 to 192 engines",
        description="Weight-streamed training of a GPT-style transformer on a cluster of "
                    "wafer-scale engines (MemoryX + SwarmX, data parallel): run time, step "
                    "time, speedup over dense and a per-layer, per-phase breakdown.",
        epilog="examples: wsesparse train --model 175B --sparsity 0.9 --engines 16; "
               "wsesparse train --model 1T --sparsity 0.9 --engines 1,16,64,192")
    p.add_argument("--model", default="175B",
                   help="GPT-3 paper model (125M, 350M, 760M, 1.3B, 2.7B, 6.7B, 13B, 175B) or a "
                        "parameter count for a scaled GPT-3 (1T, 120T, 1e12); default 175B")
    p.add_argument("--tokens", default="300B", help="training tokens (default 300B, GPT-3's)")
    p.add_argument("--batch", help="global batch in tokens (default: the model's)")
    p.add_argument("--engines", default="1", help="engine count, or a comma list for a table (default 1)")
    p.add_argument("--sparsity", type=float, default=0.0,
                   help="unstructured sparsity of the transformer weights (default 0)")
    p.add_argument("--machine", choices=sorted(PRESETS), default="wse2",
                   help="machine description (default wse2)")
    p.add_argument("--max-engines", type=int, help="override the machine's cluster limit")
    p.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                   help="value type (default float16)")
    add_psum_argument(p)
    p.add_argument("--json", action="store_true", help="print the report(s) as JSON")
    p.set_defaults(func=run_train)
