"""``wafer.GemmReport``: the table and the JSON of an estimate."""

import dataclasses
import json

import pytest
import scipy.sparse as sp

from wsesparse import wafer


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


def test_reports_with_arrays_compare_by_value():
    """GemmReport, GradientReport and Assignment hold numpy arrays: the dataclasses' own ==
    raised "truth value of an array is ambiguous"."""
    m = dataclasses.replace(wafer.WSE2, rows=4, cols=2)
    W = sp.random(20, 12, density=0.3, format="csr", random_state=1)
    for make in (lambda: wafer.estimate_gemm(W, 8, machine=m),
                 lambda: wafer.estimate_gradient(W, 8, machine=m),
                 lambda: wafer.balance([3, 1, 2, 5, 0], 2, "round_robin")):
        a, b = make(), make()
        assert a == b and not a != b
    rep = wafer.estimate_gemm(W, 8, machine=m)
    other = dataclasses.replace(rep, row_nnz=rep.row_nnz + 1)
    assert rep != other and rep != dataclasses.replace(rep, cycles=rep.cycles + 1)
    assert rep != dataclasses.replace(rep, row_nnz=rep.row_nnz[:-1])
    assert (rep == "report") is False


def _strict(text):
    """json.loads that refuses NaN and Infinity, as JSON.parse and jq do."""
    def refuse(c):
        raise ValueError(f"not JSON: {c}")
    return json.loads(text, parse_constant=refuse)


def test_json_is_strict_where_a_float_is_not_finite():
    """A review: to_json wrote Infinity (a zero-cost run's speedup) and the training JSON NaN
    (speedup_vs_dense not computed), which strict parsers reject. Both are null now; to_dict
    keeps the floats."""
    free = dataclasses.replace(wafer.WSE2, rows=2, cols=2, cycles_per_hop=0, psum_copy_cycles=0,
                               psum_reset_cycles=0, psum_add_cycles=0,
                               weight_intake_bytes_per_s=1e30)
    g = wafer.estimate_gemm(sp.csr_array((4, 4)), 4, machine=free, psum="seed")
    assert g.speedup == float("inf") and g.to_dict()["speedup"] == float("inf")
    assert _strict(g.to_json())["speedup"] is None
    tiny = wafer.TransformerConfig("tiny", n_layers=1, d_model=64, n_heads=4, vocab=100,
                                   seq_len=16)
    r = wafer.estimate_training(tiny, sparsity=0.5, compare_dense=False)
    d = _strict(r.to_json())
    assert d["speedup_vs_dense"] is None and d["engines"] == r.engines
    assert d["step_seconds"] == r.step_seconds
