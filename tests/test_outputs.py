"""Large results come from a pool of freed buffers (wsesparse/_outputs.py)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import get_handler_name

import wsesparse
from wsesparse import CSR, release_cached_outputs, sparse_matmul
from wsesparse._kernels import _runtime

POOL_MIN = _runtime.OUTPUT_POOL_MIN_BYTES
POOL_NAME = "wsesparse_output_pool"


@pytest.fixture(autouse=True)
def _empty_pool():
    release_cached_outputs()
    yield
    release_cached_outputs()


def _operands(m, k, n, dtype, density, seed):
    A = sp.random(m, k, density=density, format="csr", dtype=dtype, random_state=seed)
    X = np.random.default_rng(seed).standard_normal((k, n)).astype(dtype)
    return A, X


def test_pool_threshold_is_glibcs_mmap_limit():
    assert POOL_MIN == 32 << 20


@pytest.mark.parametrize("prepared", [False, True])
def test_large_results_reuse_freed_buffers_and_stay_exact(prepared):
    # 4096 x 1024 float64 = 32 MiB: pooled. The second product has other
    # values and empty rows: nothing of the first result may show through.
    A1, X = _operands(4096, 256, 1024, np.float64, 0.05, 0)
    Y1 = sparse_matmul(CSR(A1) if prepared else A1, X, method="sparse")
    assert get_handler_name(Y1) == POOL_NAME and Y1.flags.owndata
    assert Y1.ctypes.data % 64 == 0
    np.testing.assert_allclose(Y1, A1 @ X, rtol=1e-12, atol=1e-12)
    addr = Y1.ctypes.data
    del Y1
    assert _runtime.pooled_bytes() == 32 << 20

    A2 = sp.random(4096, 256, density=0.002, format="csr", random_state=1)
    assert np.diff(A2.indptr).min() == 0  # some rows are empty
    Y2 = sparse_matmul(CSR(A2) if prepared else A2, X, method="sparse")
    assert Y2.ctypes.data == addr and _runtime.pooled_bytes() == 0
    np.testing.assert_array_equal(Y2[np.diff(A2.indptr) == 0], 0.0)
    np.testing.assert_allclose(Y2, A2 @ X, rtol=1e-12, atol=1e-12)


def test_pooled_results_of_other_paths():
    # X @ W (transposed result), dense dispatch, and an all-zero matrix, each
    # into a buffer the previous one left.
    A, X = _operands(4096, 512, 1024, np.float64, 0.01, 2)
    for _ in range(2):
        Z = sparse_matmul(np.ascontiguousarray(X.T), A.T.tocsr())
        np.testing.assert_allclose(Z, X.T @ A.T.toarray(), rtol=1e-10, atol=1e-10)
        del Z
    D = sparse_matmul(A, X, method="dense")
    np.testing.assert_allclose(D, A @ X, rtol=1e-10, atol=1e-10)
    del D
    Z0 = sparse_matmul(sp.csr_matrix((4096, 512)), X)
    assert get_handler_name(Z0) == POOL_NAME
    assert not Z0.any()


def test_small_results_are_plain_numpy_arrays():
    A, X = _operands(64, 32, 8, np.float32, 0.2, 3)
    assert get_handler_name(sparse_matmul(A, X)) != POOL_NAME
    assert get_handler_name(sparse_matmul(A, X, method="sparse")) != POOL_NAME


def test_pool_keeps_two_buffers_of_exactly_one_size_each():
    shape = (POOL_MIN // 8,)
    a0, a1, a2 = (_runtime.empty_pooled(shape, np.float64) for _ in range(3))
    addrs = [a.ctypes.data for a in (a0, a1, a2)]
    del a0, a1, a2
    assert _runtime.pooled_bytes() == 2 * POOL_MIN  # the first of three was freed
    # Another size is a fresh allocation; the same size takes a kept buffer.
    other = _runtime.empty_pooled((POOL_MIN // 8 + 1,), np.float64)
    assert _runtime.pooled_bytes() == 2 * POOL_MIN
    again = _runtime.empty_pooled(shape, np.float64)
    assert again.ctypes.data in addrs[1:]
    assert _runtime.pooled_bytes() == POOL_MIN
    del other, again
    # 'other' took the free slot, 'again' the oldest buffer's.
    assert release_cached_outputs() == 2 * POOL_MIN + 8
    assert _runtime.pooled_bytes() == 0 and release_cached_outputs() == 0


def test_pool_returns_huge_buffers_to_the_system():
    # Over 1 GiB is not kept (the pages are never touched, so this is cheap).
    a = _runtime.empty_pooled(((1 << 30) + 64,), np.uint8)
    del a
    assert _runtime.pooled_bytes() == 0


def test_pooled_arrays_resize_and_copy_like_any_array():
    a = _runtime.empty_pooled((POOL_MIN // 4,), np.float32)
    a[:] = 1.5
    a.resize((10,), refcheck=False)  # numpy reallocates through the handler
    assert a.shape == (10,) and (a == 1.5).all()
    del a
    assert _runtime.pooled_bytes() == 0  # 40 bytes: below the pool's threshold
    b = _runtime.empty_pooled((POOL_MIN // 8,), np.float64)
    c = b.copy()
    assert get_handler_name(c) != POOL_NAME


def test_pool_can_be_turned_off():
    code = ("import numpy as np, scipy.sparse as sp, wsesparse;"
            "from wsesparse._kernels import _runtime;"
            "A = sp.random(4096, 8, density=0.5, format='csr', random_state=0);"
            "Y = wsesparse.sparse_matmul(A, np.ones((8, 1024)), method='sparse'); del Y;"
            "print(_runtime.pooled_bytes())")
    kept = {}
    for setting in ("0", "1"):
        env = dict(os.environ, WSESPARSE_OUTPUT_POOL=setting)
        kept[setting] = int(subprocess.run([sys.executable, "-c", code], env=env,
                                           capture_output=True, text=True,
                                           check=True).stdout.strip())
    assert kept == {"0": 0, "1": 32 << 20}


def test_results_own_their_data_without_the_pool():
    """WSESPARSE_OUTPUT_POOL=0: the one-shot CSC matrix-vector product returned an aligned
    view of a larger buffer (``y.base`` not None, ``y.resize`` failed) where scipy's
    result owns its data (a review)."""
    code = ("import numpy as np, scipy.sparse as sp, wsesparse;"
            "A = sp.random(300, 200, density=0.1, format='csc', random_state=0);"
            "x = np.ones(200); ys = [wsesparse.sparse_matmul(A, x)];"
            "\nwith wsesparse.accelerated(): ys.append(A @ x)\n"
            "for y in ys: assert y.base is None and y.flags.owndata, y.base\n"
            "print(len(ys))")
    env = dict(os.environ, WSESPARSE_OUTPUT_POOL="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr


def test_release_is_public_and_takes_no_arguments():
    assert "release_cached_outputs" in wsesparse.__all__
    with pytest.raises(TypeError):
        release_cached_outputs(1 << 20)
    # The pool's own entry point rejects what np.empty rejects.
    with pytest.raises(ValueError, match="negative"):
        _runtime.empty_pooled((-1,), np.float64)
    with pytest.raises(TypeError):
        _runtime.empty_pooled((4,), "not a dtype")
    assert get_handler_name(np.empty(POOL_MIN // 8)) != POOL_NAME  # handler restored


@pytest.mark.parametrize("pooled", [True, False])
@pytest.mark.parametrize("shape, dtype", [((7, 5), np.float32), ((33,), np.complex128),
                                          ((0, 3), np.float64), ((3, 40, 9), np.float64)])
def test_aligned_outputs_start_on_a_line(monkeypatch, pooled, shape, dtype):
    """empty_output(aligned=True): a writeable C-contiguous array on a 64-byte line, from
    the pool's allocator, or (WSESPARSE_OUTPUT_POOL=0) a view of a numpy buffer."""
    from wsesparse import _outputs
    monkeypatch.setattr(_outputs, "_POOLED", pooled)
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    for _ in range(4):
        Y = _outputs.empty_output(shape, dtype, nbytes, aligned=True)
        assert Y.shape == shape and Y.dtype == dtype and Y.flags.c_contiguous
        assert Y.flags.writeable and Y.nbytes == nbytes
        assert Y.__array_interface__["data"][0] % 64 == 0 or Y.size == 0
        assert (get_handler_name(Y if Y.base is None else Y.base) == POOL_NAME) == pooled
        Y[...] = 1
        assert (Y == 1).all()


def test_scatter_results_start_on_a_line():
    """One-shot transposed products (the scatter) return results on 64-byte lines: two
    panels of a row go to two threads (docs/tuning.md, "Transposed products")."""
    rng = np.random.default_rng(2)
    W = sp.random(70, 90, density=0.3, format="csr", random_state=2)
    for n in (1, 3, 8):
        X = rng.standard_normal((n, 70))
        Z = sparse_matmul(X, W)
        np.testing.assert_allclose(Z, X @ W, rtol=1e-12, atol=1e-12)
        assert Z.__array_interface__["data"][0] % 64 == 0


def test_the_last_accelerated_block_hands_the_pool_back():
    """Plain scipy keeps nothing once its results are deleted; the switch's routed products
    must not keep pooled buffers past the block (a review found 840 MiB held after it)."""
    A, X = _operands(4096, 256, 1024, np.float64, 0.02, 3)   # a 32 MiB result
    with wsesparse.accelerated():
        with wsesparse.accelerated():
            Y = A @ X
            assert get_handler_name(Y) == POOL_NAME
            del Y
        assert _runtime.pooled_bytes() == 32 << 20   # (an inner block leaves it)
    assert _runtime.pooled_bytes() == 0
    wsesparse.accelerate.enable()
    Y = A @ X
    del Y
    wsesparse.accelerate.disable()
    assert _runtime.pooled_bytes() == 0
