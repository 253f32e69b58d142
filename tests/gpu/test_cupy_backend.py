"""CuPy backend of ``sparse_matmul`` (``wsesparse._cupy_backend``).

Three kinds of tests:

* here, always: cupy is never imported by a normal (numpy/scipy) product, and CuPy objects are
  recognised from their type's ``__module__`` alone;
* here, always: the dispatch logic run against a *stand-in* ``cupy``/``cupyx.scipy.sparse``
  injected into ``sys.modules`` (numpy arrays and scipy CSR matrices whose classes claim to
  live in cupy). This checks what ``sparse_matmul`` does with such operands (shape, dtype
  promotion, ``out=``, dense @ sparse, errors); it does not check CuPy or cuSPARSE themselves;
* ``gpu``-marked: the real thing, skipped when cupy or a CUDA device is absent.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import CSR, sparse_matmul
from wsesparse._cupy_backend import is_cupy


# --------------------------------------------------------------------------- no import
def test_normal_products_never_import_cupy():
    # Any attempt to import cupy/cupyx is recorded by a finder placed first on sys.meta_path,
    # so the test means the same whether or not cupy is installed.
    code = textwrap.dedent("""
        import sys
        tried = []
        class Spy:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name.partition(".")[0] in ("cupy", "cupyx"):
                    tried.append(name)
                return None
        sys.meta_path.insert(0, Spy)
        import numpy as np, scipy.sparse as sp
        import wsesparse
        from wsesparse import CSR, sparse_matmul
        W = sp.random(50, 40, density=0.2, format="csr", random_state=0)
        X = np.ones((40, 3))
        sparse_matmul(W, X); sparse_matmul(X.T, W.T); sparse_matmul(CSR(W), X[:, 0])
        sparse_matmul(W, W.T); sparse_matmul(W.tocoo(), X, method="dense")
        try:
            sparse_matmul(X, X)
        except TypeError:
            pass
        import wsesparse.cli, wsesparse.wafer, wsesparse.tlr, wsesparse.bench
        loaded = sorted(m for m in sys.modules if m.partition(".")[0] in ("cupy", "cupyx"))
        print(tried, loaded)
        assert not tried and not loaded, (tried, loaded)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[] []"


# --------------------------------------------------------------------------- detection
def _obj(module: str, name: str = "thing"):
    return type(name, (), {"__module__": module})()


@pytest.mark.parametrize("module", ["cupy", "cupy._core.core", "cupyx.scipy.sparse._csr",
                                    "cupyx.scipy.sparse", "cupyx"])
def test_detects_cupy_types(module):
    assert is_cupy(_obj(module))


@pytest.mark.parametrize("x", [np.ones(2), np.float32(1), sp.eye(2, format="csr"),
                               sp.csr_array(np.eye(2)), [1.0], None, 3,
                               _obj("numpy"), _obj("cupyfoo"), _obj("my.cupy"),
                               _obj("scipy.sparse._csr")])
def test_does_not_detect_other_types(x):
    assert not is_cupy(x)


def test_detection_does_not_import_cupy():
    before = {m for m in sys.modules if m.partition(".")[0] in ("cupy", "cupyx")}
    is_cupy(_obj("cupyx.scipy.sparse._csr"))
    after = {m for m in sys.modules if m.partition(".")[0] in ("cupy", "cupyx")}
    assert after == before


# --------------------------------------------------------------------------- stand-in
# tests/gpu_helpers.py: a stand-in cupy on numpy and the kernels of wsesparse/gpu/kernels.cu
# replayed in Python, so these run the backend's host side (dispatch, promotion, out=,
# dense @ sparse, errors) without a GPU.
from gpu_helpers import dev as _dev  # noqa: E402
from gpu_helpers import FakeNdarray as _FakeNdarray  # noqa: E402


@pytest.fixture
def fake_cupy(monkeypatch):
    import gpu_helpers
    return gpu_helpers.install(monkeypatch)


def _pair(rng, dtype_s=np.float32, dtype_d=np.float32, n=5):
    W = sp.random(30, 20, density=0.3, format="csr", random_state=rng, dtype=dtype_s)
    X = rng.standard_normal((20, n)).astype(dtype_d)
    return W, X


def _kernels(env):
    return [name.partition("<")[0] for name, _, _ in env.launches]


def test_fake_dispatch_sparse_at_dense(fake_cupy, rng):
    W, X = _pair(rng)
    Y = sparse_matmul(fake_cupy.csr_matrix(W), _dev(X))
    assert isinstance(Y, _FakeNdarray) and Y.dtype == np.float32 and Y.shape == (30, 5)
    np.testing.assert_allclose(np.asarray(Y), W @ X, rtol=1e-5)
    # one launch of our kernel, checking the structure itself (a one-shot product)
    assert [n for n, _, _ in fake_cupy.launches] == ["csr_dense<float, int, 1, true>"]


def test_fake_dispatch_promotes_like_the_cpu_path(fake_cupy, rng):
    W, X = _pair(rng, np.float32, np.float64)
    Y = sparse_matmul(fake_cupy.csr_matrix(W), _dev(X))
    assert Y.dtype == sparse_matmul(W, X).dtype == np.float64
    # both operands reach the kernel in the result dtype (the replay asserts the types)
    assert fake_cupy.launches[-1][0].startswith("csr_dense<double, int,")
    Xi = _dev(np.arange(20, dtype=np.int16))
    assert sparse_matmul(fake_cupy.csr_matrix(W), Xi).dtype == sparse_matmul(W, Xi.view(
        np.ndarray)).dtype == np.float32


def test_fake_dispatch_dense_at_sparse_and_vectors(fake_cupy, rng):
    W, X = _pair(rng, np.complex128, np.complex64)
    W = sp.csr_matrix(W + 1j * W)
    S = fake_cupy.csr_matrix(W)
    Z = sparse_matmul(_dev(X.T.copy()), fake_cupy.csr_matrix(W.T.tocsr()))  # (5,20) @ (20,30)
    np.testing.assert_allclose(np.asarray(Z), X.T @ W.T.toarray(), rtol=1e-6)
    assert Z.dtype == np.complex128 and Z.shape == (5, 30)
    v = rng.standard_normal(30)
    np.testing.assert_allclose(np.asarray(sparse_matmul(_dev(v), S)), v @ W.toarray(),
                               rtol=1e-10)
    assert sparse_matmul(S, _dev(X[:, 0])).shape == (30,)


def test_fake_dispatch_out(fake_cupy, rng):
    W, X = _pair(rng)
    out = _dev(np.full((30, 5), np.nan, np.float32))
    r = sparse_matmul(fake_cupy.csr_matrix(W), _dev(X), out=out)
    assert r is out
    np.testing.assert_allclose(np.asarray(out), W @ X, rtol=1e-5)
    wide = _dev(np.full((30, 10), np.nan, np.float32))
    sparse_matmul(fake_cupy.csr_matrix(W), _dev(X), out=wide[:, ::2])     # strided out
    np.testing.assert_allclose(np.asarray(wide)[:, ::2], W @ X, rtol=1e-5)
    assert np.isnan(np.asarray(wide)[:, 1::2]).all()
    with pytest.raises(ValueError, match="out has dtype float64"):
        sparse_matmul(fake_cupy.csr_matrix(W), _dev(X), out=_dev(np.zeros((30, 5))))
    with pytest.raises(ValueError, match=r"out has shape \(5, 30\)"):
        sparse_matmul(fake_cupy.csr_matrix(W), _dev(X), out=_dev(np.zeros((5, 30), np.float32)))
    with pytest.raises(TypeError, match="out must be a cupy.ndarray"):
        sparse_matmul(fake_cupy.csr_matrix(W), _dev(X), out=np.zeros((30, 5), np.float32))


def test_fake_dispatch_method_dense_and_sparse_sparse(fake_cupy, rng):
    W, X = _pair(rng)
    S = fake_cupy.csr_matrix(W)
    Y = sparse_matmul(S, _dev(X), method="dense")
    np.testing.assert_allclose(np.asarray(Y), W @ X, rtol=1e-5)
    assert _kernels(fake_cupy) == ["csr_check", "csr_densify"]
    P = sparse_matmul(S, fake_cupy.csr_matrix(W.T.tocsr()))
    np.testing.assert_allclose(sp.csr_matrix(P).toarray(), (W @ W.T).toarray(), rtol=1e-5)


def test_fake_dispatch_errors(fake_cupy, rng):
    W, X = _pair(rng)
    S = fake_cupy.csr_matrix(W)
    with pytest.raises(TypeError, match=r"B is ndarray.*\(host memory\).*both must be on the dev"):
        sparse_matmul(S, X)
    with pytest.raises(TypeError, match="A is csr_matrix.*host memory"):
        sparse_matmul(W, _dev(X))
    with pytest.raises(TypeError, match="at least one cupyx.scipy.sparse operand"):
        sparse_matmul(_dev(X), _dev(X.T.copy()))
    with pytest.raises(ValueError, match="inner dimensions differ"):
        sparse_matmul(S, _dev(X[:7]))
    with pytest.raises(ValueError, match="method must be"):
        sparse_matmul(S, _dev(X), method="fast")
    with pytest.raises(TypeError, match="on the GPU the product must be float32"):
        sparse_matmul(fake_cupy.csr_matrix(W.astype(bool)), _dev(X.astype(np.int32)))
    assert fake_cupy.launches == []


def test_cpu_path_unchanged_with_fake_cupy_loaded(fake_cupy, rng):
    W, X = _pair(rng)
    np.testing.assert_allclose(sparse_matmul(CSR(W), X), W @ X, rtol=1e-5, atol=1e-6)
    assert fake_cupy.launches == []


# --------------------------------------------------------------------------- real GPU
@pytest.fixture
def cupy_device():
    cupy = pytest.importorskip("cupy")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA runtime without a driver/device
        pytest.skip(f"no CUDA device: {exc}")
    if n < 1:
        pytest.skip("no CUDA device")
    import cupyx.scipy.sparse as csp
    return cupy, csp


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_gpu_matches_scipy(cupy_device, dtype, fmt, rng):
    cupy, csp = cupy_device
    W = sp.random(300, 200, density=0.05, format=fmt, random_state=rng).astype(dtype)
    X = rng.standard_normal((200, 7)).astype(dtype)
    S = {"csr": csp.csr_matrix, "csc": csp.csc_matrix, "coo": csp.coo_matrix}[fmt](W)
    Y = sparse_matmul(S, cupy.asarray(X))
    assert isinstance(Y, cupy.ndarray) and Y.dtype == dtype and Y.shape == (300, 7)
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    np.testing.assert_allclose(cupy.asnumpy(Y), W @ X, rtol=tol, atol=tol)
    Z = sparse_matmul(cupy.asarray(X.T.copy()), S.T)
    np.testing.assert_allclose(cupy.asnumpy(Z), X.T @ W.T, rtol=tol, atol=tol)
    out = cupy.empty((300, 7), dtype=dtype)
    assert sparse_matmul(S, cupy.asarray(X), out=out) is out
    np.testing.assert_allclose(cupy.asnumpy(out), W @ X, rtol=tol, atol=tol)


@pytest.mark.gpu
def test_gpu_promotion_vector_and_dense_method(cupy_device, rng):
    cupy, csp = cupy_device
    W = sp.random(100, 80, density=0.1, format="csr", random_state=rng, dtype=np.float32)
    x = rng.standard_normal(80)
    y = sparse_matmul(csp.csr_matrix(W), cupy.asarray(x))
    assert y.dtype == np.float64 and y.shape == (100,)
    np.testing.assert_allclose(cupy.asnumpy(y), W @ x, rtol=1e-6)
    yd = sparse_matmul(csp.csr_matrix(W), cupy.asarray(x), method="dense")
    np.testing.assert_allclose(cupy.asnumpy(yd), W @ x, rtol=1e-6)
    with pytest.raises(TypeError, match="host memory"):
        sparse_matmul(csp.csr_matrix(W), x)


# --------------------------------------------------------------------------- TLR-MVM
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_tlr_device_algorithm_on_numpy(dtype, rng):
    # TLRDevice's three phases run with xp=numpy: the same array code as on cupy, checked
    # against the CPU kernel (edge tiles: 70 = 3 * 20 + 10; some tiles of rank 0).
    from wsesparse import TLRMatrix
    from wsesparse._cupy_backend import TLRDevice
    A = rng.standard_normal((70, 50)) @ np.diag(np.exp(-np.arange(50) / 3)) \
        @ rng.standard_normal((50, 50))
    A[:20, 20:] = 0
    T = TLRMatrix.from_dense(A.astype(dtype), nb=20, tol=1e-3)
    assert (T.ranks == 0).any() and T.ranks.max() > 0
    D = TLRDevice(T, xp=np)
    tol = 1e-5 if dtype in ("float32", "complex64") else 1e-12
    x = rng.standard_normal(50).astype(dtype)
    np.testing.assert_allclose(D @ x, T @ x, rtol=tol, atol=tol * np.abs(T @ x).max())
    X = rng.standard_normal((50, 3)) + 1j * rng.standard_normal((50, 3))   # promotes
    Y = D @ X
    assert Y.dtype == (T @ X).dtype and Y.shape == (70, 3)
    np.testing.assert_allclose(Y, T @ X, rtol=tol, atol=tol * np.abs(T @ X).max())
    with pytest.raises(ValueError, match="x needs 50 rows"):
        D @ np.ones(49)
    with pytest.raises(TypeError, match="T must be a wsesparse.TLRMatrix"):
        TLRDevice(np.eye(4), xp=np)
    if np.dtype(np.longdouble) != np.float64:  # 80-bit on x86-64 Linux: not a BLAS type
        with pytest.raises(TypeError, match="TLR-MVM computes"):
            TLRDevice(TLRMatrix.from_dense(np.eye(4, dtype=np.float32), nb=2), xp=np) @ \
                np.ones(4, dtype=np.longdouble)


@pytest.mark.gpu
def test_tlr_device_on_gpu(cupy_device, rng):
    cupy, _ = cupy_device
    from wsesparse import TLRMatrix
    from wsesparse._cupy_backend import TLRDevice
    from wsesparse.datasets import seismic_slice
    A = seismic_slice(nx=20, ny=20, frequency=10.0)
    T = TLRMatrix.from_dense(A, nb=64, tol=1e-3)
    x = rng.standard_normal(A.shape[1]).astype(np.complex64)
    y = TLRDevice(T) @ cupy.asarray(x)
    assert isinstance(y, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(y), T @ x, rtol=1e-4, atol=1e-4 * np.abs(T @ x).max())
