"""pytest configuration shared by the tests: hypothesis profiles, the ``rng`` fixture and the
checks several modules' tests share (an early MemoryError, Ctrl-C stopping a long run).

The tests mirror the package: one file per module (tests/test_<module>.py) or one folder
per subpackage or topic (tests/matmul/, tests/kernels/ for the compiled modules, tests/tlr/,
tests/wafer/, tests/bench/), bad input beside the good input of the same module.
tests/test_fuzz.py is the cross-module property suite.

Hypothesis profiles: ``default`` (CI, ~60 examples per property, no
deadline), ``dev`` (10 examples) and ``thorough`` (500). Select one with the
environment variable ``HYPOTHESIS_PROFILE``. Importable helpers are the
``tests/*_helpers.py`` modules (pyproject.toml puts tests/ on ``sys.path``):
``matmul_helpers`` (oracles and strategies for the sparse_matmul tests),
``kernel_helpers`` (operands of the compiled kernels' tests), ``tlr_helpers``. Test modules
are imported with ``--import-mode=importlib``, so two folders may hold files of one name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import wsesparse

REPO = Path(wsesparse.__file__).resolve().parent.parent

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


def _assert_early_memory_error(fn, *words):
    t0 = time.perf_counter()
    with pytest.raises(MemoryError) as info:
        fn()
    assert time.perf_counter() - t0 < 2.0
    msg = str(info.value)
    assert "needs" in msg and "bytes" in msg and "available" in msg, msg
    for w in words:
        assert w in msg, (w, msg)


@pytest.fixture
def assert_early_memory_error():
    """``assert_early_memory_error(fn, *words)``: ``fn()`` raises MemoryError within 2 s, its
    message saying what it needs and what is available, and containing every one of ``words``
    (an allocation that cannot fit fails before it is tried)."""
    return _assert_early_memory_error


def _assert_ctrl_c_stops(name: str, code: str):
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert proc.stdout.readline().strip() == "go"
        time.sleep(1.0)
        assert proc.poll() is None, "the run ended before the signal: make it longer"
        proc.send_signal(signal.SIGINT)
        t0 = time.perf_counter()
        _, err = proc.communicate(timeout=30)
        waited = time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"{name}: exited {waited:.2f} s after SIGINT")
    assert "KeyboardInterrupt" in err.strip().splitlines()[-1], err[-2000:]
    assert proc.returncode in (-signal.SIGINT, 1, 130)
    assert waited < 2.0, f"{name} took {waited:.1f} s to stop after SIGINT"


@pytest.fixture
def assert_ctrl_c_stops():
    """``assert_ctrl_c_stops(name, code)``: ``code`` runs in a fresh interpreter, prints "go"
    when its long part starts; SIGINT 1 s later makes it exit with KeyboardInterrupt within
    2 s."""
    return _assert_ctrl_c_stops
