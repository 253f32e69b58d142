"""The README's main job: ``wsesparse demo``.

First a wafer simulation (``wsesparse.wafer``): the cycle estimate of a GPT-3
FFN layer at 90 % sparsity on the full WSE-2 grid, and a small ``execute_gemm``
run checked against ``W @ X`` and against the estimate. Then the CPU part:
prunes a dense weight matrix by magnitude, multiplies it by a batch of
activations with ``sparse_matmul``, scipy and dense BLAS, checks the results
agree and prints the times and speedups.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from wsesparse._checks import check_int, check_real
from wsesparse._timing import best_time
from wsesparse.matmul import sparse_matmul


def _gaussian(rng, shape, dtype) -> np.ndarray:
    """Standard normal values; complex ones with a normal imaginary part too (real parts
    only made the complex demo's accuracy check blind to the cross terms)."""
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def pruned_weights(n_out: int, n_in: int, sparsity: float, dtype=np.float32,
                   seed: int = 0) -> sp.csr_array:
    """A Gaussian weight matrix with its smallest ``sparsity`` fraction set to zero.

    Examples
    --------
    >>> W = pruned_weights(100, 80, 0.9)
    >>> W.shape, round(W.nnz / (100 * 80), 2)
    ((100, 80), 0.1)
    """
    n_out = check_int(n_out, "n_out", minimum=1)
    n_in = check_int(n_in, "n_in", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    sparsity = check_real(sparsity, "sparsity", minimum=0, maximum=1, inclusive=(True, False))
    rng = np.random.default_rng(seed)
    dense = _gaussian(rng, (n_out, n_in), dtype)
    keep = max(1, int(round((1.0 - sparsity) * dense.size)))
    cut = np.partition(np.abs(dense).ravel(), dense.size - keep)[dense.size - keep]
    dense[np.abs(dense) < cut] = 0
    return sp.csr_array(dense)


def cpu_comparison(n_out=4096, n_in=4096, tokens=64, sparsities=(0.9, 0.99),
                   dtype=np.float32, repeats=5) -> list[dict]:
    """Time ``sparse_matmul`` against scipy and dense BLAS on pruned weights.

    Returns one dict per sparsity with the times (seconds, best of
    ``repeats`` after a warm-up call), GFLOP/s of the sparse kernel and the speedups.

    Examples
    --------
    >>> rows = cpu_comparison(256, 256, tokens=8, sparsities=(0.9,), repeats=1)
    >>> rows[0]["max_rel_err"] < 1e-4
    True
    """
    n_out = check_int(n_out, "n_out", minimum=1)
    n_in = check_int(n_in, "n_in", minimum=1)
    tokens = check_int(tokens, "tokens", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    rng = np.random.default_rng(1)
    X = _gaussian(rng, (n_in, tokens), dtype)
    rows = []
    for s in sparsities:
        W = pruned_weights(n_out, n_in, s, dtype)
        dense = W.toarray()
        ours, t_ours = best_time(lambda: sparse_matmul(W, X, method="sparse"), repeats)
        ref, t_scipy = best_time(lambda: W @ X, repeats)
        _, t_dense = best_time(lambda: dense @ X, repeats)
        err = float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))
        rows.append(dict(sparsity=s, nnz=W.nnz, t_wsesparse=t_ours, t_scipy=t_scipy,
                         t_dense=t_dense, gflops=2 * W.nnz * tokens / t_ours / 1e9,
                         vs_scipy=t_scipy / t_ours, vs_dense=t_dense / t_ours,
                         max_rel_err=err))
    return rows


def _print_cpu_table(rows, n_out, n_in, tokens, dtype) -> None:
    print(f"CPU: Y = W @ X, W {n_out}x{n_in} magnitude-pruned, X {n_in}x{tokens}, "
          f"{np.dtype(dtype).name} (best of repeats)")
    print(f"{'sparsity':>8} {'nnz':>10} {'wsesparse':>11} {'scipy':>11} {'dense BLAS':>11} "
          f"{'GFLOP/s':>8} {'vs scipy':>9} {'vs dense':>9} {'rel err':>9}")
    for r in rows:
        print(f"{r['sparsity']:>8.3f} {r['nnz']:>10d} {r['t_wsesparse'] * 1e3:>9.3f}ms "
              f"{r['t_scipy'] * 1e3:>9.3f}ms {r['t_dense'] * 1e3:>9.3f}ms {r['gflops']:>8.1f} "
              f"{r['vs_scipy']:>8.1f}x {r['vs_dense']:>8.1f}x {r['max_rel_err']:>9.1e}")


def wafer_demo(shape=(12288, 49152), sparsity=0.9, tokens=3_200_000) -> None:
    """Print a GPT-3 layer estimate on the full WSE-2 and a tiny checked execution."""
    import dataclasses

    from wsesparse import wafer

    m, k = shape
    print(f"Wafer model: GPT-3 FFN layer W {m}x{k} at {sparsity:.0%} sparsity, "
          f"{tokens:,} tokens, full WSE-2 grid (750 x 994 cores)")
    W = wafer.random_weights(m, k, sparsity, seed=0)
    t0 = time.perf_counter()
    rep = wafer.estimate_gemm(W, tokens, machine=wafer.WSE2)
    print(rep)
    print(f"{'estimator time':<15}  {time.perf_counter() - t0:.2f} s (event-level, compiled)\n")
    small = dataclasses.replace(wafer.WSE2, name="WSE-2 corner 8x4", rows=8, cols=4)
    Ws = pruned_weights(96, 64, 0.9, dtype=np.float32, seed=2)
    Xs = np.random.default_rng(3).standard_normal((64, 48)).astype(np.float32)
    Y, ex = wafer.execute_gemm(Ws, Xs, machine=small, dtype="float32")
    est = wafer.estimate_gemm(Ws, 48, machine=small, dtype="float32")
    err = float(np.abs(Y - Ws @ Xs).max() / np.abs(Ws @ Xs).max())
    print(f"execute_gemm on an 8x4 grid, W 96x64 ({Ws.nnz} nonzeros), 48 tokens: "
          f"max rel err vs W @ X {err:.1e}; cycles executed {ex.cycles:,} = estimated "
          f"{est.cycles:,}: {'OK' if ex.cycles == est.cycles else 'MISMATCH'}\n")


def run(args: argparse.Namespace) -> int:
    """Run the demo with parsed command-line arguments."""
    # Checked before the (slow) wafer part, each naming its option.
    for opt in ("rows", "cols", "tokens", "repeats"):
        check_int(getattr(args, opt), f"--{opt}", minimum=1)
    for s in args.sparsity:
        check_real(s, "--sparsity", minimum=0, maximum=1, inclusive=(True, False))
    if not args.no_wafer:
        wafer_demo()
    sparsities = tuple(args.sparsity)
    rows = cpu_comparison(args.rows, args.cols, args.tokens, sparsities,
                          np.dtype(args.dtype), args.repeats)
    _print_cpu_table(rows, args.rows, args.cols, args.tokens, args.dtype)
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "demo", help="wafer simulation + CPU kernel comparison on pruned weights (the README's main job)",
        description="Time sparse_matmul against scipy and dense BLAS on magnitude-pruned weights, "
                    "then simulate the same product on the wafer model (--no-wafer skips it).",
        epilog="example: wsesparse demo --rows 2048 --cols 2048 --tokens 128 --sparsity 0.9 0.99")
    p.add_argument("--rows", type=int, default=4096, help="output features (default 4096)")
    p.add_argument("--cols", type=int, default=4096, help="input features (default 4096)")
    p.add_argument("--tokens", type=int, default=64, help="activation columns (default 64)")
    p.add_argument("--sparsity", type=float, nargs="+", default=[0.9, 0.99],
                   help="fractions of weights pruned (default 0.9 0.99)")
    p.add_argument("--dtype", default="float32",
                   choices=["float32", "float64", "complex64", "complex128"],
                   help="weight and activation dtype (default float32)")
    p.add_argument("--repeats", type=int, default=5, help="timing repeats, best kept (default 5)")
    p.add_argument("--no-wafer", action="store_true", help="skip the wafer simulation part")
    p.set_defaults(func=run)
