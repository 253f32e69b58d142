"""benchmarks/gpu_spmv.py and gpu_spmv_vec.py without a GPU: the variant kernels
gpu_spmv.py compiles (a stand-in cupy records the RawModule asked for) and their swap into
wsesparse.gpu, and gpu_spmv_vec.py's launches replayed; the timing itself needs a device."""

import sys
import types

import numpy as np
import pytest
import scipy.sparse as sp

from benchmarks import gpu_spmv
from wsesparse.gpu import _module


class _Module:
    made = []

    def __init__(self, code, options, name_expressions):
        self.code, self.options, self.names = code, options, name_expressions
        _Module.made.append(self)

    def get_function(self, name):
        assert name in self.names
        return (name, self.options)


def test_variant_kernels_compile_csr_dense_at_the_depth(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=_Module))
    _Module.made.clear()
    shipped = []
    monkeypatch.setattr(_module, "kernel", lambda *a, **k: shipped.append(a) or "shipped")
    kernel = gpu_spmv._variant_kernels(8, source="// another kernels.cu")
    args = (np.dtype(np.int32), 1, True)
    name, options = kernel("csr_dense", np.float32, *args)
    assert name == _module.name("csr_dense", np.float32, *args)
    assert "-DCSR_UNROLL=8" in options and options[:-1] == _module._OPTIONS
    assert kernel("csr_dense", np.float32, *args) == (name, options)   # kept
    kernel("csr_dense", np.float32, np.dtype(np.int64), 4, False)      # same module
    assert len(_Module.made) == 1 and _Module.made[0].code == "// another kernels.cu"
    assert kernel("csr_check", np.int32) == "shipped" and shipped == [("csr_check", np.int32)]


def test_the_shipped_depth_is_the_source_default():
    depth = gpu_spmv._shipped_depth()
    assert depth >= 1 and f"#define CSR_UNROLL {depth}\n" in _module.source()


def test_kernels_are_swapped_in_and_restored_even_on_an_error():
    shipped = _module.kernel
    with gpu_spmv._kernels_from(None):
        assert _module.kernel is shipped
    with pytest.raises(RuntimeError), gpu_spmv._kernels_from(len):
        assert _module.kernel is len
        raise RuntimeError("a failed launch")
    assert _module.kernel is shipped


def test_long_row_cases_agree_and_flag_a_bad_index(monkeypatch, rng):
    """benchmarks/gpu_spmv_vec.py's raw launches, replayed on the stand-in cupy: each
    variant computes S @ x, and the checking ones flag the bad index it plants."""
    import gpu_helpers
    from benchmarks import gpu_spmv_vec
    from wsesparse.gpu import DeviceCSR, plan
    env = gpu_helpers.install(monkeypatch)
    env.cupy.abs = gpu_helpers._wrap(np.abs)
    W = sp.random(40, 300, density=0.3, format="csr", random_state=rng)
    assert W.nnz >= plan.SPMV4_MIN_MEAN * 40
    S = DeviceCSR(W)
    x = rng.standard_normal(300)
    ok, wrong = gpu_spmv_vec.checked_cases(S, gpu_helpers.dev(x), "float64", 1e-10)
    assert wrong == [] and set(ok) == {"dense", "denseC", "spmv4", "spmv4C"}
    flagged = [n for n, _, _ in env.launches if n.endswith("true>")]
    assert flagged.count("csr_spmv4<double, int, true>") == 2        # good, then bad indices
    y = gpu_helpers.dev(np.zeros(40))
    cases = gpu_spmv_vec.kernel_cases(S, gpu_helpers.dev(x), y, env.cupy.zeros(1, np.int32),
                                      "float64")
    for f in cases.values():
        y[...] = 0
        f(S.indices)
        np.testing.assert_allclose(np.asarray(y), W @ x, rtol=1e-12, atol=1e-12)
