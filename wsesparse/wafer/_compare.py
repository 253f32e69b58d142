"""Value equality for the frozen dataclasses of the model that hold numpy arrays."""

from __future__ import annotations

import dataclasses

import numpy as np


def fields_equal(a, b):
    """``a == b`` field by field, arrays by shape, dtype and values (``np.array_equal``):
    a dataclass's generated ``__eq__`` compares tuples of its fields, and a tuple holding
    arrays raised "truth value of an array is ambiguous"."""
    if type(a) is not type(b):
        return NotImplemented
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif x != y:
            return False
    return True
