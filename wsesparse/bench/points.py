"""One point of the ``wsesparse bench`` grid: every library timed on the same operands, every
result checked against scipy's (a peer whose result is wrong is reported as FAIL, never with
a time), rates in GFLOP/s = 2 * nnz * N / t."""

from __future__ import annotations

import gc
import time

from wsesparse._timing import best_time
from wsesparse.bench.bandwidth import spmv_bytes
from wsesparse.bench.peers import PEER_ORDER, PEERS, make_calls
from wsesparse.datasets import random_csr, random_dense

# Relative tolerance on max|Y - Y_scipy| / max|Y_scipy| by real precision.
TOLERANCE = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-10, "complex128": 1e-10}
# Points whose dense matrix (the dense peer's operand) would take more are skipped.
DENSE_LIMIT_BYTES = 4 * 2**30
# After a threaded BLAS call OpenBLAS's idle threads spin for 2^28 cycles (about 0.1 s) and
# MKL's for its block time: a product timed in that spell ran 1.5-1.9x slower (2 cores) and
# picked fewer threads (the load rule counts the spinners). So the steps that call them (the
# scipy reference's check, the "mkl" and "dense" peers) are followed by this pause before the
# next library is timed (docs/tuning.md, "Timing after a BLAS call").
SETTLE_SECONDS = 0.2
SPINNING_PEERS = ("mkl", "dense")


def retime(fn, best: float, budget: float) -> float:
    """``best`` or a better time of ``fn`` from calls until ``budget`` seconds are spent
    (no warm-up: ``fn`` ran before); none where one call takes over half the budget.

    The later rounds of a point: unlike :func:`wsesparse._timing.best_time` it goes on from
    an earlier best, with no warm-up and no cap on the number of calls.

    Parameters
    ----------
    fn : callable
        The library's call (zero arguments).
    best : float
        Its best time so far (seconds).
    budget : float
        Seconds of calls at most (plus the last call's overrun).

    Returns
    -------
    float
    """
    spent = 0.0
    while best <= budget / 2 and spent < budget:
        t0 = time.perf_counter()
        fn()
        t = time.perf_counter() - t0
        spent += t
        best = min(best, t)
    return best


def check(name, Y, R, dtype_name) -> tuple[bool, float]:
    """Whether ``Y`` matches the reference ``R`` within :data:`TOLERANCE`.

    Parameters
    ----------
    name : str
        The library (unused; for the caller's messages).
    Y : array_like
        A result; reshaped to ``R.shape`` where it has as many elements.
    R : ndarray
        The reference (scipy's result).
    dtype_name : str
        Key of :data:`TOLERANCE`.

    Returns
    -------
    ok : bool
    err : float
        ``max|Y - R| / max|R|`` (inf for a result of another shape).

    Examples
    --------
    >>> import numpy as np
    >>> check("x", np.ones(4), np.ones((2, 2)), "float64")
    (True, 0.0)
    >>> check("x", np.ones(3), np.ones((2, 2)), "float64")
    (False, inf)
    """
    import numpy as np
    Y = np.asarray(Y)
    if Y.shape != R.shape:
        Y = Y.reshape(R.shape) if Y.size == R.size else Y
    if Y.shape != R.shape:
        return False, float("inf")
    scale = float(np.abs(R).max()) if R.size else 0.0
    err = float(np.abs(Y - R).max()) / max(scale, np.finfo(R.dtype).tiny) if R.size else 0.0
    return bool(err <= TOLERANCE[dtype_name]), err


def check_reference(A, X, R, dtype_name, rows: int = 32) -> bool:
    """scipy's result on a sample of rows against a higher-precision dense product.

    Parameters
    ----------
    A : scipy.sparse CSR matrix
    X : ndarray
        The dense operand.
    R : ndarray
        The result to check (``A @ X`` in ``dtype_name``).
    dtype_name : str
        Key of :data:`TOLERANCE`.
    rows : int
        Rows sampled (seeded).

    Returns
    -------
    bool
    """
    import numpy as np
    rng = np.random.default_rng(7)
    idx = rng.choice(A.shape[0], size=min(rows, A.shape[0]), replace=False)
    hi = np.complex128 if np.iscomplexobj(R) else np.float64
    exact = A[idx].toarray().astype(hi) @ X.astype(hi)
    got = R.reshape(A.shape[0], -1)[idx]
    scale = max(float(np.abs(exact).max()), 1e-300)
    return float(np.abs(got - exact).max()) / scale <= TOLERANCE[dtype_name]


def run_point(M, N, density, dtype_name, mods, args):
    """Time and check every library on one point; returns its row of the table.

    Parameters
    ----------
    M : int
        M = K of the random sparse matrix.
    N : int
        Columns of the dense operand (tokens).
    density : float
    dtype_name : str
        Key of :data:`TOLERANCE`.
    mods : dict
        The peers :func:`~wsesparse.bench.peers.load_peers` loaded.
    args : argparse.Namespace
        Finished options (``--budget``, ``--rounds``, ``--repeats``, ``--left``...); its
        ``history`` of earlier times is read and updated.

    Returns
    -------
    dict
        ``M, K, N, density, dtype, nnz``; per library its GFLOP/s (or a status: "FAIL",
        "slow", "error", "unverif") and its time ``<name>_t``; ``best_peer``, ``ratio``,
        ``ratio_csr``, ``vs_scipy``, and ``spmv_GBs`` for N = 1; ``skipped`` instead for a
        point too large to run.
    """
    import numpy as np
    dtype = np.dtype(dtype_name)
    row = {"M": M, "K": M, "N": N, "density": density, "dtype": dtype_name}
    dense_bytes = M * M * dtype.itemsize
    if dense_bytes > DENSE_LIMIT_BYTES:
        row["skipped"] = "too large"
        return row
    A = random_csr(M, M, density, dtype, seed=args.seed)
    X = random_dense(M, N, dtype, seed=args.seed + 1)
    row["nnz"] = A.nnz
    flops = 2.0 * A.nnz * N
    left = getattr(args, "left", False)
    if left:
        row["side"] = "left"
    # Skip a peer whose last time at this (M, density, dtype), scaled by N, predicts a
    # call slower than --max-call, before its operands are converted (GraphBLAS picks its
    # variant by timing both: minutes at 16384^2, density 0.5, N = 1024). wsesparse is
    # never skipped; where scipy is, the others are checked on sampled rows against a
    # float64 dense product instead.
    results = {}
    for name in PEERS:
        key = (name, M, density, dtype_name)
        if key in args.history:
            n_prev, t_prev = args.history[key]
            if t_prev * N / n_prev > args.max_call:
                results[name] = ("slow", f"predicted {t_prev * N / n_prev:.0f} s per call")
    calls = make_calls(A, X, mods, args.threads, left=left, skip=set(results))
    # With --left the results (X.T @ A) are checked as their transposes, A.T @ X.
    A_ref = A.T.tocsr() if left else A
    if "graphblas" in calls:
        row["graphblas_variant"] = calls["graphblas"].variant
    # scipy first: its result is the reference.
    order = sorted(calls, key=lambda p: (p != "scipy", PEER_ORDER.index(p)))
    # The budget is spent in rounds that take every library in turn, so that a
    # noisy spell on the shared machine does not fall on one library's timings
    # alone: the first round warms up and verifies, the later ones only time.
    rounds = getattr(args, "rounds", 1)
    ref = None
    settle = False
    for name in order:
        fn = calls[name]
        if settle:
            time.sleep(SETTLE_SECONDS)
        settle = name in SPINNING_PEERS
        key = (name, M, density, dtype_name)
        try:
            out, t = best_time(fn, args.repeats, args.budget / rounds,
                               single_call_above=2 * args.budget)
            args.history[key] = (N, t)
        except Exception as exc:  # a peer that cannot do this dtype, for example
            results[name] = ("error", f"{type(exc).__name__}: {str(exc)[:50]}")
            continue
        conv = getattr(fn, "to_numpy", None)
        out = conv(out) if conv else out
        if left:
            out = np.asarray(out).T
        if name == "scipy":
            ref = np.asarray(out).reshape(M, N)
            if not check_reference(A_ref, X, ref, dtype_name):
                results[name] = ("FAIL", "scipy disagrees with a float64 dense product")
                ref = None
                break
            results[name] = ("ok", t)
            settle = True  # (the check's dense product calls BLAS)
            continue
        out = np.asarray(out)
        if ref is None:
            if results.get("scipy", ("",))[0] != "slow":
                results[name] = ("unverif", "no scipy reference")
                continue
            # scipy was too slow to run here: check sampled rows against a float64 product.
            ok = out.size == M * N and check_reference(A_ref, X, out.reshape(M, N), dtype_name)
            results[name] = ("ok", t) if ok else ("FAIL", "sampled rows off")
            continue
        ok, err = check(name, out.reshape(M, N) if out.size == M * N else out, ref, dtype_name)
        results[name] = ("ok", t) if ok else ("FAIL", f"max rel err {err:.2e}")
        del out
    for _ in range(rounds - 1):
        for name in order:
            status, t = results.get(name, ("", 0.0))
            if status == "ok":
                if settle:
                    time.sleep(SETTLE_SECONDS)
                results[name] = ("ok", retime(calls[name], t, args.budget / rounds))
                settle = name in SPINNING_PEERS
    del calls
    gc.collect()
    for name, (status, val) in results.items():
        row[name] = flops / val / 1e9 if status == "ok" else status
        if status == "ok":
            row[name + "_t"] = val
    peer_rates = {p: row[p] for p in PEERS if isinstance(row.get(p), float)}
    if peer_rates:
        best = max(peer_rates, key=peer_rates.get)
        row["best_peer"] = best
        # (no ratio against a rate of 0: a point with no nonzeros does no multiply-adds)
        for w in ("wsesparse", "wse.CSR"):
            if isinstance(row.get(w), float) and peer_rates[best] > 0:
                row["ratio" if w == "wsesparse" else "ratio_csr"] = row[w] / peer_rates[best]
        if (isinstance(row.get("scipy"), float) and isinstance(row.get("wsesparse"), float)
                and row["scipy"] > 0):
            row["vs_scipy"] = row["wsesparse"] / row["scipy"]
    if N == 1 and isinstance(row.get("wsesparse_t"), float):
        row["spmv_GBs"] = spmv_bytes(A, dtype.itemsize) / row["wse.CSR_t"] / 1e9 \
            if isinstance(row.get("wse.CSR_t"), float) else \
            spmv_bytes(A, dtype.itemsize) / row["wsesparse_t"] / 1e9
    return row
