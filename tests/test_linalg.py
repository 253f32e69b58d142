"""wsesparse.linalg.cg against scipy.sparse.linalg.cg: the same iterations and results (to
rounding) for every operand type, dtype and option scipy takes, the same bits for any thread
count, and scipy's errors (or clearer ones) for bad input."""

from __future__ import annotations

import contextlib
import warnings

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


@contextlib.contextmanager
def _no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


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


@pytest.mark.parametrize("kind", ["dia", "csr32", "int", "dense", "CSR", "complex", "csc",
                                  "dia_wide", "tridiagonal", "two_offsets"])
def test_preconditioner_types(kind):
    """Diagonal sparse preconditioners (DIA of offset 0, CSR/CSC with the diagonal alone)
    run as one fused pass, other sparse and ndarray ones as products of ours into a kept
    buffer where the solve's dtype holds their values, the others through scipy's
    LinearOperator: the same iterations as scipy's. A complex M of a real solve is a
    TypeError in both."""
    A = _spd(150, np.float64, seed=8)
    b = _vector(150, np.float64)
    d = 1 / A.diagonal()
    M = {"dia": sp.diags_array(d), "csr32": sp.csr_array(sp.diags_array(d)).astype(np.float32),
         "int": sp.csr_array(sp.diags_array(np.ones(150, dtype=np.int64), dtype=np.int64)),
         "dense": np.diag(d), "CSR": wsesparse.CSR(sp.csr_array(sp.diags_array(d))),
         "complex": sp.diags_array(d.astype(np.complex128)),
         "csc": sp.csc_matrix(sp.diags_array(d)),
         # (DIA data wider than the matrix: scipy ignores the columns past n)
         "dia_wide": sp.dia_array((np.concatenate([d, [7.0, 9.0]])[None, :], [0]),
                                  shape=(150, 150)),
         "tridiagonal": sp.csr_array(sp.diags_array([0.01 * d[1:], d, 0.01 * d[1:]],
                                                    offsets=[-1, 0, 1])),
         "two_offsets": sp.dia_array((np.vstack([d, np.zeros(150)]), [0, 1]),
                                     shape=(150, 150))}[kind]
    ref_M = M.to_scipy() if kind == "CSR" else M
    if kind == "complex":  # (scipy: a casting TypeError at its update of x)
        with pytest.raises(TypeError, match="cast"), \
                pytest.warns(np.exceptions.ComplexWarning):  # (scipy's p[:] = z first)
            sla.cg(A, b, M=M)
        with pytest.raises(TypeError, match="M.matvec returned complex128 values, which a "
                                            "float64 solve cannot hold"):
            cg(A, b, M=M)
        return
    r0 = _counted(sla.cg, A, b, M=ref_M, rtol=1e-10)
    r1 = _counted(cg, A, b, M=M, rtol=1e-10)
    assert r1[1] == r0[1] == 0 and len(r1[2]) == len(r0[2])
    np.testing.assert_allclose(r1[0], r0[0], rtol=1e-9, atol=1e-12)
    # (preconditioned minres here amplifies rounding about 3x a step, so the runs are
    # compared where both have converged)
    S = _symmetric_indefinite(150, seed=9, gap=0.5)
    m0 = sla.minres(S, b, M=ref_M, check=True, rtol=1e-13)
    m1 = minres(S, b, M=M, check=True, rtol=1e-13)
    assert m1[1] == m0[1] == 0
    np.testing.assert_allclose(m1[0], m0[0], rtol=1e-8, atol=1e-10)


def test_operators_returning_values_the_solve_cannot_hold():
    """A LinearOperator declared real whose matvec returns complex values: a TypeError
    naming it (scipy's cg fails on a casting TypeError; the first version dropped the
    imaginary parts with a ComplexWarning)."""
    B = _spd(20, np.float64)
    L = sla.LinearOperator((20, 20), matvec=lambda v: B @ v + 0.5j * v, dtype=np.float64)
    for solver in (cg, minres):
        with pytest.raises(TypeError, match="A.matvec returned complex128 values, which a "
                                            "float64 solve cannot hold"):
            solver(L, np.ones(20))


def test_longdouble_matrices_run_through_scipy_operators():
    """A sparse longdouble A (no kernel of ours): scipy's product through its
    LinearOperator, the solution float64 as scipy's cg gives it (the first version raised
    about an 'out' the user never passed)."""
    A = _spd(30, np.float64, seed=2)
    b = _vector(30, np.float64)
    for Am in (A.astype(np.longdouble), wsesparse.CSR(A.astype(np.longdouble))):
        x, info = cg(Am, b, rtol=1e-10)
        ref, ref_info = sla.cg(A.astype(np.longdouble), b, rtol=1e-10)
        assert info == ref_info == 0 and x.dtype == ref.dtype == np.float64
        np.testing.assert_allclose(x, ref, rtol=1e-9, atol=1e-12)
        x, info = minres(Am, b, rtol=1e-10)
        assert info == 0
        np.testing.assert_allclose(A @ x, b, rtol=1e-6, atol=1e-8)


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


# -- minres -----------------------------------------------------------------------------

from wsesparse.linalg import minres  # noqa: E402


def _random_symmetric(n, rng, density):
    """R + R.T for a random sparse R of standard normal values (the off-diagonal part of
    the symmetric test matrices)."""
    R = sp.random(n, n, density=density, format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    return R + R.T


def _symmetric_indefinite(n, seed=0, density=0.05, gap=None):
    """A sparse symmetric matrix with eigenvalues of both signs; with ``gap``, none within
    about ``gap`` of 0 (diagonal dominance), so that the solve converges in few steps and
    rounding cannot move its stopping step."""
    rng = np.random.default_rng(seed)
    R = _random_symmetric(n, rng, density)
    if gap is None:
        d = rng.standard_normal(n) * 3
    else:
        off = np.asarray(abs(R).sum(axis=1)).ravel()
        d = np.where(rng.random(n) < 0.5, -1.0, 1.0) * (off + gap + rng.random(n))
    return sp.csr_array(R + sp.diags_array(d))


def _clustered_indefinite(n, seed=0, density=0.3):
    """A sparse symmetric matrix whose eigenvalues lie in +-[1.0, 1.3] (Gershgorin: the
    off-diagonal row sums are scaled to at most 0.05). MINRES reduces the residual about
    3x a step, so it stops by its rate, in about 14 steps at rtol 1e-8, and rounding cannot
    move the stopping step. ``_symmetric_indefinite(n, gap=0.5)`` at density 0.3 and
    n <= 40 has condition numbers of 3 to 6 (10th to 90th percentile, up to 19): most
    solves run to within 2 steps of n, the size of the Krylov space, and 9 in 3000 ended a
    step apart from scipy's."""
    rng = np.random.default_rng(seed)
    R = _random_symmetric(n, rng, density)
    off = np.asarray(abs(R).sum(axis=1)).ravel()
    if R.nnz:
        R = R * (0.05 / off.max())
    d = np.where(rng.random(n) < 0.5, -1.0, 1.0) * (1.05 + 0.2 * rng.random(n))
    return sp.csr_array(R + sp.diags_array(d))


@pytest.mark.parametrize("kind", ["spd", "indefinite"])
def test_minres_same_iterations_and_iterates_as_scipy(kind):
    A = _spd(300, np.float64) if kind == "spd" else _symmetric_indefinite(300, gap=0.5)
    b = _vector(300, np.float64)
    x0, i0, seen0 = _counted(sla.minres, A, b, rtol=1e-10, maxiter=200)
    x1, i1, seen1 = _counted(minres, A, b, rtol=1e-10, maxiter=200)
    assert (i1, len(seen1)) == (i0, len(seen0)) and len(seen1) > 3
    assert x1.dtype == x0.dtype == np.float64
    for a, c in zip(seen0, seen1):
        np.testing.assert_allclose(c, a, rtol=1e-9, atol=1e-9 * np.abs(a).max())


def test_minres_float32_and_complex_run_scipys():
    # (scipy's minres: float32 systems give float64 results; complex ones use inner
    # products without conjugation; both run scipy's own code, products routed)
    A = _symmetric_indefinite(60, gap=0.5)
    b = _vector(60, np.float32)
    with _no_warning():
        x0, i0 = sla.minres(A.astype(np.float32), b)
        x1, i1 = minres(A.astype(np.float32), b)
    assert i1 == i0 and x1.dtype == x0.dtype == np.float64
    # (float32 products: ours and scipy's round differently)
    np.testing.assert_allclose(x1, x0, rtol=1e-4, atol=1e-4 * np.abs(x0).max())
    b = _vector(60, np.complex128)  # (scipy's own comparison of a complex beta refuses it)
    for solver in (sla.minres, minres):
        with pytest.raises(ValueError, match="non-symmetric matrix"), \
                pytest.warns(np.exceptions.ComplexWarning):
            solver(A, b)


def test_minres_poisson_three_hundred_iterations_as_scipy():
    A = poisson_2d(40)
    b = _vector(A.shape[0], np.float64)
    x0, i0, s0 = _counted(sla.minres, A, b, rtol=1e-30, maxiter=300)
    x1, i1, s1 = _counted(minres, A, b, rtol=1e-30, maxiter=300)
    assert i0 == i1 and len(s0) == len(s1) > 100
    np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-9 * np.abs(x0).max())


@pytest.mark.parametrize("kind", ["csr", "csc", "CSR", "dense", "operator"])
def test_minres_operand_types(kind):
    A = _symmetric_indefinite(150, seed=2)
    op = {"csr": A, "csc": A.tocsc(), "CSR": wsesparse.CSR(A), "dense": A.toarray(),
          "operator": sla.aslinearoperator(A)}[kind]
    b = _vector(150, np.float64)
    x0, i0 = sla.minres(A, b, rtol=1e-10)
    x1, i1 = minres(op, b, rtol=1e-10)
    assert i1 == i0
    np.testing.assert_allclose(x1, x0, rtol=1e-7, atol=1e-9 * np.abs(x0).max())


def test_minres_options_as_scipy():
    A = _symmetric_indefinite(200, seed=6, gap=0.5)
    S = _spd(200, np.float64, seed=7)
    b = _vector(200, np.float64)
    x0 = _vector(200, np.float64, seed=9)
    Mdiag = sp.diags_array(1 / S.diagonal())
    cases = [(A, dict(x0=x0)), (A, dict(shift=0.7)), (S, dict(M=Mdiag)),
             (S, dict(M=Mdiag, x0="Mb")), (A, dict(maxiter=4)), (A, dict(rtol=1e-3)),
             (A, dict(x0=x0.reshape(200, 1))), (S, dict(check=True))]
    for Amat, kw in cases:
        r0 = _counted(sla.minres, Amat, b, **kw)
        r1 = _counted(minres, Amat, b, **kw)
        assert r1[1] == r0[1] and len(r1[2]) == len(r0[2]), kw
        np.testing.assert_allclose(r1[0], r0[0], rtol=1e-8, atol=1e-10, err_msg=str(kw))


def test_minres_shift_with_a_start():
    """scipy 1.17's minres starts from b - A x0 whatever the shift: with both, it returns
    the solution of another system. Ours starts from b - (A - shift I) x0."""
    A = _symmetric_indefinite(50, seed=4, gap=1.0)
    b, x0 = _vector(50, np.float64), _vector(50, np.float64, seed=5)
    exact = np.linalg.solve(A.toarray() - 0.5 * np.eye(50), b)
    x, info = minres(A, b, x0=x0, shift=0.5, rtol=1e-12)
    assert info == 0
    np.testing.assert_allclose(x, exact, rtol=1e-8, atol=1e-10)
    x_shifted, _ = sla.minres(A - 0.5 * sp.eye_array(50), b, x0=x0, rtol=1e-12)
    np.testing.assert_allclose(x, x_shifted, rtol=1e-8, atol=1e-10)
    x_scipy, _ = sla.minres(A, b, x0=x0, shift=0.5, rtol=1e-12)
    if np.allclose(x_scipy, exact, rtol=1e-6):  # (scipy fixed: ours still right)
        return
    assert np.linalg.norm(x_scipy - exact) > 1e-3 * np.linalg.norm(exact)


@pytest.mark.parametrize("how", ["float32", "show"])
def test_minres_shift_with_a_start_also_where_scipy_runs(how, capsys):
    """float32 solves and show=True run scipy's minres; with a shift and x0 they are given
    b + shift x0, so they too solve (A - shift I) x = b (a review found them returning
    scipy's answer to another system)."""
    A = _symmetric_indefinite(40, seed=4, gap=1.0)
    b, x0 = _vector(40, np.float64), _vector(40, np.float64, seed=5)
    exact = np.linalg.solve(A.toarray() - 0.3 * np.eye(40), b)
    for start in (x0, "Mb"):
        if how == "float32":
            x, info = minres(A.astype(np.float32), b.astype(np.float32), x0=start, shift=0.3,
                             rtol=1e-7)
            tol = 1e-4
        else:
            x, info = minres(A, b, x0=start, shift=0.3, rtol=1e-12, show=True)
            tol = 1e-8
        assert info == 0
        np.testing.assert_allclose(x, exact, rtol=tol, atol=tol * np.abs(exact).max())
    if how == "show":
        assert "Enter minres" in capsys.readouterr().out


def test_minres_callback_gets_a_new_array_each_step():
    A = _symmetric_indefinite(80)
    seen = []
    x, _ = minres(A, _vector(80, np.float64), callback=seen.append, maxiter=10)
    assert len(seen) == 10 and len({id(a) for a in seen}) == 10 and seen[-1] is x
    ref = []
    sla.minres(A, _vector(80, np.float64), callback=ref.append, maxiter=10)
    for a, c in zip(ref, seen):  # (kept iterates are still the step's own)
        np.testing.assert_allclose(c, a, rtol=1e-9, atol=1e-12)


def test_minres_early_returns_as_scipy():
    A = _symmetric_indefinite(30)
    for b in (np.zeros(30), np.zeros((30, 1))):
        x0, i0 = sla.minres(A, b)
        x1, i1 = minres(A, b)
        assert i1 == i0 and np.array_equal(x1, x0) and x1.shape == x0.shape
    # an eigenvector of A as b: beta becomes 0 at the first step (istop -1)
    D = sp.diags_array(np.arange(1.0, 31.0)).tocsr()
    e = np.zeros(30)
    e[4] = 1.0
    x0, i0 = sla.minres(D, e)
    x1, i1 = minres(D, e)
    assert i1 == i0 and np.allclose(x1, x0)


def test_minres_show_runs_scipys(capsys):
    B = _symmetric_indefinite(40)
    minres(B, _vector(40, np.float64), show=True, maxiter=3)
    assert "Enter minres" in capsys.readouterr().out


def test_minres_the_same_bits_with_any_thread_count():
    A = poisson_2d(400)
    b = _vector(A.shape[0], np.float64)
    runs = [minres(A, b, maxiter=25, rtol=1e-30, n_threads=t)[0] for t in (1, 2, 3)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


def test_minres_errors():
    A = _symmetric_indefinite(10)
    b = np.ones(10)
    with pytest.raises(ValueError, match="expected square matrix"):
        minres(sp.csr_array((3, 4)), np.ones(3))
    with pytest.raises(ValueError, match=r"and b \(9,\) are incompatible"):
        minres(A, np.ones(9))
    with pytest.raises(ValueError, match=r"x0 \(5,\) are incompatible"):
        minres(A, b, x0=np.ones(5))
    with pytest.raises(ValueError, match="matrix and preconditioner have different shapes"):
        minres(A, b, M=sp.eye_array(9))
    with pytest.raises(ValueError, match="n_threads"):
        minres(A, b, n_threads=0)
    N = sp.csr_array(np.triu(np.ones((10, 10))))
    for solver in (sla.minres, minres):
        with pytest.raises(ValueError, match="non-symmetric matrix"):
            solver(N, b, check=True)
    with pytest.raises(ValueError, match="indefinite preconditioner"):
        minres(A, b, M=-sp.eye_array(10))
    for shift in (1j, "0.5", None):
        with pytest.raises(TypeError, match="shift must be a number"):
            minres(A, b, shift=shift)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2 ** 16), shift=st.sampled_from([0.0, 0.25]),
       start=st.booleans(), clustered=st.booleans())
def test_minres_random_systems_match_scipy(n, seed, shift, start, clustered):
    A = (_clustered_indefinite(n, seed=seed) if clustered
         else _symmetric_indefinite(n, seed=seed, density=0.3))
    b = _vector(n, np.float64, seed=seed + 1)
    kw = dict(x0=_vector(n, np.float64, seed=seed + 2)) if start else {}
    # (with x0 and a shift, scipy is compared on the shifted matrix: its own minres starts
    # from the residual of the unshifted one, test_minres_shift_with_a_start)
    ref = (A - shift * sp.eye_array(n), 0.0) if start else (A, shift)
    x0, i0, s0 = _counted(sla.minres, ref[0], b, rtol=1e-8, shift=ref[1], **kw)
    x1, i1, s1 = _counted(minres, A, b, rtol=1e-8, shift=shift, **kw)
    assert i1 == i0
    if clustered:  # (well conditioned: the same steps and solution to rounding)
        assert len(s1) == len(s0)
        np.testing.assert_allclose(x1, x0, rtol=1e-7, atol=1e-7 * np.abs(x0).max())
    else:  # (possibly near-singular: rounding moves x and the stopping step; scipy's
        # tests hold: a small residual, or a small A r for a least-squares solution)
        shifted = (A - shift * sp.eye_array(n)).toarray()
        r = b - shifted @ x1
        norm_a = np.linalg.norm(shifted, 2)
        test1 = np.linalg.norm(r) / (norm_a * np.linalg.norm(x1) + 1e-300)
        test2 = np.linalg.norm(shifted @ r) / (norm_a * np.linalg.norm(r) + 1e-300)
        assert min(test1, test2) <= 1e-5 or i1 == 5 * n


# -- bicgstab ---------------------------------------------------------------------------

from wsesparse.linalg import bicgstab  # noqa: E402


def _nonsymmetric(n, seed=0, density=0.05, scale=0.15, dtype=np.float64):
    """A sparse nonsymmetric matrix near 4 I (diagonally dominant): BiCGSTAB converges in
    few, smooth steps, so rounding cannot move its stopping step (on harder systems its
    erratic steps amplify rounding differences as scipy's own runs do)."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=density, format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    if np.dtype(dtype).kind == "c":  # (complex entries off the diagonal, on its pattern)
        Im = R.copy()
        Im.data = rng.standard_normal(R.nnz)
        R = R + 1j * Im
    return sp.csr_array(R * scale + sp.diags_array(np.full(n, 4.0))).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bicgstab_same_iterations_and_iterates_as_scipy(dtype):
    A = _nonsymmetric(300, dtype=dtype)
    b = _vector(300, dtype)
    single = dtype in (np.float32, np.complex64)
    rtol = 1e-5 if single else 1e-12
    x0, i0, seen0 = _counted(sla.bicgstab, A, b, rtol=rtol)
    x1, i1, seen1 = _counted(bicgstab, A, b, rtol=rtol)
    assert (i1, len(seen1)) == (i0, len(seen0)) and len(seen1) >= 3
    assert x1.dtype == x0.dtype == dtype
    tol = 1e-5 if single else 1e-12
    for a, c in zip(seen0, seen1):
        np.testing.assert_allclose(c, a, rtol=tol, atol=tol * np.abs(a).max())


@pytest.mark.parametrize("kind", ["csr", "csc", "coo", "CSR", "dense", "operator"])
def test_bicgstab_operand_types(kind):
    A = _nonsymmetric(150, seed=2)
    op = {"csr": A, "csc": A.tocsc(), "coo": A.tocoo(), "CSR": wsesparse.CSR(A),
          "dense": A.toarray(), "operator": sla.aslinearoperator(A)}[kind]
    b = _vector(150, np.float64)
    x0, i0 = sla.bicgstab(A, b, rtol=1e-10)
    x1, i1 = bicgstab(op, b, rtol=1e-10)
    assert i1 == i0 == 0
    np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-12)


def test_bicgstab_options_as_scipy():
    A = _nonsymmetric(200, seed=6)
    b = _vector(200, np.float64)
    x0 = _vector(200, np.float64, seed=9)
    d = 1 / A.diagonal()
    cases = [dict(x0=x0), dict(x0=x0.reshape(200, 1)), dict(M=sp.diags_array(d)),
             dict(M=sp.diags_array(d), x0="Mb"), dict(M=sla.aslinearoperator(sp.diags_array(d))),
             dict(M=np.diag(d)), dict(maxiter=2), dict(atol=1e-3, rtol=0.0),
             dict(rtol=1e-13),
             # (a product M: two of its outputs, phat and shat, live at once; a dense M
             # gave both in one buffer in a first version)
             dict(M=sp.csr_array(sp.diags_array([0.01 * d[1:], d, 0.02 * d[1:]],
                                                offsets=[-1, 0, 1])))]
    for kw in cases:
        r0 = _counted(sla.bicgstab, A, b, **kw)
        r1 = _counted(bicgstab, A, b, **kw)
        assert r1[1] == r0[1] and len(r1[2]) == len(r0[2]), kw
        np.testing.assert_allclose(r1[0], r0[0], rtol=1e-9, atol=1e-12, err_msg=str(kw))


def test_bicgstab_early_exits_and_breakdowns_as_scipy():
    n = 40
    b = _vector(n, np.float64)
    skew = sp.csr_array(sp.diags_array([np.ones(n - 1), -np.ones(n - 1)], offsets=[1, -1]))
    for A in (sp.eye_array(n).tocsr(), 2.5 * sp.eye_array(n).tocsr(), sp.csr_array((n, n))):
        with np.errstate(all="ignore"):
            x0, i0, s0 = _counted(sla.bicgstab, A, b)
            x1, i1, s1 = _counted(bicgstab, A, b)
        assert i1 == i0 and len(s1) == len(s0), (A.toarray()[:2, :2], i0, i1)
        np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-12)
    # An exact breakdown: with b on the even entries, skew @ b lies on the odd ones, so the
    # first step's <b, A b> is exactly 0 and both stop with -11 at the start.
    b_even = np.zeros(n)
    b_even[::2] = np.linspace(1.0, 2.0, n // 2)
    x0, i0, s0 = _counted(sla.bicgstab, skew, b_even)
    x1, i1, s1 = _counted(bicgstab, skew, b_even)
    assert i1 == i0 == -11 and len(s1) == len(s0)
    np.testing.assert_array_equal(x1, x0)
    # (with a general b the iterates blow up to 1e16 and rounding decides what happens: a
    # breakdown, -10 or -11, on some machines, for scipy all 400 steps without convergence on
    # an AVX-512 Zen 4 with the same b; neither may claim convergence)
    with np.errstate(all="ignore"):
        assert bicgstab(skew, b)[1] != 0 and sla.bicgstab(skew, b)[1] != 0
    x, info = bicgstab(_nonsymmetric(n), np.zeros(n))
    assert info == 0 and not x.any()


def test_a_start_of_m_b_in_a_wider_dtype_carries_the_solve():
    """x0="Mb" with an M wider than the system: scipy's start M @ b, and so its whole
    solve and result, take M's dtype; ours too (a review: ours stayed float32, residual
    1e-7 against scipy's 5e-13; a longdouble M gave float64 against scipy's float128)."""
    A = _nonsymmetric(80, seed=5).astype(np.float32)
    S = _spd(80, np.float64, seed=5).astype(np.float32)
    b = _vector(80, np.float32)
    M64 = sp.diags_array(np.full(80, 0.25))
    Mld = sp.csr_array(sp.diags_array(np.full(80, 0.25))).astype(np.longdouble)
    for solver, ref, Am in ((bicgstab, sla.bicgstab, A), (cg, sla.cg, S)):
        for M, want in ((M64, np.float64), (Mld, np.longdouble)):
            x0, i0 = ref(Am, b, x0="Mb", M=M, rtol=1e-12)
            x1, i1 = solver(Am, b, x0="Mb", M=M, rtol=1e-12)
            assert x1.dtype == x0.dtype == want and i1 == i0 == 0
            np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-12)


def test_bicgstab_early_exit_keeps_an_inf():
    """The early exit (norm(s) < atol) adds alpha phat alone, as scipy's: an inf in phat
    stays inf (a first version added 0 * phat too, making it NaN)."""
    A = sp.csr_array(np.array([[0.0, 0.0], [0.0, 1.0]]))
    M = sp.diags_array(np.array([np.inf, 1.0]))
    b = np.array([1e-8, 1.0])
    with np.errstate(all="ignore"):
        x0, i0 = sla.bicgstab(A, b, M=M)
        x1, i1 = bicgstab(A, b, M=M)
    assert i1 == i0 and np.array_equal(np.isinf(x1), np.isinf(x0)) and np.isinf(x1).any()


def test_a_corrupt_preconditioner_is_named():
    M = sp.dia_array((np.ones((1, 20)), [0]), shape=(20, 20))
    M.data = np.ones((0, 20))  # (offsets [0], no row of data: scipy's own check is bypassed)
    for solver in (cg, bicgstab, minres):
        with pytest.raises(ValueError, match=r"M \(dia\) has a corrupt structure"):
            solver(_spd(20, np.float64), np.ones(20), M=M)


@pytest.mark.parametrize("solver", ["bicgstab", "gmres"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_systems_run_here(solver, dtype, monkeypatch):
    """Complex systems run on the library's kernels, not through scipy's solver (as before
    session 45), with scipy's iterations and results to rounding; a complex preconditioner
    too."""
    import wsesparse.linalg as wl
    from wsesparse.linalg import _nonsymmetric as solvers

    def refuse(*args, **kwargs):
        raise AssertionError("handed to scipy")

    monkeypatch.setattr(solvers, "scipy_solver", refuse)
    n = 120
    A = _nonsymmetric(n, seed=3, scale=0.3, dtype=dtype)
    b = _vector(n, dtype)
    M = sp.diags_array((1 / A.diagonal()).astype(dtype))
    tol = 1e-4 if dtype == np.complex64 else 1e-9
    for kw in ({}, dict(M=M), dict(x0=_vector(n, dtype, seed=4)), dict(M=M, x0="Mb")):
        kw = dict(kw, rtol=1e-5 if dtype == np.complex64 else 1e-10)
        if solver == "gmres":
            kw["callback_type"] = "x"
        x0, i0, s0 = _counted(getattr(sla, solver), A, b, **kw)
        x1, i1, s1 = _counted(getattr(wl, solver), A, b, **kw)
        assert i1 == i0 == 0 and len(s1) == len(s0) and x1.dtype == x0.dtype == dtype, kw
        np.testing.assert_allclose(x1, x0, rtol=tol, atol=tol * np.abs(x0).max())


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.complex128])
def test_bicgstab_the_same_bits_with_any_thread_count(dtype):
    """(complex64 differed in thousands of entries between 1 and 2 threads before the
    vector kernels were built without FMA: test_krylov_kernels.py, "where a range
    starts")"""
    A = _nonsymmetric(150_001, density=5 / 150_000, seed=4, dtype=dtype)
    b = _vector(A.shape[0], dtype)
    runs = [bicgstab(A, b, maxiter=8, rtol=1e-30, n_threads=t)[0] for t in (1, 2, 3, 5)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


def test_bicgstab_errors():
    A = _nonsymmetric(10)
    b = np.ones(10)
    with pytest.raises(ValueError, match="expected square matrix"):
        bicgstab(sp.csr_array((3, 4)), np.ones(3))
    with pytest.raises(ValueError, match=r"and b \(9,\) are incompatible"):
        bicgstab(A, np.ones(9))
    with pytest.raises(ValueError, match="invalid `atol`"):
        bicgstab(A, b, atol=-1)
    with pytest.raises(ValueError, match="matrix and preconditioner have different shapes"):
        bicgstab(A, b, M=sp.eye_array(9))
    with pytest.raises(ValueError, match="n_threads"):
        bicgstab(A, b, n_threads=0)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2 ** 16), start=st.booleans(),
       dtype=st.sampled_from([np.float64, np.complex128]))
def test_bicgstab_random_systems_match_scipy(n, seed, start, dtype):
    A = _nonsymmetric(n, seed=seed, density=0.3, scale=0.3, dtype=dtype)
    b = _vector(n, dtype, seed=seed + 1)
    kw = dict(x0=_vector(n, dtype, seed=seed + 2)) if start else {}
    x0, i0, s0 = _counted(sla.bicgstab, A, b, rtol=1e-10, **kw)
    x1, i1, s1 = _counted(bicgstab, A, b, rtol=1e-10, **kw)
    assert i1 == i0 and len(s1) == len(s0)
    np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(x0).max()))


# -- gmres ------------------------------------------------------------------------------

from wsesparse.linalg import gmres  # noqa: E402


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("callback_type", ["x", "pr_norm", "legacy"])
def test_gmres_same_steps_as_scipy(dtype, callback_type):
    A = _nonsymmetric(300, scale=0.3, dtype=dtype)
    b = _vector(300, dtype)
    single = dtype in (np.float32, np.complex64)
    rtol = 1e-5 if single else 1e-12
    kw = dict(rtol=rtol, restart=5, callback_type=callback_type)
    x0, i0, seen0 = _counted(sla.gmres, A, b, **kw)
    x1, i1, seen1 = _counted(gmres, A, b, **kw)
    assert (i1, len(seen1)) == (i0, len(seen0)) and len(seen1) >= 2
    assert x1.dtype == x0.dtype == dtype
    tol = 1e-5 if single else 1e-12
    scale = max(float(np.abs(a).max()) for a in seen0)  # (residual norms fall to 1e-12 of it)
    for a, c in zip(seen0, seen1):  # (iterates, or the residual norms of each step)
        np.testing.assert_allclose(c, a, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(x1, x0, rtol=tol, atol=tol * np.abs(x0).max())


@pytest.mark.parametrize("kind", ["csr", "csc", "CSR", "dense", "operator"])
def test_gmres_operand_types(kind):
    A = _nonsymmetric(150, seed=2)
    op = {"csr": A, "csc": A.tocsc(), "CSR": wsesparse.CSR(A), "dense": A.toarray(),
          "operator": sla.aslinearoperator(A)}[kind]
    b = _vector(150, np.float64)
    x0, i0 = sla.gmres(A, b, rtol=1e-10)
    x1, i1 = gmres(op, b, rtol=1e-10)
    assert i1 == i0 == 0
    np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-12)


def test_gmres_options_as_scipy():
    A = _nonsymmetric(200, seed=6, scale=0.4)
    b = _vector(200, np.float64)
    x0 = _vector(200, np.float64, seed=9)
    d = 1 / A.diagonal()
    tri = sp.csr_array(sp.diags_array([0.01 * d[1:], d, 0.02 * d[1:]], offsets=[-1, 0, 1]))
    cases = [dict(x0=x0), dict(x0=x0.reshape(200, 1)), dict(M=sp.diags_array(d)),
             dict(M=sp.diags_array(d), x0="Mb"), dict(M=tri), dict(M=np.diag(d)),
             dict(M=sla.aslinearoperator(tri)), dict(restart=3), dict(restart=500),
             dict(maxiter=2, restart=4), dict(atol=1e-3, rtol=0.0), dict(rtol=1e-13)]
    for kw in cases:
        kw = dict(kw, callback_type="x")
        r0 = _counted(sla.gmres, A, b, **kw)
        r1 = _counted(gmres, A, b, **kw)
        assert r1[1] == r0[1] and len(r1[2]) == len(r0[2]), kw
        np.testing.assert_allclose(r1[0], r0[0], rtol=1e-9, atol=1e-12, err_msg=str(kw))
    # legacy: maxiter counts inner steps
    r0 = _counted(sla.gmres, A, b, maxiter=7, restart=3, callback_type="legacy")
    r1 = _counted(gmres, A, b, maxiter=7, restart=3, callback_type="legacy")
    assert r1[1] == r0[1] and len(r1[2]) == len(r0[2]) == 7


def test_gmres_breakdown_zero_and_complex_as_scipy():
    n = 30
    b = _vector(n, np.float64)
    for A in (sp.eye_array(n).tocsr(), sp.csr_array(sp.diags_array(np.arange(1.0, n + 1)))):
        x0, i0 = sla.gmres(A, b, rtol=1e-12)
        x1, i1 = gmres(A, b, rtol=1e-12)
        assert i1 == i0 == 0
        np.testing.assert_allclose(x1, x0, rtol=1e-10, atol=1e-12)
    x, info = gmres(_nonsymmetric(n), np.zeros(n))
    assert info == 0 and not x.any()
    Ac = (_nonsymmetric(n, seed=3) * (1 + 0.5j)).astype(np.complex128)
    bc = _vector(n, np.complex128)
    x0, i0 = sla.gmres(Ac, bc, rtol=1e-10)
    x1, i1 = gmres(Ac, bc, rtol=1e-10)
    assert i1 == i0 == 0 and x1.dtype == np.complex128
    np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-12)


def test_gmres_complex_passes_the_callback_s_warnings_on():
    """Warnings raised inside a complex solve (here by the callback) reach the caller (a
    first version, which handed complex systems to scipy's gmres, filtered
    DeprecationWarnings out there)."""
    A = (_nonsymmetric(20, seed=3) * (1 + 0.5j)).astype(np.complex128)

    def callback(xk):
        warnings.warn("from the callback", DeprecationWarning)

    with pytest.warns(DeprecationWarning, match="from the callback"):
        gmres(A, _vector(20, np.complex128), callback=callback, callback_type="x")


def test_gmres_callback_type_rules_as_scipy():
    A = _nonsymmetric(20)
    b = np.ones(20)
    with pytest.raises(ValueError, match="Unknown callback_type: 'y'"):
        gmres(A, b, callback_type="y")
    with pytest.warns(DeprecationWarning, match="callback_type"):
        gmres(A, b, callback=lambda r: None)
    with _no_warning():
        gmres(A, b)  # (no callback: no warning)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_gmres_the_same_bits_with_any_thread_count(dtype):
    A = _nonsymmetric(150_000, density=5 / 150_000, seed=4, dtype=dtype)
    b = _vector(A.shape[0], dtype)
    runs = [gmres(A, b, maxiter=2, restart=6, rtol=1e-30, n_threads=t)[0] for t in (1, 2, 3)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


def test_gmres_errors():
    A = _nonsymmetric(10)
    b = np.ones(10)
    with pytest.raises(ValueError, match="expected square matrix"):
        gmres(sp.csr_array((3, 4)), np.ones(3))
    with pytest.raises(ValueError, match=r"and b \(9,\) are incompatible"):
        gmres(A, np.ones(9))
    with pytest.raises(ValueError, match="invalid `atol`"):
        gmres(A, b, atol=-1)
    with pytest.raises(ValueError, match="matrix and preconditioner have different shapes"):
        gmres(A, b, M=sp.eye_array(9))
    with pytest.raises(ValueError, match="n_threads"):
        gmres(A, b, n_threads=0)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2 ** 16), start=st.booleans(),
       restart=st.sampled_from([None, 1, 3, 7]),
       dtype=st.sampled_from([np.float64, np.complex128]))
def test_gmres_random_systems_match_scipy(n, seed, start, restart, dtype):
    A = _nonsymmetric(n, seed=seed, density=0.3, scale=0.3, dtype=dtype)
    b = _vector(n, dtype, seed=seed + 1)
    kw = dict(x0=_vector(n, dtype, seed=seed + 2)) if start else {}
    x0, i0, s0 = _counted(sla.gmres, A, b, rtol=1e-10, restart=restart, callback_type="x",
                          **kw)
    x1, i1, s1 = _counted(gmres, A, b, rtol=1e-10, restart=restart, callback_type="x", **kw)
    assert i1 == i0 and len(s1) == len(s0)
    np.testing.assert_allclose(x1, x0, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(x0).max()))


# -- eigsh ------------------------------------------------------------------------------

from wsesparse.linalg import eigsh  # noqa: E402


def _laplacian(n, seed=0, dtype=np.float64):
    """A sparse symmetric (Hermitian, complex) matrix with well separated extreme
    eigenvalues: a path's Laplacian plus random symmetric entries and a random diagonal."""
    rng = np.random.default_rng(seed)
    H = _spd(n, dtype, seed=seed, density=0.02) - 0.5 * sp.eye_array(n)
    return sp.csr_array(H + sp.diags_array(rng.uniform(0, 3, n))).astype(dtype)


def _products(monkeypatch):
    """A counter of the products eigsh runs on its prepared operand."""
    from wsesparse.linalg._common import Operator
    calls = []
    original = Operator.__call__

    def counted(self, p, q):
        calls.append(1)
        return original(self, p, q)

    monkeypatch.setattr(Operator, "__call__", counted)
    return calls


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["LM", "LA", "SA"])
def test_eigsh_as_scipy(dtype, which, monkeypatch):
    calls = _products(monkeypatch)
    A = _laplacian(300, dtype=dtype)
    v0 = _vector(300, dtype, seed=5)
    kw = dict(k=4, which=which, v0=v0, tol=1e-8 if dtype in (np.float64, np.complex128)
              else 1e-4)
    w0, V0 = sla.eigsh(A, **kw)
    w1, V1 = eigsh(A, **kw)
    assert w1.dtype == w0.dtype and V1.dtype == V0.dtype and V1.shape == V0.shape
    tol = 1e-8 if dtype in (np.float64, np.complex128) else 1e-3
    np.testing.assert_allclose(np.sort(w1), np.sort(w0), rtol=tol, atol=tol)
    # (eigenvectors up to a unit factor: A V = V diag(w))
    np.testing.assert_allclose(A @ V1, V1 * w1, atol=tol * 10 * np.abs(w1).max())
    assert len(calls) > 4  # (the products ran on the prepared operand)


@pytest.mark.parametrize("kind", ["csr", "csc", "coo", "CSR", "dense", "operator", "csr64"])
def test_eigsh_operand_types(kind, monkeypatch):
    calls = _products(monkeypatch)
    A = _laplacian(200, seed=2)
    op = {"csr": A, "csc": A.tocsc(), "coo": A.tocoo(), "CSR": wsesparse.CSR(A),
          "dense": A.toarray(), "operator": sla.aslinearoperator(A),
          "csr64": sp.csr_array((A.data, A.indices.astype(np.int64),
                                 A.indptr.astype(np.int64)), shape=A.shape)}[kind]
    v0 = _vector(200, np.float64, seed=3)
    w0 = sla.eigsh(A, k=3, which="LA", v0=v0, return_eigenvectors=False)
    w1 = eigsh(op, k=3, which="LA", v0=v0, return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(w1), np.sort(w0), rtol=1e-10)
    assert (len(calls) > 0) == (kind != "operator")  # (a LinearOperator: scipy's products)


def test_eigsh_other_modes_run_scipys(monkeypatch):
    """Shift-invert, a generalized problem and buckling run scipy's eigsh as it is (a CSR
    given as its scipy matrix, which scipy factorizes), under accelerated()."""
    calls = _products(monkeypatch)
    A = _laplacian(150, seed=4)
    M = sp.diags_array(np.linspace(1, 2, 150)).tocsr()
    v0 = _vector(150, np.float64, seed=6)
    for kw in (dict(sigma=0.7), dict(M=M), dict(sigma=1.1, M=M, mode="cayley"),
               dict(sigma=0.7, which="LM", return_eigenvectors=False)):
        for op in (A, wsesparse.CSR(A)):
            r0 = sla.eigsh(A, k=3, v0=v0, **kw)
            r1 = eigsh(op, k=3, v0=v0, **kw)
            w0, w1 = (r[0] if isinstance(r, tuple) else r for r in (r0, r1))
            np.testing.assert_allclose(np.sort(w1), np.sort(w0), rtol=1e-9, err_msg=str(kw))
    assert not calls


def test_eigsh_errors_as_scipy():
    A = _laplacian(20)
    for kw, exc, match in ((dict(k=0), ValueError, "k must be greater than 0"),
                           (dict(k=3, which="XX"), ValueError, "which must be one of"),
                           (dict(k=25), TypeError, "Cannot use scipy.linalg.eigh for sparse A"),
                           (dict(k=3, OPinv=A), ValueError, "OPinv should not be specified")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (k >= N, before the error)
            with pytest.raises(exc, match=match):
                sla.eigsh(A, **kw)
            with pytest.raises(exc, match=match):
                eigsh(A, **kw)
    with pytest.raises(TypeError, match="Cannot use scipy.linalg.eigh for sparse A"):
        with pytest.warns(RuntimeWarning, match="k >= N"):
            eigsh(wsesparse.CSR(A), k=25)
    with pytest.raises(ValueError, match="n_threads"):
        eigsh(A, k=2, n_threads=0)
    with pytest.raises(ValueError, match="expected square matrix"):
        eigsh(sp.csr_array((3, 4)), k=1)


def test_eigsh_the_same_eigenvalues_with_any_thread_count():
    n = 72_900  # (the products take several threads)
    bump = np.zeros(n)
    bump[:3] = [20.0, 15.0, 12.0]  # (three eigenvalues well above the rest: ARPACK is quick)
    A = sp.csr_array(poisson_2d(270) + sp.diags_array(bump))
    v0 = _vector(n, np.float64, seed=8)
    runs = [eigsh(A, k=2, which="LA", v0=v0, ncv=8, tol=1e-10, n_threads=t)
            for t in (1, 2, 3)]
    assert runs[0][0].min() > 15
    assert all(np.array_equal(runs[0][0], w) and np.array_equal(runs[0][1], V)
               for w, V in runs[1:])


def test_eigsh_review_cases():
    """A review's cases: a complex A at k = n - 1 (scipy's eigs goes dense there: an
    ndarray's eigenvalues, a sparse A's TypeError; the prepared path gave a LinearOperator's
    TypeError), M given as a CSR (handed over as its scipy matrix, which shift-invert
    factorizes; as a LinearOperator scipy's iterative inverse did not converge), and rng
    as scipy's 14th positional argument."""
    Ac = _laplacian(6, seed=1, dtype=np.complex128)
    with pytest.warns(RuntimeWarning, match="k >= N - 1"):
        w0 = sla.eigsh(Ac.toarray(), k=5, return_eigenvectors=False)
    with pytest.warns(RuntimeWarning, match="k >= N - 1"):
        w1 = eigsh(Ac.toarray(), k=5, return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(w1), np.sort(w0), rtol=1e-12)
    for op in (Ac, wsesparse.CSR(Ac)):
        with pytest.raises(TypeError, match="for sparse A with k >= N - 1"):
            with pytest.warns(RuntimeWarning, match="k >= N - 1"):
                eigsh(op, k=5)
    A = _laplacian(120, seed=2)
    M = sp.diags_array(np.linspace(1, 2, 120)).tocsr()
    v0 = _vector(120, np.float64, seed=3)
    w0 = sla.eigsh(A, k=3, M=M, sigma=0.5, v0=v0, return_eigenvectors=False)
    w1 = eigsh(A, k=3, M=wsesparse.CSR(M), sigma=0.5, v0=v0, return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(w1), np.sort(w0), rtol=1e-12)
    if "rng" in __import__("inspect").signature(sla.eigsh).parameters:  # (scipy >= 1.15)
        args = (A, 3, None, None, "LA", None, None, None, 0, False, None, None, "normal")
        w0 = sla.eigsh(*args, np.random.default_rng(4))
        w1 = eigsh(*args, np.random.default_rng(4))
        np.testing.assert_allclose(np.sort(w1), np.sort(w0), rtol=1e-12)
