"""``TLRBatch``: independent TLR-MVMs, one per matrix, and its bad arguments.

Before the fixes ``TLRBatch(None)`` and friends failed with "'NoneType' object is not
iterable". Catalogue: docs/adversarial_inputs.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from wsesparse import TLRBatch
from wsesparse.datasets import seismic_slice


def test_batch_matches_individual_products():
    As = [seismic_slice(nx=10, ny=10, frequency=f) for f in (4.0, 9.0, 14.0)]
    B = TLRBatch.from_dense(As, nb=40, tol=1e-3)
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal(100).astype(np.complex64) for _ in As]
    ys = B @ xs
    for T, x, y in zip(B.matrices, xs, ys):
        np.testing.assert_array_equal(y, T @ x)
    zs = B.rmatvec(ys)
    np.testing.assert_array_equal(zs[2], B[2].H @ ys[2])
    assert B.nbytes == sum(T.nbytes for T in B.matrices)
    assert B.compression_ratio > 1
    with pytest.raises(ValueError, match="3 matrices"):
        B @ xs[:2]
    with pytest.raises(TypeError, match=r"matrices\[0\] must be a TLRMatrix"):
        TLRBatch([np.ones((3, 3))])


def test_batch_empty_and_array_inputs(T, A):
    B = TLRBatch([])
    assert len(B) == 0 and B.matvec([]) == [] and B.nbytes == 0 and B.compression_ratio == 0.0
    B2 = TLRBatch.from_dense(np.stack([A, 2 * A]), nb=16, tol=1e-6)
    ys = B2.matvec(np.ones((2, 30)))                       # a 2-D array of right-hand sides
    np.testing.assert_allclose(ys[1], 2 * (A @ np.ones(30)), rtol=1e-5)
    assert len(B2.matvec(np.ones(30) for _ in range(2))) == 2   # any iterable


def test_batch_bad_arguments(T, A):
    with pytest.raises(TypeError, match="matrices must be an iterable of TLRMatrix, got None"):
        TLRBatch(None)
    with pytest.raises(TypeError, match="matrices must be an iterable of TLRMatrix"):
        TLRBatch(T)
    with pytest.raises(TypeError, match=r"xs must be a sequence .* got None"):
        TLRBatch([T]).matvec(None)
    with pytest.raises(TypeError, match="xs must be a sequence"):
        TLRBatch([T]).matvec(3.0)
    with pytest.raises(ValueError, match=r"As must be a sequence of 2-D arrays or an \(F, m, n\)"):
        TLRBatch.from_dense(A, nb=16)
    with pytest.raises(ValueError, match="As must be a sequence"):
        TLRBatch.from_dense(None)
    with pytest.raises(ValueError, match="x needs 30 rows"):
        TLRBatch([T, T]).matvec([np.ones(30), np.ones(29)])
    # Before: mvm_bytes(-5) was negative, mvm_bytes(1.5) a float.
    with pytest.raises(ValueError, match="n_rhs must be a positive int, got -5"):
        T.mvm_bytes(-5)
    with pytest.raises(TypeError, match="n_rhs must be a positive int, got 1.5"):
        TLRBatch([T]).mvm_bytes(1.5)
    assert TLRBatch([T, T]).mvm_bytes(2) == 2 * T.mvm_bytes(2)


def test_errors_name_the_slice():
    rng = np.random.default_rng(0)
    good = rng.standard_normal((4, 3))
    B = TLRBatch.from_dense([good, good], nb=2, tol=1e-6)
    for threads in (1, 2):
        with pytest.raises(ValueError, match=r"^slice 1: T @ x: .* x needs 3 rows"):
            B.matvec([np.ones(3), np.ones(5)], n_threads=threads)
    with pytest.raises(ValueError, match=r"^slice 0: T.H @ y"):
        B.rmatvec([np.ones(3), np.ones(4)])
    with pytest.raises(TypeError, match=r"^slice 1: A must be a 2-D array, got None"):
        TLRBatch.from_dense([good, None], nb=2)
    with pytest.raises(ValueError, match=r"^slice 2: A contains NaN or inf"):
        TLRBatch.from_dense(np.stack([good, good, np.full((4, 3), np.nan)]), nb=2)
