"""wsesparse._hardware: the machine profile, the L3 probe and the core count."""

import os
from dataclasses import replace

import pytest

from wsesparse import _hardware
from wsesparse import _thresholds as th
from wsesparse._hardware import HardwareProfile
from wsesparse._kernels import _spmm

def test_detect_reads_this_build_and_machine():
    hw = _hardware.detect()
    assert hw.vector_bytes == _spmm.TILE_VECTOR_BYTES  # the build's, not assumed
    assert hw.kblock_tile_bytes == _spmm.KBLOCK_TILE_VECTORS * _spmm.TILE_VECTOR_BYTES
    assert hw.l2_bytes > 0 and hw.l3_bytes >= 0
    assert hw.cores == (os.cpu_count() or 1)
    assert hw.memory_bytes >= 0
    assert _hardware.current() is _hardware.current()
    assert replace(_hardware.current(), fast_l3=None) == replace(hw, fast_l3=None)

def test_profile_is_frozen():
    hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=0, vector_bytes=32)
    with pytest.raises(AttributeError):
        hw.l2_bytes = 0

def _fake_sysfs(root, caches):
    for i, (level, kind, size) in enumerate(caches):
        d = root / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    return str(root)

def test_cache_bytes_from_sysfs(tmp_path):
    base = _fake_sysfs(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"),
                                  (2, "Unified", "2048K"), (3, "Unified", "105M")])
    assert _hardware.cache_bytes(1, 0, base) == 48 << 10
    assert _hardware.cache_bytes(2, 0, base) == 2 << 20
    assert _hardware.cache_bytes(3, 0, base) == 105 << 20

def test_cache_bytes_falls_back(tmp_path, monkeypatch):
    base = _fake_sysfs(tmp_path, [(2, "Instruction", "512K")])  # no L2 data cache listed
    monkeypatch.setattr(os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert _hardware.cache_bytes(2, 12345, base) == 12345
    assert _hardware.cache_bytes(2, 777, str(tmp_path / "missing")) == 777

@pytest.mark.parametrize("forced, expected", [("0", False), ("1", True), ("", None)])
def test_fast_l3_can_be_forced(monkeypatch, forced, expected):
    """WSESPARSE_FAST_L3 pins the answer (no probe); anything else leaves it to the probe."""

    monkeypatch.setenv("WSESPARSE_FAST_L3", forced)
    hw = _hardware.detect()
    assert hw.fast_l3 is expected
    if expected is not None:
        monkeypatch.setattr(_hardware._runtime, "read_bandwidth", lambda *a: pytest.fail("probed"))
        size = min(hw.l3_bytes // 4, th.L3_PANEL_MAX_BYTES)
        assert _hardware.l3_panel_bytes(hw) == (size if expected and size > hw.l2_bytes else 0)

def test_fast_l3_probe(monkeypatch):
    """The probe: fast where L3 reads keep up with half of L2, and asked only once."""

    for far, fast in ((30.0, True), (10.0, False), (-1.0, False)):
        asked = []

        def fake(nbytes, repeats, far=far, asked=asked):
            asked.append(nbytes)
            return 50.0 if nbytes == 1 << 19 else far

        monkeypatch.setattr(_hardware._runtime, "read_bandwidth", fake)
        monkeypatch.setattr(_hardware, "_probed", {})
        hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=64 << 20, vector_bytes=32)
        assert _hardware.l3_panel_bytes(hw) == (th.L3_PANEL_MAX_BYTES if fast else 0)
        assert _hardware.l3_panel_bytes(hw) == (th.L3_PANEL_MAX_BYTES if fast else 0)  # cached
        assert sorted(asked) == [1 << 19, th.L3_PANEL_MAX_BYTES]

def test_l3_panel_is_a_quarter_of_l3_at_most_the_cap():
    for l3, expected in ((16 << 20, 4 << 20), (64 << 20, th.L3_PANEL_MAX_BYTES), (2 << 20, 0)):
        hw = HardwareProfile(l2_bytes=1 << 20, l3_bytes=l3, vector_bytes=64, fast_l3=True)
        assert _hardware.l3_panel_bytes(hw) == expected
    assert _hardware.l3_panel_bytes(HardwareProfile(1 << 20, 0, 32, fast_l3=True)) == 0

def test_available_cores_is_cached_briefly(monkeypatch):
    calls = []
    monkeypatch.setattr(_hardware, "_affinity", (-float("inf"), 1))
    monkeypatch.setattr(_hardware._runtime, "available_cores", lambda: calls.append(1) or 3)
    assert _hardware.available_cores() == 3 and _hardware.available_cores() == 3
    assert len(calls) == 1


def test_kernel_isa_names_the_build():
    """Each module says what it was compiled for, consistently with its tile width (a
    checkout built in place without -march=native was measured as if native for two
    sessions: the benchmarks now print it)."""
    from wsesparse._kernels import _spmm, _tlrmvm
    width = {"avx512f": 64, "avx2+fma": 32, "avx": 32, "x86-64 baseline (sse2)": 16,
             "baseline": 16}  # (GCC or clang; other compilers keep 32-byte tiles)
    assert _spmm.KERNEL_ISA in width and _tlrmvm.KERNEL_ISA in width
    assert _spmm.TILE_VECTOR_BYTES == width[_spmm.KERNEL_ISA]
