"""The small operand shared by the ``sparse_matmul`` error tests."""

import pytest

from matmul_helpers import random_sparse


@pytest.fixture
def S(rng):
    return random_sparse(rng, 6, 4, 0.5)
