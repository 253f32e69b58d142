"""The BLAS libraries' scan is kept until the process loads or unloads a shared object
(``wsesparse._blas_libs``): blocks and BLAS-limited products took about 1 ms each while
every one let threadpoolctl scan again."""

import ctypes
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
import threadpoolctl

import wsesparse
from wsesparse import _blas, _blas_libs, sparse_matmul
from wsesparse._kernels import _runtime


def test_loaded_objects_counts_a_library_opened_through_ctypes(tmp_path):
    before = _runtime.loaded_objects()
    if before is None:
        pytest.skip("the loader's counts cannot be read here (not glibc)")
    copy = tmp_path / "copy_of_runtime.so"   # (a new path: a new object for the loader)
    shutil.copy(_runtime.__file__, copy)
    scanned = _blas_libs.controller()
    assert _blas_libs.controller() is scanned
    ctypes.CDLL(str(copy))
    after = _runtime.loaded_objects()
    assert after[0] == before[0] + 1 and after[1] == before[1]
    assert _blas_libs.controller() is not scanned   # (scanned again)


def test_blocks_and_limited_products_scan_once(monkeypatch):
    """Many blocks and BLAS-limited products: no scan after the first, and BLAS's own
    counts are back after each."""
    original = [d["num_threads"] for d in threadpoolctl.threadpool_info()
                if d["user_api"] == "blas"]
    scans = []
    real = threadpoolctl.ThreadpoolController

    class Counting(real):
        def __init__(self, *args, **kwargs):
            scans.append(None)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", Counting)
    monkeypatch.setattr(_blas_libs, "_cached", None)
    A = sp.random(64, 64, density=0.3, format="csr", random_state=0)
    X = np.ones((64, 4))
    for _ in range(5):
        for blas_threads in ("shared", 1, None):
            with wsesparse.accelerated(blas_threads=blas_threads):
                np.testing.assert_allclose(A @ X, A.toarray() @ X)
        Y = sparse_matmul(A, X, method="dense", n_threads=1)
        np.testing.assert_allclose(Y, A.toarray() @ X)
    assert len(scans) == 1
    assert _blas.holders() == 0
    assert [d["num_threads"] for d in real().info() if d["user_api"] == "blas"] == original
