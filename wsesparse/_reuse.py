"""Prepared operands kept for scipy matrices across products: ``accelerated(reuse=True)``.

A one-shot product of a scipy CSR/CSC matrix checks its structure and reads its arrays as
they are on every call, because they may have changed in place since the last one. Under
the promise of ``reuse=True`` (no matrix changes in place while the promise holds), the
second product of the same arrays builds a prepared :class:`~wsesparse.CSR` from them, and
later products use it with what it keeps: the structure checked once, int32 indices, the
one-byte value codes of large matrices with few distinct values, the transpose of a CSR
matrix for its ``.T`` (a CSC matrix on the same arrays, as in ``x @ A`` and ``A.T @ u``).

Entries are keyed by the holder of the promise (a ``Thread``, or every thread for
``enable(reuse=True)``), the memory of the three arrays (``indptr``, ``indices``, ``data``:
address, dtype, length, stride) and the shape, so the ``A.T`` objects scipy makes anew for
every ``x @ A``, with new views of the same arrays, find theirs. The prepared operand is a
copy (its own checked arrays): a matrix changed in place despite the promise, even by
scipy's own in-place sorting (``abs(A)``, ``A.max()``, ``spsolve`` sort a matrix with
unsorted indices), gives the products of its values when it was prepared, never a read out
of bounds or a mix. An entry goes when the array owning the memory of one of its arrays is
freed, when a matrix on the same index arrays with other values takes its place, past
``MAX_ENTRIES`` (least recently used first), and when its holder lets go of the promise.
Measurements: docs/accelerate.md, "Reusing prepared operands".
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref

import numpy as np

from wsesparse._checks import fits_in_memory
from wsesparse.csr import CSR

# (the products before an entry is prepared: a matrix multiplied once, as most are outside
# solver loops, pays no copy and keeps no memory)
PREPARE_AT = 2
# (the entries kept, least recently used dropped first)
MAX_ENTRIES = 32
# Matrices of fewer stored entries stay one-shot: the bookkeeping (14 us a product alone on
# the 2-core Zen 3 VM, about 100 us in a solver loop) costs about what preparing saves
# there (a 4096^2 matrix of 838,861 random entries: one-shot SpMV 557 us, prepared 513 us;
# docs/accelerate.md).
MIN_NNZ = 2 ** 19
# Consecutive entries of each array compared with the prepared operand's at every product,
# from a position that moves on from product to product: a matrix changed in place (despite
# the promise, or arrays a freed matrix was built on, refilled for a new one) is prepared
# again where the sample meets the change.
SAMPLE = 8
# Sample windows compared right after the copy is made (about 0.5 ms).
CHECK_WINDOWS = 64
_STEP = 0x9E3779B97F4A7C15   # (the positions move by the golden ratio of 2**64)
_MASK = 2 ** 64 - 1

_INT32_MAX = int(np.iinfo(np.int32).max)
_EVERY_THREAD = "every thread"   # the holder that enable(reuse=True) stands for

# (reentrant: a weak reference's callback may run, through the garbage collector, in a
# thread that holds it)
_lock = threading.RLock()
# Who holds the promise now (set by wsesparse.accelerate, under its lock, then this one's).
_everywhere = False
_threads: frozenset[threading.Thread] = frozenset()
# (holder, arrays' memory, shape) -> _Entry, the most recently used last
_entries: dict[tuple, "_Entry"] = {}
# id(matrix) -> (weak references to the matrix and its three arrays, its CSR shape, its key):
# the keys of recent products, the oldest dropped first
_recent: dict[int, tuple] = {}
_serials = itertools.count()


class _Entry:
    __slots__ = ("refs", "seen", "operand", "serial", "structure")

    def __init__(self, refs, serial, structure):
        self.refs, self.seen, self.operand = refs, 0, None
        self.serial, self.structure = serial, structure


def set_holders(everywhere: bool, threads: frozenset[threading.Thread]) -> None:
    """Who holds the promise from now on: every thread (``enable(reuse=True)``) and the
    threads inside a block with ``reuse=True``. The entries of holders that let go are
    dropped here, under the lock that products take to add one, so none outlives its
    holder (a product in flight when its holder let go adds nothing)."""
    global _everywhere, _threads
    with _lock:
        _everywhere, _threads = everywhere, threads
        for key in [k for k in _entries if not _holds(k[0])]:
            del _entries[key]
        for k in [k for k, recent in _recent.items() if not _holds(recent[5][0])]:
            del _recent[k]


def _holds(holder) -> bool:
    return _everywhere if holder == _EVERY_THREAD else holder in _threads


def _root(a: np.ndarray) -> np.ndarray:
    """The array at the end of ``a``'s chain of views (the one that owns the memory, or
    the last array before a buffer of another type)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _memory(a: np.ndarray) -> tuple:
    return (a.__array_interface__["data"][0], a.dtype.str, a.shape, a.strides)


def _drop(key: tuple, serial: int) -> None:
    with _lock:
        entry = _entries.get(key)
        if entry is not None and entry.serial == serial:
            del _entries[key]


def _own_index(a: np.ndarray, narrowed: bool) -> np.ndarray:
    """``a`` as the prepared operand may hold it: copied where ``CSR`` would share it
    (int32, or int64 that is not narrowed), as it is where ``CSR`` makes a new array."""
    shared = a.dtype == np.int32 or (a.dtype == np.int64 and not narrowed)
    return a.copy() if shared else a


def _prepare(indptr, indices, data, shape) -> CSR | None:
    """A ``CSR`` of its own arrays, or None where the one-shot product should run instead:
    a corrupt structure (its error is the one-shot product's: a float ``indptr`` ending in
    inf raised OverflowError here), too little free memory, or arrays found changed after
    they were copied (``CHECK_WINDOWS`` sample windows: scipy sorting the matrix in another
    thread paired sorted indices with unsorted values, a review)."""
    if not (indptr.ndim == indices.ndim == data.ndim == 1 and len(indptr)
            and indptr.dtype.kind in "iu" and indices.dtype.kind in "iu"):
        return None
    if not fits_in_memory(indptr.nbytes + indices.nbytes + data.nbytes):
        return None
    narrowed = max(shape[1], int(indptr[-1])) <= _INT32_MAX
    try:
        P = CSR.from_arrays(data.copy(), _own_index(indices, narrowed),
                            _own_index(indptr, narrowed), shape)
    except (TypeError, ValueError, OverflowError):
        return None
    # (a sample, not the whole: comparing whole arrays took 50-100 ms for the 4.2M-entry
    # Laplacian of the workflows, a third of what eigsh's products gain from the operand)
    if not all(_unchanged(P, indptr, indices, data, -k) for k in range(1, CHECK_WINDOWS + 1)):
        return None
    return P


def operand(A) -> CSR | None:
    """The prepared operand to multiply in place of the scipy CSR/CSC matrix ``A``, or
    None for a one-shot product: where the calling thread holds no promise, for matrices of
    fewer than ``MIN_NNZ`` stored entries, for the first ``PREPARE_AT - 1`` products of its
    arrays, and for arrays that are not plain ndarrays or that ``CSR`` refuses (the
    one-shot product words their errors).

    For a CSC ``A`` it is the transpose of the operand prepared from the same arrays read
    as CSR (the arrays of ``A.T`` for a CSR ``A``), computed once and kept.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.random(1000, 1000, density=MIN_NNZ / 1e6, format="csr", random_state=0)
    >>> set_holders(True, frozenset())
    >>> operand(A) is None            # the first product: one-shot
    True
    >>> P = operand(A)                # the second one prepares
    >>> P is operand(A), P.T is operand(A.T)
    (True, True)
    >>> set_holders(False, frozenset()); n_entries()
    0
    """
    # (who holds is read here without the lock, for the products of threads that made no
    # promise, and again under it below)
    holder = _EVERY_THREAD if _everywhere else threading.current_thread()
    if holder is not _EVERY_THREAD and holder not in _threads:
        return None
    indptr, indices, data = arrays = A.indptr, A.indices, A.data
    if not (type(indptr) is type(indices) is type(data) is np.ndarray) \
            or len(indices) < MIN_NNZ:
        return None
    csc = A.format == "csc"
    shape = A.shape[::-1] if csc else A.shape
    # The same matrix object with the same array objects as a recent product has that
    # product's key (checked again below): the arrays' addresses and roots are not looked
    # up again (inside cg's loop, where the caches are cold, operand() took about 200 us).
    recent = _recent.get(id(A))
    if (recent is not None and recent[0]() is A and recent[1]() is indptr
            and recent[2]() is indices and recent[3]() is data and recent[4] == shape
            and recent[5][0] is holder):
        key, roots = recent[5], None
    else:
        # (by memory, not by array object: scipy's A.T holds new views of A's arrays)
        key = (holder,) + tuple(_memory(a) for a in arrays) + (shape,)
        roots = [_root(a) for a in arrays]
    with _lock:
        if not _holds(holder):
            return None
        entry = _entries.get(key)
        if entry is not None and roots is not None \
                and not all(r() is a for r, a in zip(entry.refs, roots)):
            entry = None  # (memory freed and reused before the callback ran: a new matrix)
        if entry is None:
            if roots is None:
                roots = [_root(a) for a in arrays]
            entry = _new_entry(key, roots, key[:3] + key[4:])
        else:
            _entries[key] = _entries.pop(key)  # (the most recently used last)
        entry.seen += 1
        P, seen = entry.operand, entry.seen
        if recent is None or recent[5] is not key:
            while len(_recent) >= MAX_ENTRIES:
                del _recent[next(iter(_recent))]
            _recent[id(A)] = (weakref.ref(A), *(weakref.ref(a) for a in arrays), shape, key)
    if P is not None and not _unchanged(P, indptr, indices, data, seen):
        with _lock:
            if _entries.get(key) is entry:
                del _entries[key]
                _new_entry(key, roots or [_root(a) for a in arrays], entry.structure).seen = 1
        return None
    if P is None:
        if seen < PREPARE_AT:
            return None
        P = _prepare(indptr, indices, data, shape)
        if P is None:
            return None
        with _lock:
            # (two threads of one holder may both have built one: the first is kept; an
            # entry dropped meanwhile, its holder gone, gets none)
            if _entries.get(key) is entry:
                if entry.operand is None:
                    entry.operand = P
                P = entry.operand
    return P.T if csc else P


def _unchanged(P: CSR, indptr, indices, data, seen: int) -> bool:
    """Whether ``SAMPLE`` consecutive entries of each array (a window that wraps around the
    end), from a position that moves with ``seen``, are still those the prepared ``P`` was
    made of (values bit for bit, so NaN equal to NaN).

    (Consecutive entries: one or two cache lines an array. Windows that wrap cover every
    entry alike: windows that stopped at the end reached the last entry never, the first
    only from one start in n, a review.)"""
    nnz = P.nnz
    # (the start moves by the golden ratio of 2**64 each product: the samples of successive
    # products are spread over the arrays and cover them in turn)
    golden = (seen * _STEP) & _MASK
    if not _same(*_windows(indptr, P.indptr, golden % len(indptr), len(indptr))):
        return False
    if nnz == 0:
        return True
    start = golden % nnz
    return (_same(*_windows(indices, P.indices, start, nnz))
            and _same(*_windows(data, P.data, start, nnz)))


def _windows(a: np.ndarray, b: np.ndarray, start: int, n: int) -> tuple:
    """``SAMPLE`` entries of ``a`` and of ``b`` from ``start``, wrapping at ``n``."""
    if start + SAMPLE <= n:   # (slices: cheaper than take, which only the wrap needs)
        return a[start:start + SAMPLE], b[start:start + SAMPLE]
    window = np.arange(start, start + SAMPLE)
    return a[:n].take(window, mode="wrap"), b[:n].take(window, mode="wrap")


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the sample windows ``a`` and ``b`` hold the same values, NaN equal to NaN
    (bit for bit; indices narrowed to int32 in the copy, values of another byte order made
    native compare by value)."""
    if a.dtype == b.dtype:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _new_entry(key: tuple, roots: list, structure: tuple) -> _Entry:
    """A new entry for ``key`` (under the lock): an older one on the same index arrays
    (a matrix given new values, ``J = csr_matrix((values, J.indices, J.indptr))`` in a
    Newton loop) and the least recently used past ``MAX_ENTRIES`` make way."""
    for k in [k for k, e in _entries.items() if e.structure == structure]:
        del _entries[k]
    while len(_entries) >= MAX_ENTRIES:
        del _entries[next(iter(_entries))]
    serial = next(_serials)
    refs = [weakref.ref(a, lambda _, key=key, serial=serial: _drop(key, serial))
            for a in roots]
    entry = _entries[key] = _Entry(refs, serial, structure)
    return entry


def n_entries() -> int:
    """How many arrays are tracked (prepared or not): for tests and benchmarks."""
    return len(_entries)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
