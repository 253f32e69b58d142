"""A/B of kernel builds in one process: the installed kernels against a second build of the
same source with other ``CFLAGS`` (e.g. ``-DWS_SLOW_GATHER=1``), or of another source tree
(``--source``, e.g. a ``git worktree`` of another commit).

The second build goes to a temporary copy of the source tree (``setup.py build_ext --inplace
--force`` with ``CFLAGS``; the flags are no build dependency, hence ``--force``). Its kernel
modules (``--modules``) are loaded beside the installed ones under their own names
(``importlib``, docs/development.md), and the drivers' references to them are swapped for the
B calls. The products users call, one-shot (a scipy CSR) and prepared (``CSR``), SpMV and a few
columns, on random matrices from cache and from DRAM, Poisson 2-D and lsqr's rectangular
system, at each thread count: medians of ``--rounds`` interleaved rounds
(``wsesparse.bench.tlr_setup.interleaved``; about 20 ms of calls a sample), microseconds, and
B / A. ``--set rows`` times prepared SpMV of random rows of one length each and of
Poisson-distributed lengths instead (``row_cases``); ``--set tlr`` the TLR-MVM kernels
(``_tlrmvm``: forward and adjoint with one vector, forward with 16 and 64) on a
cache-resident and a DRAM-resident seismic operator (``tlr_cases``). Every B result is
compared with A's (``allclose``: the two builds may sum in other orders).

Why: Intel AVX-512 builds gather x in SpMV (``WS_SLOW_GATHER`` 0, ``_tiles_base.h``); AMD
builds load it element by element, since gathers were 1.4-4.1x slower there. Run on the lent
16-core Xeon (session 29), it showed that Intel's gathers pay on rows of varying length and
lose on rows in runs of one length (docs/tuning.md, "Intel: scalar loads for runs of one
row length")::

    python benchmarks/kernel_ab.py --cflags=-DWS_SLOW_GATHER=1         # on an Intel machine
    python benchmarks/kernel_ab.py --cflags=-DWS_SLOW_GATHER=0 --threads 1,2 --rounds 5
    python benchmarks/kernel_ab.py --set rows --cflags=-DWS_SPMV_GATHER_NNZ=32   # row lengths
    python benchmarks/kernel_ab.py --set tlr --cflags=-DTLR_NO_ZMM     # TLR rows in 32 bytes
    git worktree add ../old HEAD~1 && python benchmarks/kernel_ab.py --source ../old
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

try:
    import wsesparse  # noqa: F401
except ImportError:  # run from a source checkout that is built in place but not installed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import scipy.sparse as sp

import wsesparse
from wsesparse import CSR, _drivers, matmul, sparse_matmul
from wsesparse._hardware import available_cores
from wsesparse._timing import comma_list, thread_counts
from wsesparse.bench.tlr_setup import interleaved, seismic_operator
from wsesparse.bench.workflows import poisson_2d, rectangular_system
from wsesparse.datasets import random_csr
from wsesparse.tlr import matrix as tlr_matrix

ROOT = Path(__file__).resolve().parent.parent
_SKIP = shutil.ignore_patterns(".git", ".venv", "build", "*.so", ".asv", "__pycache__",
                               "*.egg-info", "docs", "notebooks", "benchmarks", "tests")


def build_alternative(cflags: str, where: Path, source: Path = ROOT) -> Path:
    """Build the kernels of a copy of the source tree ``source`` at ``where`` with
    ``CFLAGS=cflags``; returns the copy's ``wsesparse/_kernels`` folder."""
    shutil.copytree(source, where, ignore=_SKIP, dirs_exist_ok=True)
    env = dict(os.environ, CFLAGS=f"{os.environ.get('CFLAGS', '')} {cflags}".strip())
    res = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "--force",
                          "-j", str(os.cpu_count() or 1)],
                         cwd=where, env=env, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"the {cflags} build failed:\n{res.stderr[-3000:]}")
    return where / "wsesparse" / "_kernels"


def load_beside(folder: Path, name: str):
    """The kernel module ``wsesparse._kernels.<name>`` built in ``folder``, loaded beside
    the installed one (``sys.modules`` keeps the installed one)."""
    path = next(folder.glob(f"{name}.*.so"), None) or next(folder.glob(f"{name}.*.pyd"))
    spec = importlib.util.spec_from_file_location(f"wsesparse._kernels.{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: The TLRMatrix operators of ``tlr_cases``: ``swapped`` drops their kept plans, which hold
#: the kernel functions of the build that made them
_TLR_OPERATORS: list = []


@contextlib.contextmanager
def swapped(modules: dict):
    """The drivers and ``TLRMatrix`` call the given kernel modules (name -> module) inside
    the block (the plans of the operators in ``_TLR_OPERATORS`` are dropped on the way in
    and out: a kept plan would call the build that made it)."""
    saved = []
    for owner in (_drivers, matmul, tlr_matrix):
        for name, mod in modules.items():
            if hasattr(owner, name):
                saved.append((owner, name, getattr(owner, name)))
                setattr(owner, name, _with_plan(mod) if name == "_tlrmvm" else mod)
    _forget_tlr_plans()
    try:
        yield
    finally:
        for owner, name, mod in saved:
            setattr(owner, name, mod)
        _forget_tlr_plans()


def _with_plan(mod):
    """A ``_tlrmvm`` build from before ``Plan`` (session 51) with one made of its
    ``tlr_matmat``/``tlr_rmatmat``: TLRMatrix's vector path as it was then (an (1, n) view
    in, an (1, m) array out; the kernel's checks at every call), so an A/B against an older
    tree times what that tree ran."""
    if hasattr(mod, "Plan"):
        return mod

    class _OldPlan:
        def __init__(self, adjoint, U, V, index, items1, items3, n_threads, prefetch,
                     vector_bytes):
            self._args = (U, V, *index)
            self._rest = (items1, items3, n_threads, prefetch)
            self._kernel = mod.tlr_rmatmat if adjoint else mod.tlr_matmat
            m, n = int(index[0][-1]), int(index[1][-1])
            self._n_out = n if adjoint else m
            self._small = (m + n + 2 * len(index[6])) * U.itemsize < vector_bytes

        def __call__(self, X, Y):
            self._kernel(*self._args, X, Y, *self._rest)

        def vector(self, x):
            if not self._small:
                return None
            y = np.empty((1, self._n_out), x.dtype)
            self._kernel(*self._args, np.ascontiguousarray(x).reshape(1, -1), y, *self._rest)
            return y.reshape(self._n_out)

    return types.SimpleNamespace(Plan=_OldPlan, **{k: getattr(mod, k) for k in dir(mod)
                                                    if not k.startswith("__")})


def _forget_tlr_plans() -> None:
    for T in _TLR_OPERATORS:
        T.__dict__.pop("_plan_cache", None)


def cases(scale: float):
    """``(label, A, X)``: the products timed (X a vector or a few columns)."""
    rng = np.random.default_rng(0)
    out = []
    # (4096^2 density 0.1: x of 16 kB stays in L1, rows of 410; #24's point against MKL)
    for full, d, dtype in ((16384, 0.001, np.float32), (16384, 0.001, np.float64),
                           (16384, 0.01, np.float32), (16384, 0.1, np.float32),
                           (4096, 0.1, np.float32)):
        side = max(64, int(full * scale))
        A = random_csr(side, side, d, dtype, seed=1)
        for n in (1, 8):
            X = rng.standard_normal(side if n == 1 else (side, n)).astype(dtype)
            out.append((f"{side}^2 d={d:g} {np.dtype(dtype).name} N={n}", A, X))
    P = poisson_2d(max(8, int(1000 * scale)))
    out.append((f"Poisson {P.shape[0]} float64 N=1", P, rng.standard_normal(P.shape[0])))
    R = rectangular_system(max(100, int(200_000 * scale)), max(50, int(50_000 * scale)), 11)
    out.append((f"lsqr R {R.shape[0]}x{R.shape[1]} N=1", R, rng.standard_normal(R.shape[1])))
    return out


def row_cases(scale: float):
    """``(label, A, x)``: SpMV of random rows of one length (``ROW_LENGTHS``) or of
    Poisson-distributed lengths of that mean (``~``), about 2 M
    nonzeros each, with x of 16384 entries (in L2), 200,000 (0.8-1.6 MB, about L2's size)
    and 2 M (beyond it by far), float32 and float64, then Poisson 2-D; for the row-length rules of
    the SpMV kernels (``WS_SPMV_GATHER_NNZ``, ``WS_SPMV_RUN_SCALAR``,
    ``WS_SPMV_GATHER_ROW_MIN_<T>``)."""
    rng = np.random.default_rng(0)
    out = []
    for n_cols in (16384, 200_000, 2_000_000):
        n_cols = max(64, int(n_cols * scale))
        for dtype in (np.float32, np.float64):
            for per_row, spread in [(n, s) for n in ROW_LENGTHS for s in (False, True)]:
                n_rows = max(1, int(2_000_000 * scale) // per_row)
                # Fixed lengths, or Poisson-distributed ones of that mean ("~"), as in
                # random_csr: the branches at a row's end then guess wrong now and then.
                lengths = (rng.poisson(per_row, n_rows) if spread
                           else np.full(n_rows, per_row))
                indptr = np.concatenate([[0], np.cumsum(lengths)])
                idx = rng.integers(0, n_cols, int(indptr[-1])).astype(np.int32)
                A = sp.csr_array((rng.standard_normal(idx.size).astype(dtype), idx, indptr),
                                 shape=(n_rows, n_cols))
                A.sort_indices()
                x = rng.standard_normal(n_cols).astype(dtype)
                out.append((f"{n_rows}x{n_cols} {'~' if spread else ''}{per_row}/row "
                            f"{np.dtype(dtype).name}", A, x))
    P = poisson_2d(max(8, int(1000 * scale)))
    out.append((f"Poisson {P.shape[0]} float64 N=1", P, rng.standard_normal(P.shape[0])))
    return out


ROW_LENGTHS = (4, 6, 8, 12, 16, 24, 32)


def tlr_cases(scale: float):
    """``(label, kind, f)``: ``f(n_threads)`` runs ``T @ x``, ``T.H @ y`` or ``T @ X`` (4, 16
    and 64 columns) of complex64 ``seismic_operator`` s: 2499^2 (4.5 MB of bases, from
    cache) and 9801^2 (56 MB, from DRAM, or from the L3 of a large one) at scale 1."""
    rng = np.random.default_rng(0)
    out = []
    for nx, ny in ((49, 51), (99, 99)):
        T = seismic_operator(max(6, round(nx * scale)), max(6, round(ny * scale)))[0]
        m, n = T.shape
        x, y = (np.asarray(rng.standard_normal(k) + 1j, np.complex64) for k in (n, m))
        X = (rng.standard_normal((n, 64)) + 1j).astype(np.complex64)
        label = f"TLR {m}^2 ({T.nbytes / 1e6:.1f} MB)"
        _TLR_OPERATORS.append(T)
        out += [(label, "fwd s=1", lambda t, T=T, x=x: T.matvec(x, n_threads=t)),
                (label, "adj s=1", lambda t, T=T, y=y: T.rmatvec(y, n_threads=t))]
        out += [(label, f"fwd s={s}", lambda t, T=T, X=X[:, :s].copy(): T.matvec(X, n_threads=t))
                for s in (4, 16, 64)]
    return out


def _calls(which: str, scale: float):
    """``(label, kind, f)`` of a ``--set``: ``f(n_threads)`` is one timed call."""
    if which == "tlr":
        return tlr_cases(scale)
    out = []
    for label, A, X in (cases if which == "products" else row_cases)(scale):
        P = CSR(A)
        if which == "products":
            out.append((label, "one-shot",
                        lambda t, A=A, X=X: sparse_matmul(A, X, n_threads=t)))
        out.append((label, "prepared", lambda t, P=P, X=X: sparse_matmul(P, X, n_threads=t)))
    return out


def _repeated(fn, reps: int, modules: dict | None = None):
    """A call of ``fn`` ``reps`` times, with the kernel ``modules`` swapped in if given."""
    def run():
        with swapped(modules) if modules else contextlib.nullcontext():
            for _ in range(reps):
                fn()
    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cflags", default="", help="the B build's extra CFLAGS")
    p.add_argument("--source", type=Path, default=ROOT,
                   help="the B build's source tree (default: this checkout)")
    p.add_argument("--modules", type=comma_list(str), default=None,
                   help="kernel modules taken from the B build (default: _spmm,_scatter; "
                        "with --set tlr: _tlrmvm)")
    p.add_argument("--threads", type=comma_list(int), default=None,
                   help="thread counts (default: 1, 2, 4, ... and all cores)")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--scale", type=float, default=1.0, help="problem sides times this")
    p.add_argument("--set", choices=("products", "rows", "tlr"), default="products",
                   help="products: what users call, one-shot and prepared; rows: prepared "
                        "SpMV of random rows of one length each and of Poisson-distributed "
                        "lengths (row_cases); tlr: TLR-MVM (tlr_cases)")
    a = p.parse_args(argv)
    modules = a.modules or (["_tlrmvm"] if a.set == "tlr" else ["_spmm", "_scatter"])
    counts = sorted(set(a.threads or thread_counts(available_cores())))
    if not counts or counts[0] < 1 or a.rounds < 1 or not a.scale > 0:
        p.error("need --threads >= 1, --rounds >= 1 and --scale > 0")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = build_alternative(a.cflags, Path(tmp) / "src", a.source)
        alt = {name: load_beside(folder, name) for name in modules}
        print(f"B: {a.source.name}, CFLAGS={a.cflags!r} (built in "
              f"{time.perf_counter() - t0:.0f} s); A: "
              f"wsesparse {wsesparse.__version__} as installed; modules {', '.join(modules)}")
        print(f"us, medians of {a.rounds} interleaved rounds; B / A < 1: B is faster")
        print(f"{'product':36s} {'call':9s} {'thr':>3s} {'A':>9s} {'B':>9s} {'B / A':>6s}")
        for label, kind, f in _calls(a.set, a.scale):
            for t in counts:
                ref = f(t)
                with swapped(alt):
                    got = f(t)
                if not np.allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max()):
                    raise AssertionError(f"{label}, {kind}: B's result differs from A's")
                t1 = time.perf_counter()
                f(t)
                reps = max(3, min(200, int(0.02 / max(time.perf_counter() - t1, 1e-6))))
                times = interleaved({"A": _repeated(lambda: f(t), reps),
                                     "B": _repeated(lambda: f(t), reps, alt)}, a.rounds)
                ta, tb = (times[k][1] / reps * 1e6 for k in ("A", "B"))
                print(f"{label:36s} {kind:9s} {t:>3d} {ta:>9.1f} {tb:>9.1f} {tb / ta:>6.2f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
