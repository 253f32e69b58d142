"""``wsesparse curve``: sparsity sweep of the wafer estimate, written as CSV (and PNG)."""

from __future__ import annotations

import argparse
import csv
import sys

import numpy as np

from wsesparse._checks import check_int
from wsesparse._progress import Progress, add_progress_argument, progress_enabled
from wsesparse.wafer.balance import BALANCERS
from wsesparse.wafer.cli import add_psum_argument, parse_shape
from wsesparse.wafer.estimate import estimate_gemm, random_weights
from wsesparse.wafer.machine import PRESETS

FIELDS = ("sparsity", "engines", "speedup", "cycles", "dense_cycles", "bound",
          "saturation_density", "tokens_per_core", "imbalance", "psum")


def parse_floats(text: str, name: str = "--sparsities") -> list[float]:
    """Parse a comma-separated list of sparsities in [0, 1).

    Examples
    --------
    >>> parse_floats("0.5,0.9, 0.99")
    [0.5, 0.9, 0.99]
    """
    try:
        vals = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated numbers, got {text!r}") from None
    if not vals or any(not 0 <= v < 1 for v in vals):
        raise ValueError(f"{name} needs values in [0, 1), got {text!r}")
    return vals


def sweep(shape: tuple[int, int], sparsities: list[float], tokens: int, engines: list[int],
          machine: str = "wse2", balance: str = "round_robin", dtype: str = "float16",
          seed: int = 0, progress: bool = False, psum: str = "fabric") -> list[dict]:
    """Wafer estimates of a random ``shape`` layer over ``sparsities`` x ``engines``.

    ``progress=True`` draws a progress bar over the points on stderr. ``psum`` picks the
    partial-sum reading, 'fabric' or 'seed' (``wafer.machine.PSUM_READINGS``).

    Examples
    --------
    >>> rows = sweep((256, 1024), [0.5, 0.9], 4096, [1, 16])
    >>> [(r["sparsity"], r["engines"]) for r in rows]
    [(0.5, 1), (0.5, 16), (0.9, 1), (0.9, 16)]
    >>> rows[2]["speedup"] > rows[0]["speedup"] > 1
    True
    """
    if not isinstance(machine, str) or machine not in PRESETS:   # (a list: "unhashable")
        raise ValueError(f"machine must be one of {sorted(PRESETS)}, got {machine!r}")
    tokens = check_int(tokens, "tokens", minimum=1)
    if not (isinstance(shape, (tuple, list)) and len(shape) == 2):
        raise ValueError(f"shape must be a pair (rows, columns), got {shape!r}")
    # (random_weights named them n_out / n_in; an int engines had "no len()")
    shape = (check_int(shape[0], "shape[0]", minimum=1), check_int(shape[1], "shape[1]",
                                                                   minimum=1))
    if isinstance(engines, (str, bytes)) or np.ndim(engines) != 1:
        raise TypeError(f"engines must be a list of engine counts, got {engines!r}")
    if isinstance(sparsities, (str, bytes)) or not hasattr(sparsities, "__len__"):
        raise TypeError(f"sparsities must be a list of numbers, got {sparsities!r}")
    out = []
    with Progress(len(sparsities) * len(engines), progress, label="curve", unit="points") as bar:
        for s in sparsities:
            W = random_weights(shape[0], shape[1], s, seed=seed)
            for e in engines:
                try:
                    r = estimate_gemm(W, tokens, machine=PRESETS[machine], balance=balance,
                                      engines=e, dtype=dtype, psum=psum)
                except ValueError as exc:   # (its argument is sweep's tokens)
                    if not str(exc).startswith("n_tokens="):
                        raise
                    raise ValueError("tokens" + str(exc)[len("n_tokens"):]) from None
                out.append({"sparsity": s, "engines": e, "speedup": r.speedup,
                            "cycles": r.cycles, "dense_cycles": r.dense_cycles, "bound": r.bound,
                            "saturation_density": r.saturation_density,
                            "tokens_per_core": r.tokens_per_core, "imbalance": r.imbalance,
                            "psum": r.psum})
                bar.step()
    return out


def plot(rows: list[dict], path: str, title: str) -> None:
    """Write speedup vs sparsity factor (one line per engine count) as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for e in sorted({r["engines"] for r in rows}):
        # (in sparsity order, whatever order they were given in: the line zig-zagged and
        # the diamond marked the first point given rather than the sparsest-first ring)
        pts = sorted((r for r in rows if r["engines"] == e), key=lambda r: r["sparsity"])
        ax.plot([1 / (1 - r["sparsity"]) for r in pts], [r["speedup"] for r in pts], "o-",
                label=f"{e} engine{'s' * (e > 1)}")
        ring = [r for r in pts if r["bound"] == "partial-sum ring"]
        if ring:
            ax.plot(1 / (1 - ring[0]["sparsity"]), ring[0]["speedup"], "kD", ms=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sparsity factor 1 / density")
    ax.set_ylabel("speedup over dense")
    ax.set_title(title + "\n(diamond: partial-sum ring becomes the bound)", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Run ``wsesparse curve`` with parsed arguments."""
    shape = parse_shape(args.shape)
    sparsities = parse_floats(args.sparsities)
    try:
        engines = [int(t) for t in args.engines.split(",")]
    except ValueError:
        raise ValueError(f"--engines must be comma-separated ints, got {args.engines!r}") from None
    for e in engines:
        check_int(e, "--engines", minimum=1)
    check_int(args.tokens, "--tokens", minimum=1)
    check_int(args.seed, "--seed", minimum=0, maximum=2**63 - 1)  # (random_weights' int64)
    rows = sweep(shape, sparsities, args.tokens, engines, args.machine, args.balance,
                 args.dtype, args.seed,
                 progress=progress_enabled(False if args.quiet else args.progress),
                 psum=args.psum)
    if args.csv == "-":
        w = csv.DictWriter(sys.stdout, FIELDS)
        w.writeheader()
        w.writerows(rows)
    else:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(rows)
    if args.plot:
        plot(rows, args.plot, f"{args.machine.upper()} model, W {shape[0]}x{shape[1]}, "
                              f"{args.tokens:,} tokens, {args.psum} partial-sum reading")
    return 0


def register(sub) -> None:
    """Add the ``curve`` subcommand to ``sub`` (an argparse subparsers object)."""
    p = sub.add_parser(
        "curve", help="sparsity sweep of the wafer estimate (CSV + PNG)",
        description="Speedup over dense of a random sparse layer on the simulated wafer, "
                    "for several sparsities and engine counts.",
        epilog="example: wsesparse curve --shape 12288x49152 --tokens 3200000 "
               "--sparsities 0.5,0.9,0.99 --engines 1,16 --csv curve.csv --plot curve.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--machine", choices=sorted(PRESETS), default="wse2",
                   help="machine description (default wse2)")
    p.add_argument("--shape", default="4096x16384", help="MxK of W (default 4096x16384)")
    p.add_argument("--sparsities", default="0.5,0.75,0.9,0.95,0.98,0.99,0.999",
                   help="comma-separated sparsities in [0, 1) (default "
                        "0.5,0.75,0.9,0.95,0.98,0.99,0.999)")
    p.add_argument("--tokens", type=int, default=2_000_000,
                   help="batch over all engines (default 2000000)")
    p.add_argument("--engines", default="1,16",
                   help="comma-separated engine counts (default 1,16)")
    p.add_argument("--balance", choices=BALANCERS, default="round_robin",
                   help="rows to cores (default round_robin)")
    p.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                   help="value type (default float16)")
    add_psum_argument(p)
    p.add_argument("--seed", type=int, default=0, help="of the random weights (default 0)")
    p.add_argument("--csv", default="-", help="CSV output file (default: stdout)")
    p.add_argument("--plot", metavar="FILE", help="write speedup vs sparsity as a PNG")
    add_progress_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar (= --no-progress)")
    p.set_defaults(func=run)
