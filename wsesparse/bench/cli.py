"""The ``wsesparse bench`` command (and ``benchmarks/peers.py``): options, the run over the
grid, and the registration of the subcommand."""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import sys
import time

from wsesparse._checks import check_int, check_real
from wsesparse._progress import Progress, add_progress_argument, progress_enabled
from wsesparse._threads import MAX_THREADS
from wsesparse.bench.bandwidth import (triad_bandwidth, triad_bandwidth_kernel,
                                       triad_bandwidth_torch)
from wsesparse.bench.peers import PEER_ORDER, load_peers, restore_peer_threads
from wsesparse.bench.points import TOLERANCE, run_point
from wsesparse.bench.tables import format_row, header, summary


def print_load_average() -> None:
    """Print the load average (where the OS has one): timings under load are noisy; and the
    vector instructions the kernels were built for (a portable build times otherwise)."""
    if hasattr(os, "getloadavg"):
        print("  load average %.2f %.2f %.2f on %d cores (other work on the machine makes "
              "timings noisy)" % (*os.getloadavg(), os.cpu_count() or 0))
    import numpy
    import scipy

    from wsesparse._kernels import _spmm
    build = kernel_build()
    if "avx512" in build and not _spmm.SPMV_GATHER:   # (AMD Zen: docs/tuning.md)
        mins, xb = _spmm.SPMV_GATHER_ROW_MIN, _spmm.SPMV_GATHER_LONG_X_BYTES
        near, anywhere = _spmm.SPMV_GATHER_NEAR_ROW_MIN, _spmm.SPMV_GATHER_NEAR_ANY_MATRIX
        rules = [f"{mins[t]}+ nonzeros in {t}" + (
            f" with x over {xb[t] // 1024} KiB ({near[t]}+ with less"
            f"{'' if anywhere[t] else ' in a matrix within half of L3'})" if xb[t] else "")
                 for t in ("float32", "float64")]
        build += (f" (SpMV gathers only rows of {', '.join(rules)})"
                  if _spmm.SPMV_GATHER_LONG else " (SpMV without gathers)")
    elif "avx512" in build and _spmm.SPMV_RUN_SCALAR:   # (Intel: docs/tuning.md)
        build += " (SpMV gathers, but not for rows in runs of one length)"
    print(f"  kernels built for {build}; numpy {numpy.__version__}, scipy {scipy.__version__}")


def kernel_build() -> str:
    """The vector instructions of the sparse and TLR kernels' builds (``KERNEL_ISA``), one
    name where they agree.

    Examples
    --------
    >>> kernel_build() in ("avx512f", "avx2+fma", "avx", "x86-64 baseline (sse2)", "baseline")
    True
    """
    from wsesparse._kernels import _spmm, _tlrmvm
    isa = {"sparse": _spmm.KERNEL_ISA, "TLR": _tlrmvm.KERNEL_ISA}
    if len(set(isa.values())) == 1:
        return isa["sparse"]
    return ", ".join(f"{k} {v}" for k, v in isa.items())


def _floats(s):
    return [float(x) for x in s.split(",") if x]


def _ints(s):
    return [int(x) for x in s.split(",") if x]


def _grid(s):
    """``"49x51"`` -> (49, 51); ``"none"`` -> None."""
    if s.strip().lower() == "none":
        return None
    try:
        nx, ny = (int(v) for v in s.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NXxNY (as 49x51) or none, got {s!r}")
    return nx, ny


DESCRIPTION = ("Time wsesparse.sparse_matmul against scipy, sparse_dot_mkl, python-graphblas, "
               "torch.sparse and dense numpy BLAS (missing peers are reported and left out).")


# The product grid without --quick, and with it (an option given replaces either).
GRID_DEFAULTS = dict(sizes=[4096, 16384], tokens=[1, 8, 64, 256, 1024],
                     densities=[0.5, 0.1, 0.01, 0.001], dtypes=["float32", "float64"], repeats=5)
QUICK_GRID = dict(sizes=[4096], tokens=[1, 64], densities=[0.1, 0.01],
                  dtypes=["float32", "float64"], repeats=3)


def _csv(values) -> str:
    return ",".join(map(str, values))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the options of ``wsesparse bench`` (and of ``benchmarks/peers.py``) to ``p``.

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    p.add_argument("--quick", action="store_true",
                   help="tiny grid (M=K=4096, N in 1,64, density in 0.1,0.01, float32 and "
                        "float64, 3 repeats), under 30 s; --sizes, --tokens, --densities, "
                        "--dtypes and --repeats given with it replace its values")
    p.add_argument("--sizes", type=_ints, default=None,
                   help=f"M = K values (default {_csv(GRID_DEFAULTS['sizes'])})")
    p.add_argument("--tokens", type=_ints, default=None,
                   help=f"N values (default {_csv(GRID_DEFAULTS['tokens'])})")
    p.add_argument("--densities", type=_floats, default=None,
                   help=f"(default {_csv(GRID_DEFAULTS['densities'])})")
    p.add_argument("--dtypes", type=lambda s: s.split(","), default=None,
                   help=f"(default {_csv(GRID_DEFAULTS['dtypes'])})")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed calls after the warm-up (fewer for slow points, more for fast ones; "
                        "default 5, --quick 3)")
    p.add_argument("--budget", type=float, default=0.6,
                   help="seconds of timed calls per library and point (adaptive repeats; "
                        "default 0.6)")
    p.add_argument("--rounds", type=int, default=None,
                   help="split the budget into this many rounds over all libraries in turn "
                        "(best time over the rounds), so that noise from other work on the "
                        "machine does not hit one library alone (default 3; --tlr: 20)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for every library (default: all cores)")
    p.add_argument("--max-call", type=float, default=10.0,
                   help="skip a peer where one call is predicted to take longer than this "
                        "many seconds (shown as 'slow'; default 10)")
    p.add_argument("--left", action="store_true",
                   help="time dense @ sparse (X @ A, X of N x K, as activations times "
                        "weights) instead of A @ X")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random matrices (default 0)")
    p.add_argument("--no-triad", action="store_true", help="skip the bandwidth measurement")
    p.add_argument("--csv", metavar="FILE", help="also write every point of the product grid "
                                                  "as CSV")
    p.add_argument("--workflows", action="store_true",
                   help="time solver workflows instead of the product grid: cg, minres, "
                        "eigsh, lsqr (and scikit-learn LogisticRegression where installed), "
                        "plain scipy against wsesparse (see wsesparse/bench/workflows.py)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="--workflows: problem sizes times this (1.0: Poisson 1000x1000, "
                        "a 200,000-node graph)")
    p.add_argument("--iterations", type=int, default=300,
                   help="--workflows: solver iterations (cg, minres, lsqr; default 300)")
    p.add_argument("--tlr", action="store_true",
                   help="time TLR-MVM instead of the product grid: forward and adjoint for "
                        "1, 4, 16, 64 right-hand sides next to the triad and a dense GEMM, and "
                        "a cache-resident operator against numpy (see "
                        "wsesparse/bench/tlr_numpy.py)")
    p.add_argument("--nx", type=int, default=99,
                   help="--tlr: side of the seismic slice's grid (99: 9801 x 9801)")
    p.add_argument("--nb", type=int, default=256, help="--tlr: tile size (default 256)")
    p.add_argument("--tol", type=float, default=1e-3, help="--tlr: compression accuracy (default 1e-3)")
    p.add_argument("--cache-grid", type=_grid, default=(49, 51), metavar="NXxNY",
                   help="--tlr: grid of the cache-resident operator timed against numpy "
                        "(49x51: 2499 x 2499; 'none' skips it)")
    p.add_argument("--gpu", action="store_true",
                   help="time the GPU kernels (cupy) against cuSPARSE and cuBLAS, and TLR-MVM "
                        "on the device (see wsesparse/bench/gpu.py)")
    p.add_argument("--gpu-size", type=int, default=16384, help="--gpu: M = K (default 16384)")
    p.add_argument("--gpu-densities", type=_floats, default=[0.001, 0.01, 0.05, 0.1, 0.3],
                   help="--gpu: densities of the sparse grid (default 0.001,0.01,0.05,0.1,0.3)")
    p.add_argument("--gpu-skip-grid", action="store_true", help="--gpu: only the TLR table")
    p.add_argument("--gpu-skip-tlr", action="store_true", help="--gpu: only the sparse grid")
    p.add_argument("--json", metavar="FILE", help="--gpu: also write the results as JSON")
    add_progress_argument(p)


def finish_args(args: argparse.Namespace) -> argparse.Namespace:
    """Apply --quick, resolve the thread count, add the per-run timing history.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options; changed in place.

    Returns
    -------
    argparse.Namespace
        ``args``.

    Raises
    ------
    ValueError
        For a ``--dtypes`` entry without a kernel, ``--rounds`` below 1, a ``--sizes`` or
        ``--tokens`` entry below 1, a ``--densities`` entry outside (0, 1], ``--repeats``
        below 1, a non-positive ``--budget`` or ``--max-call``, ``--tlr`` with
        ``--workflows``, an empty ``--sizes``/``--tokens``/``--densities``/``--dtypes``, a
        ``--threads`` outside [1, ``MAX_THREADS``], a negative ``--seed``, (with
        ``--workflows``) a non-positive ``--scale`` or ``--iterations``, (with ``--gpu``) a
        non-positive ``--gpu-size`` or a ``--gpu-densities`` entry outside (0, 1], or (with
        ``--tlr`` or ``--gpu``) a non-positive ``--nx``, ``--nb`` or ``--cache-grid`` or
        ``--tol`` outside (0, 1); two of ``--workflows``, ``--tlr`` and ``--gpu``;
        ``--csv`` with one of them or ``--json`` without ``--gpu``; a ``--csv`` or
        ``--json`` path that cannot be written; complex ``--dtypes`` with ``--gpu``.
    """
    # (--quick used to override a --sizes or --dtypes given with it, silently)
    for name, value in (QUICK_GRID if args.quick else GRID_DEFAULTS).items():
        if getattr(args, name, None) is None:
            setattr(args, name, list(value) if isinstance(value, list) else value)
    _check_sections(args)
    if args.dtypes and any(d not in TOLERANCE for d in args.dtypes):
        raise ValueError(f"--dtypes must be among {', '.join(TOLERANCE)}, got "
                         f"{','.join(args.dtypes)}")
    if getattr(args, "rounds", None) is None:
        args.rounds = 20 if getattr(args, "tlr", False) else 3
    check_int(args.rounds, "--rounds", minimum=1)
    # The product grid's options (also --gpu's): checked before any table is printed.
    for n in args.sizes:
        check_int(n, "--sizes", minimum=1)
    for n in args.tokens:
        check_int(n, "--tokens", minimum=1)
    for d in args.densities:
        check_real(d, "--densities", minimum=0, maximum=1, inclusive=(False, True))
    check_int(args.repeats, "--repeats", minimum=1)
    check_real(args.budget, "--budget", minimum=0, inclusive=(False, True))
    check_real(args.max_call, "--max-call", minimum=0, inclusive=(False, True))
    for name in ("sizes", "tokens", "densities", "dtypes"):
        if not [v for v in getattr(args, name) if v != ""]:
            # (an empty table and exit 0; a --csv of a bare line ending)
            raise ValueError(f"--{name} needs at least one value")
    if args.threads is not None:
        check_int(args.threads, "--threads", minimum=1)
        if args.threads > MAX_THREADS:
            raise ValueError(f"--threads must be at most {MAX_THREADS} (4 per core, at least "
                             f"64), got {args.threads}")
    check_int(args.seed, "--seed", minimum=0, maximum=2**63 - 1)
    if getattr(args, "workflows", False):
        check_real(args.scale, "--scale", minimum=0, inclusive=(False, True))
        check_int(args.iterations, "--iterations", minimum=1)
    if getattr(args, "gpu", False):
        check_int(args.gpu_size, "--gpu-size", minimum=1)
        for d in args.gpu_densities:
            check_real(d, "--gpu-densities", minimum=0, maximum=1, inclusive=(False, True))
    if getattr(args, "tlr", False) or getattr(args, "gpu", False):  # (--gpu: its TLR table)
        check_int(args.nx, "--nx", minimum=1)
        check_int(args.nb, "--nb", minimum=1)
        check_real(args.tol, "--tol", minimum=0, maximum=1, inclusive=(False, False))
        for g in args.cache_grid or ():
            check_int(g, "--cache-grid", minimum=1)
    args.history = {}
    args.threads_given = args.threads is not None
    if args.threads is None:
        try:
            args.threads = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            args.threads = os.cpu_count() or 1
    return args


def _check_sections(args: argparse.Namespace) -> None:
    """One section per run, and no option another section would ignore (each was accepted
    and did nothing: a review)."""
    given = [f"--{name}" for name in ("workflows", "tlr", "gpu") if getattr(args, name, False)]
    if len(given) > 1:
        raise ValueError(f"{' and '.join(given)} are separate sections: give one of them")
    if getattr(args, "csv", None):
        if given:
            raise ValueError(f"--csv writes the product grid's points; {given[0]} has no CSV"
                             + (" (--json FILE writes its results)" if given == ["--gpu"]
                                else ""))
        _check_writable(args.csv, "--csv")
    if getattr(args, "json", None):
        if given != ["--gpu"]:
            raise ValueError("--json is written by --gpu only; the product grid writes --csv")
        _check_writable(args.json, "--json")
    if given == ["--gpu"] and any(str(d).startswith("complex") for d in args.dtypes):
        # (its check compared the real parts only, then its tolerance table had no entry)
        raise ValueError(f"--gpu times float32 and float64, got --dtypes {_csv(args.dtypes)}")


def _check_writable(path: str, option: str) -> None:
    """Before any table: a bad path was reported after the whole grid had run."""
    p = os.path.abspath(path)
    parent = os.path.dirname(p)
    if os.path.isdir(p):
        raise ValueError(f"{option} {path} is a directory")
    if not os.path.isdir(parent):
        raise ValueError(f"{option} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(p) and not os.access(p, os.W_OK)):
        raise ValueError(f"{option} {path} is not writable")


def parse_args(argv=None, prog: str | None = None, epilog: str | None = None):
    """Parse the options as a standalone script (``benchmarks/peers.py``).

    Parameters
    ----------
    argv : list of str, optional
        Default: ``sys.argv[1:]``.
    prog, epilog : str, optional
        For the help text.

    Returns
    -------
    argparse.Namespace
        Finished (:func:`finish_args`).

    Examples
    --------
    >>> args = parse_args(["--quick", "--threads", "2"])
    >>> args.sizes, args.tokens, args.threads
    ([4096], [1, 64], 2)
    """
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=epilog)
    add_arguments(p)
    return finish_args(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the comparison with parsed (and finished) arguments; prints the table.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options (finished here if they are not).

    Returns
    -------
    int
        The exit code, 0.
    """
    if not hasattr(args, "history"):
        finish_args(args)
    if getattr(args, "workflows", False):
        return _run_workflows(args)
    if getattr(args, "tlr", False):
        return _run_tlr(args)
    if getattr(args, "gpu", False):
        from wsesparse.bench.gpu import run_gpu
        return run_gpu(args)
    mods, missing = load_peers(args.threads)
    try:
        return _run_grid(args, mods, missing)
    finally:
        restore_peer_threads()


def _run_grid(args: argparse.Namespace, mods: dict, missing: dict) -> int:
    """The product grid of :func:`run`, with the peers loaded."""
    import numpy as np
    import wsesparse as wse
    start = time.time()
    print(f"wsesparse {wse.__version__}  numpy {np.__version__}  threads {args.threads}  "
          f"started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print_load_average()
    for name, mod in mods.items():
        print(f"  peer {name}: {getattr(mod, '__version__', '?')}")
    for name, why in missing.items():
        print(f"  peer {name}: not installed ({why})")
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS"):
        if var in os.environ:
            print(f"  note: {var}={os.environ[var]} is set")
    triad = None
    if not args.no_triad:
        triad = triad_bandwidth(args.threads)
        msg = f"numpy in L2-sized chunks {triad:.1f} GB/s"
        t_kernel = triad_bandwidth_kernel(args.threads)
        if t_kernel is not None:
            msg += f", OpenMP loop {t_kernel:.1f} GB/s"
            triad = max(triad, t_kernel)
        if "torch" in mods:
            t_torch = triad_bandwidth_torch(mods["torch"])
            msg += f", torch.add {t_torch:.1f} GB/s"
            triad = max(triad, t_torch)
        print(f"STREAM-like triad a = b + s*c (float64, 160 MB arrays, {args.threads} threads): "
              f"{msg}; best {triad:.1f} GB/s")
    if getattr(args, "left", False):
        print("Products: dense @ sparse, X (N x K) @ A (K x M) (--left)")
    print("Rates in GFLOP/s = 2*nnz*N/t (best of repeats); ratio = wsesparse / best peer; "
          "r_CSR = prepared wsesparse.CSR / best peer; vs_scipy = wsesparse / scipy.")
    present = [p for p in PEER_ORDER if p in ("wsesparse", "wse.CSR", "scipy", "dense")
               or p in mods]
    print(header(present), flush=True)
    rows = []
    points = [(d, M, dens, N) for d in args.dtypes for M in args.sizes
              for dens in args.densities for N in args.tokens]
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=args.threads, user_api="blas"), \
            Progress(len(points), progress_enabled(getattr(args, "progress", None)),
                     label="bench", unit="points") as bar:  # dense BLAS gets the same threads
        for dtype_name, M, density, N in points:
            row = run_point(M, N, density, dtype_name, mods, args)
            rows.append(row)
            bar.write(format_row(row, present))
            bar.step()
    print(summary(rows, triad))
    print(f"total {time.time() - start:.0f} s")
    if args.csv:
        keys = []
        for r in rows:
            keys += [k for k in r if k not in keys]
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {args.csv}")
    return 0


def _run_workflows(args: argparse.Namespace) -> int:
    from wsesparse.bench.workflows import (cg_product_in_loop, format_loop_products,
                                           format_results, run_workflows)
    from threadpoolctl import threadpool_limits

    from wsesparse import _blas_share
    given = getattr(args, "threads_given", True)
    print(f"Workflows, best of {args.rounds} alternating rounds, scale {args.scale}, at most "
          f"{args.iterations} iterations"
          + (f", {args.threads} threads for every library:" if given else ":"))
    print_load_average()
    print("accelerated: the unmodified call inside wsesparse.accelerated(); reuse: the same "
          "inside accelerated(reuse=True); CSR: a prepared "
          "wsesparse.CSR in accelerated(); linalg: wsesparse.linalg's solver of the same name "
          "(cg, minres: their vector work on the kernels' threads too; eigsh: ARPACK's, beside "
          "a prepared product); 1-BLAS: plain scipy with BLAS on one "
          "thread (nothing routed); speedups over plain scipy")
    # (--threads: BLAS and the kernels' OpenMP runtime alike)
    with threadpool_limits(limits=args.threads) if given else contextlib.nullcontext():
        print(format_results(run_workflows(args.scale, args.rounds, args.iterations)))
        loop = cg_product_in_loop(args.scale, args.iterations, args.rounds)
        libs, _ = _blas_share.candidates()  # (under the same limits as the blocks)
    print(f"cg's product, medians of its calls in {args.rounds} cg runs and as many calls "
          "alone, inside accelerated() ("
          + ("OpenBLAS's parallel calls on wsesparse's threads" if libs
             else "BLAS on one thread") + "):")
    print(format_loop_products(loop))
    return 0


def _run_tlr(args: argparse.Namespace) -> int:
    from wsesparse.bench.tlr import run_tlr
    print_load_average()
    run_tlr(nx=args.nx, nb=args.nb, tol=args.tol, rounds=args.rounds, n_threads=args.threads,
            triad_elems=None if args.no_triad else 20_000_000, cache_grid=args.cache_grid,
            out=lambda s: print(s, flush=True))
    return 0


def main(argv=None, prog: str | None = None, epilog: str | None = None) -> int:
    """Standalone entry point (what ``benchmarks/peers.py`` runs).

    Parameters
    ----------
    argv : list of str, optional
        Default: ``sys.argv[1:]``.
    prog, epilog : str, optional
        For the help text.

    Returns
    -------
    int
        The exit code: 2 with one line on stderr for a bad option value, as
        ``wsesparse bench`` (it was a traceback and 1).
    """
    try:
        args = parse_args(argv, prog=prog, epilog=epilog)
    except (ValueError, TypeError) as exc:
        print(f"{prog or os.path.basename(sys.argv[0])}: error: {exc}", file=sys.stderr)
        return 2
    return run(args)


def register(sub) -> None:
    """Add the ``bench`` subcommand to ``sub`` (an argparse subparsers object).

    Parameters
    ----------
    sub : argparse subparsers action
        What ``ArgumentParser.add_subparsers`` returned.
    """
    p = sub.add_parser(
        "bench", help="CPU peer comparison: sparse_matmul vs scipy, MKL, GraphBLAS, torch, BLAS",
        description=DESCRIPTION + " Rates are GFLOP/s = 2*nnz*N/t; every result is checked "
                    "against scipy's.",
        epilog="examples:\n"
               "  wsesparse bench --quick                      # under 30 s\n"
               "  wsesparse bench --sizes 4096 --tokens 1,64 --densities 0.01 --csv peers.csv\n"
               "  wsesparse bench --workflows --scale 0.5      # cg, minres, eigsh, lsqr loops\n"
               "  wsesparse bench --tlr --nx 40                # TLR-MVM rates, a quick size\n"
               "  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE wsesparse bench   # full grid, ~1 h",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run)
