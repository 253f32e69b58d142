"""The vector kernels of wsesparse.linalg (_kernels/_krylov.h) against numpy: every dtype,
lengths around the chunk size, bitwise the same sums for any thread count, and errors for
what they cannot read."""

from __future__ import annotations

import numpy as np
import pytest

from wsesparse._kernels import _krylov

CHUNK = _krylov.CHUNK
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
LENGTHS = [0, 1, 7, 9, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 13]


def _vec(rng, n, dtype):
    v = rng.standard_normal(n)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(n)
    return v.astype(dtype)


def _tol(dtype):
    return 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-13


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_dot_is_vdot(dtype, n):
    rng = np.random.default_rng(n)
    a, b = _vec(rng, n, dtype), _vec(rng, n, dtype)
    got = _krylov.dot(a, b, 2)
    want = np.vdot(a.astype(np.complex128), b.astype(np.complex128))
    scale = max(1.0, float(np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)))
    assert abs(got - want) <= 1e-13 * scale  # (single precision sums in double)
    assert isinstance(got, complex if np.dtype(dtype).kind == "c" else float)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_xpby(dtype, n):
    rng = np.random.default_rng(n + 1)
    p, z = _vec(rng, n, dtype), _vec(rng, n, dtype)
    beta = 0.75 - 0.5j if np.dtype(dtype).kind == "c" else 0.75
    want = z + np.asarray(beta, dtype=dtype) * p
    _krylov.xpby(p, z, beta, 2)
    np.testing.assert_allclose(p, want, rtol=_tol(dtype), atol=_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_cg_update(dtype, n):
    rng = np.random.default_rng(n + 2)
    x, r, p, q = (_vec(rng, n, dtype) for _ in range(4))
    alpha = 0.3 + 0.2j if np.dtype(dtype).kind == "c" else 0.3
    a = np.asarray(alpha, dtype=dtype)
    x_want, r_want = x + a * p, r - a * q
    rr = _krylov.cg_update(x, r, p, q, alpha, 2)
    np.testing.assert_allclose(x, x_want, rtol=_tol(dtype), atol=_tol(dtype))
    np.testing.assert_allclose(r, r_want, rtol=_tol(dtype), atol=_tol(dtype))
    want = float(np.vdot(r.astype(np.complex128), r.astype(np.complex128)).real)
    assert rr == pytest.approx(want, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_diag_apply(dtype, n):
    rng = np.random.default_rng(n + 3)
    d, r = _vec(rng, n, dtype), _vec(rng, n, dtype)
    z = np.empty_like(r)
    rho = _krylov.diag_apply(z, d, r, 2)
    np.testing.assert_allclose(z, d * r, rtol=_tol(dtype), atol=_tol(dtype))
    want = np.vdot(r.astype(np.complex128), z.astype(np.complex128))
    assert abs(rho - want) <= 1e-12 * max(1.0, float(np.abs(r).astype(float) @
                                                     np.abs(z).astype(float)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sums_do_not_depend_on_the_thread_count(dtype):
    rng = np.random.default_rng(5)
    n = 7 * CHUNK + 123
    vecs = [_vec(rng, n, dtype) for _ in range(4)]
    results = []
    for threads in (1, 2, 3, 5):
        x, r, p, q = (v.copy() for v in vecs)
        d = _krylov.dot(p, q, threads)
        _krylov.xpby(p, q, 0.5, threads)
        rr = _krylov.cg_update(x, r, p, q, 0.25, threads)
        z = np.empty_like(x)
        rho = _krylov.diag_apply(z, p, r, threads)
        results.append((d, rr, rho, x.tobytes(), r.tobytes(), p.tobytes(), z.tobytes()))
    assert all(res == results[0] for res in results[1:])


def test_sums_of_large_and_small_terms_keep_the_small_ones():
    # (chunked sums in double: float32 inputs whose float32 running sum would drop 1.0s)
    a = np.ones(3 * CHUNK, dtype=np.float32)
    a[0] = 2.0 ** 25
    assert _krylov.dot(a, a, 2) == 2.0 ** 50 + 3 * CHUNK - 1


def test_errors_name_the_argument():
    v = np.ones(10)
    with pytest.raises(ValueError, match="a must be a 1-D C-contiguous array"):
        _krylov.dot(np.ones((2, 5)), v)
    with pytest.raises(ValueError, match="a must be a 1-D C-contiguous array"):
        _krylov.dot(np.ones(20)[::2], v)
    with pytest.raises(ValueError, match="b must have the first vector's dtype and length"):
        _krylov.dot(v, np.ones(11))
    with pytest.raises(ValueError, match="z must have the first vector's dtype"):
        _krylov.xpby(v, np.ones(10, dtype=np.float32), 1.0)
    with pytest.raises(ValueError, match="float32, float64, complex64 or complex128"):
        _krylov.dot(np.ones(10, dtype=np.int64), np.ones(10, dtype=np.int64))
    with pytest.raises(ValueError, match="native byte order"):
        _krylov.dot(np.ones(10, dtype=">f8"), np.ones(10, dtype=">f8"))
    ro = np.ones(10)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="p must be writeable"):
        _krylov.xpby(ro, v, 1.0)
    with pytest.raises(ValueError, match="r must be writeable"):
        _krylov.cg_update(v.copy(), ro, v, v, 1.0)
    with pytest.raises(ValueError, match="q must have the first vector's dtype and length"):
        _krylov.cg_update(v.copy(), v.copy(), v, np.ones(9), 1.0)
    with pytest.raises(TypeError):
        _krylov.dot([1.0], [1.0])


# -- the MINRES passes (real vectors) ----------------------------------------------------

REAL = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("n", LENGTHS)
def test_minres_passes(dtype, n):
    rng = np.random.default_rng(n + 7)
    y, v, r1, r2, w1, w2, x = (_vec(rng, n, dtype) for _ in range(7))
    tol = _tol(dtype)
    c = dtype(1.5)
    out = np.empty_like(y)
    _krylov.scaled(out, y, 1.5, 2)
    np.testing.assert_allclose(out, c * y, rtol=tol)

    for use_r1 in (True, False):
        yy = y.copy()
        want = (y - dtype(0.25) * v) - (dtype(0.5) * r1 if use_r1 else 0)
        dot = _krylov.minres_a(yy, v, r1, 0.25, 0.5, use_r1, 2)
        np.testing.assert_allclose(yy, want, rtol=tol, atol=tol)
        assert dot == pytest.approx(float(v.astype(np.float64) @ yy.astype(np.float64)),
                                    rel=1e-12, abs=1e-12)

    yy = y.copy()
    sq = _krylov.minres_b(yy, r2, -0.75, 2)
    np.testing.assert_allclose(yy, y + dtype(0.75) * r2, rtol=tol, atol=tol)
    assert sq == pytest.approx(float(yy.astype(np.float64) @ yy.astype(np.float64)),
                               rel=1e-12, abs=1e-300)

    w = np.empty_like(y)
    for x_out in (np.empty_like(x), None):  # (a new x, then x in place)
        xx = x.copy()
        target = xx if x_out is None else x_out
        sq = _krylov.minres_c(w, w1, w2, v, xx, target, 0.3, -0.2, 2.0, 0.7, 2)
        w_want = ((v - dtype(0.3) * w1) - dtype(-0.2) * w2) * dtype(2.0)
        np.testing.assert_allclose(w, w_want, rtol=tol, atol=tol)
        np.testing.assert_allclose(target, x + dtype(0.7) * w, rtol=tol, atol=tol)
        assert sq == pytest.approx(float(target.astype(np.float64) @ target.astype(np.float64)),
                                   rel=1e-12, abs=1e-300)


def test_minres_passes_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(8)
    n = 5 * CHUNK + 77
    vecs = [rng.standard_normal(n) for _ in range(6)]
    results = []
    for threads in (1, 2, 4):
        y, v, r1, w1, w2, x = (a.copy() for a in vecs)
        w = np.empty(n)
        a = _krylov.minres_a(y, v, r1, 0.1, 0.3, True, threads)
        b = _krylov.minres_b(y, r1, 0.2, threads)
        c = _krylov.minres_c(w, w1, w2, v, x, x, 0.1, 0.2, 0.9, 0.4, threads)
        results.append((a, b, c, y.tobytes(), w.tobytes(), x.tobytes()))
    assert all(r == results[0] for r in results[1:])


def test_minres_passes_take_real_vectors_only():
    z = np.ones(10, dtype=np.complex128)
    with pytest.raises(ValueError, match="y must be float32 or float64, got complex128"):
        _krylov.minres_a(z, z, z, 0.0, 1.0, True)
    v = np.ones(10)
    with pytest.raises(ValueError, match="x_out must have the first vector's dtype"):
        _krylov.minres_c(v.copy(), v, v, v, v, np.ones(10, dtype=np.float32), 0, 0, 1, 1)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_scaled_complex_vectors_by_a_real(dtype):
    """gmres's normalisation of a complex basis vector: both parts times s."""
    rng = np.random.default_rng(9)
    y = _vec(rng, 2 * CHUNK + 5, dtype)
    out = np.empty_like(y)
    _krylov.scaled(out, y, 0.3, 2)
    real = np.float32 if dtype == np.complex64 else np.float64
    assert np.array_equal(out.real, y.real * real(0.3))
    assert np.array_equal(out.imag, y.imag * real(0.3))


def test_teams_are_capped_by_chunks_and_max_team():
    """A request for 100,000 threads crashed the process (OpenMP built the whole team):
    a call takes at most one thread per chunk and MAX_TEAM, with the same bits."""
    assert _krylov.MAX_TEAM >= 64
    a = np.linspace(-1, 1, 50 * CHUNK + 3)
    assert _krylov.dot(a, a, 100_000) == _krylov.dot(a, a, 1)
    x, r = a.copy(), a[::-1].copy()
    assert _krylov.cg_update(x, r, a, a, 0.5, 100_000) == \
        _krylov.cg_update(a.copy(), a[::-1].copy(), a, a, 0.5, 1)


def test_none_is_refused_before_any_read():
    with pytest.raises(TypeError):
        _krylov.dot(None, np.ones(3))
    with pytest.raises(TypeError):
        _krylov.minres_c(np.ones(3), None, np.ones(3), np.ones(3), np.ones(3), np.ones(3),
                         0, 0, 1, 1)


# -- the BiCGSTAB passes ---------------------------------------------------------------

def _c128(a):
    return a.astype(np.complex128)


def _scalars(dtype, *values):
    """The scalars of a pass: complex for complex vectors, their real parts for real ones."""
    return [v if np.dtype(dtype).kind == "c" else v.real for v in values]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_bicgstab_passes(dtype, n):
    rng = np.random.default_rng(n + 11)
    p, r, v, x, t, rt = (_vec(rng, n, dtype) for _ in range(6))
    tol = _tol(dtype)
    beta, omega, alpha = _scalars(dtype, 0.7 + 0.4j, -0.3 + 0.2j, 0.4 - 0.9j)
    be, om, al = (np.asarray(s, dtype=dtype) for s in (beta, omega, alpha))
    pp = p.copy()
    _krylov.bicg_p(pp, r, v, beta, omega, 2)
    np.testing.assert_allclose(pp, ((p - om * v) * be) + r, rtol=tol, atol=tol)
    xx = x.copy()
    _krylov.bicg_x(xx, p, v, alpha, omega, 2)
    np.testing.assert_allclose(xx, (x + al * p) + om * v, rtol=tol, atol=tol)
    ab, aa = _krylov.dot2(t, r, 2)
    assert isinstance(ab, complex if np.dtype(dtype).kind == "c" else float)
    assert isinstance(aa, float)
    assert ab == pytest.approx(np.vdot(_c128(t), _c128(r)), rel=1e-12, abs=1e-12)
    assert aa == pytest.approx(np.vdot(_c128(t), _c128(t)).real, rel=1e-12, abs=1e-300)
    rr_ = r.copy()
    sq, rho = _krylov.bicg_r(rr_, t, rt, omega, 2)
    np.testing.assert_allclose(rr_, r - om * t, rtol=tol, atol=tol)
    new = _c128(rr_)
    assert sq == pytest.approx(np.vdot(new, new).real, rel=1e-12, abs=1e-300)
    assert rho == pytest.approx(np.vdot(_c128(rt), new), rel=1e-12, abs=1e-12)
    yy = r.copy()  # (minres_b is BiCGSTAB's r -= alpha v too)
    sq = _krylov.minres_b(yy, v, alpha, 2)
    np.testing.assert_allclose(yy, r - al * v, rtol=tol, atol=tol)
    assert sq == pytest.approx(np.vdot(_c128(yy), _c128(yy)).real, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.complex64])
def test_bicgstab_passes_do_not_depend_on_the_thread_count(dtype):
    rng = np.random.default_rng(12)
    n = 5 * CHUNK + 31
    vecs = [_vec(rng, n, dtype) for _ in range(4)]
    beta, alpha, omega = _scalars(dtype, 0.7 - 0.1j, 0.1 + 0.6j, 0.5 - 0.5j)
    results = []
    for threads in (1, 2, 4):
        p, r, v, rt = (a.copy() for a in vecs)
        _krylov.bicg_p(p, r, v, beta, 0.2, threads)
        _krylov.bicg_x(r, p, v, alpha, 0.3, threads)
        d = _krylov.dot2(p, r, threads)
        e = _krylov.bicg_r(r, v, rt, omega, threads)
        f = _krylov.minres_b(v, p, alpha, threads)
        results.append((d, e, f, p.tobytes(), r.tobytes(), v.tobytes()))
    assert all(res == results[0] for res in results[1:])


def test_real_vectors_take_real_scalars_only():
    v = np.ones(10)
    with pytest.raises(ValueError, match=r"omega must be real for real vectors, got 1j"):
        _krylov.bicg_p(v.copy(), v, v, 0.5, 1j)
    with pytest.raises(ValueError, match=r"h must be real for real vectors"):
        _krylov.mgs(v.copy(), v, v, 0.5 + 0.5j)
    with pytest.raises(ValueError, match=r"c2 must be real for real vectors"):
        _krylov.minres_b(v.copy(), v, 2j)
    with pytest.raises(ValueError, match=r"beta must be real for real vectors"):
        _krylov.xpby(v.copy(), v, 1 + 1j)  # (its imaginary part was dropped before)
    with pytest.raises(ValueError, match=r"alpha must be real for real vectors"):
        _krylov.cg_update(v.copy(), v.copy(), v, v, np.complex64(1j))
    _krylov.bicg_x(v, v, v, 0.5 + 0j, 1.0)  # (a complex number with no imaginary part)
    _krylov.bicg_x(v, v, v, np.float32(0.5), np.complex128(1.0))


def test_scalars_must_be_numbers():
    """complex("2") parses a string: a first version of the complex passes ran with it."""
    z = np.ones(10, dtype=np.complex128)
    with pytest.raises(TypeError, match=r"beta must be a number, got '2'"):
        _krylov.bicg_p(z.copy(), z, z, "2", 0.5)
    with pytest.raises(TypeError, match=r"h must be a number, got '1\+1j'"):
        _krylov.mgs(z.copy(), z, z, "1+1j")
    with pytest.raises(TypeError, match="alpha must be a number"):
        _krylov.cg_update(z.copy(), z.copy(), z, z, b"1")
    with pytest.raises(TypeError):
        _krylov.xpby(z.copy(), z, None)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_passes_do_not_depend_on_where_a_range_starts(dtype):
    """Each element's bits are the same wherever it falls: at any offset of the array (its
    alignment) and for thread ranges that begin at odd elements. GCC 12 fused complex
    products into vfmaddsub in a loop's vector body but not in its scalar remainder
    despite -ffp-contract=off, so complex64 bits moved with the split (a review:
    bicgstab's iterates differed in 10,493 of 70,001 entries between 1 and 2 threads);
    setup.py builds _krylov without FMA on x86."""
    rng = np.random.default_rng(21)
    n = 70_001
    data = [_vec(rng, n, dtype) for _ in range(4)]

    def at(a, off):  # a copy of a that starts off elements into a new buffer
        out = np.empty(n + off, dtype)[off:]
        out[:] = a
        return out

    runs = []
    for off, threads in [(0, t) for t in range(1, 8)] + [(1, 1), (2, 3), (3, 5)]:
        p, r, v, x = (at(a, off) for a in data)
        _krylov.bicg_p(p, r, v, 0.7 - 0.2j, 0.3 + 0.9j, threads)
        _krylov.bicg_x(x, r, v, 0.1 + 0.6j, -0.4 + 0.3j, threads)
        _krylov.xpby(x, p, 0.25 - 0.75j, threads)
        sq, rho = _krylov.bicg_r(p, v, r, 0.5 - 0.5j, threads)
        h = _krylov.mgs(x, p, v, 0.2 + 0.3j, threads)
        runs.append((p.tobytes(), x.tobytes(), sq, rho, h))
    assert all(run == runs[0] for run in runs[1:])
    assert _krylov.dot(data[0], data[0]).imag == 0  # (an unfused sum of products)




@pytest.mark.parametrize("dtype", REAL)
def test_updates_round_as_numpy_s_steps(dtype):
    """The updates are built without floating-point contraction (setup.py): each product
    and sum rounds as numpy's separate steps do, so x += alpha p gives numpy's bits (GCC
    fused them into FMAs, a review found: 40 % of the entries differed)."""
    rng = np.random.default_rng(13)
    n = 3 * CHUNK + 5
    a, b, c = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    p = a.copy()
    _krylov.bicg_p(p, b, c, 0.7, 1.3, 2)
    assert np.array_equal(p, ((a - dtype(1.3) * c) * dtype(0.7)) + b)
    x, r = a.copy(), b.copy()
    _krylov.cg_update(x, r, c, a, 0.3, 2)
    assert np.array_equal(x, a + dtype(0.3) * c) and np.array_equal(r, b - dtype(0.3) * a)
    y = a.copy()
    _krylov.minres_b(y, b, 0.45, 2)
    assert np.array_equal(y, a - dtype(0.45) * b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
def test_mgs(dtype, n):
    rng = np.random.default_rng(n + 17)
    w, vk, u = (_vec(rng, n, dtype) for _ in range(3))
    tol = _tol(dtype)
    (h,) = _scalars(dtype, 0.35 - 0.8j)
    hh = np.asarray(h, dtype=dtype)
    ww = w.copy()
    got = _krylov.mgs(ww, vk, u, h, 2)
    np.testing.assert_allclose(ww, w - hh * vk, rtol=tol, atol=tol)
    if np.dtype(dtype).kind == "f":
        assert np.array_equal(ww, w - hh * vk)  # (numpy's rounding, no contraction)
    assert got == pytest.approx(np.vdot(_c128(u), _c128(ww)), rel=1e-12, abs=1e-12)
    w2 = w.copy()
    sq = _krylov.mgs(w2, vk, w2, h, 2)  # (u = w: |w|^2 of the new w)
    assert sq == pytest.approx(np.vdot(_c128(ww), _c128(ww)), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_mgs_does_not_depend_on_the_thread_count(dtype):
    rng = np.random.default_rng(18)
    n = 5 * CHUNK + 9
    w, vk, u = (_vec(rng, n, dtype) for _ in range(3))
    (h,) = _scalars(dtype, 0.2 + 0.3j)
    runs = []
    for threads in (1, 2, 5):
        ww = w.copy()
        runs.append((_krylov.mgs(ww, vk, u, h, threads), ww.tobytes()))
    assert all(r == runs[0] for r in runs[1:])
