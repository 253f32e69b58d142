"""Prepared operands kept for scipy matrices across products: ``accelerated(reuse=True)``.

A one-shot product of a scipy CSR/CSC matrix checks its structure and reads its arrays as
they are on every call, because they may have changed in place since the last one. Under
the promise of ``reuse=True`` (no matrix changes in place while the promise holds), the
second product of the same arrays builds a prepared :class:`~wsesparse.CSR` from them, and
later products use it with what it keeps: the structure checked once, int32 indices, the
one-byte value codes of large matrices with few distinct values, the transpose of a CSR
matrix for its ``.T`` (a CSC matrix on the same arrays, as in ``x @ A`` and ``A.T @ u``).

Entries are keyed by the memory of the three arrays (``indptr``, ``indices``, ``data``:
address, dtype, length, stride) and the shape, so the ``A.T`` objects scipy makes anew for
every ``x @ A``, with new views of the same arrays, find theirs; an entry goes when the
array owning the memory of one of its index arrays is freed. The prepared operand holds its
own copies of the index arrays: a broken promise gives stale values, never a read out of
bounds. Its values are the matrix's own (cast or coded copies where the products make
them). Measurements: docs/accelerate.md, "Reusing prepared operands".
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref

import numpy as np

from wsesparse.csr import CSR

# (the products before an entry is prepared: a matrix multiplied once, as most are outside
# solver loops, pays no copy and keeps no memory)
PREPARE_AT = 2
# (the entries kept, least recently used dropped first: a loop that gives a matrix new
# values each iteration, ``A.data = ...``, would otherwise keep one operand per iteration)
MAX_ENTRIES = 32

_INT32_MAX = int(np.iinfo(np.int32).max)

# (reentrant: a weak reference's callback may run, through the garbage collector, in a
# thread that holds it)
_lock = threading.RLock()
# key -> [weak references to indptr, indices, data; products seen; the prepared CSR; serial]
_entries: dict[tuple, list] = {}
_serials = itertools.count()


def _private_index(a: np.ndarray, narrowed: bool) -> np.ndarray:
    """``a`` as the prepared operand may hold it: copied where ``CSR`` would share it
    (int32, or int64 that is not narrowed), as it is where ``CSR`` makes a new array."""
    shared = a.dtype == np.int32 or (a.dtype == np.int64 and not narrowed)
    return a.copy() if shared else a


def _root(a: np.ndarray) -> np.ndarray:
    """The array at the end of ``a``'s chain of views (the one that owns the memory, or
    the last array before a buffer of another type)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _drop(key: tuple, serial: int) -> None:
    with _lock:
        entry = _entries.get(key)
        if entry is not None and entry[5] == serial:
            del _entries[key]


def operand(A) -> CSR | None:
    """The prepared operand to multiply in place of the scipy CSR/CSC matrix ``A``, or
    None for a one-shot product (the first ``PREPARE_AT - 1`` products of its arrays, and
    operands whose arrays are not plain ndarrays: the one-shot path words their errors).

    For a CSC ``A`` it is the transpose of the operand prepared from the same arrays read
    as CSR (the arrays of ``A.T`` for a CSR ``A``), computed once and kept.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.random(40, 30, density=0.2, format="csr", random_state=0)
    >>> operand(A) is None            # the first product: one-shot
    True
    >>> P = operand(A)                # the second one prepares
    >>> P is operand(A), P.T is operand(A.T)
    (True, True)
    >>> clear()
    """
    indptr, indices, data = arrays = A.indptr, A.indices, A.data
    if not (type(indptr) is type(indices) is type(data) is np.ndarray):
        return None
    csc = A.format == "csc"
    shape = A.shape[::-1] if csc else A.shape
    # (by memory, not by array object: scipy's A.T holds new views of A's arrays)
    key = tuple((a.__array_interface__["data"][0], a.dtype.str, a.shape, a.strides)
                for a in arrays) + (shape,)
    roots = [_root(a) for a in arrays]
    with _lock:
        entry = _entries.get(key)
        if entry is not None and not all(r() is a for r, a in zip(entry, roots)):
            entry = None  # (memory freed and reused before the callback ran: a new matrix)
        if entry is None:
            while len(_entries) >= MAX_ENTRIES:
                del _entries[next(iter(_entries))]
            serial = next(_serials)
            refs = [weakref.ref(a, lambda _, key=key, serial=serial: _drop(key, serial))
                    for a in roots]
            entry = _entries[key] = refs + [0, None, serial]
        else:
            _entries[key] = _entries.pop(key)  # (the most recently used last)
        entry[3] += 1
        P, seen = entry[4], entry[3]
    if P is None:
        if seen < PREPARE_AT:
            return None
        nnz = int(indptr[-1]) if len(indptr) else 0
        narrowed = max(shape[1], nnz) <= _INT32_MAX
        P = CSR.from_arrays(data, _private_index(indices, narrowed),
                            _private_index(indptr, narrowed), shape)
        with _lock:
            # (two threads may both have built one: the first published is kept)
            if _entries.get(key) is entry:
                if entry[4] is None:
                    entry[4] = P
                P = entry[4]
    return P.T if csc else P


def clear() -> None:
    """Drop every entry (when the last holder of ``reuse=True`` lets go)."""
    with _lock:
        _entries.clear()


def n_entries() -> int:
    """How many arrays are tracked (prepared or not): for tests and benchmarks."""
    return len(_entries)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
