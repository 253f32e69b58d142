import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import wafer


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sddmm_matches_masked_dense(dtype):
    rng = np.random.default_rng(5)
    W = sp.random(40, 30, density=0.2, format="csr", random_state=3)
    dY = rng.standard_normal((40, 17)).astype(dtype)
    X = rng.standard_normal((30, 17)).astype(dtype)
    G = wafer.sddmm(W, dY, X)
    assert G.dtype == dtype and G.nnz == W.nnz
    np.testing.assert_allclose(G.toarray(), (dY @ X.T) * (W.toarray() != 0), rtol=1e-5, atol=1e-5)


def test_sddmm_rejects_bad_shapes():
    W = sp.eye(4, format="csr")
    with pytest.raises(ValueError, match="dY"):
        wafer.sddmm(W, np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="X"):
        wafer.sddmm(W, np.ones((4, 2)), np.ones((4, 3)))
    with pytest.raises(TypeError, match="sddmm"):
        wafer.sddmm(W, np.ones((4, 2), dtype=complex), np.ones((4, 2)))


def test_delta_cpu_and_wafer_estimate_are_the_reversed_stream():
    m = dataclasses.replace(wafer.WSE2, rows=8, cols=4)
    W = sp.random(64, 48, density=0.2, format="csr", random_state=0)
    dY = np.random.default_rng(2).standard_normal((64, 10))
    np.testing.assert_allclose(wafer.delta(W, dY), W.T @ dY, rtol=1e-12)
    g = wafer.estimate_gradient(W, 10, machine=m, dtype="float32")
    assert g.delta.shape == (48, 64) and g.delta_lands_in_place
    # The delta pass streams 48 "outputs" (features of X) over the 64 rows of dY; run
    # it numerically with the same stream order and check it is W.T @ dY.
    a = wafer.balance(np.bincount(W.indices, minlength=48), 8)
    order = np.lexsort((a.row_of_feature, a.slot_of_feature))
    WT = sp.csr_array(W.T)[order]
    rows = wafer.balance(np.diff(W.indptr), 8, "identity")
    dX, rep = wafer.execute_gemm(WT, dY, machine=m, balance=rows, dtype="float32")
    np.testing.assert_allclose(dX, (W.T @ dY)[order], rtol=1e-5, atol=1e-5)
    assert rep.cycles == g.delta.cycles
    assert g.sddmm_cycles == max(g.sddmm_bounds.values()) > 0
    assert "SDDMM" in str(g)
