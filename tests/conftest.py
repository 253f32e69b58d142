"""pytest configuration shared by the tests: hypothesis profiles, the ``rng`` fixture.

Hypothesis profiles: ``default`` (CI, ~60 examples per property, no
deadline), ``dev`` (10 examples) and ``thorough`` (500). Select one with the
environment variable ``HYPOTHESIS_PROFILE``. Oracles and strategies for the
sparse_matmul tests live in ``matmul_helpers.py`` (not here: a second
``conftest`` module in a subdirectory would shadow this one on import).
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", parent=settings.get_profile("default"), max_examples=10)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config):
    # np.matrix operands are part of what sparse_matmul must accept.
    config.addinivalue_line(
        "filterwarnings", "ignore:the matrix subclass:PendingDeprecationWarning")


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's node id (reproducible, distinct per test)."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
