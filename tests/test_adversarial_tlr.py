"""Adversarial inputs to TLRMatrix (from_dense, from_function, constructor, matvec, load) and
TLRBatch, beyond the error tests of tests/test_tlr.py (nb, tol in {0, <0, 1, 2, nan}, NaN/inf
input, empty and 1-D A, foreign .npz, mismatched vectors).

Before the fixes: values near the float64 limits compressed to an all-zero matrix (the
Frobenius guarantee silently broken), from_function dropped the imaginary part of complex
blocks, float shapes were truncated, an explicit integer dtype= was silently float64, and
TLRMatrix.load / TLRBatch failed with EOFError, BadZipFile, KeyError, IndexError or
"'NoneType' object is not iterable". Catalogue: docs/adversarial_inputs.md.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import TLRBatch, TLRMatrix


@pytest.fixture(scope="module")
def A():
    rng = np.random.default_rng(0)
    return rng.standard_normal((40, 6)) @ rng.standard_normal((6, 30))


@pytest.fixture(scope="module")
def T(A):
    return TLRMatrix.from_dense(A, nb=16, tol=1e-6)


def rel_err(A, T):
    return np.linalg.norm(A - T.toarray()) / np.linalg.norm(A)


# -- from_dense ----------------------------------------------------------------------------
@pytest.mark.parametrize("kw,exc,match", [
    (dict(A=sp.eye(4, format="csr")), TypeError, r"A must be a dense array, got csr_matrix"),
    (dict(A=3.0), TypeError, "A must be a 2-D array"),
    (dict(A=None), TypeError, "A must be a 2-D array"),
    (dict(A=np.ones((2, 2, 2))), ValueError, "A must be 2-D"),
    (dict(A=np.ones((4, 4), object)), TypeError, r"A has dtype object"),
    (dict(A=np.ones((4, 4), np.longdouble)), TypeError, "TLR matrices are float32"),
    (dict(dtype=np.int8), TypeError, "dtype must be float32, float64, complex64 or complex128"),
    (dict(dtype=np.float16), TypeError, "dtype must be float32, float64"),
    (dict(dtype="nonsense"), TypeError, "dtype must be a numpy dtype or its name"),
    (dict(dtype=object), TypeError, r"dtype has dtype object"),
    (dict(seed="x"), TypeError, "seed must be None or a nonnegative int"),
    (dict(seed=-1), TypeError, "seed must be None or a nonnegative int"),
    (dict(tol=float("inf")), ValueError, r"tol must be a number in \(0, 1\), got inf"),
    (dict(tol=None), TypeError, "give tol"),
    (dict(rank=2.0), TypeError, "rank must be a positive int"),
    (dict(n_threads=0), ValueError, "n_threads must be a positive int"),
])
def test_from_dense_bad_arguments(A, kw, exc, match):
    args = dict(A=A, nb=16, tol=1e-3)
    args.update(kw)
    with pytest.raises(exc, match=match):
        TLRMatrix.from_dense(**args)


@pytest.mark.parametrize("scale", [1e300, 1e160, 1e-300, 1e-120])
def test_from_dense_magnitude_outside_float64_accounting(A, scale):
    """Before: squared norms overflowed/underflowed and every rank became 0 (T = 0)."""
    with pytest.raises(ValueError, match=r"A has entries of magnitude up to .*rescale A"):
        TLRMatrix.from_dense(A * scale, nb=16, tol=1e-3)


@pytest.mark.parametrize("scale", [1e120, 1e-80])
def test_from_dense_large_and_small_values_keep_the_guarantee(A, scale):
    T = TLRMatrix.from_dense(A * scale, nb=16, tol=1e-3)
    assert T.ranks.max() > 0
    assert rel_err(A * scale, T) <= 1e-3


@pytest.mark.parametrize("layout", ["F", "negstride", "readonly", "list", "int", "bool"])
def test_from_dense_layouts_and_dtypes(A, layout):
    """Memory order, strides, read-only, lists and integer/bool input: same guarantee."""
    if layout == "F":
        X = np.asfortranarray(A)
    elif layout == "negstride":
        X = A[::-1, ::-1]
    elif layout == "readonly":
        X = A.copy()
        X.flags.writeable = False
    elif layout == "list":
        X = A.tolist()
    elif layout == "int":
        X = np.rint(A * 10).astype(np.int32)
    else:
        X = A > 0
    T = TLRMatrix.from_dense(X, nb=16, tol=1e-4)
    assert T.dtype == np.float64
    assert rel_err(np.asarray(X, dtype=np.float64), T) <= 1e-4


@pytest.mark.parametrize("nb", [31, 40, 41, 10**6])
def test_nb_at_and_beyond_the_matrix(A, nb):
    """nb >= one side or both: edge tiles shrink, one tile at most per side."""
    T = TLRMatrix.from_dense(A, nb=nb, tol=1e-6)
    assert T.ranks.shape == (-(-40 // nb), -(-30 // nb))
    assert rel_err(A, T) <= 1e-6
    x = np.arange(30.0)
    np.testing.assert_allclose(T @ x, A @ x, rtol=1e-5, atol=1e-8)


# -- from_function ---------------------------------------------------------------------------
def _f(r, c):
    i = np.arange(r.start, r.stop)[:, None]
    j = np.arange(c.start, c.stop)[None, :]
    return 1.0 / (1.0 + np.abs(i - j))


@pytest.mark.parametrize("kw,exc,match", [
    (dict(shape=(8.0, 8)), TypeError, "shape must be a pair of ints"),
    (dict(shape=(8, 8.5)), TypeError, "shape must be a pair of ints"),
    (dict(shape=(True, 8)), TypeError, "shape must be a pair of ints"),
    (dict(shape=(8, 8, 8)), TypeError, "shape must be a pair of ints"),
    (dict(shape=8), TypeError, "shape must be a pair of ints"),
    (dict(shape=(0, 8)), ValueError, "shape must be positive"),
    (dict(dtype=int), TypeError, "dtype must be float32, float64"),
    (dict(f=lambda r, c: _f(r, c) * 1j), TypeError, r"returned complex values but dtype="),
    (dict(f=lambda r, c: _f(r, c) * 1e300), ValueError, "has entries of magnitude"),
    (dict(f=lambda r, c: _f(r, c) * 1e-300), ValueError, "has entries of magnitude"),
    (dict(f=lambda r, c: None), ValueError, "expected shape"),
    (dict(f=lambda r, c: np.full(_f(r, c).shape, "a")), TypeError, r"f\(rows, cols\) has dtype"),
    (dict(seed=[1, "a"]), TypeError, "seed must be None or a nonnegative int"),
])
def test_from_function_bad_arguments(kw, exc, match):
    args = dict(f=_f, shape=(24, 20), nb=8, tol=1e-3)
    args.update(kw)
    with pytest.raises(exc, match=match):
        TLRMatrix.from_function(**args)


def test_from_function_errors_of_f_propagate_unchanged():
    """An exception raised by the user's f is the user's: it comes through as it is."""
    def f(r, c):
        raise ZeroDivisionError("from f")
    with pytest.raises(ZeroDivisionError, match="from f"):
        TLRMatrix.from_function(f, (8, 8), nb=4, n_threads=1)


def test_from_function_numpy_int_shape_and_complex_dtype():
    T = TLRMatrix.from_function(lambda r, c: _f(r, c) * (1 + 1j), (np.int64(24), np.int32(20)),
                                nb=8, tol=1e-4, dtype=np.complex128)
    A = _f(slice(0, 24), slice(0, 20)) * (1 + 1j)
    assert T.shape == (24, 20) and rel_err(A, T) <= 1e-4


# -- constructor -----------------------------------------------------------------------------
def test_constructor_checks(T):
    with pytest.raises(TypeError, match="shape must be a pair of ints"):
        TLRMatrix((40.0, 30), 16, T.ranks, T.U, T.V)
    with pytest.raises(ValueError, match="shape must be positive"):
        TLRMatrix((0, 30), 16, T.ranks, T.U, T.V)
    # lists are arrays; an all-rank-0 matrix from empty lists is valid
    Z = TLRMatrix((4, 4), 2, np.zeros((2, 2), int), [], [])
    np.testing.assert_array_equal(Z @ np.ones(4), np.zeros(4))
    with pytest.raises(TypeError, match="U and V must share one of"):
        TLRMatrix((40, 30), 16, T.ranks, T.U.astype(np.float32), T.V)


# -- products ----------------------------------------------------------------------------------
def test_matvec_bad_vectors(T):
    with pytest.raises(TypeError, match="x must be a dense array, got csr_array"):
        T @ sp.csr_array(np.ones((30, 1)))
    with pytest.raises(TypeError, match="x must be a 1-D or 2-D array, got None"):
        T.matvec(None)
    with pytest.raises(ValueError, match="x needs 30 rows"):
        T.matvec(np.array(2.0))
    with pytest.raises(ValueError, match="x needs 30 rows"):
        T.matvec(np.ones((30, 1, 1)))
    with pytest.raises(TypeError, match="TLR matrices are float32"):
        T.matvec(np.ones(30, np.longdouble))
    with pytest.raises(TypeError, match="n_threads"):
        T.matvec(np.ones(30), n_threads="2")


def test_ndarray_at_tlr_is_a_type_error(T):
    """Before: numpy treated T as an object scalar and failed inside its gufunc machinery."""
    with pytest.raises(TypeError, match="unsupported operand"):
        np.ones(40) @ T
    with pytest.raises(TypeError, match="unsupported operand"):
        np.ones(30) @ T.H


def test_matvec_containers_and_layouts(T, A):
    X = np.random.default_rng(2).standard_normal((60, 8))
    want = T.toarray() @ X[::2]
    got = T @ X[::2]                                        # strided
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(T @ np.asfortranarray(X[::2]), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(T @ X[-2::-2][::-1], want, rtol=1e-10, atol=1e-10)  # negative
    Y = T @ np.asmatrix(X[::2])
    assert type(Y) is np.ndarray and Y.shape == (40, 8)
    assert (T @ ([1.0] * 30)).shape == (40,)
    for dt, want_dt in [(np.bool_, np.float64), (np.float16, np.float64), (np.int8, np.float64),
                        (np.complex64, np.complex128)]:
        assert (T @ np.ones(30, dt)).dtype == want_dt


def _factored_reference(T, x):
    """y = sum_j U_ij (V_ij^T x_j), in numpy, tile by tile."""
    y = np.zeros(T.shape[0], dtype=np.result_type(T.dtype, x.dtype))
    for i in range(T.ranks.shape[0]):
        for j in range(T.ranks.shape[1]):
            if T.ranks[i, j]:
                U, V = T.tile(i, j)
                y[T.row_ptr[i]:T.row_ptr[i + 1]] += U @ (V.T @ x[T.col_ptr[j]:T.col_ptr[j + 1]])
    return y


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_matvec_nonfinite_like_the_factored_product(bad):
    """Non-finite x propagates like numpy's U @ (V.T @ x) per tile -- not like
    T.toarray() @ x: an inf meets factors of both signs and becomes NaN, and tiles of rank 0
    do not see it (documented)."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((40, 4)) @ rng.standard_normal((4, 30))
    A[:16, :16] = 0.0                         # a rank-0 tile
    T = TLRMatrix.from_dense(A, nb=16, tol=1e-6)
    assert T.ranks[0, 0] == 0
    x = rng.standard_normal(30)
    x[3] = bad
    with np.errstate(invalid="ignore"):
        y = T @ x
        ref = _factored_reference(T, x)
    for pred in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(pred(y), pred(ref))
    assert np.isfinite(y[:16]).all() and not np.isfinite(y[16:]).any()


# -- load --------------------------------------------------------------------------------------
def _save(T, path, **over):
    d = dict(U=T.U, V=T.V, ranks=T.ranks, shape=np.array(T.shape), nb=np.array(T.nb),
             tol=np.array(1e-6), format=np.array("wsesparse.TLRMatrix/1"))
    d.update(over)
    np.savez(path, **{k: v for k, v in d.items() if v is not None})
    return path


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


BAD_FILES = {
    "empty": lambda T, p: _write(p, b""),
    "garbage": lambda T, p: _write(p, b"not a zip archive at all"),
    "truncated": lambda T, p: _write(p, _save(T, p).read_bytes()[:300]),
    "npy": lambda T, p: (np.save(p.with_suffix(".npy"), np.ones(3)), p.with_suffix(".npy"))[1],
    "object_array": lambda T, p: _save(T, p, U=np.array([None], object)),
    "missing_U": lambda T, p: _save(T, p, U=None),
    "no_format": lambda T, p: _save(T, p, format=None),
    "format_v2": lambda T, p: _save(T, p, format=np.array("wsesparse.TLRMatrix/2")),
    "shape_1": lambda T, p: _save(T, p, shape=np.array([40])),
    "shape_3": lambda T, p: _save(T, p, shape=np.array([40, 30, 1])),
    "shape_float": lambda T, p: _save(T, p, shape=np.array([40.5, 30.0])),
    "nb_float": lambda T, p: _save(T, p, nb=np.array(16.7)),
    "nb_array": lambda T, p: _save(T, p, nb=np.array([16, 16])),
    "tol_str": lambda T, p: _save(T, p, tol=np.array("abc")),
    "nan_bases": lambda T, p: _save(T, p, U=np.full_like(T.U, np.nan)),
}
LAYOUT_ERRORS = {
    "ranks_negative": (lambda T, p: _save(T, p, ranks=-T.ranks), "ranks must be a nonnegative"),
    "ranks_float": (lambda T, p: _save(T, p, ranks=T.ranks * 1.0), "ranks must be a nonnegative"),
    "nb_other": (lambda T, p: _save(T, p, nb=np.array(8)), "ranks must be a nonnegative"),
    "nb_zero": (lambda T, p: _save(T, p, nb=np.array(0)), "nb must be a positive int"),
    "shape_negative": (lambda T, p: _save(T, p, shape=np.array([-40, 30])), "shape must be"),
    "U_short": (lambda T, p: _save(T, p, U=T.U[:-1]), "U and V must be 1-D of lengths"),
    "U_2d": (lambda T, p: _save(T, p, U=T.U[:, None]), "U and V must be 1-D of lengths"),
    "U_int": (lambda T, p: _save(T, p, U=T.U.astype(int)), "U and V must share"),
}


@pytest.mark.parametrize("how", sorted(BAD_FILES))
def test_load_bad_files(T, tmp_path, how):
    path = BAD_FILES[how](T, tmp_path / "t.npz")
    with pytest.raises(ValueError, match="is not a TLRMatrix file written by TLRMatrix.save"):
        TLRMatrix.load(path)


@pytest.mark.parametrize("how", sorted(LAYOUT_ERRORS))
def test_load_inconsistent_layout(T, tmp_path, how):
    make, match = LAYOUT_ERRORS[how]
    with pytest.raises((ValueError, TypeError), match=match):
        TLRMatrix.load(make(T, tmp_path / "t.npz"))


def test_load_paths(T, tmp_path):
    with pytest.raises(FileNotFoundError):
        TLRMatrix.load(tmp_path / "missing.npz")
    with pytest.raises(IsADirectoryError):
        TLRMatrix.load(tmp_path)
    with pytest.raises(TypeError, match="file must be a path or a binary file object"):
        TLRMatrix.load(None)
    with pytest.raises(TypeError, match="file must be a path or a binary file object"):
        TLRMatrix.load(3)
    # a file object works, and the round trip is exact
    with open(_save(T, tmp_path / "ok.npz"), "rb") as fh:
        T2 = TLRMatrix.load(fh)
    np.testing.assert_array_equal(T2.toarray(), T.toarray())


# -- TLRBatch ----------------------------------------------------------------------------------
def test_batch_bad_arguments(T, A):
    with pytest.raises(TypeError, match="matrices must be an iterable of TLRMatrix, got None"):
        TLRBatch(None)
    with pytest.raises(TypeError, match="matrices must be an iterable of TLRMatrix"):
        TLRBatch(T)
    with pytest.raises(TypeError, match=r"xs must be a sequence .* got None"):
        TLRBatch([T]).matvec(None)
    with pytest.raises(TypeError, match="xs must be a sequence"):
        TLRBatch([T]).matvec(3.0)
    with pytest.raises(ValueError, match=r"As must be a sequence of 2-D arrays or an \(F, m, n\)"):
        TLRBatch.from_dense(A, nb=16)
    with pytest.raises(ValueError, match="As must be a sequence"):
        TLRBatch.from_dense(None)
    with pytest.raises(ValueError, match="x needs 30 rows"):
        TLRBatch([T, T]).matvec([np.ones(30), np.ones(29)])


def test_batch_empty_and_array_inputs(T, A):
    B = TLRBatch([])
    assert len(B) == 0 and B.matvec([]) == [] and B.nbytes == 0 and B.compression_ratio == 0.0
    B2 = TLRBatch.from_dense(np.stack([A, 2 * A]), nb=16, tol=1e-6)
    ys = B2.matvec(np.ones((2, 30)))                       # a 2-D array of right-hand sides
    np.testing.assert_allclose(ys[1], 2 * (A @ np.ones(30)), rtol=1e-5)
    assert len(B2.matvec(np.ones(30) for _ in range(2))) == 2   # any iterable
