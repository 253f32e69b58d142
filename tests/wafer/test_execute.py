"""``wafer.execute_gemm``: the simulated run equals numpy's product and the estimate's
cycles; operand dtypes and layouts, nan/inf, an SRAM too small, and bad operands.

Before the fixes complex operands lost their imaginary part silently. Catalogue:
docs/adversarial_inputs.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import wafer


SMALL = dataclasses.replace(wafer.WSE2, rows=4, cols=3)


def weights(dtype=np.float64):
    return sp.random(20, 12, density=0.3, format="csr", random_state=1, dtype=dtype)


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


def test_an_inf_weight_gives_no_warning_of_its_own():
    """An inf weight met the tiles' zero padding (NaN lanes Y drops) and warned "invalid value
    encountered in multiply" where scipy's W @ X is silent (a review)."""
    import warnings
    W = sp.random(20, 12, density=0.3, format="csr", random_state=3, dtype=np.float32)
    W.data[4] = np.inf
    X = np.ones((12, 5), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Y, _ = wafer.execute_gemm(W, X, machine=SMALL, dtype="float32")
        ref = W @ X
    np.testing.assert_array_equal(np.isposinf(Y), np.isposinf(ref))


def test_execute_sram_too_small_still_runs_and_says_so():
    """A machine whose SRAM cannot hold one token per core: the result is still computed
    (costed at one token per core) and the report says it does not fit."""
    tiny = dataclasses.replace(SMALL, sram_bytes=1)
    X = np.ones((12, 3))
    Y, rep = wafer.execute_gemm(weights(), X, machine=tiny, dtype="float32")
    assert not rep.sram_fits and "does NOT fit" in rep.layout_note
    np.testing.assert_allclose(Y, weights() @ X, rtol=1e-5)
    assert wafer.estimate_gemm(weights(), 3, machine=tiny, dtype="float32").cycles == rep.cycles


# -- bad input ---------------------------------------------------------------------------------
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
    # (a review: a scipy sparse X said "X has dtype object")
    (weights(), sp.csr_array(np.ones((12, 3))), TypeError, r"X must be dense here, got csr_array"),
    (weights(), np.full((12, 3), "a"), TypeError, r"X has dtype <U1 \(str\)"),
])
def test_execute_bad_operands(W, X, exc, match):
    with pytest.raises(exc, match=match):
        wafer.execute_gemm(W, X, machine=SMALL)


def test_wafer_too_big(assert_early_memory_error):
    """execute_gemm and random_weights fail at once with the size and shape."""
    W = sp.random(3, 4, density=0.5, format="csr", random_state=0)
    assert_early_memory_error(
        lambda: wafer.execute_gemm(W, np.broadcast_to(np.float32(1), (4, 2**40))),
        "X 4 x 1099511627776")
    assert_early_memory_error(lambda: wafer.random_weights(2**40, 4, 0.5), "1099511627776")


@pytest.mark.parametrize("n_tokens,engines", [(10, 7), (10, 10), (7, 3), (1, 1)])
def test_every_engine_gets_tokens(n_tokens, engines, monkeypatch):
    """The batch is split evenly: every engine runs at least one token and the busiest
    ceil(n_tokens / engines), the layout's tokens_per_engine. A review found chunks of that
    size leaving the last engines empty (10 tokens on 7 engines: 2,2,2,2,2,0,0)."""
    from wsesparse.wafer import execute
    m = dataclasses.replace(wafer.WSE2, rows=4, cols=1)
    W = sp.random(8, 6, density=0.5, format="csr", random_state=0)
    X = np.random.default_rng(0).standard_normal((6, n_tokens))
    sizes = []
    run = execute._run_engine

    def spy(csr, Xe, *args, **kwargs):
        sizes.append(Xe.shape[1])
        return run(csr, Xe, *args, **kwargs)

    monkeypatch.setattr(execute, "_run_engine", spy)
    Y, rep = wafer.execute_gemm(W, X, machine=m, engines=engines, dtype="float32")
    assert sum(sizes) == n_tokens and len(sizes) == engines
    assert min(sizes) >= 1 and max(sizes) == -(-n_tokens // engines)
    np.testing.assert_allclose(Y, W @ X, rtol=1e-5, atol=1e-6)
    assert rep.cycles == wafer.estimate_gemm(W, n_tokens, machine=m, engines=engines,
                                             dtype="float32").cycles
