"""csr_spmv4's CUDA source run on the CPU under AddressSanitizer (no GPU needed).

The kernel's text is taken from wsesparse/gpu/kernels.cu as it ships (its section and the
value types and helpers before it), compiled as C++ with g++ against tests/gpu/
spmv4_emulation.cpp, which runs it one emulated lane at a time on random valid and corrupt
structures in exactly sized arrays: a read out of bounds is an ASan error, the checking
kernel must flag exactly the corrupt structures, and both kernels must give bitwise the sums
in the order tests/gpu_helpers.py replays. Skipped where g++ cannot build with
``-fsanitize=address`` (the CUDA itself is tested on a device, tests/gpu/test_device.py).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from wsesparse.gpu import _module

HARNESS = Path(__file__).with_name("spmv4_emulation.cpp")
_FLAGS = ["-std=c++17", "-O1", "-g", "-fsanitize=address,undefined",
          "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]


def kernel_text() -> str:
    """The part of kernels.cu the emulation compiles: everything up to ``w_vec`` (value types,
    FMA, add and shuffle helpers) and the "SpMV of long rows" section."""
    src = _module.source()
    head = re.search(r"\A.*?^template <typename T, int V> struct [^\n]*w_vec[^\n]*\n", src,
                     re.S | re.M)
    body = re.search(r"^// -+ SpMV of long rows\n.*?(?=^__device__ __forceinline__ float "
                     r"w_shfl\(float)", src, re.S | re.M)
    assert head and body, "kernels.cu's layout changed: update kernel_text()"
    return head.group(0) + body.group(0)


def _sanitizer_works(tmp_path) -> bool:
    if shutil.which("g++") is None:
        return False
    probe = tmp_path / "probe.cpp"
    probe.write_text("int main() { return 0; }\n")
    res = subprocess.run(["g++", *_FLAGS, str(probe), "-o", str(tmp_path / "probe")],
                         capture_output=True, timeout=120)
    return res.returncode == 0 and subprocess.run([str(tmp_path / "probe")]).returncode == 0


def test_kernel_text_holds_the_kernel_and_its_helpers():
    text = kernel_text()
    for name in ("csr_spmv4(", "w_load4(", "w_outside(", "w_fma(", "w_shfl_xor(", "w_vec"):
        assert name in text
    assert "seg_gemv" not in text and "csr_dense(" not in text


@pytest.mark.parametrize("unroll", [None, 1, 3])
def test_spmv4_reads_in_bounds_flags_faults_and_sums_in_order(tmp_path, unroll):
    if not _sanitizer_works(tmp_path):
        pytest.skip("g++ with -fsanitize=address not available")
    (tmp_path / "spmv4_kernel.inc").write_text(kernel_text())
    exe = tmp_path / "emu"
    depth = [] if unroll is None else [f"-DSPMV4_UNROLL={unroll}"]
    res = subprocess.run(["g++", *_FLAGS, *depth, f"-I{tmp_path}", str(HARNESS), "-o",
                          str(exe)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    run = subprocess.run([str(exe), "7", "1500"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
    cases, valid, flagged, fails = map(int, re.search(
        r"cases (\d+) valid (\d+) flagged (\d+) fails (\d+)", run.stdout).groups())
    assert fails == 0 and valid > 1000 and flagged > 1000 and cases > valid
