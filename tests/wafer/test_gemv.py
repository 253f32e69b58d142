"""``wafer.estimate_gemv`` / ``wafer.execute_gemv``: the run against numpy, golden cycle
counts, the reductions, nan/inf and empty rows, an SRAM too small, and bad operands.

Before the fixes complex operands lost their imaginary part silently. Catalogue:
docs/adversarial_inputs.md.
"""

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import wafer

SMALL = dataclasses.replace(wafer.WSE2, rows=4, cols=3)


@pytest.mark.parametrize("reduction", wafer.REDUCTIONS)
@pytest.mark.parametrize("method", ["identity", "round_robin", "greedy"])
def test_execute_gemv_matches_numpy(reduction, method):
    m = dataclasses.replace(wafer.WSE2, rows=3, cols=5)
    A = sp.random(37, 29, density=0.3, format="csr", random_state=4)
    x = np.random.default_rng(1).standard_normal(29)
    y, rep = wafer.execute_gemv(A, x, machine=m, balance=method, reduction=reduction,
                              dtype="float32")
    np.testing.assert_allclose(y, A @ x, rtol=1e-5, atol=1e-5)
    assert rep.cycles == wafer.estimate_gemv(A, machine=m, balance=method, dtype="float32").cycles


def test_gemv_golden_dense_2x4():
    """A = ones(4, 8), fp32, 2 x 4 grid, identity: core (r, c) holds rows {r, r+2},
    columns {c, c+4}: 2 x_j per core, each an AXPY over 2 values (fmac 1) -> 4 cycles;
    x stream: 2 values per column = 2 cycles; compute = max(4, 2) + R*h = 4 + 2 = 6.
    Segment of 2 fp32 values: t = 2 cycles per link, C = 4, h = 1:
    chain 3*(2+1) = 9; ring 3*(ceil(2/4)+1) = 6; tree ceil(log2 4)*2 + 3 = 7.
    """
    m = dataclasses.replace(wafer.WSE2, rows=2, cols=4)
    rep = wafer.estimate_gemv(np.ones((4, 8)), machine=m, balance="identity", dtype="float32")
    assert rep.compute_cycles == 6
    assert rep.reduce_cycles == {"chain": 9, "ring": 6, "tree": 7}
    assert rep.cycles == {"chain": 15, "ring": 12, "tree": 13} and rep.best == "ring"
    assert "ring" in str(rep)


def test_gemv_reduction_ranking_on_wide_rows():
    # Long rows of cores: chain pays t per hop, tree log2(C)*t, ring t/C per step.
    m = dataclasses.replace(wafer.WSE2, rows=4, cols=256)
    rep = wafer.estimate_gemv(np.ones((4 * 64, 1024)), machine=m)
    assert rep.reduce_cycles["chain"] > rep.reduce_cycles["tree"]
    assert rep.reduce_cycles["chain"] > rep.reduce_cycles["ring"]


@pytest.mark.parametrize("kwargs,exc,word", [
    (dict(x=np.ones(3)), ValueError, "x must be 1-D"),
    (dict(reduction="star"), ValueError, "reduction"),
    (dict(dtype="int8"), ValueError, "dtype"),
    (dict(balance="rr"), ValueError, "balance must be one of"),
])
def test_gemv_rejects_bad_input(kwargs, exc, word):
    args = dict(A=np.eye(4), x=np.ones(4), machine=dataclasses.replace(wafer.WSE2, rows=2, cols=2))
    args.update(kwargs)
    with pytest.raises(exc, match=word):
        wafer.execute_gemv(**args)


def test_gemv_nonfinite_and_empty_rows():
    A = np.diag([1.0, 0.0, 2.0, 3.0])
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    for red in wafer.REDUCTIONS:
        y, _ = wafer.execute_gemv(sp.csr_array(A), x, machine=SMALL, reduction=red)
        with np.errstate(invalid="ignore"):
            ref = sp.csr_array(A) @ x
        np.testing.assert_array_equal(y, ref.astype(np.float32))
    rep = wafer.estimate_gemv(np.zeros((4, 3)), machine=SMALL)
    assert rep.nnz == 0 and rep.core_nnz_max == 0 and rep.best in wafer.REDUCTIONS


def test_gemv_sram_too_small_is_reported():
    rep = wafer.estimate_gemv(np.ones((8, 8)), machine=dataclasses.replace(SMALL, sram_bytes=1))
    assert not rep.sram_fits and "DOES NOT FIT" in str(rep)


@pytest.mark.parametrize("A,x,exc,match", [
    (np.eye(4) * 1j, np.ones(4), TypeError, "real dtypes only, A is"),
    (np.eye(4), np.ones(4) * 1j, TypeError, "real dtypes only, x is"),
    (np.eye(4), None, TypeError, "x is None"),
    (None, np.ones(4), TypeError, "A is None"),
    (np.ones((0, 4)), np.ones(4), ValueError, "A must have at least one row"),
    (np.eye(4), np.ones((4, 1)), ValueError, "x must be 1-D of length 4"),
    (np.eye(4), 2.0, ValueError, "x is a scalar"),
])
def test_gemv_bad_operands(A, x, exc, match):
    with pytest.raises(exc, match=match):
        wafer.execute_gemv(A, x, machine=SMALL)


def test_fp16_segments_are_rounded_on_every_link():
    """A segment crosses each link in fp16 (what the reduction's cost counts), as in
    execute_gemm's ring: a review found execute_gemv summing the segments in fp32 and
    rounding once (2052 where the hardware it costs gives 2048). Only what crosses a link is
    rounded: the tree's receiving core keeps its fp32 sum, so it ends at 2052."""
    A, x = np.array([[1.0, 2048.0, 1.0, 1.0]]), np.ones(4)
    got = {red: wafer.execute_gemv(A, x, machine=dataclasses.replace(wafer.WSE2, rows=1, cols=4),
                                   balance="identity", reduction=red)[0][0]
           for red in wafer.REDUCTIONS}
    Y, _ = wafer.execute_gemm(A, x[:, None], machine=dataclasses.replace(wafer.WSE2, rows=4,
                                                                         cols=1),
                              balance="identity")
    # chain: ((1 + 2048) -> 2048) + 1 -> 2049 -> 2048, + 1 -> 2048; the ring, one chunk, the
    # same hops from column 1; tree: (1 + 2048) + fp16(1 + 1) = 2051 -> 2052
    assert got == {"chain": 2048.0, "ring": 2048.0, "tree": 2052.0}
    assert Y[0, 0] == got["chain"]
    y32 = {red: wafer.execute_gemv(A, x, machine=dataclasses.replace(wafer.WSE2, rows=1, cols=4),
                                   balance="identity", reduction=red, dtype="float32")[0][0]
           for red in wafer.REDUCTIONS}
    assert set(y32.values()) == {2051.0}
