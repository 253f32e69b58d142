"""benchmarks/gpu_spmv.py and gpu_spmv_vec.py without a GPU: the variant kernels they
compile (a stand-in cupy records the RawModule asked for; nvcc where installed) and their
swap into wsesparse.gpu; the timing itself needs a device."""

import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

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


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed")
def test_vector_load_prototype_compiles_with_nvcc(tmp_path):
    # benchmarks/gpu_spmv_vec.py's kernel, every instantiation it asks NVRTC for, for sm_90
    from benchmarks import gpu_spmv_vec
    lines = [gpu_spmv_vec.SOURCE]
    for expr in gpu_spmv_vec.names():
        t = expr.partition("<")[2].split(",")[0]
        lines.append(f"template __global__ void {expr}(const int*, const int*, const {t}*, "
                     f"const {t}*, {t}*, int);")
    src = tmp_path / "vec.cu"
    src.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-o",
                          str(tmp_path / "vec.cubin"), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(gpu_spmv_vec.names()) == 2 * len(gpu_spmv_vec.UNROLLS)
