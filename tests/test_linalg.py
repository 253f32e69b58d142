"""wsesparse.linalg.cg against scipy.sparse.linalg.cg: the same iterations and results (to
rounding) for every operand type, dtype and option scipy takes, the same bits for any thread
count, and scipy's errors (or clearer ones) for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from hypothesis import given, settings, strategies as st

import wsesparse
from wsesparse.bench.workflows import poisson_2d
from wsesparse.linalg import cg

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _spd(n, dtype, seed=0, density=0.05):
    """A sparse Hermitian positive definite matrix of ``dtype`` (diagonally dominant)."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=density, format="csr", random_state=rng)
    if np.dtype(dtype).kind == "c":
        R = R + 1j * sp.random(n, n, density=density, format="csr", random_state=rng)
    H = R + R.conj().T
    d = np.asarray(abs(H).sum(axis=1)).ravel() + 1.0
    return sp.csr_array(H + sp.diags_array(d)).astype(dtype)


def _vector(n, dtype, seed=1):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(n)
    return v.astype(dtype)


def _counted(solver, *args, **kwargs):
    seen = []
    x, info = solver(*args, callback=lambda xk: seen.append(np.array(xk)), **kwargs)
    return x, info, seen


def _rtol(dtype):
    return 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9


@pytest.mark.parametrize("dtype", DTYPES)
def test_same_iterations_and_solution_as_scipy(dtype):
    A = _spd(300, dtype)
    b = _vector(300, dtype)
    x0, i0, seen0 = _counted(sla.cg, A, b, rtol=_rtol(dtype) / 10)
    x1, i1, seen1 = _counted(cg, A, b, rtol=_rtol(dtype) / 10)
    assert (i1, len(seen1)) == (i0, len(seen0))
    assert i1 == 0 and len(seen1) > 3
    assert x1.dtype == x0.dtype and x1.shape == x0.shape
    for a, c in zip(seen0, seen1):  # every iterate, not only the last
        np.testing.assert_allclose(c, a, rtol=_rtol(dtype), atol=_rtol(dtype) * np.abs(a).max())
    res = np.linalg.norm(A @ x1 - b) / np.linalg.norm(b)
    assert res <= _rtol(dtype)


def test_poisson_three_hundred_iterations_as_scipy():
    A = poisson_2d(40)
    b = _vector(A.shape[0], np.float64)
    x0, i0 = sla.cg(A, b, rtol=1e-30, maxiter=300)
    x1, i1 = cg(A, b, rtol=1e-30, maxiter=300)
    assert i0 == i1 == 300
    np.testing.assert_allclose(x1, x0, rtol=1e-10, atol=1e-10 * np.abs(x0).max())


@pytest.mark.parametrize("kind", ["csr", "csc", "coo", "CSR", "dense", "operator", "int"])
def test_operand_types(kind):
    A = _spd(120, np.float64, seed=3)
    op = {"csr": A, "csc": A.tocsc(), "coo": A.tocoo(), "CSR": wsesparse.CSR(A),
          "dense": A.toarray(), "operator": sla.aslinearoperator(A),
          "int": sp.csr_array(A.multiply(4).astype(np.int64))}[kind]
    ref = A.multiply(4).astype(np.int64) if kind == "int" else A
    b = _vector(120, np.float64)
    x0, i0 = sla.cg(ref, b, rtol=1e-10)
    x1, i1 = cg(op, b, rtol=1e-10)
    assert i1 == i0 == 0 and x1.dtype == x0.dtype == np.float64
    np.testing.assert_allclose(x1, x0, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("a_dtype,b_dtype,want", [
    (np.float32, np.float32, np.float32), (np.float32, np.float64, np.float64),
    (np.float64, np.float32, np.float64), (np.float32, np.complex64, np.complex64),
    (np.float64, np.complex64, np.complex128), (np.complex64, np.float32, np.complex64),
    (np.float32, np.int64, np.float64), (np.int32, np.float32, np.float64)])
def test_solution_dtype_is_scipys(a_dtype, b_dtype, want):
    A = _spd(50, np.float64, seed=4)
    A = sp.csr_array(A.multiply(8).astype(a_dtype)) if np.dtype(a_dtype).kind == "i" \
        else A.astype(a_dtype)
    b = np.arange(1, 51).astype(b_dtype)
    ref, ref_info = sla.cg(A, b)
    x, info = cg(A, b)
    assert x.dtype == ref.dtype == want and info == ref_info == 0
    tol = 1e-4 if want in (np.float32, np.complex64) else 1e-9
    np.testing.assert_allclose(x, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_options_as_scipy():
    A = _spd(200, np.float64, seed=6)
    n = 200
    b = _vector(n, np.float64)
    x0 = _vector(n, np.float64, seed=9)
    Mdiag = sp.diags_array(1 / A.diagonal())
    cases = [dict(x0=x0), dict(x0=x0.reshape(n, 1)), dict(M=Mdiag), dict(M=Mdiag, x0="Mb"),
             dict(x0="Mb"), dict(M=sla.aslinearoperator(Mdiag)), dict(maxiter=3),
             dict(atol=1e-3, rtol=0.0), dict(rtol=1e-12)]
    for kw in cases:
        r0 = _counted(sla.cg, A, b, **kw)
        r1 = _counted(cg, A, b, **kw)
        assert r1[1] == r0[1] and len(r1[2]) == len(r0[2]), kw
        np.testing.assert_allclose(r1[0], r0[0], rtol=1e-9, atol=1e-12, err_msg=str(kw))
    # b as a column, the answer a vector
    x, info = cg(A, b.reshape(n, 1))
    assert x.shape == (n,) and info == 0


def test_maxiter_reached_returns_it():
    A = poisson_2d(30)
    x, info = cg(A, np.ones(900), maxiter=5)
    assert info == 5


def test_zero_right_hand_side_returns_it():
    A = _spd(20, np.float64)
    b = np.zeros(20)
    x, info = cg(A, b)
    assert info == 0 and not x.any() and x.shape == (20,)
    x, info = cg(sp.csr_array((0, 0)), np.zeros(0))
    assert info == 0 and x.shape == (0,)


def test_callback_gets_the_iterate():
    A = _spd(60, np.float64)
    b = _vector(60, np.float64)
    seen = []
    x, _ = cg(A, b, callback=lambda xk: seen.append(xk))
    assert seen and seen[-1] is x  # (scipy's too: the array updated in place)


def test_a_singular_matrix_gives_scipys_nan_not_an_exception():
    A = sp.csr_array((10, 10))
    b = np.ones(10)
    with np.errstate(all="ignore"):
        x0, i0 = sla.cg(A, b, maxiter=3)
        x1, i1 = cg(A, b, maxiter=3)
    assert i0 == i1 == 3
    assert np.isnan(x0).all() == np.isnan(x1).all()


def test_the_same_bits_with_any_thread_count():
    A = poisson_2d(400)  # (160,000 unknowns: several threads and chunks)
    b = _vector(A.shape[0], np.float64)
    runs = [cg(A, b, maxiter=25, rtol=1e-30, n_threads=t)[0] for t in (1, 2, 3)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


def test_inputs_are_left_as_they_were():
    A = _spd(80, np.float64)
    before = A.copy()
    b = _vector(80, np.float64)
    b0 = b.copy()
    x0 = _vector(80, np.float64, seed=3)
    x00 = x0.copy()
    cg(A, b, x0=x0)
    assert np.array_equal(b, b0) and np.array_equal(x0, x00)
    assert (A != before).nnz == 0


def test_errors():
    A = _spd(10, np.float64)
    b = np.ones(10)
    with pytest.raises(ValueError, match="expected square matrix"):
        cg(sp.csr_array((3, 4)), np.ones(3))
    with pytest.raises(ValueError, match=r"shapes of A \(10, 10\) and b \(9,\) are incompatible"):
        cg(A, np.ones(9))
    with pytest.raises(ValueError, match=r"and b \(10, 2\) are incompatible"):
        cg(A, np.ones((10, 2)))
    with pytest.raises(ValueError, match=r"x0 \(5,\) are incompatible"):
        cg(A, b, x0=np.ones(5))
    with pytest.raises(ValueError, match="x0 must be an array, None or 'Mb'"):
        cg(A, b, x0="Mx")
    for atol in (-1.0, None, "legacy"):
        with pytest.raises(ValueError, match="invalid `atol`"):
            cg(A, b, atol=atol)
    with pytest.raises(ValueError, match="matrix and preconditioner have different shapes"):
        cg(A, b, M=sp.eye_array(9))
    with pytest.raises(ValueError, match="n_threads"):
        cg(A, b, n_threads=0)
    with pytest.raises(TypeError):
        cg(A, b, maxiter=2.5)
    bad = sp.csr_array(A)
    bad.indices = bad.indices.copy()
    bad.indices[0] = 99
    with pytest.raises(ValueError, match="A has a corrupt compressed structure"):
        cg(bad, b)
    with pytest.raises(ValueError, match=r"reshape|M.matvec returned"):  # (scipy's check)
        cg(A, b, M=sla.LinearOperator((10, 10), matvec=lambda v: np.ones(3)))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float64, np.complex128]),
       start=st.booleans())
def test_random_systems_match_scipy(n, seed, dtype, start):
    A = _spd(n, dtype, seed=seed, density=0.3)
    b = _vector(n, dtype, seed=seed + 1)
    kw = dict(x0=_vector(n, dtype, seed=seed + 2)) if start else {}
    x0, i0, s0 = _counted(sla.cg, A, b, rtol=1e-10, **kw)
    x1, i1, s1 = _counted(cg, A, b, rtol=1e-10, **kw)
    assert i1 == i0 and abs(len(s1) - len(s0)) <= 1
    np.testing.assert_allclose(x1, x0, rtol=1e-7, atol=1e-9 * max(1.0, np.abs(x0).max()))
