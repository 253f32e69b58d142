"""Matrices and the error measure of the TLR tests (tests/tlr/)."""

from __future__ import annotations

import numpy as np


DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def rel_err(A, T) -> float:
    A64 = np.asarray(A, dtype=np.complex128)
    return float(np.linalg.norm(A64 - T.toarray()) / np.linalg.norm(A64))


def lowrank_plus_noise(rng, m, n, r, noise, dtype):
    def g(*shape):
        z = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            z = z + 1j * rng.standard_normal(shape)
        return z
    # Decaying spectrum (like smooth kernels) plus dense noise.
    A = (g(m, r) * np.logspace(0, -3, r)) @ g(r, n) + noise * g(m, n)
    return A.astype(dtype)
