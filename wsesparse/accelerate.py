"""Opt-in acceleration of scipy's own CSR/CSC products, for code you do not own.

``with wsesparse.accelerated(): ...`` (or :func:`enable` / :func:`disable`)
routes the products of scipy CSR and CSC matrices and arrays with dense
operands through :func:`wsesparse.sparse_matmul`, wherever they come from:
``A @ x``, ``A.dot(x)``, ``A * x`` for ``spmatrix``, ``x @ A``, and the
LinearOperators scipy builds from the matrices (``aslinearoperator(A)``, and
so ``cg``, ``minres``, ``lsqr``, ``eigsh``, ... on a scipy matrix).

How: scipy validates every such product (scalars, shapes, sparse operands,
np.matrix containers, ``(n, 1)`` columns) in ``_spbase._matmul_dispatch`` and
then hands the dense operand, an ndarray of the right shape, to one of two
per-format methods, ``_matmul_vector`` (1-D) and ``_matmul_multivector``
(2-D), which return the result. While switched on, those two methods of the
CSR and CSC base classes (``scipy.sparse._csr._csr_base``, ``_csc._csc_base``)
are replaced by hooks that call ``sparse_matmul`` when the kernels cover the
product, and scipy's original method otherwise. ``x @ A`` reaches them too:
scipy computes it as ``(A.T @ x.T).T``, and the transpose of a CSR matrix is
a CSC one (and vice versa).

Routed: a 2-D CSR/CSC matrix or array (or subclass) times an ``ndarray`` whose
product has a kernel dtype (float32, float64, complex64, complex128) by
scipy's upcast rule: ``int64 @ float64`` is routed (float64), and so is
``int8 @ float16`` (float32: scipy has no float16), ``int64 @ int64`` is
not. Left to scipy: products of every other result dtype (bool, integers,
long double), operands that reach the methods as anything but an exact
``ndarray`` (scipy turns lists, np.matrix and most others into ndarrays
first; object arrays it refuses itself), 1-D sparse arrays, sparse @ sparse,
scalar products, other formats
with a product of their own (COO, BSR, DIA, DOK), and everything that is not a
product. (LIL has none: scipy converts it to CSR and calls the CSR product,
which is then routed.)

The switch is process-wide (scipy's classes are shared by all threads) and
reference-counted: each ``with accelerated():`` block, in any thread, holds it
on until it exits, :func:`enable` holds it on until :func:`disable`; when the
last holder lets go, scipy's class attributes are put back exactly as they
were (absent ones removed again). Guide and measured overhead: docs/accelerate.md.

``accelerated(reuse=True)`` adds a promise that no matrix changes in place inside the
block: the second product of a matrix then prepares a ``wsesparse.CSR`` from it, which
later products (and those of ``A.T``) reuse (``wsesparse._reuse``; docs/accelerate.md,
"Reusing prepared operands").

BLAS threads: OpenBLAS's idle threads busy-wait (about 0.1 s after each call,
with no yield) on the cores the next product needs, so in a solver loop (a
product between ``np.dot``/``norm`` calls) they hold a core against the
product's threads. By default the switch runs OpenBLAS's parallel calls on the
kernels' own OpenMP threads while it is on (``blas_threads="shared"``), or,
where a BLAS library loaded in the process cannot do that, limits BLAS to one
thread (``blas_threads=1``; ``None`` leaves BLAS alone). Measurements:
docs/accelerate.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from typing import Iterator

import numpy as np

from wsesparse import _blas, _blas_share, _reuse
from wsesparse._checks import KERNEL_DTYPES, check_int, result_dtype
from wsesparse._interrupts import deferred, finish
from wsesparse._outputs import release_cached_outputs
from wsesparse.matmul import sparse_matmul

__all__ = ["accelerated", "enable", "disable", "is_enabled"]

# (The scipy classes and method names are looked up when the switch is first
# turned on, so that importing wsesparse does not touch scipy's private modules.)
_METHOD_NAMES = (("_matmul_vector", "_matmul_multivector"),  # scipy >= 1.12
                 ("_mul_vector", "_mul_multivector"))        # scipy 1.11

_lock = threading.Lock()
_switched_on = False  # enable() without disable()
# While on: (class, name, the class's own attribute or _ABSENT) for each hook.
_saved: list[tuple[type, str, object]] | None = None
_ABSENT = object()
# The BLAS thread limit (wsesparse._blas) or the shared team (wsesparse._blas_share): held
# by blocks and enable() that asked for one; the first holder's count applies until the
# last holder lets go.
_switched_on_blas = None  # what enable() holds: "shared", "limit" or None
_switched_on_reuse = False  # enable(reuse=True)
# The open blocks: a key per block -> (its thread's ident, what its blas_threads holds, its
# thread's Thread object where it has reuse=True, else None); a forked child drops those of
# the parent's other threads (below). (Thread objects for reuse, not idents: an ident is
# recycled, and a new thread got a dead one's open block's promise, a review.)
_blocks: dict[object, tuple[int, str | None, threading.Thread | None]] = {}


def _targets() -> list[tuple[type, str]]:
    """``(class, method name)`` of the methods the hooks replace."""
    from scipy.sparse._compressed import _cs_matrix
    from scipy.sparse._csc import _csc_base
    from scipy.sparse._csr import _csr_base

    for names in _METHOD_NAMES:
        if all(callable(getattr(_cs_matrix, n, None)) for n in names):
            return [(cls, n) for cls in (_csr_base, _csc_base) for n in names]
    import scipy
    raise RuntimeError(f"wsesparse.accelerated does not know scipy {scipy.__version__}: "
                       "its CSR/CSC classes have no _matmul_vector/_matmul_multivector")


_CORRUPT = re.compile(r"^A( has a corrupt compressed structure)(?: \([^)]*\))?:")


def _hook_message(msg: str) -> str:
    """``sparse_matmul``'s message about a corrupt operand, worded for the hook: for
    ``x @ A`` scipy hands the hook ``A.T``, a matrix of the other format that the user
    never saw, so the message gives neither a shape nor a format nor rows or columns.

    Examples
    --------
    >>> msg = _hook_message("A has a corrupt compressed structure (40x30, CSC): a stored "
    ...                     "row index is negative or not below 40")
    >>> for part in msg.split(": "):
    ...     print(part)
    a sparse operand has a corrupt compressed structure
    a stored index is negative or not below 40
    """
    if not _CORRUPT.match(msg):
        return msg
    msg = _CORRUPT.sub(r"a sparse operand\1:", msg)
    msg = re.sub(r" for shape \([^)]*\)(?: \(CSC\))?", "", msg)
    return re.sub(r"a stored (row|column) index", "a stored index", msg)


def _hook(original):
    """The method replacing ``original`` (``_matmul_vector`` or ``_matmul_multivector``).

    scipy calls it with ``other`` an ndarray of the right shape: ``(N,)`` or
    ``(N, k)`` for a sparse ``(M, N)``. Products the kernels cover go to
    ``sparse_matmul``, which returns what scipy's method would (a new
    C-contiguous ``(M,)`` or ``(M, k)`` ndarray of scipy's upcast dtype); all
    others to ``original``.
    """
    @functools.wraps(original)
    def method(self, other):
        if type(other) is np.ndarray and self.ndim == 2:
            dtype = other.dtype
            try:
                # (the commonest call, an array of the matrix's own kernel dtype, without
                # the promotion rule: docs/accelerate.md, "Overhead")
                routed = ((dtype is self.data.dtype and dtype.char in "fdFD")
                          or result_dtype(self.dtype, dtype) in KERNEL_DTYPES)
            except TypeError:  # no sparse dtype holds it: scipy words the error
                routed = False
            if routed:
                try:
                    operand = _reuse.operand(self)   # (None unless this thread promised)
                    return sparse_matmul(self if operand is None else operand, other)
                except TypeError as exc:
                    # Only a corrupt structure gets here (index arrays of the wrong type,
                    # or None): scipy raises ValueError for those, so the switch does too.
                    raise ValueError(_hook_message(str(exc))) from exc
                except ValueError as exc:
                    msg = _hook_message(str(exc))
                    if msg == str(exc):
                        raise
                    raise ValueError(msg) from exc
                except MemoryError:
                    # (sparse_matmul refuses a result larger than the free memory, which
                    # its kernels write whole; scipy's zeroed result may touch few pages)
                    pass
        return original(self, other)

    method.__module__ = __name__  # (wraps copied scipy's; __wrapped__ is the original)
    return method


def _install() -> None:
    global _saved
    saved = []
    for cls, name in _targets():
        saved.append((cls, name, cls.__dict__.get(name, _ABSENT)))
    # (recorded before the first hook goes in, and removed below whatever is left: a child
    # forked while another thread was half way through either finds what to undo)
    _saved = saved
    try:
        for cls, name, _ in saved:
            setattr(cls, name, _hook(getattr(cls, name)))
    except BaseException:
        _uninstall()
        raise


def _uninstall() -> None:
    global _saved
    for cls, name, own in reversed(_saved):
        if own is not _ABSENT:
            setattr(cls, name, own)
        elif name in cls.__dict__:
            delattr(cls, name)
    _saved = None


def _update() -> None:
    """Install or remove the hooks, and set who reuses prepared operands, to match the
    holders (under ``_lock``)."""
    _set_reuse_holders()
    on = bool(_blocks) or _switched_on
    if on and _saved is None:
        _install()
    elif not on and _saved is not None:
        _uninstall()
        # The pool's freed results (up to two of 1 GiB each) stay with the block: plain
        # scipy holds nothing after its results are deleted (a review found 840 MiB kept).
        release_cached_outputs()


def _set_reuse_holders() -> None:
    """Who reuses prepared operands, from the holders (under ``_lock``); the entries of
    holders that let go are dropped: the promise ends with its holder."""
    _reuse.set_holders(_switched_on and _switched_on_reuse,
                       frozenset(thread for _, _, thread in _blocks.values()
                                 if thread is not None))


def _check_blas_threads(blas_threads):
    if isinstance(blas_threads, str):
        if blas_threads != "shared":
            raise ValueError(f"blas_threads must be 'shared', a positive int or None, "
                             f"got {blas_threads!r}")
        return blas_threads
    # (the BLAS libraries take a C int: 2**32 + 1 became 1 thread, 2**31 was ignored)
    return check_int(blas_threads, "blas_threads", minimum=1, maximum=2 ** 31 - 1,
                     allow_none=True)


def _check_reuse(reuse) -> bool:
    if not isinstance(reuse, (bool, np.bool_)):
        raise TypeError(f"reuse must be True or False, got {reuse!r}")
    return bool(reuse)


def _hold_blas(n: int | str | None) -> str | None:
    """Take what ``blas_threads=n`` asks for: "shared" (``wsesparse._blas_share``; where
    a BLAS library cannot share, a limit of one thread instead), "limit" (a hold on the
    process's BLAS limit of ``n`` threads, ``wsesparse._blas``) or None (nothing)."""
    if n is None:
        return None
    if n == "shared":
        if _blas_share.share():
            return "shared"
        n = 1
    _blas.hold(n)
    return "limit"


def _release_blas(kind: str | None) -> None:
    """Let go of what :func:`_hold_blas` took."""
    if kind == "shared":
        _blas_share.unshare()
    elif kind == "limit":
        _blas.release()


def enable(blas_threads: int | str | None = "shared", reuse: bool = False) -> None:
    """Route scipy's CSR/CSC products through the kernels until :func:`disable`.

    Idempotent (a switch, not a counter); ``accelerated()`` blocks open
    meanwhile keep it on after ``disable()`` until they exit.

    Parameters
    ----------
    blas_threads : "shared", int or None, default "shared"
        What the process's BLAS libraries do until :func:`disable` (see
        :func:`accelerated`). A second ``enable()`` keeps the first one's setting.
    reuse : bool, default False
        Products in every thread reuse prepared operands until :func:`disable`, under
        the promise that no matrix changes in place meanwhile (see :func:`accelerated`).
        A second ``enable()`` keeps the first one's setting.

    Examples
    --------
    >>> from wsesparse import accelerate
    >>> accelerate.enable(); accelerate.is_enabled()
    True
    >>> accelerate.disable(); accelerate.is_enabled()
    False
    """
    global _switched_on, _switched_on_blas, _switched_on_reuse
    blas_threads = _check_blas_threads(blas_threads)
    reuse = _check_reuse(reuse)
    with deferred(), _lock:   # (see wsesparse._interrupts)
        if _switched_on:
            _update()
            return
        _switched_on_blas = _hold_blas(blas_threads)
        _switched_on, _switched_on_reuse = True, reuse
        try:
            _update()
        except BaseException:
            # Undone as accelerated() undoes a failed start: a half-on switch kept BLAS
            # on one thread and left the hooks in after the next block (a review found it).
            _switched_on, _switched_on_reuse = False, False
            _release_blas(_switched_on_blas)
            _switched_on_blas = None
            _set_reuse_holders()
            raise


def disable() -> None:
    """Undo :func:`enable`: scipy's own products (and BLAS thread counts) again,
    once no ``accelerated()`` block is open either. Idempotent."""
    global _switched_on, _switched_on_blas, _switched_on_reuse
    with deferred(), _lock:
        if _switched_on:
            _release_blas(_switched_on_blas)
        _switched_on, _switched_on_blas, _switched_on_reuse = False, None, False
        _update()


def is_enabled() -> bool:
    """Whether scipy's CSR/CSC products are routed now (by ``enable()`` or a block)."""
    return _saved is not None


@contextlib.contextmanager
def accelerated(blas_threads: int | str | None = "shared",
                reuse: bool = False) -> Iterator[None]:
    """Route scipy's CSR/CSC products with dense operands through the kernels
    while the block runs (also usable as a decorator of plain functions: on a generator or
    ``async`` function the block would close before its body runs).

    Blocks nest and may be open in several threads at once: the switch is
    process-wide and stays on until the last one exits (or, if
    :func:`~wsesparse.accelerate.enable` was called, until
    :func:`~wsesparse.accelerate.disable`); then scipy's classes are exactly as
    before, and the buffers of large freed results that ``sparse_matmul`` keeps for reuse
    are handed back (:func:`~wsesparse.release_cached_outputs`). See the module
    ``wsesparse.accelerate`` for what is routed.

    Parameters
    ----------
    blas_threads : "shared", int or None, default "shared"
        What the BLAS libraries loaded in the process (threadpoolctl's
        ``user_api="blas"``: numpy's and scipy's OpenBLAS, MKL, ...) do while
        the block runs. Idle OpenBLAS threads busy-wait on the cores the
        kernels' threads need: in a CG loop on 2 cores the product otherwise
        gets one thread, and CG with a prepared ``CSR`` ran 1.03x scipy
        instead of 1.17-1.26x (docs/accelerate.md).

        - ``"shared"``: OpenBLAS keeps its thread count, but its parallel calls
          run on the kernels' own threads (``wsesparse._blas_share``), so no
          idle BLAS thread holds a core. Where a BLAS library in the process
          cannot do that (MKL, BLIS, OpenBLAS with OpenMP or outside the
          versions 0.3.30-0.3.31 this was tested with, not Linux), the block
          limits BLAS to one thread instead. Do not raise a BLAS thread count
          while a block is open: past half of OpenBLAS's ``MAX_THREADS`` that
          stops the process with a message. Threaded BLAS calls from several
          Python threads take turns.
        - an int: BLAS runs on that many threads of its own.
        - ``None``: BLAS is left as it is.

        Both are process-wide: sharing holds from the first block that asks for
        it until the last such block (or ``enable``) lets go, and so does a
        limit, at the first limiting block's count (an inner block with
        ``blas_threads=2`` inside a shared one adds that limit to the sharing).
        Taking either costs about 50 us (a block with ``None``: about 30 us),
        so open the block around a loop rather than around each product.
    reuse : bool, default False
        Your promise that no scipy matrix multiplied in this thread changes in place
        (``A.data[...] = ...``, ``A.indices`` sorted or edited) while the block is open.
        In return the second product of a matrix (of at least 2**19 stored entries:
        smaller ones stay one-shot) prepares a :class:`~wsesparse.CSR` from its arrays,
        and later products in the thread use it, as with a ``CSR`` you make
        yourself: the structure is checked once, large stencil-like matrices are read
        with one-byte value codes, and ``A.T``'s products use a transpose made once. On
        2 cores CG then ran 1.18-1.57x scipy over six runs, against 1.04-1.34x without
        (docs/accelerate.md, "Reusing prepared operands"; short solves that multiply few
        times, such as lsqr's 69 iterations, do not pay for the preparation). It costs
        memory: a copy of each such matrix (and its transpose where ``A.T`` or ``x @ A``
        is multiplied, and what a ``CSR`` keeps), kept until the thread's last
        block with ``reuse=True`` exits. A matrix changed in place despite the promise
        gives the products of the matrix as it was prepared, never a crash, until a
        product's sample of its entries meets the change and it is prepared again. A
        matrix given new arrays (``A.data = ...``) is a new matrix.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> import wsesparse
    >>> A = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    >>> x = np.ones(200)
    >>> with wsesparse.accelerated():
    ...     y = A @ x                      # computed by wsesparse's kernels
    ...     wsesparse.accelerate.is_enabled()
    True
    >>> wsesparse.accelerate.is_enabled(), np.allclose(y, A @ x)
    (False, True)
    """
    blas_threads = _check_blas_threads(blas_threads)
    reuse = _check_reuse(reuse)
    key = None
    # (the try first, the block registered before anything is taken, and the steps with
    # Ctrl-C held back: an interrupt between them left the hooks in scipy with no hold to
    # remove them, or a hold with no block: a review)
    try:
        with deferred(), _lock:
            key = object()
            _blocks[key] = (threading.get_ident(), None, None)
            _blocks[key] = (threading.get_ident(), _hold_blas(blas_threads),
                            threading.current_thread() if reuse else None)
            _update()
        yield
    finally:
        if key is not None:
            try:
                finish(_close_block, key)
            except BaseException:
                if key in _blocks:   # (it landed before finish took over: close it now)
                    finish(_close_block, key)
                raise


def _close_block(key: object) -> None:
    """What the end of an ``accelerated()`` block undoes (run by ``finish``; the open
    blocks are ``_blocks``, which also decides whether the hooks are in)."""
    with _lock:
        entry = _blocks.pop(key, None)
        if entry is None:
            return   # (closed already, or never registered)
        try:   # (the hooks follow the blocks even if an exception lands in between)
            _release_blas(entry[1])
        finally:
            _update()


def _after_fork_in_child() -> None:
    """A child forked while another thread was inside a block: the lock, which that thread
    may have held, is replaced (the child's first block waited on it for ever: a review),
    and that thread's blocks are dropped, as it does not exist here; the child's own thread
    keeps its blocks, and ``enable()`` stays on. The counts (blocks, BLAS holds, shared
    holds) are rebuilt from what remains, as the other thread may have been half way
    through opening or closing a block. (``wsesparse._blas`` and ``wsesparse._blas_share``,
    registered before this, have replaced their locks.)"""
    global _lock
    _lock = threading.Lock()
    me = threading.get_ident()
    for k in [k for k, (thread, _, _) in _blocks.items() if thread != me]:
        del _blocks[k]
    kinds = [blas for _, blas, _ in _blocks.values()]
    if _switched_on:
        kinds.append(_switched_on_blas)
    _blas.settle_after_fork(kinds.count("limit"))
    _blas_share.settle_after_fork(kinds.count("shared"))
    _update()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
