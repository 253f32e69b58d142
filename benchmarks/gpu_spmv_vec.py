"""Issue #23's long-row SpMV: ``csr_spmv4`` (16-byte loads of 4 nonzeros a lane) against
``csr_dense``, raw launches of the shipped kernels, with and without the one-shot check.

Needs cupy and a CUDA device. For each dtype and density, a 16384^2 random CSR (int32
indices, as cupyx holds them; ``--index int64`` builds a prepared ``DeviceCSR`` with int64
indices and skips cuSPARSE) and one vector. Every kernel variant's result is compared with
``csr_dense``'s before it is timed (the two sum in different orders: equal to rounding); a
variant off by more prints WRONG instead of a time. The checking variants also get a copy of
the indices with one bad index in the middle of a row and must flag it.

Columns (best of ``--repeats`` per round, min of ``--rounds`` interleaved rounds, CUDA events,
microseconds): ``cusparse`` (cupyx's ``A @ x``), ``prepared`` (``S @ x`` on a ``DeviceCSR``)
and ``oneshot`` (``sparse_matmul(A, x)``), host work included; ``dense``/``denseC`` and
``spmv4``/``spmv4C``: raw launches of ``csr_dense`` and ``csr_spmv4``, unchecked / checked.

    PYTHONPATH=. python benchmarks/gpu_spmv_vec.py --densities 0.001,0.01,0.1,0.3

Session 23 timed a prototype of the kernel here; session 28 shipped it (docs/gpu.md).
"""

from __future__ import annotations

import argparse

import numpy as np


def kernel_cases(S, x, y, flags, dtype) -> dict:
    """Raw launches of ``csr_dense`` and ``csr_spmv4`` on a checked ``DeviceCSR`` ``S``:
    name -> ``f(indices)`` that computes ``y = S @ x`` with those indices (checking variants
    store a fault into ``flags``, a one-element int32 device array). Tested without a GPU
    in tests/bench/test_gpu_spmv_script.py.
    """
    from wsesparse.gpu import _module
    from wsesparse.gpu.csr import _address
    from wsesparse.gpu.plan import BLOCK, csr_launch, spmv4_grid
    m, k = S.shape
    vals = S.values(np.dtype(dtype))
    launch = csr_launch(m, 1, S.nnz, 1)
    cases = {}
    for chk in (False, True):
        ptr = np.uint64(_address(flags) if chk else 0)
        tail = (np.int64(k), np.int64(S.indices.size), ptr)
        dense = _module.kernel("csr_dense", dtype, S.indices.dtype, 1, chk)
        spmv4 = _module.kernel("csr_spmv4", dtype, S.indices.dtype, chk)
        c = "C" if chk else ""
        cases[f"dense{c}"] = (
            lambda ix, f=dense, tail=tail: f(launch.grid, (BLOCK,), (
                S.indptr, ix, vals, x, y, np.int64(m), np.int64(1), np.int64(1), np.int64(1),
                np.int64(1), np.int32(launch.gs_log), np.int32(launch.q_log)) + tail))
        cases[f"spmv4{c}"] = (
            lambda ix, f=spmv4, tail=tail: f((spmv4_grid(m),), (BLOCK,), (
                S.indptr, ix, vals, x, y, np.int64(m), np.int64(1), np.int64(1)) + tail))
    return cases


def checked_cases(S, x, dtype, tol: float) -> tuple[dict, list[str]]:
    """The kernel cases whose results match ``csr_dense``'s (and whose checking variants flag
    a bad index), as ``name -> f()``, and a line for each that failed."""
    import cupy
    m, k = S.shape
    y, ref = cupy.empty(m, dtype), cupy.empty(m, dtype)
    flags = cupy.zeros(1, np.int32)
    cases = kernel_cases(S, x, y, flags, dtype)
    ix = S.indices
    kernel_cases(S, x, ref, flags, dtype)["dense"](ix)
    scale = float(cupy.abs(ref).max()) or 1.0
    ok, wrong = {}, []
    bad = ix.copy()
    r0, r1 = int(S.indptr[m // 2]), int(S.indptr[m // 2 + 1])
    if r1 > r0:
        bad[(r0 + r1) // 2] = k
    for name, f in cases.items():
        f(ix)
        err = float(cupy.abs(y - ref).max()) / scale
        if err > tol or int(flags[0]):
            wrong.append(f"{name} WRONG (rel. {err:.1e}, flags {int(flags[0])})")
            flags[0] = 0
            continue
        if name.endswith("C") and r1 > r0:
            f(bad)
            if int(flags[0]) != 8:
                wrong.append(f"{name} MISSED a bad index (flags {int(flags[0])})")
                continue
            flags[0] = 0
        ok[name] = lambda f=f: f(ix)
    return ok, wrong


def run(densities, dtypes, index: str, repeats: int, rounds: int, m: int = 16384) -> None:
    import cupy
    from wsesparse import sparse_matmul
    from wsesparse.bench.gpu import event_time, random_csr
    from wsesparse.gpu import DeviceCSR
    print(f"{m}^2 CSR, N = 1, {index} indices; best of {repeats} per round, min of {rounds} "
          f"rounds; us")
    for dtype in dtypes:
        for density in densities:
            A = random_csr(m, m, density, dtype)
            if index == "int32":
                S = DeviceCSR(A)
                cases = {"cusparse": lambda: A @ x, "prepared": lambda: S @ x,
                         "oneshot": lambda: sparse_matmul(A, x)}
            else:
                S = DeviceCSR((A.data, A.indices.astype(index), A.indptr.astype(index)),
                              shape=A.shape)
                cases = {"prepared": lambda: S @ x}
            x = cupy.random.standard_normal(m).astype(dtype)
            single = np.dtype(dtype) in (np.float32, np.complex64)
            ok, wrong = checked_cases(S, x, dtype, 1e-4 if single else 1e-10)
            cases.update(ok)
            best = dict.fromkeys(cases, float("inf"))
            for _ in range(rounds):
                for name, fn in cases.items():
                    best[name] = min(best[name], event_time(fn, repeats) * 1e6)
            row = "  ".join(f"{name} {t:7.1f}" for name, t in best.items())
            print(f"{dtype:>8} d={density:<5} {row}  {' '.join(wrong)}", flush=True)
            del A, S, x, cases, ok     # (the cases hold the matrices' arrays)
            cupy.get_default_memory_pool().free_all_blocks()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--densities", default="0.001,0.003,0.01,0.05,0.1,0.3")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--index", default="int32", choices=("int32", "int64"))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=16384, help="rows and columns of the CSR")
    a = ap.parse_args(argv)
    run([float(d) for d in a.densities.split(",")], a.dtypes.split(","), a.index, a.repeats,
        a.rounds, a.size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
