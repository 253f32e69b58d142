"""``wsesparse bench --gpu``: our GPU kernels against cuSPARSE and cuBLAS, and TLR-MVM on
the device next to the device-to-device copy bandwidth, all timed with CUDA events.

Sparse grid: an ``M x M`` CSR matrix with uniformly random entries (generated on the
device) times a dense ``M x N`` matrix. Columns: ``auto`` is ``sparse_matmul`` on the cupyx
matrix (structure checked by the kernel on every call, kernel or dense chosen by the cost
model); ``prep`` the same on a prepared :class:`~wsesparse.gpu.DeviceCSR` (which keeps a
dense copy where it chooses cuBLAS); ``kernel`` our kernel forced (``method="sparse"``,
prepared); ``cusparse`` is cupyx's ``A @ X``; ``cublas`` is ``A.toarray() @ X`` (what a
user holding a sparse matrix runs); ``gemm`` is the GEMM alone on a dense copy made
beforehand. ``r_auto`` = best of cusparse and cublas over auto; ``r_gemm`` = best of
cusparse and gemm over auto; ``r_prep`` = best of cusparse and gemm over prep.
Times are the best of the repeats after one warm-up call. Every point's ``auto``, ``prep``
and ``kernel`` results are compared with cuSPARSE's first (``GRID_TOLERANCE``); a row
beyond it ends in FAIL.
"""

from __future__ import annotations

import json
import time

import numpy as np

GPU_DENSITIES = (0.001, 0.01, 0.05, 0.1, 0.3)
GPU_TOKENS = (1, 8, 64, 256, 1024)


def event_time(fn, repeats: int = 5, warmup: int = 1, budget: float = 2.0) -> float:
    """Best time in seconds of ``fn()`` over ``repeats`` calls (CUDA events around each),
    after ``warmup`` calls; stops early once ``budget`` seconds were spent timing."""
    import cupy
    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    best, spent = float("inf"), 0.0
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        t = cupy.cuda.get_elapsed_time(start, end) / 1e3
        best, spent = min(best, t), spent + t
        if spent > budget:
            break
    return best


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy rate in bytes/s, counting bytes read plus bytes written."""
    import cupy
    a = cupy.ones(nbytes // 4, dtype=np.float32)
    b = cupy.empty_like(a)
    t = event_time(lambda: b.__setitem__(Ellipsis, a), repeats=10)
    return 2 * nbytes / t


def random_csr(m: int, k: int, density: float, dtype, seed: int = 0):
    """A cupyx CSR matrix with entries at uniformly random places, normal values."""
    import cupy
    import cupyx.scipy.sparse as csp
    rs = cupy.random.RandomState(seed)
    rows = []
    step = max(1, (1 << 28) // max(k, 1))         # at most 2**28 random draws at a time
    for r0 in range(0, m, step):
        r1 = min(m, r0 + step)
        mask = rs.random_sample((r1 - r0, k), dtype=np.float32) < density
        vals = rs.standard_normal((r1 - r0, k), dtype=np.float64 if np.dtype(dtype).itemsize
                                  >= 8 else np.float32)
        block = cupy.where(mask, vals, 0).astype(dtype)
        if np.dtype(dtype).kind == "c":
            block = block + 1j * cupy.where(mask, vals[::-1], 0).astype(dtype)
        rows.append(csp.csr_matrix(block))
        del mask, vals, block
    return csp.vstack(rows).tocsr() if len(rows) > 1 else rows[0]


# Largest relative difference (Frobenius) of a timed wsesparse result from cuSPARSE's
# that a grid row accepts; beyond it the row is marked FAIL.
GRID_TOLERANCE = {"float32": 1e-4, "float64": 1e-10}


def grid_errors(A, S, X) -> float:
    """The largest relative difference (Frobenius) of the ``auto``, ``prep`` and ``kernel``
    results from cuSPARSE's ``A @ X``, computed on the host: every timed column is checked,
    as the CPU grid checks its products against scipy's."""
    from wsesparse import sparse_matmul

    def host(Y):  # (a device array's copy on the host)
        return np.asarray(Y.get() if hasattr(Y, "get") else Y, dtype=np.float64)

    ref = host(A @ X)
    scale = float(np.linalg.norm(ref)) or 1.0
    return max(float(np.linalg.norm(host(Y) - ref)) / scale
               for Y in (sparse_matmul(A, X), sparse_matmul(S, X),
                         sparse_matmul(S, X, method="sparse")))


def grid_point(A, S, X, dense, dtype, repeats: int) -> dict:
    """Times of one product (see the module docstring for the columns), and ``rel_err``
    (:func:`grid_errors`)."""
    from wsesparse import sparse_matmul
    from wsesparse.gpu import DeviceCSR
    from wsesparse.gpu.csr import choose
    t = {"rel_err": grid_errors(A, S, X)}
    t["auto"] = event_time(lambda: sparse_matmul(A, X), repeats)
    t["prep"] = event_time(lambda: sparse_matmul(S, X), repeats)
    t["kernel"] = event_time(lambda: sparse_matmul(S, X, method="sparse"), repeats)
    t["cusparse"] = event_time(lambda: A @ X, repeats)
    t["cublas"] = event_time(lambda: A.toarray() @ X, repeats)
    t["gemm"] = event_time(lambda: dense @ X, repeats) if dense is not None else float("nan")
    n = 1 if X.ndim == 1 else X.shape[1]
    t["choice"] = choose(S, n, dtype, X.ndim == 1)
    t["choice_oneshot"] = choose(DeviceCSR.unchecked(A), n, dtype, X.ndim == 1)
    return t


def run_grid(m: int = 16384, densities=GPU_DENSITIES, tokens=GPU_TOKENS,
             dtypes=("float32", "float64"), repeats: int = 5, seed: int = 0) -> list[dict]:
    """The sparse grid; prints one line per point and returns the rows."""
    import cupy
    from wsesparse.gpu import DeviceCSR
    rows = []
    print(f"{'dtype':>8} {'density':>7} {'N':>5} {'auto':>9} {'prep':>9} {'kernel':>9} "
          f"{'cusparse':>9} {'cublas':>9} {'gemm':>9} {'choice':>6} {'r_auto':>6} "
          f"{'r_gemm':>6} {'r_prep':>6}  (ms)", flush=True)
    for dtype in dtypes:
        for density in densities:
            A = random_csr(m, m, density, dtype, seed)
            S = DeviceCSR(A)
            dense = A.toarray()
            for N in tokens:
                X = cupy.asarray(cupy.random.RandomState(seed + N).standard_normal(
                    (m, N) if N > 1 else (m,))).astype(dtype)
                t = grid_point(A, S, X, dense, dtype, repeats)
                best_peer = min(t["cusparse"], t["cublas"])
                best_held = min(t["cusparse"], t["gemm"])
                row = dict(dtype=dtype, density=density, N=N, nnz=S.nnz, **t,
                           r_auto=best_peer / t["auto"], r_gemm=best_held / t["auto"],
                           r_prep=best_held / t["prep"],
                           gather_tbs=S.nnz * N * np.dtype(dtype).itemsize / t["kernel"] / 1e12)
                rows.append(row)
                choice = t["choice"][0] + "/" + t["choice_oneshot"][0]
                row["ok"] = t["rel_err"] <= GRID_TOLERANCE[dtype]
                print(f"{dtype:>8} {density:>7} {N:>5} " + " ".join(
                    f"{t[k] * 1e3:9.3f}" for k in ("auto", "prep", "kernel", "cusparse",
                                                   "cublas", "gemm"))
                    + f" {choice:>6} {row['r_auto']:6.2f} {row['r_gemm']:6.2f} "
                    f"{row['r_prep']:6.2f}"
                    + ("" if row["ok"] else f"  FAIL: differs from cuSPARSE by "
                                            f"{t['rel_err']:.1e}"), flush=True)
                del X
            del A, S, dense
            cupy.get_default_memory_pool().free_all_blocks()
    return rows


def host_overheads(m: int = 4096, density: float = 0.001, calls: int = 300) -> dict:
    """Microseconds per call, host clock, ``calls`` back to back then one sync, of small
    products whose GPU work is a few microseconds: what a solver loop pays per step."""
    import cupy
    from wsesparse import sparse_matmul
    from wsesparse.gpu import DeviceCSR
    A = random_csr(m, m, density, np.float32)
    S = DeviceCSR(A)
    x = cupy.ones(m, dtype=np.float32)
    res = {}
    for name, fn in (("cusparse A@x", lambda: A @ x), ("prepared S@x", lambda: S @ x),
                     ("one-shot sparse_matmul(A, x)", lambda: sparse_matmul(A, x)),
                     ("cupy x + x", lambda: x + x)):
        fn()
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        cupy.cuda.Device().synchronize()
        res[name] = (time.perf_counter() - t0) / calls * 1e6
        print(f"  {name:>30}: {res[name]:7.1f} us per call ({m}x{m}, density {density})",
              flush=True)
    return res


def run_tlr_gpu(nx: int = 99, nb: int = 256, tol: float = 1e-3, batch: int = 8,
                repeats: int = 50) -> dict:
    """TLR-MVM on the device: forward/adjoint for 1 and 16 right-hand sides, a batch of
    ``batch`` copies of the slice (distinct buffers, together larger than the L2), the
    per-tile reference ``TLRDevice`` and a dense GEMV; GB/s over the copy bandwidth; the
    bases stored in float16 and bfloat16, with their error against the float32 product."""
    import cupy
    from wsesparse import TLRBatch
    from wsesparse._cupy_backend import TLRDevice
    from wsesparse.bench.tlr_setup import seismic_operator
    from wsesparse.datasets import seismic_slice
    from wsesparse.gpu import DeviceTLR
    T, _, t_comp = seismic_operator(nx, nx, nb, tol)
    n = T.shape[1]
    D = DeviceTLR(T)
    rs = cupy.random.RandomState(1)
    x1 = (rs.standard_normal(n) + 1j * rs.standard_normal(n)).astype(np.complex64)
    x16 = (rs.standard_normal((n, 16)) + 1j * rs.standard_normal((n, 16))).astype(np.complex64)
    x4 = cupy.ascontiguousarray(x16[:, :4])
    res = {"shape": T.shape, "nb": nb, "tol": tol, "bases_MB": T.nbytes / 1e6,
           "compress_s": t_comp}
    res["copy_GBs"] = copy_bandwidth() / 1e9
    res["fwd1_us"] = event_time(lambda: D @ x1, repeats) * 1e6
    res["adj1_us"] = event_time(lambda: D.H @ x1, repeats) * 1e6
    res["fwd4_us"] = event_time(lambda: D @ x4, repeats) * 1e6
    res["adj4_us"] = event_time(lambda: D.H @ x4, repeats) * 1e6
    res["fwd16_us"] = event_time(lambda: D @ x16, repeats) * 1e6
    res["adj16_us"] = event_time(lambda: D.H @ x16, repeats) * 1e6
    ref = TLRDevice(T)
    res["pertile1_us"] = event_time(lambda: ref @ x1, 5) * 1e6
    A = cupy.asarray(seismic_slice(nx, nx))
    res["dense_gemv_us"] = event_time(lambda: A @ x1, repeats) * 1e6
    y_ref = T @ x1.get()
    res["fwd_rel_err"] = float(np.linalg.norm((D @ x1).get() - y_ref) / np.linalg.norm(y_ref))
    Y_ref = T @ x16.get()
    res["fwd16_rel_err"] = float(np.linalg.norm((D @ x16).get() - Y_ref) / np.linalg.norm(Y_ref))
    res["fwd16_over_fwd1"] = res["fwd16_us"] / res["fwd1_us"]
    res["adj1_over_fwd1"] = res["adj1_us"] / res["fwd1_us"]
    del A
    B = DeviceTLR(TLRBatch([T] * batch))
    xs = cupy.stack([x1] * batch)
    res["batch"] = batch
    res["batch_MB"] = B.nbytes / 1e6
    res["batch1_us"] = event_time(lambda: B @ xs, repeats) * 1e6
    res["batch_GBs"] = T.mvm_bytes(1) * batch / (res["batch1_us"] * 1e-6) / 1e9
    res["fwd1_GBs"] = T.mvm_bytes(1) / (res["fwd1_us"] * 1e-6) / 1e9
    res["batch_over_copy"] = res["batch_GBs"] / res["copy_GBs"]
    del B
    full = (D @ x1).get()
    for storage in ("float16", "bfloat16"):   # 16-bit bases: time, and error against float32
        S = DeviceTLR(T, storage=storage)
        res[f"{storage}_fwd1_us"] = event_time(lambda: S @ x1, repeats) * 1e6
        res[f"{storage}_adj1_us"] = event_time(lambda: S.H @ x1, repeats) * 1e6
        res[f"{storage}_fwd16_us"] = event_time(lambda: S @ x16, repeats) * 1e6
        res[f"{storage}_rel_err"] = float(np.linalg.norm((S @ x1).get() - full)
                                          / np.linalg.norm(full))
        res[f"{storage}_basis_err"] = S.basis_error
    for k, v in res.items():
        print(f"  {k:>16}: {v:.4g}" if isinstance(v, float) else f"  {k:>16}: {v}")
    return res


def run_gpu(args) -> int:
    """``wsesparse bench --gpu``: device, copy rate, the sparse grid and the TLR table.
    Returns 2 (with a message) where cupy or a CUDA device is missing."""
    from wsesparse._cupy_backend import available
    if not available():
        print("wsesparse bench --gpu needs cupy and a CUDA device (pip install cupy-cuda12x); "
              "none found")
        return 2
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    print(f"device {props['name'].decode()}  cupy {cupy.__version__}  "
          f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}  "
          f"started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}", flush=True)
    print(f"copy bandwidth (read + write) {copy_bandwidth() / 1e9:.0f} GB/s", flush=True)
    out = {"host_us": host_overheads()}
    if not args.gpu_skip_grid:
        out["grid"] = run_grid(args.gpu_size, args.gpu_densities, args.tokens, args.dtypes,
                               args.repeats, args.seed)
    if not args.gpu_skip_tlr:
        out["tlr"] = run_tlr_gpu(args.nx, args.nb, args.tol)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=str)
        print(f"wrote {args.json}")
    return 0
