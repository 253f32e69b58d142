"""``wafer.estimate_gemm``: golden cycle counts on hand-checked grids, what the estimate
reads of W (only the pattern), huge token counts, Ctrl-C, and every bad argument.

Before the fixes a corrupt CSR/COO weight matrix segfaulted the compiled estimator and a huge
n_tokens overflowed int64 cycle counts (silently, or with an OverflowError). Catalogue:
docs/adversarial_inputs.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import CSR, wafer


SMALL = dataclasses.replace(wafer.WSE2, rows=4, cols=3)


def weights(dtype=np.float64):
    return sp.random(20, 12, density=0.3, format="csr", random_state=1, dtype=dtype)


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


@pytest.mark.parametrize("W", [
    np.eye(6, dtype=np.float16), np.eye(6, dtype=bool), np.eye(6, dtype=np.int8),
    np.eye(6).tolist(), sp.eye(6, format="coo"), sp.eye(6, format="dia"), sp.eye(6).tolil(),
    CSR(sp.eye(6, format="csr")), np.asfortranarray(np.eye(6))[::-1, ::-1],
    np.where(np.eye(6) > 0, np.nan, 0.0), np.eye(6) * 1j,
], ids=["float16", "bool", "int8", "list", "coo", "dia", "lil", "wsesparse.CSR", "F-negstride",
        "nan-values", "complex"])
def test_estimate_only_needs_the_pattern(W):
    """Any numeric dtype (float16 too, which scipy.sparse rejects), container and layout: the
    estimate depends only on the pattern, so all of these equal the identity's estimate."""
    want = wafer.estimate_gemm(sp.eye(6, format="csr"), 8, machine=SMALL)
    got = wafer.estimate_gemm(W, 8, machine=SMALL)
    assert (got.cycles, got.dense_cycles, got.nnz) == (want.cycles, want.dense_cycles, 6)


def test_estimate_nnz0():
    """No nonzeros: only the per-output fixed costs remain; speedup > 1 and finite."""
    rep = wafer.estimate_gemm(sp.csr_array((20, 12)), 8, machine=SMALL)
    assert rep.nnz == 0 and 0 < rep.cycles < rep.dense_cycles and np.isfinite(rep.speedup)
    assert rep.row_nnz.sum() == 0


def test_estimate_large_n_tokens_is_exact():
    """Just below the limit the report is still consistent (cycles in int64, row sums)."""
    rep = wafer.estimate_gemm(weights(), 2**40, machine=SMALL)
    assert rep.cycles < 2**63 and rep.row_cycles.dtype == np.int64
    assert (rep.row_cycles > 0).all() and rep.row_cycles.max() <= rep.cycles


def test_estimate_np_integer_tokens():
    a = wafer.estimate_gemm(weights(), np.int64(8), machine=SMALL)
    b = wafer.estimate_gemm(weights(), 8, machine=SMALL)
    assert a.cycles == b.cycles


@pytest.mark.parametrize("name", ["wafer estimate"])
def test_ctrl_c_stops_long_runs(name, assert_ctrl_c_stops):
    """SIGINT 1 s into a long wafer estimate: the process exits with KeyboardInterrupt within
    2 s (the wafer kernel checks for signals between chunks of its nogil loop; before, it
    finished its kernel call first: 8.9 s here)."""
    assert_ctrl_c_stops(name, (
        "from wsesparse import wafer\n"
        "W = wafer.random_weights(3_000_000, 4096, 0.9995)\n"
        "print('go', flush=True)\n"
        "wafer.estimate_gemm(W, 100_000)\n"))  # one kernel call ~10 s here


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("call,exc,word", [
    (lambda: wafer.estimate_gemm(None, 4), TypeError, "W"),
    (lambda: wafer.estimate_gemm(np.ones(3), 4), ValueError, "W"),
    (lambda: wafer.estimate_gemm(np.array([["a"]]), 4), TypeError, "W"),
    (lambda: wafer.estimate_gemm(np.eye(3), 0), ValueError, "n_tokens"),
    (lambda: wafer.estimate_gemm(np.eye(3), 4, machine="wse2"), TypeError, "machine"),
    (lambda: wafer.estimate_gemm(np.eye(3), 4, balance="best"), ValueError, "balance"),
    (lambda: wafer.estimate_gemm(np.eye(3), 4, dtype="int32"), ValueError, "dtype"),
    (lambda: wafer.execute_gemm(np.eye(3), np.ones((4, 2))), ValueError, "chain"),
    (lambda: wafer.execute_gemm(np.eye(3), np.ones(3)), ValueError, "X"),
    (lambda: wafer.random_weights(10, 10, 1.0), ValueError, "sparsity"),
    (lambda: wafer.random_weights(3, 3, 0.5, seed=2**70), ValueError, "seed"),
])
def test_bad_input_names_argument(call, exc, word):
    with pytest.raises(exc, match=word):
        call()


def _assignment_fields(a, **changes):
    fields = dict(method=a.method, row_of_feature=a.row_of_feature,
                  slot_of_feature=a.slot_of_feature, features_per_row=a.features_per_row,
                  row_nnz=a.row_nnz)
    return wafer.Assignment(**{**fields, **changes})


def test_hand_built_assignments_are_checked():
    """A balance= Assignment is checked before the simulator indexes rows and slots with
    it: rows out of range crashed the process (free(): invalid size, a segfault) or gave
    a wrong cycle count; other index dtypes are taken."""
    m = dataclasses.replace(wafer.WSE2, rows=4, cols=3)
    W = sp.random(10, 8, density=0.5, format="csr", random_state=0)
    X = np.ones((8, 6))
    a = wafer.balance(np.bincount(W.indices, minlength=8), 4)
    good = wafer.estimate_gemm(W, 6, machine=m, balance=a).cycles
    wide = _assignment_fields(a, row_of_feature=a.row_of_feature.astype(np.int64))
    assert wafer.estimate_gemm(W, 6, machine=m, balance=wide).cycles == good
    swapped = a.slot_of_feature.copy()
    first_two = np.flatnonzero(a.row_of_feature == a.row_of_feature[0])[:2]
    swapped[first_two] = swapped[first_two[::-1]]
    assert wafer.estimate_gemm(W, 6, machine=m,
                               balance=_assignment_fields(a, slot_of_feature=swapped)).cycles > 0
    bad = [(dict(row_of_feature=np.full(8, v, np.int32)), "row outside") for v in (-1, 4, 10**8)]
    bad += [(dict(slot_of_feature=np.zeros(8, np.int32)), "without repeats"),
            (dict(features_per_row=a.features_per_row + 1), "features_per_row"),
            (dict(row_nnz=a.row_nnz + 1), "row_nnz"),
            (dict(row_of_feature=a.row_of_feature[:5]), "row_of_feature must be 8 integers"),
            (dict(row_of_feature=a.row_of_feature.astype(float)), "must be 8 integers")]
    for change, match in bad:
        B = _assignment_fields(a, **change)
        with pytest.raises(ValueError, match=match):
            wafer.estimate_gemm(W, 6, machine=m, balance=B)
        with pytest.raises(ValueError, match=match):
            wafer.execute_gemm(W, X, machine=m, balance=B)


@pytest.mark.parametrize("W,exc,match", [
    (3.0, ValueError, "W must be 2-D"),
    (np.array(3.0), ValueError, "W must be 2-D"),
    ("abc", ValueError, "W must be 2-D, got a scalar"),
    (np.ones((2, 2, 2)), ValueError, "W must be 2-D"),
    (np.ones((0, 4)), ValueError, "W must have at least one row and one column"),
    (np.ones((4, 0)), ValueError, "W must have at least one row and one column"),
    (np.ones((3, 3), object), TypeError, r"W has dtype object"),
    ([[1, 0], [0, "x"]], TypeError, r"W has dtype .*str"),
    ([[1.0, 2.0], [3.0]], TypeError, "W cannot be converted"),
])
def test_estimate_bad_weights(W, exc, match):
    with pytest.raises(exc, match=match):
        wafer.estimate_gemm(W, 8, machine=SMALL)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(n_tokens=8.0), TypeError, "n_tokens must be a positive int, got 8.0"),
    (dict(n_tokens=True), TypeError, r"n_tokens must be a positive int, got True \(bool\)"),
    (dict(n_tokens=None), TypeError, "n_tokens must be a positive int, got None"),
    (dict(n_tokens=-1), ValueError, "n_tokens must be a positive int, got -1"),
    (dict(engines=0), ValueError, "engines must be a positive int, got 0"),
    (dict(engines=9), ValueError, r"engines \(9\) exceeds n_tokens \(8\)"),
    # (it said "got float64": np.dtype(None) is float64; a review)
    (dict(dtype=None), ValueError, "dtype must be one of .*, got None"),
    (dict(dtype=object), ValueError, "dtype must be one of"),
    (dict(dtype="bogus"), TypeError, "dtype must be a numpy dtype"),
    (dict(balance=None), ValueError, "balance must be an Assignment or one of"),
    (dict(machine=None), TypeError, "machine must be a wafer.Machine"),
    (dict(machine=wafer.PRESETS), TypeError, "machine must be a wafer.Machine"),
])
def test_estimate_bad_arguments(kw, exc, match):
    args = dict(W=weights(), n_tokens=8, machine=SMALL)
    args.update(kw)
    with pytest.raises(exc, match=match):
        wafer.estimate_gemm(**args)


@pytest.mark.parametrize("n_tokens", [2**62, 2**63, 10**30])
def test_estimate_huge_n_tokens(n_tokens):
    """Cycle counts that do not fit int64: ValueError, not an OverflowError or wrapped counts."""
    with pytest.raises(ValueError, match=r"n_tokens=\d+ is too large: the cycle counts overflow"):
        wafer.estimate_gemm(weights(), n_tokens, machine=SMALL)


# -- corrupt structures: segfaults before ------------------------------------------------------
def corrupt(how: str):
    W = weights()
    if how == "indptr_decreasing":
        W.indptr[3] = W.indptr[-1] + 7
    elif how == "indptr_last_big":
        W.indptr[-1] = 10**6
    elif how == "indptr_short":
        W.indptr = W.indptr[:-3]
    elif how == "index_big":
        W.indices[0] = 10**6
    elif how == "index_negative":
        W.indices[-1] = -1
    elif how == "coo_row_big":
        W = sp.coo_array(W, copy=True)
        W.row[0] = 10**6
    elif how == "csc_index_big":
        W = W.tocsc()
        W.indices[0] = 10**6
    else:  # pragma: no cover
        raise ValueError(how)
    return W


CORRUPTIONS = ["indptr_decreasing", "indptr_last_big", "indptr_short", "index_big",
               "index_negative", "coo_row_big", "csc_index_big"]


@pytest.mark.parametrize("how", CORRUPTIONS)
@pytest.mark.parametrize("call", ["estimate_gemm", "execute_gemm", "estimate_gemv",
                                  "execute_gemv"])
def test_corrupt_weights(how, call):
    W = corrupt(how)
    name = "W" if call.endswith("gemm") else "A"
    with pytest.raises(ValueError, match=rf"^{name}( \(\w+\))? has a corrupt"):
        if call == "estimate_gemm":
            wafer.estimate_gemm(W, 8, machine=SMALL)
        elif call == "execute_gemm":
            wafer.execute_gemm(W, np.ones((12, 3)), machine=SMALL)
        elif call == "estimate_gemv":
            wafer.estimate_gemv(W, machine=SMALL)
        else:
            wafer.execute_gemv(W, np.ones(12), machine=SMALL)


def test_machines_beyond_the_simulators_integers_are_refused():
    """Extreme machine descriptions: fields beyond what the simulator's ints hold are
    refused by Machine (2**70-cycle copies raised bare OverflowErrors), and an intake so
    slow that the cycle counts would wrap is refused by the estimate (1e-12 B/s gave 5203
    cycles, below its own weight-intake bound of 3.4e25)."""
    import dataclasses
    for field, value in (("psum_copy_cycles", 2**70), ("psum_buffer_depth", 2**40),
                         ("sram_bytes", 2**62), ("rows", 2**30)):
        with pytest.raises(ValueError, match=f"Machine.{field} must be an int in"):
            dataclasses.replace(wafer.WSE2, **{field: value})
    slow = dataclasses.replace(wafer.WSE2, rows=2, cols=2, weight_intake_bytes_per_s=1e-12)
    with pytest.raises(ValueError, match="overflow int64"):
        wafer.estimate_gemm(np.ones((100, 100)), 4, machine=slow)
    with pytest.raises(ValueError, match="overflow int64"):
        wafer.execute_gemm(np.ones((10, 10)), np.ones((10, 4)), machine=slow)
