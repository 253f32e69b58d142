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
# # TLR-MVM on a seismic frequency slice
#
# A frequency slice of seismic data (sources x receivers on a surface grid) is dense but
# data-sparse: tiles of nearby sources and receivers are numerically low rank. `TLRMatrix`
# compresses every nb x nb tile to `U_ij V_ij^T` under a whole-matrix accuracy `tol`, and the
# three-phase TLR-MVM streams the stacked bases, the algorithm of the 92.58 PB/s run on
# 48 CS-2 systems. This notebook shows (1) the tile-rank map with sources/receivers in row
# (normal) order and along a Hilbert curve, (2) accuracy vs storage over `tol`, (3) the
# bandwidth the CPU kernel sustains and what the wafer model estimates.
# `WSESPARSE_SMALL=1` shrinks it; figures go to `$WSESPARSE_FIGURES`.

# %%
import os
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from wsesparse import TLRMatrix
from wsesparse.datasets import seismic_slice
from wsesparse.wafer.tlr import estimate_tlrmvm

SMALL = os.environ.get("WSESPARSE_SMALL", "") not in ("", "0")
_here = Path(__file__).parent if "__file__" in globals() else Path.cwd()
FIGURES = Path(os.environ.get("WSESPARSE_FIGURES") or _here / "figures")
FIGURES.mkdir(parents=True, exist_ok=True)

NX, NB = (16, 32) if SMALL else (60, 128)   # NX x NX surface grid; matrix NX^2 x NX^2
FREQ = 10.0
TOLS = [1e-1, 1e-2, 1e-3] if SMALL else [3e-1, 1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4]

# %% [markdown]
# ## Rank map: normal vs Hilbert order

# %%
slices, tlrs = {}, {}
for order in ("row", "hilbert"):
    A = seismic_slice(nx=NX, ny=NX, frequency=FREQ, order=order)
    t = time.perf_counter()
    T = TLRMatrix.from_dense(A, nb=NB, tol=1e-3)
    slices[order], tlrs[order] = A, T
    print(f"{order:<8} {A.shape[0]}x{A.shape[1]} {A.dtype}: mean rank {T.ranks.mean():6.2f}, "
          f"max {T.ranks.max()}, storage {T.nbytes / 1e6:8.2f} MB "
          f"(compression {T.compression_ratio:5.2f}x), {time.perf_counter() - t:.2f} s")

fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
vmax = max(T.ranks.max() for T in tlrs.values())
for ax, (order, T) in zip(axes, tlrs.items()):
    im = ax.imshow(T.ranks, vmin=0, vmax=vmax, cmap="magma")
    ax.set_title(f"{order} order: mean rank {T.ranks.mean():.1f}, "
                 f"{T.compression_ratio:.1f}x smaller", fontsize=9)
    ax.set_xlabel("tile column")
    ax.set_ylabel("tile row")
fig.colorbar(im, ax=axes, label="tile rank")
fig.suptitle(f"seismic slice {NX * NX}x{NX * NX}, {FREQ:g} Hz, nb={NB}, tol=1e-3", fontsize=9)
fig.savefig(FIGURES / "tlr_rank_map.png", dpi=90)

# %% [markdown]
# ## Accuracy vs storage
# The measured relative Frobenius error `‖A − T‖_F / ‖A‖_F` (always at most `tol`: the
# guarantee is on the whole matrix) against the storage of the compressed bases.

# %%
acc = {}
for order, A in slices.items():
    nA = np.linalg.norm(A)
    pts = []
    for tol in TOLS:
        T = TLRMatrix.from_dense(A, nb=NB, tol=tol)
        err = float(np.linalg.norm(A - T.toarray()) / nA)
        assert err <= tol * (1 + 1e-6), (order, tol, err)
        pts.append((tol, err, T.nbytes / A.nbytes))
    acc[order] = pts
    print(order, " ".join(f"tol {t:g}: err {e:.2e}, {100 * s:.1f} %" for t, e, s in pts))

fig, ax = plt.subplots(figsize=(5.5, 3.8))
for order, pts in acc.items():
    ax.plot([p[2] * 100 for p in pts], [p[1] for p in pts], "o-", label=f"{order} order")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("storage, % of the dense matrix")
ax.set_ylabel("relative Frobenius error")
ax.set_title("accuracy vs storage (one point per tol)", fontsize=9)
ax.legend()
fig.tight_layout()
fig.savefig(FIGURES / "tlr_accuracy_storage.png", dpi=90)

# %% [markdown]
# ## Bandwidth
# Sustained bandwidth counts the bytes of U and V plus x and y once per product
# (`T.mvm_bytes()`), the measure of the 92.58 PB/s record. CPU: best of repeated products with
# all cores. Wafer: `estimate_tlrmvm` on one WSE-2 with as many copies (frequency slices) as
# fit, and on 48 systems.

# %%
T = tlrs["hilbert"]
x = np.ones(T.shape[1], dtype=np.complex64)
T @ x
best = np.inf
for _ in range(5 if SMALL else 30):
    t = time.perf_counter()
    T @ x
    best = min(best, time.perf_counter() - t)
cpu_bw = T.mvm_bytes() / best
dense_t = np.inf
A = slices["hilbert"]
A @ x
for _ in range(3 if SMALL else 10):
    t = time.perf_counter()
    A @ x
    dense_t = min(dense_t, time.perf_counter() - t)
print(f"CPU TLR-MVM: {best * 1e6:.1f} us, {cpu_bw / 1e9:.2f} GB/s; dense GEMV "
      f"{dense_t * 1e6:.1f} us (TLR-MVM {dense_t / best:.2f}x as fast)")
est1 = estimate_tlrmvm(T, systems=1)
est48 = estimate_tlrmvm(T, systems=48)
print(est1.summary())
print(est48.summary())

fig, ax = plt.subplots(figsize=(5, 3.5))
labels = ["CPU (this machine)", "1 x WSE-2 (model)", "48 x WSE-2 (model)", "published\n48 x CS-2"]
vals = [cpu_bw, est1.bandwidth_bytes_per_s, est48.bandwidth_bytes_per_s, 92.58e15]
ax.bar(labels, vals, color=["C0", "C1", "C1", "C2"])
ax.set_yscale("log")
ax.set_ylabel("sustained bandwidth (bytes/s)")
ax.set_title(f"TLR-MVM bandwidth, {T.shape[0]}x{T.shape[1]} slice", fontsize=9)
ax.tick_params(axis="x", labelsize=7)
fig.tight_layout()
fig.savefig(FIGURES / "tlr_bandwidth.png", dpi=90)
print("wrote figures to", FIGURES)

# %% [markdown]
# ## Least squares with the compressed operator
# Redatuming and multi-dimensional deconvolution invert a frequency slice: find `x` with
# `A x ≈ b` in the least-squares sense. LSQR calls the forward product and the adjoint once
# each per iteration; `T.aslinearoperator()` gives both from the same stored bases
# (`T @ x` and `T.H @ y`). The same solve with the dense matrix shows the time per
# iteration against the dense GEMV pair and how close the two solutions are (the operator
# differs by at most `tol` in the Frobenius norm).

# %%
from scipy.sparse.linalg import aslinearoperator, lsqr

rng = np.random.default_rng(0)
n_src = T.shape[1]
x_true = (rng.standard_normal(n_src) + 1j * rng.standard_normal(n_src)).astype(np.complex64)
b = A @ x_true
iters = 10 if SMALL else 50
solves = {}
for name, op in (("TLR", T.aslinearoperator()), ("dense", aslinearoperator(A))):
    op.matvec(x_true), op.rmatvec(b)  # warm-up (first-call costs)
    t = time.perf_counter()
    sol, _, itn = lsqr(op, b, damp=1e-3, atol=0, btol=0, iter_lim=iters)[:3]
    solves[name] = (sol, (time.perf_counter() - t) / itn, itn)
for name, (sol, per_it, itn) in solves.items():
    print(f"LSQR {name:5s}: {itn} iterations, {per_it * 1e3:.3f} ms per iteration, "
          f"residual {np.linalg.norm(A @ sol - b) / np.linalg.norm(b):.2e}")
diff = np.linalg.norm(solves["TLR"][0] - solves["dense"][0]) / np.linalg.norm(solves["dense"][0])
print(f"time per iteration: dense / TLR = {solves['dense'][1] / solves['TLR'][1]:.1f}; "
      f"solutions differ by {diff:.1e} (relative)")
