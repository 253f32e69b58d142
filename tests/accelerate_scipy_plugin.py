"""pytest plugin for ``test_accelerate.py``: runs a pytest session (scipy's own
sparse tests) with ``wsesparse.accelerate`` switched on from start to end.

Load it with ``-p accelerate_scipy_plugin`` (this directory on ``PYTHONPATH``).
At the end it writes to the file named by ``WSESPARSE_ACCELERATE_REPORT`` a
JSON object: ``calls`` (products the hooks sent to ``sparse_matmul``),
``routed_tests`` (tests that sent at least one), ``enabled_at_end`` (the switch
was still on after the last test) and ``restored`` (off again after disable).
"""

from __future__ import annotations

import json
import os
import threading

import pytest

import wsesparse.accelerate as acc

_lock = threading.Lock()  # products may run in threads
_calls = 0
_routed: list[str] = []
_original = None


def pytest_configure(config):
    global _original
    _original = acc.sparse_matmul

    def counting(*args, **kwargs):
        global _calls
        with _lock:
            _calls += 1
        return _original(*args, **kwargs)

    acc.sparse_matmul = counting  # the hooks look the name up on every call
    acc.enable()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = _calls
    yield
    if _calls > before:
        _routed.append(item.nodeid)


def pytest_unconfigure(config):
    enabled = acc.is_enabled()
    acc.disable()
    acc.sparse_matmul = _original
    report = {"calls": _calls, "routed_tests": len(_routed), "enabled_at_end": enabled,
              "restored": not acc.is_enabled()}
    with open(os.environ["WSESPARSE_ACCELERATE_REPORT"], "w") as f:
        json.dump(report, f)
