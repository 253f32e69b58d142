"""TLRMatrix / TLRBatch: accuracy guarantee, products, persistence, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.sparse.linalg import lsqr

from wsesparse import TLRBatch, TLRMatrix
from wsesparse.datasets import seismic_slice

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _rel_err(A, T) -> float:
    A64 = np.asarray(A, dtype=np.complex128)
    return float(np.linalg.norm(A64 - T.toarray()) / np.linalg.norm(A64))


def _lowrank_plus_noise(rng, m, n, r, noise, dtype):
    def g(*shape):
        z = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            z = z + 1j * rng.standard_normal(shape)
        return z
    # Decaying spectrum (like smooth kernels) plus dense noise.
    A = (g(m, r) * np.logspace(0, -3, r)) @ g(r, n) + noise * g(m, n)
    return A.astype(dtype)


# ------------------------------------------------------------ the guarantee

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tol", [1e-1, 1e-2, 1e-3])
def test_frobenius_guarantee_lowrank_plus_noise(dtype, tol):
    rng = np.random.default_rng(1)
    A = _lowrank_plus_noise(rng, 330, 300, 25, 1e-3, dtype)
    T = TLRMatrix.from_dense(A, nb=64, tol=tol)
    err = _rel_err(A, T)
    assert err <= tol
    # The greedy spends the budget: the error is not far below tol (else we
    # would be storing more than needed).
    assert err >= 0.3 * tol
    assert T.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_frobenius_guarantee_seismic(dtype):
    A = seismic_slice(nx=24, ny=24, frequency=20.0, dtype=dtype)
    T = TLRMatrix.from_dense(A, nb=96, tol=1e-3)
    assert _rel_err(A, T) <= 1e-3
    assert T.compression_ratio > 2.0


def test_hilbert_order_lowers_ranks():
    kw = dict(nx=32, ny=32, frequency=15.0)
    Th = TLRMatrix.from_dense(seismic_slice(order="hilbert", **kw), nb=128, tol=1e-3)
    Tr = TLRMatrix.from_dense(seismic_slice(order="row", **kw), nb=128, tol=1e-3)
    assert Th.nbytes < Tr.nbytes


def test_global_budget_beats_uniform_per_tile_tolerance():
    """The global greedy stores fewer numbers than tol per tile, same guarantee."""
    A = seismic_slice(nx=24, ny=24, frequency=20.0, dtype=np.complex128)
    T = TLRMatrix.from_dense(A, nb=96, tol=1e-3)
    uniform = 0
    for i in range(T.ranks.shape[0]):
        for j in range(T.ranks.shape[1]):
            blk = A[i * 96:(i + 1) * 96, j * 96:(j + 1) * 96]
            s = np.linalg.svd(blk, compute_uv=False)
            tail = np.sqrt(np.cumsum(s[::-1] ** 2))[::-1]  # tail[k] = error at rank k
            k = int(np.argmax(np.append(tail, 0) <= 1e-3 * np.linalg.norm(blk)))
            uniform += k * (blk.shape[0] + blk.shape[1])
    stored = T.nbytes // T.dtype.itemsize
    assert stored < uniform


def test_randomized_ranks_close_to_svd_optimal():
    """Per tile, the kept rank is at most a little above the SVD rank for the same error."""
    A = seismic_slice(nx=20, ny=20, frequency=25.0, dtype=np.complex128)
    T = TLRMatrix.from_dense(A, nb=100, tol=1e-3)
    total_svd = 0
    for i in range(4):
        for j in range(4):
            blk = A[i * 100:(i + 1) * 100, j * 100:(j + 1) * 100]
            Uij, Vij = T.tile(i, j)
            e = np.linalg.norm(blk - Uij @ Vij.T)
            s = np.linalg.svd(blk, compute_uv=False)
            tail = np.sqrt(np.cumsum(s[::-1] ** 2))[::-1]
            total_svd += int(np.argmax(np.append(tail, 0) <= e * (1 + 1e-9)))
    assert T.ranks.sum() <= 1.15 * total_svd + 4


def test_fixed_rank():
    rng = np.random.default_rng(2)
    A = _lowrank_plus_noise(rng, 200, 150, 40, 0.0, np.float64)
    T = TLRMatrix.from_dense(A, nb=64, rank=5)
    assert T.ranks.max() == 5
    assert T.ranks[-1, -1] == min(5, 200 - 192, 150 - 128)
    # Exact rank-40 tiles truncated to 5: error equals the optimal per-tile tail.
    blk = A[:64, :64]
    s = np.linalg.svd(blk, compute_uv=False)
    Uij, Vij = T.tile(0, 0)
    assert np.linalg.norm(blk - Uij @ Vij.T) <= 1.05 * np.sqrt((s[5:] ** 2).sum())


def test_exact_low_rank_and_zero_tiles():
    A = np.zeros((130, 130))
    A[:64, :64] = np.outer(np.arange(64.0), np.ones(64))
    T = TLRMatrix.from_dense(A, nb=64, tol=1e-6)
    assert T.ranks.tolist() == [[1, 0, 0], [0, 0, 0], [0, 0, 0]]
    np.testing.assert_allclose(T.toarray(), A, atol=1e-10)
    x = np.ones(130)
    np.testing.assert_allclose(T @ x, A @ x, atol=1e-9)


def test_from_function_matches_from_dense_guarantee():
    f, shape = seismic_slice(nx=20, ny=20, frequency=20.0, return_function=True)
    T = TLRMatrix.from_function(f, shape, nb=80, tol=1e-3, dtype=np.complex64)
    A = f(slice(0, 400), slice(0, 400))
    assert _rel_err(A, T) <= 1e-3


def test_result_independent_of_threads():
    A = seismic_slice(nx=16, ny=16, dtype=np.complex128)
    T1 = TLRMatrix.from_dense(A, nb=64, tol=1e-4, n_threads=1)
    T2 = TLRMatrix.from_dense(A, nb=64, tol=1e-4, n_threads=2)
    assert np.array_equal(T1.ranks, T2.ranks)
    assert np.array_equal(T1.U, T2.U) and np.array_equal(T1.V, T2.V)
    x = np.ones(256, dtype=np.complex128)
    assert np.array_equal(T1.matvec(x, n_threads=1), T1.matvec(x, n_threads=2))


# ---------------------------------------------------------------- products

@pytest.mark.parametrize("dtype", DTYPES)
def test_matvec_matmat_adjoint_agree_with_toarray(dtype):
    rng = np.random.default_rng(3)
    A = _lowrank_plus_noise(rng, 203, 170, 12, 1e-2, dtype)
    T = TLRMatrix.from_dense(A, nb=48, tol=1e-2)
    D = T.toarray().astype(np.complex128)
    rtol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    x = _lowrank_plus_noise(rng, 170, 1, 1, 1.0, dtype)[:, 0]
    y = _lowrank_plus_noise(rng, 203, 1, 1, 1.0, dtype)[:, 0]
    X = _lowrank_plus_noise(rng, 170, 5, 1, 1.0, dtype)
    Y = _lowrank_plus_noise(rng, 203, 5, 1, 1.0, dtype)
    for got, want in [(T @ x, D @ x), (T @ X, D @ X), (T.H @ y, D.conj().T @ y),
                      (T.rmatvec(Y), D.conj().T @ Y)]:
        assert got.dtype == np.dtype(dtype)
        assert got.shape == want.shape
        assert np.linalg.norm(got - want) <= rtol * np.linalg.norm(want)
    np.testing.assert_array_equal(T.H.toarray(), T.toarray().conj().T)
    assert T.H.H is T


def test_real_matrix_complex_vector_and_promotion():
    rng = np.random.default_rng(4)
    A = _lowrank_plus_noise(rng, 100, 90, 5, 0.0, np.float32)
    T = TLRMatrix.from_dense(A, nb=32, tol=1e-4)
    D = T.toarray().astype(np.complex128)
    z = rng.standard_normal(90) + 1j * rng.standard_normal(90)
    got = T @ z.astype(np.complex64)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, D @ z, rtol=1e-4, atol=1e-4 * np.abs(D @ z).max())
    got64 = T @ z  # complex128 vector -> complex128 result
    assert got64.dtype == np.complex128
    assert (T @ np.ones(90, dtype=np.int64)).dtype == np.float64


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), nb=st.integers(1, 80),
       s=st.integers(1, 3), cplx=st.booleans(), seed=st.integers(0, 2**16))
def test_products_any_shape_and_tile_size(m, n, nb, s, cplx, seed):
    rng = np.random.default_rng(seed)
    dtype = np.complex128 if cplx else np.float64
    A = _lowrank_plus_noise(rng, m, n, 3, 1e-3, dtype)
    T = TLRMatrix.from_dense(A, nb=nb, tol=1e-2)
    assert _rel_err(A, T) <= 1e-2
    D = T.toarray()
    X = _lowrank_plus_noise(rng, n, s, 1, 1.0, dtype)
    Y = _lowrank_plus_noise(rng, m, s, 1, 1.0, dtype)
    np.testing.assert_allclose(T @ X, D @ X, rtol=1e-10, atol=1e-10 * (1 + np.abs(D).sum()))
    np.testing.assert_allclose(T.H @ Y, D.conj().T @ Y, rtol=1e-10,
                               atol=1e-10 * (1 + np.abs(D).sum()))


def test_linear_operator_lsqr():
    rng = np.random.default_rng(5)
    A = np.eye(200) + 0.1 * _lowrank_plus_noise(rng, 200, 200, 4, 0.0, np.float64)
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


# ------------------------------------------------------------- persistence

@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_save_load_roundtrip(tmp_path, dtype):
    A = seismic_slice(nx=12, ny=12, dtype=dtype)
    T = TLRMatrix.from_dense(A, nb=50, tol=1e-3)
    path = tmp_path / "t.npz"
    T.save(path)
    L = TLRMatrix.load(path)
    assert L.shape == T.shape and L.nb == T.nb and L.tol == T.tol and L.dtype == T.dtype
    assert np.array_equal(L.ranks, T.ranks)
    assert np.array_equal(L.toarray(), T.toarray())
    x = np.ones(144, dtype=dtype)
    assert np.array_equal(L @ x, T @ x)


def test_load_rejects_foreign_file(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.ones(3))
    with pytest.raises(ValueError, match="not a TLRMatrix file"):
        TLRMatrix.load(tmp_path / "x.npz")


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("nb", [0, -3])
def test_bad_nb_value(nb):
    with pytest.raises(ValueError, match="nb must be a positive int"):
        TLRMatrix.from_dense(np.ones((4, 4)), nb=nb)


@pytest.mark.parametrize("nb", [2.5, "8", True, None])
def test_bad_nb_type(nb):
    with pytest.raises(TypeError, match="nb must be a positive int"):
        TLRMatrix.from_dense(np.ones((4, 4)), nb=nb)


@pytest.mark.parametrize("tol", [0.0, -1e-3, 1.0, 2.0, float("nan")])
def test_bad_tol_value(tol):
    with pytest.raises(ValueError, match=r"tol must be a number in \(0, 1\)"):
        TLRMatrix.from_dense(np.ones((4, 4)), nb=2, tol=tol)


def test_bad_tol_type_and_too_small_for_dtype():
    with pytest.raises(TypeError, match="tol"):
        TLRMatrix.from_dense(np.ones((4, 4)), nb=2, tol="1e-3")
    with pytest.raises(ValueError, match="below what float32"):
        TLRMatrix.from_dense(np.ones((4, 4), dtype=np.float32), nb=2, tol=1e-7)


def test_nan_and_inf_rejected():
    A = np.ones((10, 10))
    A[3, 4] = np.nan
    with pytest.raises(ValueError, match="A contains NaN"):
        TLRMatrix.from_dense(A, nb=4)
    A[3, 4] = np.inf
    with pytest.raises(ValueError, match="A contains NaN"):
        TLRMatrix.from_dense(A, nb=4)
    f = lambda r, c: np.full((r.stop - r.start, c.stop - c.start), np.nan)  # noqa: E731
    with pytest.raises(ValueError, match="NaN"):
        TLRMatrix.from_function(f, (8, 8), nb=4)


def test_bad_matrix_arguments():
    with pytest.raises(ValueError, match="A must be 2-D"):
        TLRMatrix.from_dense(np.ones(5))
    with pytest.raises(ValueError, match="must not be empty"):
        TLRMatrix.from_dense(np.ones((0, 5)))
    with pytest.raises(TypeError, match="A has dtype"):
        TLRMatrix.from_dense(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="rank must be a positive int"):
        TLRMatrix.from_dense(np.ones((4, 4)), nb=2, rank=0)
    with pytest.raises(ValueError, match=r"expected shape \(4, 4\)"):
        TLRMatrix.from_function(lambda r, c: np.ones((3, 3)), (8, 8), nb=4)
    with pytest.raises(TypeError, match="drop the imaginary part"):
        TLRMatrix.from_dense(np.ones((4, 4), dtype=complex), nb=2, dtype=np.float64)
    with pytest.raises(ValueError, match=r"tile \(0, 1\) needs U of shape"):
        TLRMatrix.from_tiles((4, 4), 2, {(0, 1): (np.ones((2, 1)), np.ones((3, 1)))})
    with pytest.raises(ValueError, match="contain NaN"):
        TLRMatrix.from_tiles((4, 4), 2, {(0, 1): (np.ones((2, 1)), np.full((2, 1), np.nan))})
    with pytest.raises(TypeError, match="f must be callable"):
        TLRMatrix.from_function(np.ones((3, 3)), (8, 8), nb=4)


def test_nb_larger_than_matrix_gives_one_tile():
    A = np.arange(12.0).reshape(3, 4)
    T = TLRMatrix.from_dense(A, nb=100, tol=1e-8)
    assert T.ranks.shape == (1, 1)
    np.testing.assert_allclose(T.toarray(), A, atol=1e-12)


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


def test_empty_rhs_block():
    T = TLRMatrix.from_dense(np.ones((6, 4)), nb=2, tol=1e-3)
    assert (T @ np.ones((4, 0))).shape == (6, 0)


# ------------------------------------------------------------------ batch

def test_batch_matches_individual_products():
    As = [seismic_slice(nx=10, ny=10, frequency=f) for f in (4.0, 9.0, 14.0)]
    B = TLRBatch.from_dense(As, nb=40, tol=1e-3)
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal(100).astype(np.complex64) for _ in As]
    ys = B @ xs
    for T, x, y in zip(B.matrices, xs, ys):
        np.testing.assert_array_equal(y, T @ x)
    zs = B.rmatvec(ys)
    np.testing.assert_array_equal(zs[2], B[2].H @ ys[2])
    assert B.nbytes == sum(T.nbytes for T in B.matrices)
    assert B.compression_ratio > 1
    with pytest.raises(ValueError, match="3 matrices"):
        B @ xs[:2]
    with pytest.raises(TypeError, match=r"matrices\[0\] must be a TLRMatrix"):
        TLRBatch([np.ones((3, 3))])


def test_progress_bar_on_stderr(capsys):
    TLRMatrix.from_dense(np.eye(40), nb=10, tol=1e-3, progress=True)
    err = capsys.readouterr().err
    assert "16/16 tiles" in err and err.endswith("\n")


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 90), n=st.integers(1, 90), nb=st.integers(1, 50),
       dtype=st.sampled_from(DTYPES), log_tol=st.floats(-4, -0.5), noise=st.sampled_from([0, 1e-4, 1e-1]),
       seed=st.integers(0, 2**16))
def test_frobenius_guarantee_property(m, n, nb, dtype, log_tol, noise, seed):
    tol = 10.0 ** log_tol
    rng = np.random.default_rng(seed)
    A = _lowrank_plus_noise(rng, m, n, 6, noise, dtype)
    T = TLRMatrix.from_dense(A, nb=nb, tol=tol, seed=seed)
    assert _rel_err(A, T) <= tol


def test_zero_matrix_has_rank_zero_everywhere():
    T = TLRMatrix.from_dense(np.zeros((5, 7)), nb=2)
    assert T.ranks.sum() == 0 and T.nbytes == 0
    np.testing.assert_array_equal(T @ np.ones(7), np.zeros(5))
    np.testing.assert_array_equal(T.H @ np.ones(5), np.zeros(7))
