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


def test_sddmm_and_estimates_leave_w_alone_and_count_duplicates_once():
    """as_csr_pattern shared a CSR input's arrays and sddmm's sum_duplicates sorted and
    summed them in place: W lost an entry and a matrix sharing its arrays was reordered;
    estimate_gemm counted a duplicate as two nonzeros (density 2.0, speedup below 1)."""
    W = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])),
                     shape=(2, 3))
    twin = sp.csr_array((np.array([10.0, 20.0, 30.0]), W.indices, W.indptr), shape=(2, 3))
    before = [a.copy() for a in (W.data, W.indices, W.indptr)]
    G = wafer.sddmm(W, np.ones((2, 1)), np.ones((3, 1)))
    for a, b in zip((W.data, W.indices, W.indptr), before):
        np.testing.assert_array_equal(a, b)
    assert twin.toarray().tolist() == [[20.0, 0.0, 40.0], [0.0, 0.0, 0.0]]
    assert G.nnz == 2
    m = dataclasses.replace(wafer.WSE2, rows=2, cols=2)
    D = sp.csr_array((np.array([1.0, 2.0]), np.array([0, 0]), np.array([0, 2])), shape=(1, 1))
    r = wafer.estimate_gemm(D, 4, machine=m, dtype="float32")
    assert r.nnz == 1 and r.density == 1.0 and r.speedup == 1.0


def test_a_run_of_no_cycles_has_an_infinite_speedup():
    """(a machine whose partial sums cost nothing and a W of zeros: ZeroDivisionError)"""
    m = dataclasses.replace(wafer.WSE2, rows=2, cols=2, cycles_per_hop=0, psum_copy_cycles=0,
                            psum_reset_cycles=0, psum_add_cycles=0,
                            weight_intake_bytes_per_s=1e30)
    r = wafer.estimate_gemm(np.zeros((3, 3)), 4, machine=m, psum="seed")
    assert r.cycles == 0 and r.dense_cycles > 0 and r.speedup == float("inf")
    Y, r2 = wafer.execute_gemm(np.zeros((3, 3)), np.ones((3, 4)), machine=m, psum="seed")
    assert r2.speedup == float("inf") and not Y.any()


def test_delta_shape_error_names_dy_and_w():
    """It reported "inner dimensions differ: A is csc_array (20, 30)" (W.T) and "B"."""
    W = sp.random(30, 20, density=0.3, format="csr", random_state=0)
    with pytest.raises(ValueError, match=r"dY must have 30 rows to match W of shape \(30, 20\)"):
        wafer.delta(W, np.ones((5, 3)))
    with pytest.raises(TypeError, match="dY is None"):  # (was the ValueError above; a review)
        wafer.delta(W, None)
    np.testing.assert_allclose(wafer.delta(W, np.ones(30)), W.T @ np.ones(30))
