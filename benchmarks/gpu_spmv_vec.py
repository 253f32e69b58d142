"""A prototype for issue #23's long-row SpMV: 16-byte loads of 4 consecutive nonzeros a lane.

Needs cupy and a CUDA device. ``csr_dense`` (wsesparse/gpu/kernels.cu) gives a lane of a
row the nonzeros p, p + P, p + 2P, ... one 4-byte index and one value at a time. The
prototype kernel ``spmv_vec<T, U>`` here (one warp a row, int32 indices, float32/float64,
no checks) gives lane l the nonzeros 4l .. 4l + 3 of every 128 (after a head of up to 3
that brings the row to a 16-byte boundary), read as one ``int4`` of indices and one
``float4`` (two ``double2``) of values, U such groups loaded before their sums. The sums
then run in another order than ``csr_dense``'s (and its host replay's), so the results
differ in rounding: the script checks each variant against ``csr_dense`` on the same arrays
(those of a prepared ``DeviceCSR``) before it times it, and prints WRONG instead of a time
for a variant off by more than rounding.

Times (best of ``--repeats`` per round, min of ``--rounds`` interleaved rounds, CUDA events,
microseconds): ``cusparse`` (cupyx's ``A @ x``), ``prepared`` (``S @ x``, host work
included), ``csr_dense`` and ``vecU`` (raw launches of the kernels, no host work).

    PYTHONPATH=. python benchmarks/gpu_spmv_vec.py --densities 0.01,0.1,0.3

Session 23 (docs/gpu.md) timed this kernel on an H200 with a harness that paired the wrong
arrays (its check failed), so its times are leads, not results.
"""

from __future__ import annotations

import argparse

import numpy as np

SOURCE = r"""
template <typename T, int U>
__global__ void __launch_bounds__(256) spmv_vec(
        const int* __restrict__ indptr, const int* __restrict__ indices,
        const T* __restrict__ data, const T* __restrict__ x, T* __restrict__ y, int n_rows) {
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (row >= n_rows) return;                        // (the same for the whole warp)
    const int start = indptr[row], end = indptr[row + 1];
    T acc = 0;
    int a = (start + 3) & ~3;                          // the first 16-byte boundary
    if (a > end) a = end;
    int b = end & ~3;                                  // the last
    if (b < a) b = a;
    if (lane < a - start) acc = fma(data[start + lane], x[indices[start + lane]], acc);
    int k = a + 4 * lane;
    for (; k + 128 * (U - 1) < b; k += 128 * U) {
        int4 c[U];
        T v[U][4];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            c[u] = *reinterpret_cast<const int4*>(indices + k + 128 * u);
            if (sizeof(T) == 4) {
                const float4 f = *reinterpret_cast<const float4*>(data + k + 128 * u);
                v[u][0] = f.x; v[u][1] = f.y; v[u][2] = f.z; v[u][3] = f.w;
            } else {
                const double2 f0 = *reinterpret_cast<const double2*>(data + k + 128 * u);
                const double2 f1 = *reinterpret_cast<const double2*>(data + k + 128 * u + 2);
                v[u][0] = f0.x; v[u][1] = f0.y; v[u][2] = f1.x; v[u][3] = f1.y;
            }
        }
        T xv[U][4];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            xv[u][0] = x[c[u].x]; xv[u][1] = x[c[u].y];
            xv[u][2] = x[c[u].z]; xv[u][3] = x[c[u].w];
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc = fma(v[u][j], xv[u][j], acc);
    }
    for (; k < b; k += 128) {
        const int4 c = *reinterpret_cast<const int4*>(indices + k);
        acc = fma(data[k], x[c.x], acc);
        acc = fma(data[k + 1], x[c.y], acc);
        acc = fma(data[k + 2], x[c.z], acc);
        acc = fma(data[k + 3], x[c.w], acc);
    }
    if (lane < end - b) acc = fma(data[b + lane], x[indices[b + lane]], acc);
    for (int m = 16; m >= 1; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
    if (lane == 0) y[row] = acc;
}
"""
UNROLLS = (1, 2, 4)
CTYPES = {"float32": "float", "float64": "double"}


def names() -> list[str]:
    """The instantiations the script compiles.

    Examples
    --------
    >>> names()[:2]
    ['spmv_vec<float, 1>', 'spmv_vec<float, 2>']
    """
    return [f"spmv_vec<{t}, {u}>" for t in CTYPES.values() for u in UNROLLS]


def run(densities, dtypes, repeats: int, rounds: int, m: int = 16384) -> None:
    import cupy
    from wsesparse.bench.gpu import event_time, random_csr
    from wsesparse.gpu import DeviceCSR, _module
    from wsesparse.gpu.plan import BLOCK, csr_launch
    mod = cupy.RawModule(code=SOURCE, options=("-std=c++17",), name_expressions=names())
    print(f"{m}^2 CSR, N = 1; best of {repeats} per round, min of {rounds} rounds; us")
    for dtype in dtypes:
        for density in densities:
            A = random_csr(m, m, density, dtype)
            S = DeviceCSR(A)
            ip, ix, vals = S.indptr, S.indices, S.values(np.dtype(dtype))
            if ix.dtype != np.int32 or any(a.data.ptr % 16 for a in (ix, vals)):
                print(f"{dtype} d={density}: needs int32 indices and 16-byte aligned arrays")
                continue
            x = cupy.random.standard_normal(m).astype(dtype)
            y_ref, y = cupy.empty(m, dtype), cupy.empty(m, dtype)
            launch = csr_launch(m, 1, S.nnz, 1)
            dense = _module.kernel("csr_dense", dtype, ix.dtype, 1, False)
            args = (ip, ix, vals, x, y_ref, np.int64(m), np.int64(1), np.int64(1), np.int64(1),
                    np.int64(1), np.int32(launch.gs_log), np.int32(launch.q_log),
                    np.int64(m), np.int64(ix.size), np.uint64(0))
            cases = {"cusparse": lambda: A @ x, "prepared": lambda: S @ x,
                     "csr_dense": lambda: dense(launch.grid, (BLOCK,), args)}
            cases["csr_dense"]()
            scale = float(cupy.abs(y_ref).max()) or 1.0
            tol = 1e-4 if dtype == "float32" else 1e-10
            wrong = []
            for u in UNROLLS:
                f = mod.get_function(f"spmv_vec<{CTYPES[dtype]}, {u}>")
                go = (lambda f=f: f(((m * 32 + 255) // 256,), (256,),
                                    (ip, ix, vals, x, y, np.int32(m))))
                go()
                err = float(cupy.abs(y - y_ref).max()) / scale
                if err > tol:
                    wrong.append(f"vec{u} WRONG (rel. {err:.1e})")
                else:
                    cases[f"vec{u}"] = go
            best = dict.fromkeys(cases, float("inf"))
            for _ in range(rounds):
                for k, fn in cases.items():
                    best[k] = min(best[k], event_time(fn, repeats) * 1e6)
            row = "  ".join(f"{k} {v:7.1f}" for k, v in best.items())
            print(f"{dtype:>8} d={density:<5} {row}  {' '.join(wrong)}", flush=True)
            del A, S
            cupy.get_default_memory_pool().free_all_blocks()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--densities", default="0.01,0.05,0.1,0.3")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=16384, help="rows and columns of the CSR")
    a = ap.parse_args(argv)
    run([float(d) for d in a.densities.split(",")], a.dtypes.split(","), a.repeats, a.rounds,
        a.size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
