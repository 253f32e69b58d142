# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # `sparse_matmul` on this CPU: speedup over dense BLAS and scipy vs sparsity
#
# Measured, not modelled: `Y = W @ X` with a uniformly random sparse `W` (M x K) and a dense
# `X` (K x N), timed three ways:
#
# - `sparse_matmul(W, X, method="sparse")` (the AXPY-per-nonzero OpenMP kernel, W prepared as
#   a `wsesparse.CSR` once, as a weight matrix is),
# - dense BLAS `Wd @ X` on an already densified `Wd` (the best case for dense: no conversion),
# - `scipy.sparse` `W @ X`.
#
# The crossover is the density above which dense BLAS is faster than the sparse kernel
# (interpolated on a log scale between the two measured densities around it). Numbers depend
# on the machine and its load. All three use the same number of threads, `WSESPARSE_THREADS`
# (default 1: on a small or shared machine, OpenMP and OpenBLAS worker threads that spin
# after a call steal cores from each other and make multi-threaded timings erratic).
# `WSESPARSE_SMALL=1` shrinks the problem; figures go to `$WSESPARSE_FIGURES`.

# %%
import os
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_info, threadpool_limits

from wsesparse import CSR, sparse_matmul

SMALL = os.environ.get("WSESPARSE_SMALL", "") not in ("", "0")
_here = Path(__file__).parent if "__file__" in globals() else Path.cwd()
FIGURES = Path(os.environ.get("WSESPARSE_FIGURES") or _here / "figures")
FIGURES.mkdir(parents=True, exist_ok=True)

M = K = 1024 if SMALL else 4096
N = 64 if SMALL else 256
DTYPE = np.float32
DENSITIES = np.geomspace(0.002, 0.5, 6 if SMALL else 12)
BUDGET = 0.05 if SMALL else 0.5          # seconds of repeats per measurement
THREADS = int(os.environ.get("WSESPARSE_THREADS", "1"))
threadpool_limits(THREADS)               # BLAS and OpenMP, for the rest of the notebook
print(f"W {M}x{K}, X {K}x{N}, {np.dtype(DTYPE).name}, {THREADS} thread(s) of {os.cpu_count()} cores")
print("BLAS:", [(i.get("internal_api"), i.get("num_threads")) for i in threadpool_info()])


def best_time(f, budget=BUDGET, max_repeats=50):
    """Best of repeated calls within a time budget (at least 3 calls)."""
    f()
    best, spent, n = np.inf, 0.0, 0
    while n < 3 or (spent < budget and n < max_repeats):
        t = time.perf_counter()
        f()
        dt = time.perf_counter() - t
        best, spent, n = min(best, dt), spent + dt, n + 1
    return best


# %%
rng = np.random.default_rng(0)
X = rng.standard_normal((K, N), dtype=DTYPE)
results = []
for dens in DENSITIES:
    W = sp.random(M, K, density=dens, format="csr", dtype=DTYPE, random_state=rng)
    Wp, Wd = CSR(W), W.toarray()
    Y = sparse_matmul(Wp, X, method="sparse")
    np.testing.assert_allclose(Y, Wd @ X, rtol=1e-3, atol=1e-3 * np.abs(Y).max())
    t_sp = best_time(lambda: sparse_matmul(Wp, X, method="sparse", n_threads=THREADS))
    t_bl = best_time(lambda: Wd @ X)
    t_sc = best_time(lambda: W @ X)
    results.append((dens, t_sp, t_bl, t_sc))
    print(f"density {dens:7.4f}: wsesparse {t_sp * 1e3:8.3f} ms  dense BLAS {t_bl * 1e3:8.3f} ms"
          f"  scipy {t_sc * 1e3:8.3f} ms  | vs BLAS {t_bl / t_sp:6.2f}x  vs scipy {t_sc / t_sp:6.2f}x")
res = np.array(results)

# %%
def crossover(dens, ratio):
    """First density where ratio (dense time / sparse time) drops below 1, log-interpolated."""
    below = np.nonzero(ratio < 1)[0]
    if below.size == 0:
        return None
    i = below[0]
    if i == 0:
        return dens[0]
    x0, x1 = np.log(dens[i - 1]), np.log(dens[i])
    y0, y1 = np.log(ratio[i - 1]), np.log(ratio[i])
    return float(np.exp(x0 + (0 - y0) * (x1 - x0) / (y1 - y0)))


vs_blas = res[:, 2] / res[:, 1]
vs_scipy = res[:, 3] / res[:, 1]
cross = crossover(res[:, 0], vs_blas)
print("crossover density (dense BLAS faster above):",
      "none in range" if cross is None else f"{cross:.3f}")

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(res[:, 0], vs_blas, "o-", label="over dense BLAS (pre-densified W)")
ax.plot(res[:, 0], vs_scipy, "s-", label="over scipy.sparse")
ax.axhline(1, color="grey", lw=0.8)
if cross is not None:
    ax.axvline(cross, color="C3", ls="--", label=f"crossover, density {cross:.3f}")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("density of W (1 - sparsity)")
ax.set_ylabel("speedup of wsesparse.sparse_matmul")
ax.set_title(f"W {M}x{K} @ X {K}x{N}, {np.dtype(DTYPE).name}, {THREADS} thread(s)",
             fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(FIGURES / "cpu_speedup.png", dpi=90)
print("wrote", FIGURES / "cpu_speedup.png")
