"""Golden cycle counts on hand-checked grids, and execute == estimate."""

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import wafer


def test_golden_2x2(unit_machine):
    """2 x 2 grid, fp32 (1 FMAC/cycle), intake 1 message/cycle, hop 1, copy+reset 2,
    add 2, buffers 2. W = [[a, b], [0, c]], identity: feature j on row j. N = 4 tokens
    -> L = 2 per core: AXPY a = 2 cycles, partial sum on the wire ceil(2*4/4) = 2,
    ring step t = max(2, 2) = 2. Latency to row r: hop * (r + cols) = r + 2.
    Messages: w00 #1, w01 #2, ctrl0 #3, w11 #4, ctrl1 #5 (arrive at cycle k).

    Output 0: row 0: start max(0, 1+2)=3, ready max(3+2, 3+2)=5, F=5+2=7 (stall 3);
    row 1: start max(0, 1+3)=4, ready max(4+2, 3+3)=6, F=8 (stall 4).
    Ring d=0 starts on row 1: G=max(8,0)=8, E=10; row 0: G=max(7, 0, 8+1)=9, E=11.
    Output 1: row 0 (no nonzero): start max(7, 4+2)=7, ready max(7, 5+2)=7, F=9;
    row 1: start max(8, 4+3)=8, ready max(8+2, 5+3)=10, F=12.
    Ring d=1 starts on row 0: G=max(9, rfree 11)=11, E=13; row 1: G=max(12, 10, 12)=12,
    E=14.  -> cycles 14; busy = [2+2 + 0+2, 2+2 + 2+2] = [6, 8]; stall = [3, 4].
    Dense (both rows get one AXPY per output, 2 weights per output): output 0 is the
    same; output 1: ctrl is message #6: row 0 F=max(7+2, 6+2)+2=11, row 1
    F=max(8+2, 6+3)+2=12; ring: row 0 G=max(11, 11)=11, E=13; row 1 G=12, E=14 -> 14.
    """
    W = sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]]))
    X = np.arange(8.0).reshape(2, 4)
    rep = wafer.estimate_gemm(W, 4, machine=unit_machine, balance="identity", dtype="float32")
    assert rep.cycles == 14 and rep.dense_cycles == 14
    assert rep.row_cycles.tolist() == [6, 8] and rep.row_stall_cycles.tolist() == [3, 4]
    Y, rep2 = wafer.execute_gemm(W, X, machine=unit_machine, balance="identity", dtype="float32")
    np.testing.assert_allclose(Y, W @ X, rtol=1e-6)
    assert rep2.cycles == 14 and rep2.row_stall_cycles.tolist() == [3, 4]


def test_golden_4x3(unit_machine):
    """4 x 3 grid, same unit costs, fp32, N = 3 tokens -> L = 1: AXPY 1 cycle, wire
    ceil(4/4) = 1, ring step t = max(add 2, 1) = 2. Latency to row r: r + 3.
    W (2 x 4): output 0 uses features 0, 1, 2; output 1 uses feature 3; identity.
    Messages: weights #1-3, ctrl0 #4, w13 #5, ctrl1 #6.

    Output 0 (t_first 1, t_ctrl 4): F = max(start + n, 4 + lat) + 2 with
    start = 1 + lat: rows 0..3 -> F = 9, 10, 11, 12 (row 3 has no AXPY).
    Ring d=0 from row 1: G = 10, 11 (=10+1), 12, then row 0: max(9, 13) = 13; E = G + 2
    -> E = [15, 12, 13, 14]; output 0 lands at 15.
    Output 1 (t_first 5, t_ctrl 6): row 0 start max(9, 8)=9, F=max(9, 9)+2=11;
    row 1 F=max(10, 10)+2=12; row 2 F=13; row 3 start 12, ready max(13, 12), F=15.
    Ring d=1 from row 2: G=max(13, 13)=13, E=15; row 3 G=max(15, 14, 14)=15, E=17;
    row 0 G=max(11, 15, 16)=16, E=18; row 1 G=max(12, 12, 17)=17, E=19 -> cycles 19.
    busy: 3 (AXPY 1 + 2) or 2 per output -> 5 on every row;
    stall (F - previous F - work - 2): row 0 9-0-1-2 = 6, then 0; rows 1..3: 7, 8, 10.
    """
    m = dataclasses.replace(unit_machine, rows=4, cols=3)
    W = sp.csr_array(np.array([[1.0, -2.0, 0.5, 0.0], [0.0, 0.0, 0.0, 4.0]]))
    rep = wafer.estimate_gemm(W, 3, machine=m, balance="identity", dtype="float32")
    assert rep.cycles == 19
    assert rep.row_cycles.tolist() == [5, 5, 5, 5]
    assert rep.row_stall_cycles.tolist() == [6, 7, 8, 10]
    X = np.array([[1.0, 2, 3], [4, 5, 6], [7, 8, 9], [1, 0, -1]])
    Y, rep2 = wafer.execute_gemm(W, X, machine=m, balance="identity", dtype="float32")
    np.testing.assert_allclose(Y, W @ X)
    assert rep2.cycles == 19


@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-5), ("float16", 2e-2)])
@pytest.mark.parametrize("engines", [1, 3])
@pytest.mark.parametrize("method", wafer.BALANCERS)
def test_execute_matches_numpy_and_estimate(dtype, rtol, engines, method):
    # Small SRAM forces several passes of two different widths.
    m = dataclasses.replace(wafer.WSE2, rows=4, cols=3, sram_bytes=300)
    rng = np.random.default_rng(7)
    W = sp.random(23, 17, density=0.3, format="csr", random_state=11)
    X = rng.standard_normal((17, 40))
    Y, rep = wafer.execute_gemm(W, X, machine=m, balance=method, engines=engines, dtype=dtype)
    est = wafer.estimate_gemm(W, 40, machine=m, balance=method, engines=engines, dtype=dtype)
    ref = W @ X
    assert Y.dtype == np.dtype(dtype) and Y.shape == ref.shape
    np.testing.assert_allclose(Y, ref, rtol=rtol, atol=rtol * np.abs(ref).max())
    assert rep.cycles == est.cycles and rep.dense_cycles == est.dense_cycles
    assert rep.row_cycles.tolist() == est.row_cycles.tolist()
    assert rep.row_stall_cycles.tolist() == est.row_stall_cycles.tolist()
    if engines == 1 and dtype == "float32":
        assert rep.passes > 1 and len(rep.pass_widths) == 2


def test_empty_rows_and_columns_run():
    m = dataclasses.replace(wafer.WSE2, rows=3, cols=2)
    W = sp.csr_array((5, 4))
    Y, rep = wafer.execute_gemm(W, np.ones((4, 3)), machine=m)
    assert not Y.any() and rep.cycles == wafer.estimate_gemm(W, 3, machine=m, dtype="float32").cycles
    assert rep.cycles > 0


def test_report_table_and_json():
    m = dataclasses.replace(wafer.WSE2, rows=4, cols=3)
    W = sp.random(20, 12, density=0.2, format="csr", random_state=2)
    rep = wafer.estimate_gemm(W, 30, machine=m)
    text = str(rep)
    for word in ("cycles", "speedup", "SRAM per core", "imbalance", "bound", "fabric"):
        assert word in text
    d = json.loads(rep.to_json())
    assert d["cycles"] == rep.cycles and len(d["row_nnz"]) == 4 and d["shape"] == [20, 12]
    assert rep.seconds == pytest.approx(rep.cycles / m.clock_hz)
    assert rep.speedup == pytest.approx(rep.dense_cycles / rep.cycles)


@pytest.mark.parametrize("call,exc,word", [
    (lambda: wafer.estimate_gemm(None, 4), TypeError, "W"),
    (lambda: wafer.estimate_gemm(np.ones(3), 4), ValueError, "W"),
    (lambda: wafer.estimate_gemm(np.array([["a"]]), 4), TypeError, "W"),
    (lambda: wafer.estimate_gemm(np.eye(3), 0), ValueError, "n_tokens"),
    (lambda: wafer.estimate_gemm(np.eye(3), 4, machine="wse2"), TypeError, "machine"),
    (lambda: wafer.estimate_gemm(np.eye(3), 4, balance="best"), ValueError, "method"),
    (lambda: wafer.estimate_gemm(np.eye(3), 4, dtype="int32"), ValueError, "dtype"),
    (lambda: wafer.execute_gemm(np.eye(3), np.ones((4, 2))), ValueError, "chain"),
    (lambda: wafer.execute_gemm(np.eye(3), np.ones(3)), ValueError, "X"),
    (lambda: wafer.random_weights(10, 10, 1.0), ValueError, "sparsity"),
])
def test_bad_input_names_argument(call, exc, word):
    with pytest.raises(exc, match=word):
        call()
