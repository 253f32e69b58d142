"""``wafer.Machine``: the presets against the design table, and every bad field (checked
at construction, also through ``dataclasses.replace``)."""

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from wsesparse import wafer


SMALL = dataclasses.replace(wafer.WSE2, rows=4, cols=3)


def weights(dtype=np.float64):
    return sp.random(20, 12, density=0.3, format="csr", random_state=1, dtype=dtype)


def test_presets_match_design_table():
    assert (wafer.WSE2.rows, wafer.WSE2.cols) == (750, 994)
    assert wafer.WSE2.cores == 745_500
    assert wafer.WSE2.sram_bytes == 48 * 1024
    assert wafer.WSE2.fmac("float16") == 4 and wafer.WSE2.fmac("float32") == 1
    assert (wafer.WSE2.psum_copy_cycles + wafer.WSE2.psum_reset_cycles
            + wafer.WSE2.psum_add_cycles) == 4
    assert (wafer.WSE3.rows, wafer.WSE3.cols) == (762, 1172)
    # 150 GB/s of 4-byte messages at 850 MHz
    assert wafer.WSE2.intake_messages_per_cycle == pytest.approx(44.1176, rel=1e-4)


def test_machine_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        wafer.WSE2.rows = 3


@pytest.mark.parametrize("field,value,exc", [
    ("rows", 0, ValueError), ("cols", 2.5, TypeError), ("clock_hz", -1.0, ValueError),
    ("payload_bits", 30, ValueError), ("psum_buffer_depth", True, TypeError),
    ("cycles_per_hop", -1, ValueError), ("psum_on_wire", 1, TypeError),
])
def test_machine_rejects_bad_fields(field, value, exc):
    with pytest.raises(exc, match=field):
        dataclasses.replace(wafer.WSE2, **{field: value})


@pytest.mark.parametrize("field,value,exc", [
    ("cols", 0, ValueError), ("sram_bytes", 0, ValueError), ("sram_bytes", -1, ValueError),
    ("clock_hz", 0.0, ValueError), ("clock_hz", float("nan"), ValueError),
    ("clock_hz", float("inf"), ValueError), ("clock_hz", "1e9", TypeError),
    ("clock_hz", None, TypeError), ("weight_intake_bytes_per_s", 0, ValueError),
    ("weight_intake_bytes_per_s", -1e9, ValueError), ("fmac_fp16", 0, ValueError),
    ("fmac_fp32", 1.0, TypeError), ("payload_bits", 0, ValueError),
    ("psum_add_cycles", -1, ValueError), ("rows", 3.0, TypeError), ("rows", None, TypeError),
    ("name", None, TypeError), ("psum_on_wire", None, TypeError),
])
def test_machine_rejects_more_bad_fields(field, value, exc):
    with pytest.raises(exc, match=f"Machine.{field}"):
        dataclasses.replace(wafer.WSE2, **{field: value})


def test_machine_unknown_field_and_numpy_ints():
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        dataclasses.replace(wafer.WSE2, foo=1)
    m = dataclasses.replace(wafer.WSE2, rows=np.int64(4), cols=np.int32(3))
    assert wafer.estimate_gemm(weights(), 8, machine=m).cycles == \
        wafer.estimate_gemm(weights(), 8, machine=SMALL).cycles
