"""``wsesparse bench``: ``sparse_matmul`` against the sparse libraries users have today.

Times sparse (M x K) @ dense (K x N) (or, with ``--left``, dense (N x K) @ sparse (K x M))
with

* ``wsesparse``      - ``sparse_matmul(A, X)`` on a scipy CSR matrix (validates every call)
* ``wsesparse.CSR``  - the same with a prepared ``wsesparse.CSR`` operand (validated once)
* ``scipy``          - ``A @ X`` (the reference every other result is checked against)
* ``mkl``            - ``sparse_dot_mkl.dot_product_mkl(A, X)``            (if installed)
* ``graphblas``      - python-graphblas / SuiteSparse:GraphBLAS ``mxm``/``mxv`` (if installed)
* ``torch``          - ``torch.sparse_csr_tensor(...) @ X``                 (if installed)
* ``dense``          - numpy BLAS ``A_dense @ X`` (dense matrix built outside the timing)

Every time is the best of a few repeats (fewer for slow points) in one process; the repeats
are spread over ``--rounds`` rounds that time every library in turn. Every result is
checked against scipy's (a peer whose result is wrong is reported as FAIL, never with a time),
and rates are GFLOP/s = 2 * nnz * N / t for every library, dense BLAS included, so the columns
compare directly. A STREAM-like triad at the top gives the memory bandwidth to compare the
SpMV (N = 1) rows with. ``benchmarks/peers.py`` runs the same code from a source tree.

The peers are optional (``pip install sparse_dot_mkl python-graphblas torch``); missing
ones are listed as "not installed" and left out. Importing this module does no work.
"""

from __future__ import annotations

import argparse
import csv
import gc
import glob
import operator
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from wsesparse._progress import Progress, add_progress_argument, progress_enabled
from wsesparse._timing import MAX_REPEATS, best_time  # noqa: F401 - re-exported for scripts

# The kernels this compares share the machine's cores; peers get the same thread count.
PEER_ORDER = ("wsesparse", "wse.CSR", "scipy", "mkl", "graphblas", "torch", "dense")
# Columns that are "peers" (what wsesparse is compared against).
PEERS = ("scipy", "mkl", "graphblas", "torch", "dense")
# Relative tolerance on max|Y - Y_scipy| / max|Y_scipy| by real precision.
TOLERANCE = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-10, "complex128": 1e-10}
DENSE_LIMIT_BYTES = 4 * 2**30


# --------------------------------------------------------------------------------------
# environment and optional peers
# --------------------------------------------------------------------------------------
def _find_mkl_rt() -> None:
    """sparse_dot_mkl looks for libmkl_rt.so; pip's mkl ships libmkl_rt.so.<N> only."""
    if os.environ.get("MKL_RT"):
        return
    for prefix in {sys.prefix, sys.base_prefix}:
        hits = sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*")))
        if hits:
            os.environ["MKL_RT"] = hits[0]
            return


def load_peers(n_threads: int) -> tuple[dict, dict]:
    """Import the optional peers. Returns ({name: module}, {name: reason it is missing})."""
    mods, missing = {}, {}
    _find_mkl_rt()
    # One OpenMP runtime for everybody (the kernels use GNU OpenMP): MKL's own Intel runtime
    # would spin on the cores after each call and slow whichever library runs next.
    os.environ.setdefault("MKL_THREADING_LAYER", "GNU")
    try:
        import sparse_dot_mkl
        sparse_dot_mkl.mkl_set_num_threads(n_threads)
        mods["mkl"] = sparse_dot_mkl
    except Exception as exc:  # ImportError, or MKL's runtime not loadable
        missing["mkl"] = f"{type(exc).__name__}: {str(exc)[:60]}"
    try:
        import graphblas as gb
        gb.init("suitesparse", blocking=True)
        gb.ss.config["nthreads"] = n_threads
        mods["graphblas"] = gb
    except Exception as exc:
        missing["graphblas"] = f"{type(exc).__name__}: {str(exc)[:60]}"
    try:
        import torch
        torch.set_num_threads(n_threads)
        mods["torch"] = torch
    except Exception as exc:
        missing["torch"] = f"{type(exc).__name__}: {str(exc)[:60]}"
    return mods, missing


# --------------------------------------------------------------------------------------
# problem generation
# --------------------------------------------------------------------------------------
def random_csr(m: int, k: int, density: float, dtype, seed: int = 0):
    """A random CSR matrix with i.i.d. Bernoulli(density) pattern, built in row blocks.

    scipy.sparse.random draws all M*K*density positions at once, which is slow and needs
    many GB at M = K = 16384, density 0.5; this needs one block of uniforms at a time.
    """
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    block = max(1, min(m, (1 << 24) // max(k, 1)))
    indptr = np.zeros(m + 1, dtype=np.int64)
    chunks = []
    for r0 in range(0, m, block):
        mask = rng.random((min(block, m - r0), k), dtype=np.float32) < density
        indptr[r0 + 1:r0 + 1 + mask.shape[0]] = mask.sum(axis=1)
        chunks.append(np.nonzero(mask)[1].astype(np.int32))
        del mask
    np.cumsum(indptr, out=indptr)
    indices = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
    nnz = indices.size
    real = np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64
    data = rng.standard_normal(nnz, dtype=real).astype(dtype)
    if np.dtype(dtype).kind == "c":
        data.imag = rng.standard_normal(nnz)
    idx_t = np.int32 if nnz < 2**31 else np.int64
    return sp.csr_matrix((data, indices.astype(idx_t, copy=False), indptr.astype(idx_t)),
                         shape=(m, k))


def random_dense(k: int, n: int, dtype, seed: int = 1):
    import numpy as np
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((k, n), dtype=np.float32 if np.dtype(dtype).itemsize <= 8
                            else np.float64).astype(dtype)
    if np.dtype(dtype).kind == "c":
        X.imag = rng.standard_normal((k, n))
    return X


# --------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------
def triad_bandwidth(n_threads: int, n_elems: int = 20_000_000, repeats: int = 5) -> float:
    """STREAM-like triad a = b + s*c (float64) in GB/s, counting 3 arrays per pass.

    numpy has no fused triad, so each thread works through its half of the arrays in
    L1-sized chunks (multiply then add in cache): DRAM sees one read of b and c and one
    write of a, as in STREAM.
    """
    import numpy as np

    a = np.zeros(n_elems)
    b = np.ones(n_elems)
    c = np.full(n_elems, 2.0)
    s = 3.0
    chunk = 1 << 15  # 3 x 256 KB per step: stays in L2 between the two passes
    bounds = np.linspace(0, n_elems, n_threads + 1).astype(int)

    def part(i):
        for j in range(bounds[i], bounds[i + 1], chunk):
            e = min(j + chunk, bounds[i + 1])
            np.multiply(c[j:e], s, out=a[j:e])
            np.add(a[j:e], b[j:e], out=a[j:e])

    best = float("inf")
    with ThreadPoolExecutor(n_threads) as pool:
        for _ in range(repeats):
            t0 = time.perf_counter()
            list(pool.map(part, range(n_threads)))
            best = min(best, time.perf_counter() - t0)
    assert a[0] == 7.0 and a[-1] == 7.0
    return 3 * 8 * n_elems / best / 1e9


def triad_bandwidth_kernel(n_threads: int, n_elems: int = 20_000_000, repeats: int = 5):
    """The triad as wsesparse's own OpenMP loop (``_tlrmvm.stream_triad``), None if absent."""
    import numpy as np
    try:
        from wsesparse._kernels import _tlrmvm
        triad = _tlrmvm.stream_triad
    except (ImportError, AttributeError):
        return None
    a, b, c = np.zeros(n_elems), np.ones(n_elems), np.full(n_elems, 2.0)
    best = float("inf")
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        triad(a, b, c, 3.0, n_threads)
        best = min(best, time.perf_counter() - t0)
    return 3 * 8 * n_elems / best / 1e9


def triad_bandwidth_torch(torch, n_elems: int = 20_000_000, repeats: int = 5) -> float:
    """The same triad as one fused multi-threaded pass: torch.add(b, c, alpha=s, out=a)."""
    a = torch.zeros(n_elems, dtype=torch.float64)
    b = torch.ones(n_elems, dtype=torch.float64)
    c = torch.full((n_elems,), 2.0, dtype=torch.float64)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - t0)
    assert float(a[0]) == 7.0
    return 3 * 8 * n_elems / best / 1e9


def spmv_bytes(A, x_itemsize: int) -> int:
    """Bytes an SpMV must move: values + indices + indptr once, plus x and y."""
    m, k = A.shape
    return (A.data.nbytes + A.indices.nbytes + A.indptr.nbytes
            + k * x_itemsize + m * x_itemsize)


# --------------------------------------------------------------------------------------
# the peers at one point
# --------------------------------------------------------------------------------------
def print_load_average() -> None:
    """Print the load average (where the OS has one): timings under load are noisy."""
    if hasattr(os, "getloadavg"):
        print("  load average %.2f %.2f %.2f on %d cores (other work on the machine makes "
              "timings noisy)" % (*os.getloadavg(), os.cpu_count() or 0))


def make_calls(A, X, mods, n_threads, left=False, skip=()):
    """{name: zero-argument callable returning a numpy array} for every peer present.

    Conversions to each library's own format happen here, outside the timed region. Peers
    named in ``skip`` (predicted too slow) are left out before any conversion or warm-up.
    With ``left``, the calls compute ``X.T @ A`` (dense @ sparse; ``X.T`` C-contiguous).
    """
    import numpy as np
    import wsesparse as wse
    one = X.shape[1] == 1
    if one:
        D = X[:, 0].copy()
    else:
        D = np.ascontiguousarray(X.T) if left else X

    def pair(S):
        """The operands in product order: (dense, sparse) with --left."""
        return (D, S) if left else (S, D)

    calls = {"wsesparse": lambda: wse.sparse_matmul(*pair(A), n_threads=n_threads)}
    P = wse.CSR(A)
    # A prepared operand's first product caches what later ones reuse (its transpose
    # for --left, its dense copy where dense BLAS wins): done here, outside the timing,
    # as the dense peer's A.toarray() is (best_time reports a lone warm-up call for
    # slow points, which would time the copy: 16384^2, density 0.5, N = 64: 6 GFLOP/s
    # for the densifying call, 107 for the next ones).
    wse.sparse_matmul(*pair(P), n_threads=n_threads)
    calls["wse.CSR"] = lambda: wse.sparse_matmul(*pair(P), n_threads=n_threads)
    if "scipy" not in skip:
        calls["scipy"] = lambda: operator.matmul(*pair(A))

    if "mkl" in mods and "mkl" not in skip:
        dot = mods["mkl"].dot_product_mkl
        calls["mkl"] = lambda: dot(*pair(A))

    if "graphblas" in mods and "graphblas" not in skip:
        calls["graphblas"] = _graphblas_call(mods["graphblas"], A, X, D, one, left)

    if "torch" in mods and "torch" not in skip:
        torch = mods["torch"]
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                     torch.from_numpy(A.data), size=A.shape, check_invariants=False)
        Dt = torch.from_numpy(np.ascontiguousarray(D))
        calls["torch"] = _TorchCall(*((Dt, At) if left else (At, Dt)))

    if "dense" not in skip:
        Ad = A.toarray()
        calls["dense"] = lambda: operator.matmul(*pair(Ad))
    return calls


def _graphblas_call(gb, A, X, D, one, left=False):
    """The faster of two ways to run A @ X in SuiteSparse:GraphBLAS, picked by one timing.

    Operands are converted once here. "A*X": mxm of A (CSR) with X as a full row-major
    matrix; "(X'*A')'": mxm of X' (full) with A' (CSR), i.e. the transposed product, whose
    result is Y'. GraphBLAS picks its own algorithm (saxpy/dot) inside either. For N = 1 it
    is mxv. With ``left`` (D = X.T, or the vector): "X*A" (mxm), or vxm for N = 1. The
    result stays a GraphBLAS object inside the timed call; converting it back to numpy
    (for the check) is not timed.
    """
    import numpy as np
    Ag = gb.io.from_scipy_sparse(A)
    if one:
        xg = gb.Vector.from_dense(D)
        if left:
            return _GraphBLASCall(lambda: xg.vxm(Ag).new(), transposed=False, variant="vxm")
        return _GraphBLASCall(lambda: Ag.mxv(xg).new(), transposed=False, variant="mxv")
    if left:
        Dg = gb.Matrix.from_dense(D)
        return _GraphBLASCall(lambda: Dg.mxm(Ag).new(), transposed=False, variant="X*A")
    Xg = gb.Matrix.from_dense(X)
    XTg = gb.Matrix.from_dense(np.ascontiguousarray(X.T))
    ATg = gb.io.from_scipy_sparse(A.T.tocsr())
    variants = [_GraphBLASCall(lambda: Ag.mxm(Xg).new(), transposed=False, variant="A*X"),
                _GraphBLASCall(lambda: XTg.mxm(ATg).new(), transposed=True, variant="(X'*A')'")]
    times = []
    for v in variants:
        v()  # warm-up
        t0 = time.perf_counter()
        v()
        times.append(time.perf_counter() - t0)
    return variants[int(np.argmin(times))]


class _GraphBLASCall:
    """Timed part: the mxm/mxv; ``to_numpy`` converts a result for the check."""

    def __init__(self, fn, transposed, variant):
        self.fn, self.transposed, self.variant = fn, transposed, variant

    def __call__(self):
        return self.fn()

    def to_numpy(self, r):
        Y = r.to_dense(fill_value=0)
        return Y.T if self.transposed else Y


class _TorchCall:
    """``a @ b`` (sparse @ dense, or dense @ sparse for ``--left``); a dense operand is
    1-D for N = 1 (a matrix-vector product)."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self):
        return self.a @ self.b

    @staticmethod
    def to_numpy(r):
        return r.numpy()


def retime(fn, best: float, budget: float) -> float:
    """``best`` or a better time of ``fn`` from calls until ``budget`` seconds are spent
    (no warm-up: ``fn`` ran before); none where one call takes over half the budget."""
    spent = 0.0
    while best <= budget / 2 and spent < budget:
        t0 = time.perf_counter()
        fn()
        t = time.perf_counter() - t0
        spent += t
        best = min(best, t)
    return best


def check(name, Y, R, dtype_name) -> tuple[bool, float]:
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
    """scipy's result on a sample of rows against a higher-precision dense product."""
    import numpy as np
    rng = np.random.default_rng(7)
    idx = rng.choice(A.shape[0], size=min(rows, A.shape[0]), replace=False)
    hi = np.complex128 if np.iscomplexobj(R) else np.float64
    exact = A[idx].toarray().astype(hi) @ X.astype(hi)
    got = R.reshape(A.shape[0], -1)[idx]
    scale = max(float(np.abs(exact).max()), 1e-300)
    return float(np.abs(got - exact).max()) / scale <= TOLERANCE[dtype_name]


def run_point(M, N, density, dtype_name, mods, args):
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
    for name in order:
        fn = calls[name]
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
                results[name] = ("ok", retime(calls[name], t, args.budget / rounds))
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
        for w in ("wsesparse", "wse.CSR"):
            if isinstance(row.get(w), float):
                row["ratio" if w == "wsesparse" else "ratio_csr"] = row[w] / peer_rates[best]
        if isinstance(row.get("scipy"), float) and isinstance(row.get("wsesparse"), float):
            row["vs_scipy"] = row["wsesparse"] / row["scipy"]
    if N == 1 and isinstance(row.get("wsesparse_t"), float):
        row["spmv_GBs"] = spmv_bytes(A, dtype.itemsize) / row["wse.CSR_t"] / 1e9 \
            if isinstance(row.get("wse.CSR_t"), float) else \
            spmv_bytes(A, dtype.itemsize) / row["wsesparse_t"] / 1e9
    return row


# --------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------
def _fmt(v, width=8):
    if isinstance(v, float):
        return f"{v:{width}.1f}" if v >= 0.05 else f"{v:{width}.3f}"
    if v is None:
        return f"{'-':>{width}}"
    return f"{str(v)[:width]:>{width}}"


def header(present):
    cols = " ".join(f"{c:>8}" for c in present)
    return (f"{'M':>6} {'N':>5} {'density':>7} {'dtype':>7} {'nnz':>10} | {cols} | "
            f"{'best':>9} {'ratio':>6} {'r_CSR':>6} {'vs_scipy':>8}")


def format_row(row, present):
    lead = f"{row['M']:>6} {row['N']:>5} {row['density']:>7g} {row['dtype']:>7}"
    if "skipped" in row:
        return f"{lead} skipped: {row['skipped']}"
    cols = " ".join(_fmt(row.get(c)) for c in present)
    extra = ""
    if "spmv_GBs" in row:
        extra = f"  SpMV {row['spmv_GBs']:.1f} GB/s"
    return (f"{lead} {row['nnz']:>10} | {cols} | {row.get('best_peer', '-'):>9} "
            f"{_fmt(row.get('ratio'), 6)} {_fmt(row.get('ratio_csr'), 6)} "
            f"{_fmt(row.get('vs_scipy'), 8)}{extra}")


def summary(rows, triad):
    done = [r for r in rows if "skipped" not in r and isinstance(r.get("ratio"), float)]
    lines = ["", "Summary (ratio = wsesparse GFLOP/s / best peer GFLOP/s; > 1 means wsesparse "
             "is faster)"]
    for key, label in (("ratio", "sparse_matmul (one-shot)"),
                       ("ratio_csr", "sparse_matmul (prepared CSR)")):
        rr = [r for r in done if isinstance(r.get(key), float)]
        if not rr:
            continue
        below = [r for r in rr if r[key] < 1.0]
        lines.append(f"  {label}: slower than the best peer at {len(below)} of {len(rr)} points")
        for r in below:
            lines.append(f"      M={r['M']} N={r['N']} density={r['density']:g} {r['dtype']}: "
                         f"{r[key]:.2f}x vs {r['best_peer']}")
        sub = [r for r in rr if r["N"] >= 8 and r["density"] <= 0.01]
        if sub:
            w = min(sub, key=lambda r: r[key])
            lines.append(f"  {label}: min ratio to best peer for N>=8, density<=1%: "
                         f"{w[key]:.2f} (M={w['M']} N={w['N']} d={w['density']:g} "
                         f"{w['dtype']}, best peer {w['best_peer']})")
        sub = [r for r in rr if r["N"] >= 8 and r["density"] <= 0.1]
        if sub:
            w = min(sub, key=lambda r: r[key])
            lines.append(f"  {label}: min ratio to best peer for N>=8, density<=10%: "
                         f"{w[key]:.2f} (M={w['M']} N={w['N']} d={w['density']:g} {w['dtype']})")
    sub = [r for r in done if r["N"] >= 8 and isinstance(r.get("vs_scipy"), float)]
    if sub:
        w = min(sub, key=lambda r: r["vs_scipy"])
        lines.append(f"  min ratio sparse_matmul / scipy for N>=8: {w['vs_scipy']:.2f} "
                     f"(M={w['M']} N={w['N']} d={w['density']:g} {w['dtype']})")
    spmv = [r for r in done if "spmv_GBs" in r]
    if spmv and triad:
        lines.append("  SpMV (N=1) bandwidth, prepared CSR: "
                     + ", ".join(f"{r['M']}/{r['density']:g}/{r['dtype']}: "
                                 f"{r['spmv_GBs']:.0f} GB/s ({100 * r['spmv_GBs'] / triad:.0f}%)"
                                 for r in spmv)
                     + f"  [triad {triad:.1f} GB/s; small matrices run from cache]")
    return "\n".join(lines)


def _floats(s):
    return [float(x) for x in s.split(",") if x]


def _ints(s):
    return [int(x) for x in s.split(",") if x]


DESCRIPTION = ("Time wsesparse.sparse_matmul against scipy, sparse_dot_mkl, python-graphblas, "
               "torch.sparse and dense numpy BLAS (missing peers are reported and left out).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``wsesparse bench`` (and of ``benchmarks/peers.py``)."""
    p.add_argument("--quick", action="store_true",
                   help="tiny grid (M=K=4096, N in 1,64, density in 0.1,0.01, float32 and "
                        "float64), under 30 s")
    p.add_argument("--sizes", type=_ints, default=[4096, 16384], help="M = K values")
    p.add_argument("--tokens", type=_ints, default=[1, 8, 64, 256, 1024], help="N values")
    p.add_argument("--densities", type=_floats, default=[0.5, 0.1, 0.01, 0.001])
    p.add_argument("--dtypes", type=lambda s: s.split(","), default=["float32", "float64"])
    p.add_argument("--repeats", type=int, default=5,
                   help="timed calls after the warm-up (fewer for slow points, more for fast ones)")
    p.add_argument("--budget", type=float, default=0.6,
                   help="seconds of timed calls per library and point (adaptive repeats)")
    p.add_argument("--rounds", type=int, default=3,
                   help="split the budget into this many rounds over all libraries in turn "
                        "(best time over the rounds), so that noise from other work on the "
                        "machine does not hit one library alone")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for every library (default: all cores)")
    p.add_argument("--max-call", type=float, default=10.0,
                   help="skip a peer where one call is predicted to take longer than this "
                        "many seconds (shown as 'slow')")
    p.add_argument("--left", action="store_true",
                   help="time dense @ sparse (X @ A, X of N x K, as activations times "
                        "weights) instead of A @ X")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-triad", action="store_true", help="skip the bandwidth measurement")
    p.add_argument("--csv", metavar="FILE", help="also write every point as CSV")
    add_progress_argument(p)


def finish_args(args: argparse.Namespace) -> argparse.Namespace:
    """Apply --quick, resolve the thread count, add the per-run timing history."""
    if args.dtypes and any(d not in TOLERANCE for d in args.dtypes):
        raise ValueError(f"--dtypes must be among {', '.join(TOLERANCE)}, got "
                         f"{','.join(args.dtypes)}")
    if getattr(args, "rounds", 1) < 1:
        raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
    if args.quick:
        args.sizes, args.tokens, args.densities = [4096], [1, 64], [0.1, 0.01]
        args.dtypes, args.repeats = ["float32", "float64"], 3
    args.history = {}
    if args.threads is None:
        try:
            args.threads = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            args.threads = os.cpu_count() or 1
    return args


def parse_args(argv=None, prog: str | None = None, epilog: str | None = None):
    """Parse the options as a standalone script (``benchmarks/peers.py``)."""
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=epilog)
    add_arguments(p)
    return finish_args(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the comparison with parsed (and finished) arguments; prints the table."""
    if not hasattr(args, "history"):
        finish_args(args)
    mods, missing = load_peers(args.threads)
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


def main(argv=None, prog: str | None = None, epilog: str | None = None) -> int:
    """Standalone entry point (what ``benchmarks/peers.py`` runs)."""
    return run(parse_args(argv, prog=prog, epilog=epilog))


def register(sub) -> None:
    """Add the ``bench`` subcommand to ``sub`` (an argparse subparsers object)."""
    p = sub.add_parser(
        "bench", help="CPU peer comparison: sparse_matmul vs scipy, MKL, GraphBLAS, torch, BLAS",
        description=DESCRIPTION + " Rates are GFLOP/s = 2*nnz*N/t; every result is checked "
                    "against scipy's.",
        epilog="examples:\n"
               "  wsesparse bench --quick                      # under 30 s\n"
               "  wsesparse bench --sizes 4096 --tokens 1,64 --densities 0.01 --csv peers.csv\n"
               "  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE wsesparse bench   # full grid, ~1 h",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run)
