"""Tile boundaries and the 64-byte aligned buffers of the stacked TLR bases."""

from __future__ import annotations

import numpy as np

__all__ = ["ALIGN", "aligned_empty", "copy_aligned", "tile_bounds"]

# Byte alignment of the stacked bases (a cache line / one AVX-512 register).
ALIGN = 64


def aligned_empty(n: int, dtype: np.dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    raw = np.empty(n * dtype.itemsize + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + n * dtype.itemsize].view(dtype)


def tile_bounds(size: int, nb: int) -> np.ndarray:
    return np.append(np.arange(0, size, nb, dtype=np.int64), np.int64(size))


def copy_aligned(a: np.ndarray) -> np.ndarray:
    out = aligned_empty(a.size, a.dtype)
    out[:] = a.ravel()
    return out
