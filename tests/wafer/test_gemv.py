import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import wafer


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
])
def test_gemv_rejects_bad_input(kwargs, exc, word):
    args = dict(A=np.eye(4), x=np.ones(4), machine=dataclasses.replace(wafer.WSE2, rows=2, cols=2))
    args.update(kwargs)
    with pytest.raises(exc, match=word):
        wafer.execute_gemv(**args)
