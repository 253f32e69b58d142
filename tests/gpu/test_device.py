"""The GPU kernels on a real device (``gpu``-marked; skipped without cupy and a CUDA device).

Every kernel and dtype against scipy/numpy on random and adversarial structures, bad input,
and run-to-run bitwise equality. The host side of the same code runs without a GPU in
tests/gpu/test_host.py.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from gpu_helpers import cupy_on_a_device, random_values, stored_tlr, tlr_test_matrix
from wsesparse import TLRBatch, TLRMatrix, sparse_matmul

pytestmark = pytest.mark.gpu

DTYPES = ["float32", "float64", "complex64", "complex128"]


@pytest.fixture(scope="module")
def cp():
    return cupy_on_a_device()


def _tol(dtype):
    return 2e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12



def _matrix(rng, m, k, density, dtype, kind="random"):
    W = sp.random(m, k, density=density, format="csr", random_state=rng).astype(dtype)
    if np.dtype(dtype).kind == "c":
        W = W + 1j * W
    W = sp.csr_matrix(W)
    if kind == "long_rows":         # a few dense rows among empty ones
        D = np.zeros((m, k), dtype=dtype)
        D[::max(m // 3, 1)] = random_values(rng, (len(range(0, m, max(m // 3, 1))), k), dtype)
        W = sp.csr_matrix(D)
    elif kind == "unsorted_duplicates":
        coo = W.tocoo()
        order = rng.permutation(coo.nnz)
        r = np.concatenate([coo.row[order], coo.row[:5]])
        c = np.concatenate([coo.col[order], coo.col[:5]])
        v = np.concatenate([coo.data[order], coo.data[:5]])
        # csr from unsorted triplets without summing: build indptr by a stable sort on rows
        o = np.argsort(r, kind="stable")
        indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=m))])
        W = sp.csr_matrix((v[o], c[o], indptr), shape=(m, k))
        assert not W.has_canonical_format
    return W


def _check(Y, ref, dtype):
    Y = Y.get()
    assert Y.dtype == ref.dtype, (Y.dtype, ref.dtype)
    scale = max(np.abs(ref).max(initial=0), 1)
    np.testing.assert_allclose(Y, ref, rtol=_tol(dtype), atol=_tol(dtype) * scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", ["int32", "int64"])
@pytest.mark.parametrize("n", [1, 3, 8, 33, 256])
@pytest.mark.parametrize("kind", ["random", "long_rows", "unsorted_duplicates"])
def test_csr_dense_matches_scipy(cp, rng, dtype, index, n, kind):
    from wsesparse.gpu import DeviceCSR
    W = _matrix(rng, 301, 203, 0.05, dtype, kind)
    S = DeviceCSR((cp.asarray(W.data), cp.asarray(W.indices.astype(index)),
                   cp.asarray(W.indptr.astype(index))), shape=W.shape)
    X = random_values(rng, (203, n), dtype)
    _check(sparse_matmul(S, cp.asarray(X), method="sparse"), W @ X, dtype)
    _check(S @ cp.asarray(X[:, 0]), W @ X[:, 0], dtype)                   # SpMV
    Z = random_values(rng, (n, 301), dtype)
    _check(sparse_matmul(cp.asarray(Z), S, method="sparse"), Z @ W, dtype)  # dense @ CSR
    _check(cp.asarray(Z[0]) @ S, Z[0] @ W, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layouts_and_out(cp, rng, dtype):
    W = _matrix(rng, 120, 90, 0.1, dtype)
    import cupyx.scipy.sparse as csp
    S = csp.csr_matrix(W)
    X = random_values(rng, (90, 24), dtype)
    wide = np.zeros((90, 48), dtype=dtype)
    wide[:, ::2] = X
    for Xd in (cp.asarray(X), cp.asfortranarray(cp.asarray(X)),
               cp.asarray(wide)[:, ::2],                                    # strided columns
               cp.asarray(np.concatenate([X[:, :1], X], axis=1))[:, 1:]):   # unaligned rows
        _check(sparse_matmul(S, Xd, method="sparse"), W @ X, dtype)
    out = cp.full((120, 48), np.nan, dtype=dtype)[:, ::2]                   # strided out
    r = sparse_matmul(S, cp.asarray(X), out=out, method="sparse")
    assert r is out
    _check(out, W @ X, dtype)
    outT = cp.full((24, 120), np.nan, dtype=dtype)
    sparse_matmul(cp.asarray(X.T.copy()), S.T.tocsr(), out=outT, method="sparse")
    _check(outT, X.T @ W.T, dtype)
    for fmt in ("csc", "coo"):
        _check(sparse_matmul(getattr(csp, f"{fmt}_matrix")(W), cp.asarray(X)), W @ X, dtype)


def test_out_overlapping_the_operand(cp, rng):
    import cupyx.scipy.sparse as csp
    W = _matrix(rng, 40, 40, 0.2, "float64")
    x = rng.standard_normal((40, 3))
    xd = cp.asarray(x)
    r = sparse_matmul(csp.csr_matrix(W), xd, out=xd, method="sparse")      # x = A @ x
    assert r is xd
    _check(xd, W @ x, "float64")


def test_degenerate_shapes(cp, rng):
    import cupyx.scipy.sparse as csp
    from wsesparse.gpu import DeviceCSR
    for m, k, n in ((0, 5, 3), (5, 0, 3), (5, 4, 0), (1, 1, 1)):
        W = sp.random(m, k, density=0.5, format="csr", random_state=rng)
        X = rng.standard_normal((k, n))
        S = DeviceCSR(W)
        Y = sparse_matmul(S, cp.asarray(X), method="sparse")
        assert Y.shape == (m, n)
        _check(Y, W @ X, "float64")
    Z = sparse_matmul(csp.csr_matrix((7, 9), dtype=np.float32), cp.ones((9, 4), np.float32))
    assert float(abs(Z).max()) == 0.0 and Z.shape == (7, 4)


def test_promotion_and_method_dense(cp, rng):
    import cupyx.scipy.sparse as csp
    W = _matrix(rng, 100, 80, 0.1, "float32")
    x = rng.standard_normal(80)
    y = sparse_matmul(csp.csr_matrix(W), cp.asarray(x))
    assert y.dtype == np.float64
    _check(y, W @ x, "float64")
    X = rng.standard_normal((80, 16)).astype(np.complex64)
    _check(sparse_matmul(csp.csr_matrix(W), cp.asarray(X), method="dense"), W @ X, "complex64")
    Wd = _matrix(rng, 60, 50, 0.1, "float64", "unsorted_duplicates")
    Xd = rng.standard_normal((50, 8))
    _check(sparse_matmul(csp.csr_matrix(Wd), cp.asarray(Xd), method="dense"), Wd @ Xd,
           "float64")


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_method_and_kept_copy(cp, rng, dtype):
    from wsesparse.gpu import DeviceCSR
    W = _matrix(rng, 200, 150, 0.2, dtype, "unsorted_duplicates")
    X = random_values(rng, (150, 40), dtype)
    for keep in (True, False):
        S = DeviceCSR(W, keep_dense=keep)
        dense = S.toarray()
        assert np.array_equal(dense.get(), S.toarray().get())         # fixed order
        np.testing.assert_allclose(dense.get(), W.toarray(), rtol=_tol(dtype))
        for _ in range(2):
            _check(sparse_matmul(S, cp.asarray(X), method="dense"), W @ X, dtype)
        assert bool(S._dense) == keep
        Z = random_values(rng, (7, 200), dtype)
        _check(sparse_matmul(cp.asarray(Z), S, method="dense"), Z @ W, dtype)


def test_one_shot_checks_in_the_kernel(cp, rng):
    import cupyx.scipy.sparse as csp
    W = _matrix(rng, 64, 48, 0.2, "float32")
    for n in (1, 8, 100):
        S = csp.csr_matrix(W)
        S.indices[5] = 48
        with pytest.raises(ValueError, match="not below 48"):
            sparse_matmul(S, cp.ones((48, n), np.float32) if n > 1 else cp.ones(48, np.float32),
                          method="sparse")
        S = csp.csr_matrix(W)
        S.indptr[3] = S.indptr[4] + 1
        with pytest.raises(ValueError, match="indptr decreases"):
            sparse_matmul(S, cp.ones((48, n), np.float32), method="sparse")
        with pytest.raises(ValueError, match="indptr decreases"):
            sparse_matmul(cp.ones((n, 64), np.float32), S)       # transposed: checked first


@pytest.mark.parametrize("dtype", DTYPES)
def test_bitwise_reproducible(cp, rng, dtype):
    from wsesparse.gpu import DeviceCSR
    W = _matrix(rng, 3000, 2000, 0.02, dtype)
    S = DeviceCSR(W)
    for n in (1, 8, 256):
        X = cp.asarray(random_values(rng, (2000, n), dtype))
        first = (S @ X).get()
        for _ in range(5):
            assert np.array_equal((S @ X).get(), first)
        Z = cp.asarray(random_values(rng, (n, 3000), dtype))
        z0 = (Z @ S).get()
        assert np.array_equal((Z @ S).get(), z0)


def test_bad_cupyx_csc_is_rejected_before_tocsr(cp, rng):
    """A cupyx CSC with a bad row index is a ValueError before cupyx's tocsr (which
    would write where the index points), worded for the CSC; a valid one gives W."""
    import cupyx.scipy.sparse as csp
    from wsesparse.gpu import DeviceCSR
    W = sp.csc_matrix(_matrix(rng, 50, 40, 0.2, "float64"))
    np.testing.assert_array_equal(DeviceCSR(csp.csc_matrix(W)).toarray().get(), W.toarray())
    for value in (50, -1, 10**6):
        C = csp.csc_matrix(W)
        indices = C.indices.copy()
        indices[7] = value
        C.indices = indices
        with pytest.raises(ValueError, match=r"\(50x40, CSC\): a stored row index"):
            DeviceCSR(C)


def test_bad_structure_is_rejected(cp, rng):
    from wsesparse.gpu import DeviceCSR
    W = _matrix(rng, 50, 40, 0.2, "float64")
    X = cp.ones((40, 3))

    def make(indptr=None, indices=None):
        ip = cp.asarray(W.indptr if indptr is None else indptr)
        ix = cp.asarray(W.indices if indices is None else indices)
        return DeviceCSR((cp.asarray(W.data), ix, ip), shape=W.shape)

    bad_idx = W.indices.copy()
    bad_idx[7] = 40
    with pytest.raises(ValueError, match="a stored column index is negative or not below 40"):
        make(indices=bad_idx)
    neg = W.indices.copy()
    neg[-1] = -1
    with pytest.raises(ValueError, match="negative"):
        make(indices=neg)
    ip = W.indptr.copy()
    ip[10], ip[11] = ip[11], ip[10] - 1
    with pytest.raises(ValueError, match="indptr decreases"):
        make(indptr=ip)
    ip = W.indptr.copy()
    ip[-1] += 5
    with pytest.raises(ValueError, match="exceeds the number of stored indices"):
        make(indptr=ip)
    ip = W.indptr.copy()
    ip[0] = 1
    with pytest.raises(ValueError, match=r"indptr\[0\] is not 0"):
        make(indptr=ip)
    import cupyx.scipy.sparse as csp
    S = csp.csr_matrix(W)
    S.indices[3] = 99
    with pytest.raises(ValueError, match="A has a corrupt compressed structure"):
        sparse_matmul(S, X)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        sparse_matmul(make(), cp.ones((41, 3)))


def _long_rows(rng, m, k, dtype, index="int32", max_len=700):
    """Rows 0..max_len long (mean above SPMV4_MIN_MEAN: csr_spmv4), starts at every offset
    from a multiple of 4, an empty row and rows of 1-3, unsorted duplicates."""
    lengths = rng.integers(0, max_len + 1, m)
    lengths[:5] = (0, 1, 2, 3, max_len)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(index)
    indices = rng.integers(0, k, int(indptr[-1])).astype(index)
    return indptr, indices, random_values(rng, int(indptr[-1]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_long_row_spmv_matches_scipy(cp, rng, dtype, index):
    """csr_spmv4 (an SpMV of long rows), prepared and one-shot, strided x and out, and D @ S;
    bitwise the same run to run."""
    import cupyx.scipy.sparse as csp
    from wsesparse.gpu import DeviceCSR, plan
    indptr, indices, data = _long_rows(rng, 1500, 900, dtype, index)
    W = sp.csr_matrix((data, indices, indptr), shape=(1500, 900))
    assert W.nnz >= plan.SPMV4_MIN_MEAN * 1500
    S = DeviceCSR((cp.asarray(data), cp.asarray(indices), cp.asarray(indptr)), shape=W.shape)
    x = random_values(rng, 900, dtype)
    ref = W @ x
    first = (S @ cp.asarray(x)).get()
    _check(cp.asarray(first), ref, dtype)
    for _ in range(3):
        assert np.array_equal((S @ cp.asarray(x)).get(), first)
    one_shot = csp.csr_matrix(W)
    _check(sparse_matmul(one_shot, cp.asarray(x)), ref, dtype)
    wide = cp.asarray(np.stack([x, x, x], axis=1))
    out = cp.full((1500, 2), np.nan, dtype=dtype)
    for A in (S, one_shot):
        col = out[:, 1]
        assert sparse_matmul(A, wide[:, 1], out=col, method="sparse") is col
        _check(col, ref, dtype)
        assert bool(cp.isnan(out[:, 0]).all())
        _check(sparse_matmul(A, wide[:, :1], method="sparse"), ref[:, None], dtype)
    z = random_values(rng, 900, dtype)
    _check(cp.asarray(z) @ DeviceCSR(csp.csr_matrix(W.T.tocsr())), z @ W.T, dtype)


@pytest.mark.parametrize("where", ["head", "middle", "remainder", "tail", "negative", "huge",
                                   "indptr"])
def test_long_row_spmv_one_shot_finds_faults(cp, rng, where):
    """A bad index in each part of a row csr_spmv4 reads (head, the unrolled groups, the
    group after them, tail) or a corrupt indptr: the one-shot product names it."""
    import cupyx.scipy.sparse as csp
    indptr, indices, data = _long_rows(rng, 300, 500, "float32")
    W = sp.csr_matrix((data, indices, indptr), shape=(300, 500))
    row = next(r for r in range(5, 300) if W.indptr[r] % 4 and W.indptr[r + 1] % 4
               and 300 < W.indptr[r + 1] - W.indptr[r] < 380)   # 3 groups a lane at most
    start, end = int(W.indptr[row]), int(W.indptr[row + 1])
    bad = csp.csr_matrix(W)
    message = "a stored column index is negative or not below 500"
    if where == "indptr":
        bad.indptr[3] = bad.indptr[4] + 1
        message = "indptr decreases somewhere"
    else:
        a = (start + 3) & ~3        # lane 1's second group; lane 0's third (SPMV4_UNROLL 2)
        k = {"head": start, "middle": a + 133, "remainder": a + 257, "tail": end - 1,
             "negative": (start + end) // 2, "huge": start + 200}[where]
        bad.indices[k] = {"negative": -1, "huge": 2**31 - 1}.get(where, 500)
    with pytest.raises(ValueError, match="A has a corrupt compressed structure.*" + message):
        sparse_matmul(bad, cp.ones(500, np.float32), method="sparse")


# ------------------------------------------------------------------------------------- TLR

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s", [None, 1, 3, 16, 21])
def test_tlr_forward_adjoint(cp, rng, dtype, s):
    from wsesparse.gpu import DeviceTLR
    T = tlr_test_matrix(rng, dtype)
    D = DeviceTLR(T)
    x = random_values(rng, (50,) if s is None else (50, s), dtype)
    y = random_values(rng, (70,) if s is None else (70, s), dtype)
    _check(D @ cp.asarray(x), T @ x, dtype)
    _check(D.H @ cp.asarray(y), T.rmatvec(y), dtype)
    a, b = (D @ cp.asarray(x)).get(), (D.H @ cp.asarray(y)).get()
    assert np.array_equal((D @ cp.asarray(x)).get(), a)
    assert np.array_equal((D.H @ cp.asarray(y)).get(), b)


@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s", [None, 3, 21])
def test_tlr_16_bit_storage(cp, rng, storage, dtype, s):
    from wsesparse.gpu import DeviceTLR
    T = tlr_test_matrix(rng, dtype)
    D = DeviceTLR(T, storage=storage)
    R = stored_tlr(T, storage)                  # the rounded bases, summed in dtype
    x = random_values(rng, (50,) if s is None else (50, s), dtype)
    y = random_values(rng, (70,) if s is None else (70, s), dtype)
    _check(D @ cp.asarray(x), R @ x, dtype)
    _check(D.H @ cp.asarray(y), R.rmatvec(y), dtype)
    a = (D @ cp.asarray(x)).get()
    assert np.array_equal((D @ cp.asarray(x)).get(), a)


def test_tlr_real_matrix_complex_vector_and_batch(cp, rng):
    from wsesparse.gpu import DeviceTLR
    T = tlr_test_matrix(rng, "float32")
    xc = random_values(rng, (50, 2), "complex64")
    _check(DeviceTLR(T) @ cp.asarray(xc), T @ xc, "complex64")
    B = TLRBatch([tlr_test_matrix(rng, "complex64") for _ in range(3)])
    D = DeviceTLR(B)
    xs = random_values(rng, (3, 50, 4), "complex64")
    ys = D @ cp.asarray(xs)
    assert ys.shape == (3, 70, 4)
    for f in range(3):
        _check(ys[f], B[f] @ xs[f], "complex64")
    zs = D.H @ cp.asarray(random_values(rng, (3, 70), "complex64"))
    assert zs.shape == (3, 50)
    with pytest.raises(ValueError, match=r"x must be of shape \(3, 50\[, s\]\)"):
        D @ cp.ones((50,), np.complex64)
    with pytest.raises(TypeError, match="x must be a cupy.ndarray"):
        D @ np.ones((3, 50))


def test_cupyx_solvers_with_our_operators(cp, rng):
    import cupyx.scipy.sparse.linalg as cla
    from wsesparse.gpu import DeviceCSR, DeviceTLR
    n = 400
    W = sp.random(n, n, density=0.02, format="csr", random_state=rng)
    A = sp.csr_matrix(W @ W.T + 10 * sp.eye(n))                    # SPD
    b = rng.standard_normal(n)
    x, info = cla.cg(DeviceCSR(A).aslinearoperator(), cp.asarray(b), maxiter=500)
    assert info == 0
    assert np.linalg.norm(A @ x.get() - b) <= 1e-4 * np.linalg.norm(b)
    # lsmr calls the adjoint too (cupyx's lsqr is a direct QR solve of a square CSR matrix
    # and takes no operator); the same solve on the CPU operator is the yardstick
    import scipy.sparse.linalg as sla
    T = tlr_test_matrix(rng, "float64")
    rhs = T @ rng.standard_normal(50)
    tols = dict(atol=1e-10, btol=1e-10, maxiter=500)
    ours = cla.lsmr(DeviceTLR(T).aslinearoperator(), cp.asarray(rhs), **tols)[0].get()
    ref = sla.lsmr(T.aslinearoperator(), rhs, **tols)[0]
    res = np.linalg.norm(T @ ours - rhs)
    assert res <= 1.01 * np.linalg.norm(T @ ref - rhs) + 1e-10 * np.linalg.norm(rhs)


def test_tlr_seismic(cp, rng):
    from wsesparse.datasets import seismic_slice
    from wsesparse.gpu import DeviceTLR
    A = seismic_slice(nx=20, ny=20, frequency=10.0)
    T = TLRMatrix.from_dense(A, nb=64, tol=1e-3)
    x = random_values(rng, A.shape[1], np.complex64)
    _check(DeviceTLR(T) @ cp.asarray(x), T @ x, "complex64")
