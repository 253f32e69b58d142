import dataclasses

import pytest

from wsesparse import wafer


@pytest.fixture
def unit_machine():
    """A machine whose intake delivers exactly one message per cycle (hand-checkable)."""
    return dataclasses.replace(wafer.WSE2, name="unit", rows=2, cols=2, clock_hz=1e9,
                               weight_intake_bytes_per_s=4e9)
