"""The synthetic seismic frequency slice and the Hilbert ordering."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wsesparse.datasets import hilbert_order, random_csr, random_dense, seismic_slice


@settings(max_examples=30, deadline=None)
@given(nx=st.integers(1, 40), ny=st.integers(1, 40))
def test_hilbert_order_is_a_local_permutation(nx, ny):
    p = hilbert_order(nx, ny)
    assert sorted(p.tolist()) == list(range(nx * ny))
    if nx == ny and nx & (nx - 1) == 0:
        # On a full power-of-two square consecutive points are grid neighbours.
        ix, iy = p // ny, p % ny
        steps = np.abs(np.diff(ix)) + np.abs(np.diff(iy))
        assert (steps == 1).all()


def test_matches_the_image_source_formula():
    """Entry (r, s) by hand: one reflector, primaries and first multiple."""
    kw = dict(nx=3, ny=2, spacing=10.0, frequency=7.0, velocity=1500.0, depths=[300.0],
              reflectivity=[0.4], n_multiples=2, receiver_depth=5.0, attenuation=0.01,
              order="row", dtype=np.complex128)
    A = seismic_slice(**kw)
    xs = np.array([[i * 10.0, j * 10.0] for i in range(3) for j in range(2)])
    k = 2 * np.pi * 7.0 / 1500.0 * (1 - 0.01j)
    r, s = 4, 1
    h = np.linalg.norm(xs[r] - xs[s])
    want = 0
    for p, amp in [(1, 0.4), (2, -0.16)]:
        rho = np.hypot(h, 2 * p * 300.0 - 5.0)
        want += 1000 * amp * np.exp(-1j * k * rho) / rho
    assert A[r, s] == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(A, A.T, rtol=1e-12)  # reciprocity


def test_orders_are_permutations_of_each_other():
    Ah = seismic_slice(nx=8, ny=5, order="hilbert", dtype=np.complex128)
    Ar = seismic_slice(nx=8, ny=5, order="row", dtype=np.complex128)
    p = hilbert_order(8, 5)
    np.testing.assert_allclose(Ah, Ar[np.ix_(p, p)], rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_dtypes_and_function_form(dtype):
    A = seismic_slice(nx=9, ny=7, dtype=dtype)
    assert A.dtype == np.dtype(dtype) and A.shape == (63, 63)
    assert np.isfinite(A).all()
    f, shape = seismic_slice(nx=9, ny=7, dtype=dtype, return_function=True)
    assert shape == (63, 63)
    np.testing.assert_array_equal(f(slice(10, 40), slice(0, 63)), A[10:40])
    ref = seismic_slice(nx=9, ny=7, dtype=np.complex128)
    want = ref if np.dtype(dtype).kind == "c" else ref.real
    np.testing.assert_allclose(A, want, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("kw, match", [
    (dict(nx=0), "nx must be a positive int"),
    (dict(frequency=-1.0), "frequency must be a positive"),
    (dict(depths=[100.0], reflectivity=[0.1, 0.2]), "equal length"),
    (dict(reflectivity=[0.1, 1.5, 0.2]), "reflectivity must lie"),
    (dict(order="zorder"), "order must be"),
    (dict(depths=[5.0, 10.0, 20.0]), "below both the sources .0. and receiver_depth"),
    # a reflector above the sources (receivers above them too): rho = 0, inf/NaN entries
    (dict(depths=[-5.0], reflectivity=[0.3], receiver_depth=-10.0), "below both the sources"),
    (dict(depths=[1e-30], reflectivity=[0.3], receiver_depth=0.0), "too close to the source"),
])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        seismic_slice(**kw)


@pytest.mark.parametrize("kw, exc, match", [
    # Before: numpy's UFuncTypeError, "'>' not supported", "float() argument", and NaN
    # entries with a RuntimeWarning (the float32 wavenumber overflowed).
    (dict(receiver_depth="a"), TypeError, "receiver_depth must be a finite number"),
    (dict(receiver_depth=None), TypeError, "receiver_depth must be a finite number"),
    (dict(reflectivity=[0.3j, 0.1, 0.1]), TypeError, "reflectivity must be a sequence of real"),
    (dict(depths=["a", "b", "c"]), TypeError, "depths must be a sequence of real"),
    (dict(velocity=1e-37), ValueError, "wavenumber .* overflows float32"),
])
def test_bad_arguments_named(kw, exc, match):
    with pytest.raises(exc, match=match):
        seismic_slice(nx=3, ny=3, **kw)


def test_formula_of_the_docstring():
    """A[r, s] = 1000 sum_l sum_p (-1)^(p-1) R_l^p exp(-i k rho) / rho (the 1000 was
    missing from the docstring); two sources 20 m apart, row order."""
    A = seismic_slice(nx=2, ny=1, order="row", dtype=np.complex128)
    k = 2 * np.pi * 10.0 / 2000.0 * (1 - 0.002j)
    want = 0
    for d, R in zip((350.0, 800.0, 1400.0), (0.3, -0.2, 0.25)):
        for p in (1, 2):
            rho = np.hypot(20.0, 2 * p * d - 10.0)
            want += (-1) ** (p - 1) * R**p * np.exp(-1j * k * rho) / rho
    np.testing.assert_allclose(A[0, 1], 1000 * want, rtol=1e-12)


def test_bad_dtype():
    with pytest.raises(TypeError, match="dtype"):
        seismic_slice(nx=3, ny=3, dtype=np.int32)


@pytest.mark.parametrize("method", ["blocks", "scipy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_random_csr_is_canonical_seeded_and_of_its_dtype(method, dtype):
    from wsesparse.datasets import random_csr
    A = random_csr(70, 40, 0.2, dtype, seed=3, method=method)
    assert A.shape == (70, 40) and A.dtype == np.dtype(dtype) and A.has_canonical_format
    assert A.indices.dtype == np.int32 and (A.data != 0).all()
    if np.dtype(dtype).kind == "c":
        assert (A.data.imag != 0).all()
    B = random_csr(70, 40, 0.2, dtype, seed=3, method=method)
    assert (A != B).nnz == 0 and (A != random_csr(70, 40, 0.2, dtype, seed=4, method=method)).nnz
    if method == "scipy":
        assert A.nnz == 560                      # exactly round(density * m * k)
        assert (A.data.real > 0).all() and (A.data.real < 1).all()
    else:
        assert 400 < A.nnz < 720                 # Bernoulli(0.2) per entry


def test_random_csr_row_blocks_and_empty_shapes():
    from wsesparse.datasets import random_csr
    A = random_csr(3, 1 << 23, 1e-6, "float32")    # two rows per block of 2**24 uniforms
    assert A.shape == (3, 1 << 23) and A.has_canonical_format
    assert random_csr(0, 5, 0.5, "float64").shape == (0, 5)
    assert random_csr(4, 0, 0.5, "float64").nnz == 0


def test_random_csr_small_densities_are_not_rounded_up():
    """The float32 uniforms come in steps of 2**-24: u < density held with probability
    ceil(density * 2**24) / 2**24, 1.19x density at 1e-7 and 60x at 1e-9. At 1e-9 on
    16384^2 (0.27 nonzeros expected) the old draw gave about 16."""
    from wsesparse.datasets import random_csr
    assert random_csr(16384, 16384, 1e-9, "float32", seed=0).nnz <= 4
    # A density on the 2**-24 grid needs no boundary draws: 1/4 of the entries, as before.
    A = random_csr(256, 256, 0.25, "float64", seed=0)
    assert abs(A.nnz - 0.25 * 256**2) < 5 * np.sqrt(0.25 * 0.75 * 256**2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_random_dense_draws(dtype):
    from wsesparse.datasets import random_dense
    X = random_dense(30, 4, dtype, seed=2)
    assert X.shape == (30, 4) and X.dtype == np.dtype(dtype) and X.flags.c_contiguous
    np.testing.assert_array_equal(X, random_dense(30, 4, dtype, seed=2))
    # Drawn in float64, the values are those of numpy's generator cast to dtype.
    Y = random_dense(30, 4, dtype, seed=2, draws=np.float64)
    rng = np.random.default_rng(2)
    np.testing.assert_array_equal(Y.real, rng.standard_normal((30, 4)).astype(Y.real.dtype))
    if np.dtype(dtype).kind == "c":
        np.testing.assert_array_equal(Y.imag,
                                      rng.standard_normal((30, 4)).astype(Y.real.dtype))


@pytest.mark.parametrize("call, exc, match", [
    (lambda f: f.random_csr(-1, 4, 0.1), ValueError, "m must be a nonnegative int, got -1"),
    (lambda f: f.random_csr(4, 2.0, 0.1), TypeError, "k must be a nonnegative int, got 2.0"),
    (lambda f: f.random_csr(4, 4, 1.5), ValueError, r"density must be a number in \[0, 1\]"),
    (lambda f: f.random_csr(4, 4, float("nan")), ValueError, "density must be a number in"),
    (lambda f: f.random_csr(4, 4, 0.1, method="dense"), ValueError, "method must be"),
    (lambda f: f.random_dense(4, -2), ValueError, "n must be a nonnegative int, got -2"),
    # Before: numpy's messages ("expected non-negative integer", SeedSequence's, "Unsupported
    # dtype ... for standard_normal"), and hilbert_order(2.5, 2) gave no permutation.
    (lambda f: f.random_csr(5, 5, 0.5, seed=-1), ValueError, "seed must be None or a nonneg"),
    (lambda f: f.random_dense(3, 4, seed=1.5), TypeError, "seed must be None or a nonneg"),
    (lambda f: f.random_dense(3, 4, draws=np.int32), TypeError, "draws must be float32"),
    (lambda f: f.random_dense(3, 4, draws="x"), TypeError, "draws must be float32"),
    (lambda f: f.hilbert_order(2.5, 2), TypeError, "nx must be a positive int, got 2.5"),
    (lambda f: f.hilbert_order(2, 0), ValueError, "ny must be a positive int, got 0"),
])
def test_random_bad_arguments(call, exc, match):
    from wsesparse import datasets
    with pytest.raises(exc, match=match):
        call(datasets)


def test_random_bad_dtype():
    from wsesparse.datasets import random_csr, random_dense
    with pytest.raises(TypeError, match="dtype"):
        random_csr(3, 3, 0.5, np.int32)
    with pytest.raises(TypeError, match="dtype"):
        random_dense(3, 3, "bool")


@pytest.mark.parametrize("dtype", ["complex64", "float32"])
def test_single_precision_slice_of_a_huge_geometry_is_finite(dtype):
    """Squared distances beyond float32 (spacing 1e20, a reflector at 1e20) gave inf, then
    cos(inf) = NaN in 72 of 81 entries, where complex128 gives finite values."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for kw in (dict(spacing=1e20), dict(depths=(1e20,), reflectivity=(0.5,))):
            A = seismic_slice(3, 3, dtype=dtype, **kw)
            B = seismic_slice(3, 3, dtype="complex128", **kw)
            assert A.dtype == np.dtype(dtype) and np.isfinite(A).all()
            want = B if A.dtype.kind == "c" else B.real
            np.testing.assert_allclose(A, want, rtol=1e-5, atol=1e-6 * np.abs(B).max())


def test_dtypes_outside_the_kernels_and_unknown_names_are_type_errors():
    """random_csr(dtype=float16) returned a scipy matrix scipy cannot use (toarray failed);
    an unknown dtype name gave numpy's "data type 'bogus' not understood"."""
    for f in (lambda dt: random_csr(4, 5, 0.5, dt), lambda dt: random_csr(4, 5, 0.5, dt,
                                                                           method="scipy"),
              lambda dt: random_dense(3, 3, dt), lambda dt: seismic_slice(nx=2, ny=2, dtype=dt)):
        with pytest.raises(TypeError, match="dtype must be float32, float64, complex64 or "
                                            "complex128, got float16"):
            f(np.float16)
        with pytest.raises(TypeError, match="dtype must be a float or complex dtype, got 'bogus'"):
            f("bogus")


@pytest.mark.parametrize("kw", [dict(spacing=1e155), dict(depths=(1e160,), reflectivity=(0.3,))])
def test_seismic_geometry_beyond_float64_distances_is_an_error(kw):
    """Squared distances overflowed float64: 12-16 of 16 entries NaN, with warnings only."""
    with pytest.raises(ValueError, match="too far apart for float64 distances"):
        seismic_slice(nx=2, ny=2, dtype=np.complex128, **kw)


def test_non_native_byte_orders_compute_as_native_ones():
    """'>f8' was computed in float32 (dtype != np.float64) and random_csr's '>f4' drew other
    values than '<f4' for the same seed (a review)."""
    for native, swapped in (("<f8", ">f8"), ("<f4", ">f4"), ("<c8", ">c8")):
        a = seismic_slice(nx=3, ny=3, dtype=native)
        b = seismic_slice(nx=3, ny=3, dtype=swapped)
        assert b.dtype == np.dtype(swapped)
        np.testing.assert_array_equal(a, b)
        A = random_csr(20, 30, 0.2, dtype=native, seed=4)
        B = random_csr(20, 30, 0.2, dtype=swapped, seed=4)
        np.testing.assert_array_equal(A.toarray(), B.toarray())
