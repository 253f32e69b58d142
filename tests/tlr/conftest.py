"""A small exactly-rank-6 matrix and its TLR form, shared by the TLR tests."""

import numpy as np
import pytest

from wsesparse import TLRMatrix


@pytest.fixture(scope="module")
def A():
    rng = np.random.default_rng(0)
    return rng.standard_normal((40, 6)) @ rng.standard_normal((6, 30))


@pytest.fixture(scope="module")
def T(A):
    return TLRMatrix.from_dense(A, nb=16, tol=1e-6)
