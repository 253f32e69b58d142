"""``TLRMatrix`` as an operator: products (``T @ x``, ``T.H``, ``rmatvec``, the
LinearOperator) against its dense form, sizes and layout, the constructor's checks, and bad
vectors.

Before the fixes ``ndarray @ T`` failed inside numpy's gufunc machinery. Catalogue:
docs/adversarial_inputs.md.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from scipy.sparse.linalg import lsqr

from tlr_helpers import DTYPES, lowrank_plus_noise, rel_err
from wsesparse import TLRMatrix
from wsesparse.datasets import seismic_slice


@pytest.mark.parametrize("dtype", DTYPES)
def test_matvec_matmat_adjoint_agree_with_toarray(dtype):
    rng = np.random.default_rng(3)
    A = lowrank_plus_noise(rng, 203, 170, 12, 1e-2, dtype)
    T = TLRMatrix.from_dense(A, nb=48, tol=1e-2)
    D = T.toarray().astype(np.complex128)
    rtol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    x = lowrank_plus_noise(rng, 170, 1, 1, 1.0, dtype)[:, 0]
    y = lowrank_plus_noise(rng, 203, 1, 1, 1.0, dtype)[:, 0]
    X = lowrank_plus_noise(rng, 170, 5, 1, 1.0, dtype)
    Y = lowrank_plus_noise(rng, 203, 5, 1, 1.0, dtype)
    for got, want in [(T @ x, D @ x), (T @ X, D @ X), (T.H @ y, D.conj().T @ y),
                      (T.rmatvec(Y), D.conj().T @ Y)]:
        assert got.dtype == np.dtype(dtype)
        assert got.shape == want.shape
        assert np.linalg.norm(got - want) <= rtol * np.linalg.norm(want)
    np.testing.assert_array_equal(T.H.toarray(), T.toarray().conj().T)
    assert T.H.H is T


def test_real_matrix_complex_vector_and_promotion():
    rng = np.random.default_rng(4)
    A = lowrank_plus_noise(rng, 100, 90, 5, 0.0, np.float32)
    T = TLRMatrix.from_dense(A, nb=32, tol=1e-4)
    D = T.toarray().astype(np.complex128)
    z = rng.standard_normal(90) + 1j * rng.standard_normal(90)
    got = T @ z.astype(np.complex64)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, D @ z, rtol=1e-4, atol=1e-4 * np.abs(D @ z).max())
    got64 = T @ z  # complex128 vector -> complex128 result
    assert got64.dtype == np.complex128
    assert (T @ np.ones(90, dtype=np.int64)).dtype == np.float64


@pytest.mark.parametrize("dtype", DTYPES)
def test_many_right_hand_sides_copied_in_blocks(dtype, monkeypatch):
    """The kernels take right-hand sides as rows: X of 64 columns (rows of 512 bytes or
    more) is transposed by the blocked, threaded copy (``_drivers.contiguous_operand``), also
    the [Re, Im] columns of a complex X with a real matrix. Each column of the product
    equals the product of that column alone bit for bit, and the dense product to
    rounding."""
    from wsesparse import _drivers
    calls = []
    real = _drivers._csr_tools.transpose_into
    monkeypatch.setattr(_drivers._csr_tools, "transpose_into",
                        lambda *a: calls.append(a[0].shape) or real(*a))
    rng = np.random.default_rng(9)
    cx = np.dtype(dtype).kind == "c"
    T = TLRMatrix.from_dense(lowrank_plus_noise(rng, 600, 520, 8, 1e-3, dtype), nb=128,
                             tol=1e-3)
    X = (rng.standard_normal((520, 64)) + 1j * rng.standard_normal((520, 64))).astype(
        np.result_type(dtype, np.complex64))  # (the dtype's complex type)
    Y = T @ X
    assert calls and calls[0] == ((520, 128) if not cx else (520, 64))
    for c in (0, 17, 63):
        assert Y[:, c].tobytes() == (T @ X[:, c]).tobytes(), c
    D = T.toarray().astype(np.complex128)
    np.testing.assert_allclose(Y, D @ X, rtol=1e-4, atol=1e-4 * np.abs(D @ X).max())


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), nb=st.integers(1, 80),
       s=st.integers(1, 3), cplx=st.booleans(), seed=st.integers(0, 2**16))
def test_products_any_shape_and_tile_size(m, n, nb, s, cplx, seed):
    rng = np.random.default_rng(seed)
    dtype = np.complex128 if cplx else np.float64
    A = lowrank_plus_noise(rng, m, n, 3, 1e-3, dtype)
    T = TLRMatrix.from_dense(A, nb=nb, tol=1e-2)
    assert rel_err(A, T) <= 1e-2
    D = T.toarray()
    X = lowrank_plus_noise(rng, n, s, 1, 1.0, dtype)
    Y = lowrank_plus_noise(rng, m, s, 1, 1.0, dtype)
    np.testing.assert_allclose(T @ X, D @ X, rtol=1e-10, atol=1e-10 * (1 + np.abs(D).sum()))
    np.testing.assert_allclose(T.H @ Y, D.conj().T @ Y, rtol=1e-10,
                               atol=1e-10 * (1 + np.abs(D).sum()))


def test_linear_operator_lsqr():
    rng = np.random.default_rng(5)
    A = np.eye(200) + 0.1 * lowrank_plus_noise(rng, 200, 200, 4, 0.0, np.float64)
    op = TLRMatrix.from_dense(A, nb=50, tol=1e-9).aslinearoperator()
    x = rng.standard_normal(200)
    sol = lsqr(op, A @ x, atol=1e-13, btol=1e-13, iter_lim=2000)[0]
    np.testing.assert_allclose(sol, x, rtol=1e-6, atol=1e-6)
    assert op.rmatvec(np.ones(200)).shape == (200,)


def test_sizes_and_layout():
    A = seismic_slice(nx=16, ny=16)
    T = TLRMatrix.from_dense(A, nb=64, tol=1e-3)
    K = int(T.ranks.sum())
    hsum = sum(T.ranks[i].sum() * 64 for i in range(4))
    assert T.U.size == hsum and T.V.size == hsum  # square 64-tiles: same count
    assert T.nbytes == T.U.nbytes + T.V.nbytes == 2 * K * 64 * 8
    assert T.compression_ratio == pytest.approx(256 * 256 * 8 / T.nbytes)
    assert T.mvm_bytes(1) == T.nbytes + 512 * 8
    assert sorted(T.perm.tolist()) == list(range(K))
    assert T.U.ctypes.data % 64 == 0 and T.V.ctypes.data % 64 == 0


def test_empty_rhs_block():
    T = TLRMatrix.from_dense(np.ones((6, 4)), nb=2, tol=1e-3)
    assert (T @ np.ones((4, 0))).shape == (6, 0)


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


# -- bad input ---------------------------------------------------------------------------------
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


def test_mismatched_vectors():
    T = TLRMatrix.from_dense(np.ones((6, 4)), nb=2, tol=1e-3)
    with pytest.raises(ValueError, match=r"T @ x: T has shape \(6, 4\) but x is ndarray of shape \(5,\)"):
        T @ np.ones(5)
    with pytest.raises(ValueError, match=r"T.H @ y: .*y needs 6 rows"):
        T.H @ np.ones(4)
    with pytest.raises(ValueError, match="x needs 4 rows"):
        T @ np.ones((4, 2, 2))
    with pytest.raises(TypeError, match="x must be"):
        T @ 3.0
    with pytest.raises(TypeError, match="x has dtype"):
        T @ np.array(["a"] * 4)


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


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_adjoint_is_an_operator_like_the_matrix(dtype):
    """T.H has matmat/rmatmat, .T (real) and aslinearoperator, as TLRMatrix has."""
    from scipy.sparse.linalg import LinearOperator
    rng = np.random.default_rng(2)
    A = rng.standard_normal((40, 30)).astype(dtype)
    M = TLRMatrix.from_dense(A, nb=16, tol=1e-4)
    H, D = M.H, M.toarray()
    Y, X = rng.standard_normal((40, 3)).astype(dtype), rng.standard_normal((30, 3)).astype(dtype)
    rtol = 1e-4 if dtype == np.complex64 else 1e-10
    np.testing.assert_allclose(H.matmat(Y), D.conj().T @ Y, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(H.rmatmat(X), D @ X, rtol=rtol, atol=rtol)
    op = H.aslinearoperator()
    assert isinstance(op, LinearOperator) and op.shape == (30, 40)
    np.testing.assert_allclose(op @ Y[:, 0], D.conj().T @ Y[:, 0], rtol=rtol, atol=rtol)
    np.testing.assert_allclose(op.H @ X[:, 0], D @ X[:, 0], rtol=rtol, atol=rtol)
    if dtype == np.complex64:
        with pytest.raises(NotImplementedError, match="use .H"):
            H.T
    else:
        assert H.T is M


def test_tlr_at_tlr_is_a_type_error(T):
    """No lazy TLR product: T @ T and T.H @ T both say so (T.H @ T named y's dtype)."""
    for left, right in ((T, T), (T.H, T), (T.H, T.H)):
        with pytest.raises(TypeError, match="unsupported operand"):
            left @ right


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">c8", ">i4"])
def test_from_dense_takes_big_endian_arrays(dtype):
    """Big-endian data (FITS, HDF5, np.load) compresses like its native equivalent."""
    A = np.random.default_rng(1).standard_normal((40, 30))
    want = TLRMatrix.from_dense(A.astype(np.dtype(dtype).newbyteorder("=")), nb=16, tol=1e-4)
    T = TLRMatrix.from_dense(A.astype(dtype), nb=16, tol=1e-4)
    assert T.dtype == want.dtype and T.dtype.isnative
    np.testing.assert_array_equal(T.toarray(), want.toarray())


def test_tlr_too_big(assert_early_memory_error):
    """TLR products, toarray and absurd tile counts fail at once with the size and shape."""
    T = TLRMatrix.from_dense(np.random.default_rng(0).standard_normal((300, 200)), nb=64)
    big_x = np.broadcast_to(1.0, (200, 2**36))
    assert_early_memory_error(lambda: T @ big_x, "(300, 68719476736)", "PiB")
    assert_early_memory_error(lambda: T.H @ np.broadcast_to(1.0, (300, 2**36)),
                              "(200, 68719476736)")
    huge = TLRMatrix.from_tiles((2**40, 4), 2**40, {})
    assert_early_memory_error(huge.toarray, "(1099511627776, 4)", "32.0 TiB")
    assert_early_memory_error(
        lambda: TLRMatrix.from_function(lambda r, c: None, (2**40, 4), nb=256),
        "4,294,967,296 tiles")


def test_tile_indices_wrap_like_numpy_and_outside_the_grid_raise():
    """tile(-3, 0) of a 3 x 2 grid returned factors cut from two tiles; tile(3, 0) and
    tile(-1, 0) failed inside reshape."""
    A = np.random.default_rng(0).standard_normal((10, 7))
    T = TLRMatrix.from_dense(A, nb=4, tol=1e-9)
    assert T.ranks.shape == (3, 2)
    for i in range(-3, 3):
        for j in range(-2, 2):
            U, V = T.tile(i, j)
            rows = slice(T.row_ptr[i % 3], T.row_ptr[i % 3 + 1])
            cols = slice(T.col_ptr[j % 2], T.col_ptr[j % 2 + 1])
            np.testing.assert_allclose(U @ V.T, A[rows, cols], atol=1e-8)
    for i, j in [(3, 0), (-4, 0), (0, 2), (0, -3)]:
        with pytest.raises(IndexError, match="out of the 3 x 2 tile grid"):
            T.tile(i, j)
    with pytest.raises(TypeError):
        T.tile(0.0, 0)


def test_nb_and_tol_are_what_save_can_write():
    """nb >= 2**63 and tol=0/1/'1e-3' were accepted, saved, and then refused by load."""
    A = np.arange(20.0).reshape(5, 4)
    with pytest.raises(ValueError, match=r"nb must be a positive int below 2\*\*63"):
        TLRMatrix.from_dense(A, nb=2**63)
    U = np.ones((2, 1))
    with pytest.raises(ValueError, match="nb must be"):
        TLRMatrix.from_tiles((3, 3), 2**64, {(0, 0): (np.ones((3, 1)), np.ones((3, 1)))})
    with pytest.raises(TypeError, match="tol"):
        TLRMatrix.from_tiles((3, 3), 2, {(0, 0): (U, U)}, tol="1e-3")
    for bad in (-1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="tol"):
            TLRMatrix.from_tiles((3, 3), 2, {(0, 0): (U, U)}, tol=bad)
    for tol in (0, 1, np.float16(1e-3), None):
        T = TLRMatrix.from_tiles((3, 3), 2, {(0, 0): (U, U)}, tol=tol)
        buf = io.BytesIO()
        T.save(buf)
        buf.seek(0)
        S = TLRMatrix.load(buf)
        assert S.tol == T.tol and (tol is None) == (S.tol is None)


def test_messages_name_the_argument_and_its_own_dtype():
    """from_tiles(tiles=None) said "'NoneType' object is not iterable"; a float128 x with a
    complex64 T was reported as "x has dtype complex256"."""
    with pytest.raises(TypeError, match="tiles must be a dict .* or a callable .* got None"):
        TLRMatrix.from_tiles((3, 3), 2, None)
    T = TLRMatrix.from_dense(np.ones((4, 3), np.complex64), nb=2, tol=1e-3)
    if np.dtype(np.longdouble).itemsize > 8:  # (platforms with an extended long double)
        with pytest.raises(TypeError, match=f"x has dtype {np.dtype(np.longdouble)}; with T "
                                            "of complex64 it would promote to"):
            T @ np.ones(3, np.longdouble)
