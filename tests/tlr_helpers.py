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


def kernel_product(T, X, adjoint=False, items=None, prefetch=2, n_threads=2):
    """``T @ X`` (or ``T.H @ X``) through ``_tlrmvm.tlr_matmat``/``tlr_rmatmat`` themselves,
    with the work items (default: ``T._items(n_threads, adjoint)``) and the prefetch level
    (0, 1 or 2) given."""
    from wsesparse._kernels import _tlrmvm

    U, V = T._bases(T.dtype)
    XT = np.ascontiguousarray(X.T)
    out = np.empty((XT.shape[0], T.shape[1] if adjoint else T.shape[0]), T.dtype)
    items = T._items(n_threads, adjoint) if items is None else items
    args = (U, V, T.row_ptr, T.col_ptr, T.u_off, T.v_off, T.krow_ptr, T.kcol_ptr, T.perm, XT,
            out, *items, n_threads)
    (_tlrmvm.tlr_rmatmat if adjoint else _tlrmvm.tlr_matmat)(*args, prefetch)
    return out.T
