"""The optional peers of ``wsesparse bench`` made unimportable."""

import sys

import pytest

PEER_MODULES = ("sparse_dot_mkl", "graphblas", "torch")


@pytest.fixture
def no_peers(monkeypatch):
    """Make the optional peers unimportable (None in sys.modules raises ImportError).

    The environment variables the peer loader sets for MKL are restored afterwards.
    """
    for mod in PEER_MODULES:
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.setenv("MKL_THREADING_LAYER", "GNU")
    monkeypatch.setenv("MKL_RT", "")
