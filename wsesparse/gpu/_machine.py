"""Rates of the GPUs that ``method="auto"`` uses to choose between our sparse kernel and a
dense product through cuBLAS (densify, then GEMM). Each figure names its source.

The choice compares two estimates (:func:`sparse_seconds`, :func:`dense_seconds`); the rates
only need to be right within a factor where the two are close, which is where either choice
costs little.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class GPURates:
    """Measured rates of one GPU model.

    ``hbm``: bytes/s of a device-to-device copy (read + write). ``gather``: bytes/s at which
    ``csr_dense`` reads rows of X (nonzeros x columns x itemsize over its time) when the
    columns fill a warp. ``gemm``: real flops/s of cuBLAS GEMM per value dtype (complex
    counted as 8 real flops per multiply-add); at N columns a GEMM runs at
    ``gemm / (1 + gemm_half / N)``. ``source``: where the numbers come from.
    """

    name: str
    hbm: float
    gather: float
    gemm: dict = field(default_factory=dict)
    source: str = ""
    gemm_half: float = 8.0


# H200 (SXM, 141 GB HBM3e), measured with `wsesparse bench --gpu` on 2026-11-26 (cupy 14.2,
# CUDA 13.0; docs/gpu.md has the table): copy 4.19 TB/s; csr_dense gathered X rows at 9.3-11.7
# TB/s wherever nnz * N >= 2.7e7 (the L2's rate: X of 16384 x N fits in it); cuBLAS SGEMM
# 50.5 TFLOP/s, DGEMM 63 TFLOP/s at N >= 256 (16384^2 x N). Complex GEMM rates are not
# measured: taken as the real ones (a complex multiply-add counted as 8 flops).
H200 = GPURates("H200", hbm=4.19e12, gather=10.5e12,
                gemm={"float32": 50.5e12, "float64": 63e12, "complex64": 50.5e12,
                      "complex128": 63e12},
                source="wsesparse bench --gpu on an H200, 2026-11-26 (docs/gpu.md)")
# H100 80GB HBM3 (SXM), measured with `wsesparse bench --gpu` on 2026-11-27 (session 17, two
# runs; docs/gpu.md "Measured (H100)"): copy 2.94-2.99 TB/s; csr_dense gathered X rows at
# 7.7-9.3 TB/s at density >= 0.01, N >= 256 (below the H200's: the same L2, slower clocks or
# memory under it); cuBLAS SGEMM 50.6 TFLOP/s, DGEMM 62.5 TFLOP/s at N = 1024 (16384^2 x N),
# falling faster with N than the H200's: N = 64 took 0.90-0.95 ms (float32) and 0.79-0.82
# (float64) against 2.72-2.76 and 2.28-2.36 at N = 256, which gemm_half = 32 fits.
H100 = GPURates("H100", hbm=2.96e12, gather=8.5e12,
                gemm={"float32": 50.5e12, "float64": 63e12, "complex64": 50.5e12,
                      "complex128": 63e12},
                source="wsesparse bench --gpu on an H100, 2026-11-27 (docs/gpu.md)",
                gemm_half=32.0)

_BY_NAME = (("H200", H200), ("H100", H100))


def rates_for(device_name: str) -> GPURates:
    """The rates of the GPU called ``device_name`` (H100 figures for unknown models).

    Examples
    --------
    >>> rates_for("NVIDIA H200").name, rates_for("NVIDIA H100 80GB HBM3").name
    ('H200', 'H100')
    >>> rates_for("Tesla T4").name
    'H100'
    """
    for key, rates in _BY_NAME:
        if key in device_name:
            return rates
    return H100


def sparse_seconds(r: GPURates, n_rows: int, n_cols: int, nnz: int, dtype,
                   index_itemsize: int) -> float:
    """Estimated time of ``csr_dense``: the X rows it gathers, its matrix and output.

    Examples
    --------
    >>> round(sparse_seconds(H200, 16384, 256, 2_684_355, np.float32, 4) * 1e3, 2)   # 0.31 measured
    0.27
    """
    item = np.dtype(dtype).itemsize
    gathered = nnz * max(n_cols, 1) * item
    streamed = nnz * (item + index_itemsize) + n_rows * max(n_cols, 1) * item
    return gathered / r.gather + streamed / r.hbm


def gemm_seconds(r: GPURates, n_rows: int, n_inner: int, n_cols: int, dtype) -> float:
    """Estimated time of a dense ``(n_rows x n_inner) @ (n_inner x n_cols)`` through cuBLAS:
    its flops or its reading of the dense matrix, whichever takes longer; the flop rate falls
    as ``1 / (1 + r.gemm_half / n_cols)`` (H200: 44 of 50.5 TFLOP/s for SGEMM at N = 64).

    Examples
    --------
    >>> round(gemm_seconds(H200, 16384, 16384, 256, np.float32) * 1e3, 2)   # 2.72 measured
    2.81
    """
    dtype = np.dtype(dtype)
    flops = (8 if dtype.kind == "c" else 2) * n_rows * n_inner * max(n_cols, 1)
    rate = r.gemm[dtype.name] / (1 + r.gemm_half / max(n_cols, 1))
    return max(flops / rate, n_rows * n_inner * dtype.itemsize / r.hbm)


def densify_seconds(r: GPURates, n_rows: int, n_inner: int, nnz: int, dtype) -> float:
    """Estimated time of ``csr_densify`` into zeros: the dense matrix written once, then a
    32-byte sector touched per stored entry.

    Examples
    --------
    >>> round(densify_seconds(H200, 16384, 16384, 26843546, np.float32) * 1e3, 2)
    0.56
    """
    dense = n_rows * n_inner * np.dtype(dtype).itemsize
    return (dense + 48 * nnz) / r.hbm
