"""``wsesparse._kernels._runtime``: the read-bandwidth probe. (Its output pool:
tests/test_outputs.py; its OpenMP queries: tests/test_threads.py.)"""

import pytest

from wsesparse._kernels import _runtime


def test_read_bandwidth():
    assert _runtime.read_bandwidth(1 << 16, 2) > 0
    assert _runtime.read_bandwidth(0) == -1.0 and _runtime.read_bandwidth(63) == -1.0
    with pytest.raises(ValueError, match="nbytes must be nonnegative, got -1"):
        _runtime.read_bandwidth(-1)
    for repeats in (0, -3):
        with pytest.raises(ValueError, match=f"repeats must be at least 1, got {repeats}"):
            _runtime.read_bandwidth(1 << 16, repeats)
