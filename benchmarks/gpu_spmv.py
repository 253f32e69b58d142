"""GPU CSR products at few columns: csr_dense's unroll depth and the one-shot call's cost.

Needs cupy and a CUDA device. For each dtype, density and N (16384^2 CSR, uniform random),
times in one process, in interleaved rounds (best of ``--repeats`` per round, CUDA events,
the minimum over rounds):

- ``cusparse``: cupyx's ``A @ x``;
- ``prepared``: ``S @ x`` on a ``DeviceCSR`` (its product kernel, ``method="auto"``);
- for every unroll depth U (``CSR_UNROLL``, kernels.cu; the shipped depth is marked ``*``):
  ``kernel U`` = ``sparse_matmul(S, x, method="sparse")`` and ``one-shot U`` =
  ``sparse_matmul(A, x)`` (the checking kernel and its sync) with ``csr_dense`` compiled at
  that depth; with ``--compare FILE`` also ``kernel other`` / ``one-shot other``, compiled
  from another kernels.cu at the shipped depth. Every variant's results are compared byte
  for byte with the shipped depth's.

Then ``--profile`` one-shot SpMV calls (4096^2, density 0.001) under cProfile: where the
host time of a small product goes.

    PYTHONPATH=. python benchmarks/gpu_spmv.py --unroll 2,4,8 --densities 0.01,0.1,0.3
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
from contextlib import contextmanager

import numpy as np


def _variant_kernels(depth: int, source: str | None = None):
    """A stand-in for ``wsesparse.gpu._module.kernel`` that compiles ``csr_dense`` at the
    unroll ``depth``, from ``source`` (the text of a kernels.cu; default: the shipped one);
    other families as shipped."""
    import cupy
    from wsesparse.gpu import _module
    shipped = _module.kernel
    mods: dict = {}
    funcs: dict = {}     # kept, as _module.kernel keeps its own: the same host cost a call

    def kernel(family, dtype, *params, storage=None):
        if family != "csr_dense":
            return shipped(family, dtype, *params, storage=storage)
        dtype = np.dtype(dtype)
        f = funcs.get((dtype, params))
        if f is None:
            if dtype not in mods:
                mods[dtype] = cupy.RawModule(
                    code=source or _module.source(),
                    options=_module._OPTIONS + (f"-DCSR_UNROLL={depth}",),
                    name_expressions=_module.family_names("csr_dense", dtype))
            f = funcs[dtype, params] = mods[dtype].get_function(
                _module.name("csr_dense", dtype, *params))
        return f
    return kernel


@contextmanager
def _kernels_from(kernel):
    """``wsesparse.gpu._module.kernel`` replaced by ``kernel`` (None: as shipped) inside the
    block, restored after it, also on an error."""
    from wsesparse.gpu import _module
    shipped = _module.kernel
    _module.kernel = kernel or shipped
    try:
        yield
    finally:
        _module.kernel = shipped


def _shipped_depth() -> int:
    import re
    from wsesparse.gpu import _module
    return int(re.search(r"#define CSR_UNROLL (\d+)", _module.source()).group(1))


def run(densities, tokens, dtypes, depths, repeats: int, rounds: int, m: int = 16384,
        compare: str | None = None):
    import cupy
    from wsesparse import sparse_matmul
    from wsesparse.bench.gpu import event_time, random_csr
    from wsesparse.gpu import DeviceCSR
    base = _shipped_depth()
    # the shipped depth first: its bytes are the reference of the others
    depths = [base] + [u for u in depths if u != base]
    kernels = {str(u): _variant_kernels(u) for u in depths}
    if compare:      # another kernels.cu (e.g. git show REV:wsesparse/gpu/kernels.cu > F)
        with open(compare) as f:
            kernels["other"] = _variant_kernels(base, f.read())
    print(f"{m}^2 CSR; shipped CSR_UNROLL = {base}; best of {repeats} per round, min of "
          f"{rounds} rounds; us")
    for dtype in dtypes:
        for density in densities:
            A = random_csr(m, m, density, dtype)
            S = DeviceCSR(A)
            for n in tokens:
                X = cupy.random.standard_normal(m if n == 1 else (m, n)).astype(dtype)
                cases = {"cusparse": lambda: A @ X, "prepared": lambda: S @ X}
                for u in kernels:
                    cases[f"kernel {u}"] = (u, lambda: sparse_matmul(S, X, method="sparse"))
                    cases[f"one-shot {u}"] = (u, lambda: sparse_matmul(A, X))
                best = dict.fromkeys(cases, float("inf"))
                refs, differ = {}, []
                for r in range(rounds):
                    for name, case in cases.items():
                        u, fn = case if isinstance(case, tuple) else (None, case)
                        with _kernels_from(kernels.get(u)):
                            if r == 0 and u is not None:
                                kind, y = name.split()[0], fn().get().tobytes()
                                if refs.setdefault(kind, y) != y:
                                    differ.append(name)
                            best[name] = min(best[name], event_time(fn, repeats) * 1e6)
                row = "  ".join(f"{k} {'*' if k.endswith(f' {base}') else ''}{v:7.1f}"
                                for k, v in best.items())
                same = f"  DIFFER: {differ}" if differ else "  (same bytes)"
                print(f"{dtype:>8} d={density:<5} N={n:<4} {row}{same}", flush=True)
            del A, S
            cupy.get_default_memory_pool().free_all_blocks()


def profile(calls: int) -> None:
    import cupy
    from wsesparse import sparse_matmul
    from wsesparse.bench.gpu import random_csr
    A = random_csr(4096, 4096, 0.001, np.float32)
    x = cupy.ones(4096, dtype=np.float32)
    for _ in range(50):
        sparse_matmul(A, x)
    cupy.cuda.Device().synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        sparse_matmul(A, x)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print(f"one-shot SpMV 4096^2 density 0.001, {calls} calls under cProfile:")
    print(out.getvalue())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--densities", default="0.01,0.1,0.3")
    ap.add_argument("--tokens", default="1,8")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--unroll", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", type=int, default=2000, help="calls profiled (0: none)")
    ap.add_argument("--compare", metavar="FILE",
                    help="also time csr_dense compiled from this kernels.cu ('other')")
    a = ap.parse_args(argv)
    depths = [int(u) for u in a.unroll.split(",")]
    run([float(d) for d in a.densities.split(",")], [int(t) for t in a.tokens.split(",")],
        a.dtypes.split(","), depths, a.repeats, a.rounds, compare=a.compare)
    if a.profile:
        profile(a.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
