"""Adversarial inputs to the wafer model: estimate_gemm, execute_gemm, estimate_gemv,
execute_gemv, Machine (dataclasses.replace) and estimate_tlrmvm.

Extends tests/wafer/test_golden_and_execute.py::test_bad_input_names_argument,
tests/wafer/test_gemv.py::test_gemv_rejects_bad_input,
tests/wafer/test_machine_layout_balance.py::test_machine_rejects_bad_fields and
tests/test_wafer_tlr.py::test_rank_too_large_for_sram_and_bad_args. Before the fixes a
corrupt CSR/COO weight matrix segfaulted the compiled estimator, complex operands lost their
imaginary part silently, a huge n_tokens overflowed int64 cycle counts (silently, or with an
OverflowError), and estimate_tlrmvm raised IndexError / AttributeError. Catalogue:
docs/adversarial_inputs.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import CSR, TLRBatch, TLRMatrix, wafer
from wsesparse.wafer.tlr import estimate_tlrmvm

SMALL = dataclasses.replace(wafer.WSE2, rows=4, cols=3)


def weights(dtype=np.float64):
    return sp.random(20, 12, density=0.3, format="csr", random_state=1, dtype=dtype)


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


# -- corrupt structures: segfaults before ---------------------------------------------------
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


# -- operand kinds and dtypes ---------------------------------------------------------------
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


@pytest.mark.parametrize("n_tokens", [2**62, 2**63, 10**30])
def test_estimate_huge_n_tokens(n_tokens):
    """Cycle counts that do not fit int64: ValueError, not an OverflowError or wrapped counts."""
    with pytest.raises(ValueError, match=r"n_tokens=\d+ is too large: the cycle counts overflow"):
        wafer.estimate_gemm(weights(), n_tokens, machine=SMALL)


def test_estimate_large_n_tokens_is_exact():
    """Just below the limit the report is still consistent (cycles in int64, row sums)."""
    rep = wafer.estimate_gemm(weights(), 2**40, machine=SMALL)
    assert rep.cycles < 2**63 and rep.row_cycles.dtype == np.int64
    assert (rep.row_cycles > 0).all() and rep.row_cycles.max() <= rep.cycles


@pytest.mark.parametrize("kw,exc,match", [
    (dict(n_tokens=8.0), TypeError, "n_tokens must be a positive int, got 8.0"),
    (dict(n_tokens=True), TypeError, r"n_tokens must be a positive int, got True \(bool\)"),
    (dict(n_tokens=None), TypeError, "n_tokens must be a positive int, got None"),
    (dict(n_tokens=-1), ValueError, "n_tokens must be a positive int, got -1"),
    (dict(engines=0), ValueError, "engines must be a positive int, got 0"),
    (dict(engines=9), ValueError, r"engines \(9\) exceeds n_tokens \(8\)"),
    (dict(dtype=None), ValueError, "dtype must be one of"),
    (dict(dtype=object), ValueError, "dtype must be one of"),
    (dict(dtype="bogus"), TypeError, "dtype must be a numpy dtype"),
    (dict(balance=None), ValueError, "method must be one of"),
    (dict(machine=None), TypeError, "machine must be a wafer.Machine"),
    (dict(machine=wafer.PRESETS), TypeError, "machine must be a wafer.Machine"),
])
def test_estimate_bad_arguments(kw, exc, match):
    args = dict(W=weights(), n_tokens=8, machine=SMALL)
    args.update(kw)
    with pytest.raises(exc, match=match):
        wafer.estimate_gemm(**args)


def test_estimate_np_integer_tokens():
    a = wafer.estimate_gemm(weights(), np.int64(8), machine=SMALL)
    b = wafer.estimate_gemm(weights(), 8, machine=SMALL)
    assert a.cycles == b.cycles


# -- execute_gemm ---------------------------------------------------------------------------
@pytest.mark.parametrize("W,X,exc,match", [
    (weights(np.complex128), np.ones((12, 3)), TypeError, "real dtypes only, W is"),
    (weights(), np.ones((12, 3)) * 1j, TypeError, "real dtypes only, X is"),
    (weights(), None, TypeError, "X is None"),
    (weights(), 3.0, ValueError, "X is a scalar"),
    (weights(), np.ones(12), ValueError, "X must be 2-D"),
    (weights(), np.ones((12, 3, 1)), ValueError, "X has 3 dimensions"),
    (weights(), np.ones((12, 0)), ValueError, r"X has no tokens"),
    (weights(), np.ones((11, 3)), ValueError, "W and X do not chain"),
    (weights(), np.ones((12, 3), object), TypeError, "X has dtype object"),
    (weights(), np.full((12, 3), "a"), TypeError, r"X has dtype <U1 \(str\)"),
])
def test_execute_bad_operands(W, X, exc, match):
    with pytest.raises(exc, match=match):
        wafer.execute_gemm(W, X, machine=SMALL)


@pytest.mark.parametrize("xdtype", [np.float16, np.bool_, np.int32, np.float64], ids=str)
def test_execute_operand_dtypes_and_layouts(xdtype):
    """float16/bool/int X become the engine dtype; F-order, negative strides, read-only and
    lists give the same Y as a C-contiguous float32 copy."""
    W = weights()
    X = (np.arange(12 * 6).reshape(12, 6) % 5).astype(xdtype)
    want, _ = wafer.execute_gemm(W, np.ascontiguousarray(X, dtype=np.float32), machine=SMALL, dtype="float32")
    ro = np.array(X)
    ro.flags.writeable = False
    for Xv in (np.asfortranarray(X), ro, X.tolist()):
        Y, _ = wafer.execute_gemm(W, Xv, machine=SMALL, dtype="float32")
        assert Y.dtype == np.float32
        np.testing.assert_array_equal(Y, want)
    Xr = np.asfortranarray(X)[::-1, ::-1]
    Y, _ = wafer.execute_gemm(W, Xr, machine=SMALL, dtype="float32")
    want_r, _ = wafer.execute_gemm(W, np.ascontiguousarray(Xr, dtype=np.float32), machine=SMALL, dtype="float32")
    np.testing.assert_array_equal(Y, want_r)


def _nonfinite_case(rng):
    W = sp.random(20, 12, density=0.3, format="csr", random_state=3, dtype=np.float32)
    W.data[:] = rng.standard_normal(W.nnz).astype(np.float32)
    X = rng.standard_normal((12, 5)).astype(np.float32)
    X[2, 1], X[5, 3], X[7, 0] = np.nan, np.inf, -np.inf
    W.data[4] = np.inf
    return W, X


def test_execute_nonfinite_propagate_like_scipy(rng):
    """NaN/±inf in X or W: the same NaN and ±inf positions as scipy's W @ X (implicit zeros
    never meet inf; the engine sums in a different order, which does not change where a NaN
    or an infinity appears)."""
    W, X = _nonfinite_case(rng)
    with np.errstate(invalid="ignore", over="ignore"):
        Y, _ = wafer.execute_gemm(W, X, machine=SMALL, dtype="float32")
        ref = W @ X
    for pred in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(pred(Y), pred(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(Y[fin], ref[fin], rtol=1e-4, atol=1e-5)


def test_execute_sram_too_small_still_runs_and_says_so():
    """A machine whose SRAM cannot hold one token per core: the result is still computed
    (costed at one token per core) and the report says it does not fit."""
    tiny = dataclasses.replace(SMALL, sram_bytes=1)
    X = np.ones((12, 3))
    Y, rep = wafer.execute_gemm(weights(), X, machine=tiny, dtype="float32")
    assert not rep.sram_fits and "does NOT fit" in rep.layout_note
    np.testing.assert_allclose(Y, weights() @ X, rtol=1e-5)
    assert wafer.estimate_gemm(weights(), 3, machine=tiny, dtype="float32").cycles == rep.cycles


# -- GEMV -----------------------------------------------------------------------------------
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


# -- Machine ---------------------------------------------------------------------------------
@pytest.mark.parametrize("field,value,exc", [
    ("cols", 0, ValueError), ("sram_bytes", 0, ValueError), ("sram_bytes", -1, ValueError),
    ("clock_hz", 0.0, ValueError), ("clock_hz", float("nan"), ValueError),
    ("clock_hz", float("inf"), ValueError), ("clock_hz", "1e9", TypeError),
    ("clock_hz", None, TypeError), ("weight_intake_bytes_per_s", 0, ValueError),
    ("weight_intake_bytes_per_s", -1e9, ValueError), ("fmac_fp16", 0, ValueError),
    ("fmac_fp32", 1.0, TypeError), ("payload_bits", 0, ValueError),
    ("psum_add_cycles", -1, ValueError), ("rows", 3.0, TypeError), ("rows", None, TypeError),
    ("name", None, TypeError), ("psum_on_wire", None, TypeError),
])
def test_machine_rejects_more_bad_fields(field, value, exc):
    with pytest.raises(exc, match=f"Machine.{field}"):
        dataclasses.replace(wafer.WSE2, **{field: value})


def test_machine_unknown_field_and_numpy_ints():
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        dataclasses.replace(wafer.WSE2, foo=1)
    m = dataclasses.replace(wafer.WSE2, rows=np.int64(4), cols=np.int32(3))
    assert wafer.estimate_gemm(weights(), 8, machine=m).cycles == \
        wafer.estimate_gemm(weights(), 8, machine=SMALL).cycles


# -- estimate_tlrmvm ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tlr():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 6)) @ rng.standard_normal((6, 30))
    return TLRMatrix.from_dense(A, nb=16, tol=1e-6)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(machine=None), TypeError, "machine must be a wafer.Machine"),
    (dict(machine="wse2"), TypeError, "machine must be a wafer.Machine"),
    (dict(systems=2.0), TypeError, "systems must be a positive int"),
    (dict(systems=True), TypeError, "systems must be a positive int"),
    (dict(copies=-1), ValueError, "copies must be a positive int"),
    (dict(reserved_bytes=-1), ValueError, "reserved_bytes must be an int"),
    (dict(reserved_bytes=wafer.WSE2.sram_bytes), ValueError, "reserved_bytes must be an int"),
    (dict(reserved_bytes=10.0), TypeError, "reserved_bytes must be an int"),
    (dict(chunk_bytes=0), ValueError, "chunk_bytes must be an int"),
    (dict(chunk_bytes=10**9), ValueError, "chunk_bytes must be an int"),
    (dict(machine=dataclasses.replace(wafer.WSE2, sram_bytes=100), reserved_bytes=0),
     ValueError, "use a smaller nb"),
])
def test_tlrmvm_bad_arguments(tlr, kw, exc, match):
    with pytest.raises(exc, match=match):
        estimate_tlrmvm(tlr, **kw)


def test_tlrmvm_bad_operator(tlr):
    with pytest.raises(ValueError, match="empty TLRBatch"):
        estimate_tlrmvm(TLRBatch([]))
    cplx = TLRMatrix.from_dense(tlr.toarray().astype(np.complex128), nb=16, tol=1e-6)
    with pytest.raises(ValueError, match="mixes real and complex"):
        estimate_tlrmvm(TLRBatch([tlr, cplx]))
    with pytest.raises(TypeError, match="TLRMatrix or TLRBatch"):
        estimate_tlrmvm(None)


def test_tlrmvm_nb_larger_than_matrix_and_zero_ranks():
    """One tile (nb > m, n) and an all-zero matrix (every rank 0) are costed, not errors."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((30, 4)) @ rng.standard_normal((4, 20))
    one = estimate_tlrmvm(TLRMatrix.from_dense(A, nb=1000, tol=1e-6), copies=1)
    assert one.fits and one.cores_per_matrix >= 1 and one.total_cycles > 0
    zero = estimate_tlrmvm(TLRMatrix.from_dense(np.zeros((30, 20)), nb=8), copies=1)
    assert zero.cores_per_matrix == 0 and zero.phase1_cycles == zero.phase3_cycles == 0
    assert zero.total_cycles > 0 and np.isfinite(zero.bandwidth_bytes_per_s)
