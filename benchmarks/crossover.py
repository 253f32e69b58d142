#!/usr/bin/env python
"""Density crossover between the sparse AXPY kernel and dense BLAS.

For each dtype and number of tokens N, times on M = K = 4096 (default)

* ``sparse``   - ``sparse_matmul(A, X, method="sparse")`` (the AXPY-per-nonzero kernel)
* ``dense+cvt`` - ``sparse_matmul(A, X, method="dense")``: densify A, then BLAS, which is what
  ``method="auto"`` would run instead
* ``dense``    - ``A_dense @ X`` with the dense matrix built outside the timing (the cost a
  caller pays who keeps a dense copy)

over a ladder of densities, and reports the density above which each dense variant is faster
than the sparse kernel (log-interpolated between ladder points; ``>1`` when dense never wins).
It ends with a recommendation for ``DENSE_DENSITY`` (per dtype, in the table of this build's
tile width) and ``DENSE_MIN_TOKENS`` in ``wsesparse/_thresholds.py``: dense is chosen when
N >= DENSE_MIN_TOKENS and density >= DENSE_DENSITY[width][dtype], so the recommendation is the smallest N from which dense+cvt wins at some
density <= 1, and for each dtype the largest crossover over the N >= DENSE_MIN_TOKENS measured
(dense only where it wins for all of them).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/crossover.py
    python benchmarks/crossover.py --size 2048 --tokens 1,64 --dtypes float32   # quicker

Import-safe (asv imports every module of ``benchmarks/``): all work happens in ``main()``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

DEFAULT_DENSITIES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def _helpers():
    """random_csr, random_dense, best_time and the wsesparse module, from peers.py."""
    try:
        from benchmarks import peers  # run as a module from the repository root
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import peers
    return peers, peers._import_wsesparse()


def crossing(densities, t_sparse, t_dense):
    """Density above which dense is faster, log-interpolated; inf if it never is.

    The crossing is the first ladder point at which dense wins and keeps winning at most of
    the higher densities (at least two thirds of them), so that one noisy timing on a shared
    machine does not move it; the density is interpolated in log(t_dense / t_sparse) between
    that point and the one below it.
    """
    wins = [td < ts for ts, td in zip(t_sparse, t_dense)]
    i = next((j for j in range(len(wins))
              if wins[j] and 3 * sum(wins[j:]) >= 2 * len(wins[j:])), None)
    if i is None:
        return math.inf
    if i == 0:
        return densities[0]
    d0, d1 = densities[i - 1], densities[i]
    r0 = math.log(t_dense[i - 1] / t_sparse[i - 1])
    r1 = math.log(t_dense[i] / t_sparse[i])
    f = r0 / (r0 - r1) if r0 > 0 > r1 else 1.0
    return math.exp(math.log(d0) + f * (math.log(d1) - math.log(d0)))


def interleaved_best(fns, repeats, budget, max_rounds=50):
    """Best time of each callable, timed round-robin so load bursts hit all of them alike.

    One warm-up call each; then rounds until ``budget`` seconds are spent (at least two, at
    least ``repeats`` while under the budget, at most ``max_rounds``).
    """
    for fn in fns:
        fn()
    best = [math.inf] * len(fns)
    spent = 0.0
    for r in range(max_rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            t = time.perf_counter() - t0
            spent += t
            best[i] = min(best[i], t)
        if r >= 1 and spent > budget:
            break
    return best


def measure(size, n_tokens, dtype_name, densities, args, peers, wse):
    import numpy as np
    rows = []
    dense_streak = 0
    for density in densities:
        A = peers.random_csr(size, size, density, np.dtype(dtype_name), seed=args.seed)
        X = peers.random_dense(size, n_tokens, np.dtype(dtype_name), seed=args.seed + 1)
        if n_tokens == 1:
            X = X[:, 0].copy()
        Ad = A.toarray()
        ts, tc, td = interleaved_best([
            lambda: wse.sparse_matmul(A, X, method="sparse", n_threads=args.threads),
            lambda: wse.sparse_matmul(A, X, method="dense", n_threads=args.threads),
            lambda: Ad @ X], args.repeats, args.budget)
        del Ad
        rows.append((density, A.nnz, ts, tc, td))
        dense_streak = dense_streak + 1 if tc < ts and td < ts else 0
        if dense_streak >= 2 and not args.full:
            break  # dense+cvt has won twice in a row: higher densities only widen the gap
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=4096, help="M = K")
    p.add_argument("--tokens", default="1,8,64,256", help="comma-separated N values")
    p.add_argument("--dtypes", default="float32,float64,complex64,complex128")
    p.add_argument("--densities", default=",".join(map(str, DEFAULT_DENSITIES)))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=None, help="default: all cores")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--full", action="store_true",
                   help="measure every density (default: stop once dense clearly wins)")
    args = p.parse_args(argv)
    peers, wse = _helpers()
    import numpy as np
    tokens = [int(x) for x in args.tokens.split(",")]
    dtypes = args.dtypes.split(",")
    densities = sorted(float(x) for x in args.densities.split(","))
    start = time.time()
    print(f"crossover: M=K={args.size}, numpy {np.__version__}, threads "
          f"{args.threads or 'all'}, started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    from wsesparse.bench import print_load_average
    print_load_average()
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS"):
        if var in os.environ:
            print(f"  note: {var}={os.environ[var]} is set")
    print("times in ms; x_cvt = density above which densify+BLAS beats the sparse kernel, "
          "x_dense = same without the densify cost")
    table = {}
    from threadpoolctl import threadpool_limits
    for dtype_name in dtypes:
        for n in tokens:
            # --threads limits BLAS (the "dense" column) as well as the kernels.
            with threadpool_limits(limits=args.threads, user_api="blas"):
                rows = measure(args.size, n, dtype_name, densities, args, peers, wse)
            ds = [r[0] for r in rows]
            x_cvt = crossing(ds, [r[2] for r in rows], [r[3] for r in rows])
            x_dense = crossing(ds, [r[2] for r in rows], [r[4] for r in rows])
            table[dtype_name, n] = (x_cvt, x_dense)
            print(f"\n{dtype_name} N={n}: {'density':>8} {'sparse':>9} {'dense+cvt':>9} "
                  f"{'dense':>9}")
            for d, nnz, ts, tc, td in rows:
                mark = " <- dense+cvt wins" if tc < ts else (" <- dense wins" if td < ts else "")
                print(f"{'':>{len(dtype_name) + 5}} {d:>8g} {ts * 1e3:>9.3f} {tc * 1e3:>9.3f} "
                      f"{td * 1e3:>9.3f}{mark}", flush=True)

    def fmt(x):
        return ">1" if math.isinf(x) else f"{x:.3f}"

    print(f"\nCrossover density (M=K={args.size}); beyond the last measured density: >1")
    print(f"{'dtype':>10} " + " ".join(f"{'N=' + str(n) + ' cvt':>11} {'N=' + str(n) + ' dense':>11}"
                                       for n in tokens))
    for dtype_name in dtypes:
        print(f"{dtype_name:>10} " + " ".join(
            f"{fmt(table[dtype_name, n][0]):>11} {fmt(table[dtype_name, n][1]):>11}"
            for n in tokens))

    # Recommendation for wsesparse/_thresholds.py.
    wins_at = [n for n in tokens if all(not math.isinf(table[d, n][0]) for d in dtypes)]
    min_tokens = min(wins_at) if wins_at else None
    print("\nRecommendation for wsesparse/_thresholds.py (dense when N >= DENSE_MIN_TOKENS and "
          "density >= DENSE_DENSITY[dtype]):")
    if min_tokens is None:
        print("  densify + BLAS never beat the sparse kernel here: keep method='auto' sparse "
              "(DENSE_DENSITY = 1.0 disables the dense path).")
    else:
        print(f"  DENSE_MIN_TOKENS = {min_tokens}")
        for d in dtypes:
            worst = max(table[d, n][0] for n in tokens if n >= min_tokens)
            worst = min(worst, 1.0)
            # Round up to two decimals (0.0042 -> 0.01): dense only where it is clearly faster.
            rec = math.ceil(worst * 100) / 100 if worst < 1 else 1.0
            print(f"  DENSE_DENSITY[{d}] = {rec:.2f}   (largest crossover over N >= "
                  f"{min_tokens}: {fmt(worst)})")
    print(f"\ntotal {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
