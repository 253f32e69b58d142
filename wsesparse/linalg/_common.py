"""The solvers' shared parts: the prepared operator, the checks of A, b, x0 and M
(scipy's rules), preconditioners, thread counts, and the hand-off to scipy."""

from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import aslinearoperator, LinearOperator

from wsesparse._checks import renamed
from wsesparse._kernels import _krylov
from wsesparse._threads import resolve_n_threads
from wsesparse.csr import CSR
from wsesparse.matmul import sparse_matmul


# scipy.sparse.linalg's rule for the dtype of the solution (make_system's coerce): the
# matrix's and b's kinds, anything not floating taken as float64.
FLOATING = "fdFD"


def _solution_char(a: str, b: str) -> str:
    a = a if a in FLOATING else "d"
    b = b if b in FLOATING else "d"
    cx = a in "FD" or b in "FD"
    double = a in "dD" or b in "dD"
    return ("D" if double else "F") if cx else ("d" if double else "f")


class Operator:
    """``q = A @ p`` into a buffer, for the operand types the solvers take (``A`` or a
    preconditioner, named by ``name`` in errors). :meth:`settle` picks the route once the
    solve's dtype is known."""

    def __init__(self, A, n_threads: int | None, name: str = "A"):
        self.n_threads = n_threads
        self.name = name
        self.sparse: CSR | None = None
        self.dense: np.ndarray | None = None
        self.op: LinearOperator | None = None
        if self.holds(A):
            self._held = A
        else:
            self._held = self.op = aslinearoperator(A)
        self.shape = self._held.shape
        if len(self.shape) != 2 or self.shape[0] != self.shape[1]:
            raise ValueError(f"expected square matrix, but got shape={(self.shape,)}")
        self.dtype = self._held.dtype

    @staticmethod
    def holds(A) -> bool:
        """Whether ``A`` is multiplied as it is (a sparse matrix or array, CSR or ndarray),
        not through ``aslinearoperator(A)``."""
        return isinstance(A, CSR) or sp.issparse(A) or type(A) is np.ndarray

    def settle(self, dtype: np.dtype) -> None:
        """Products of a sparse or ndarray operand whose values ``dtype`` holds run on our
        kernel (a scipy matrix wrapped once in a ``CSR``: checked and narrowed, value codes
        from its third product) or numpy's ``matmul``, into the solve's buffers; any other
        through ``aslinearoperator(A).matvec``, as scipy's (a longdouble matrix, a complex
        preconditioner of a real solve)."""
        A = self._held
        if self.op is not None:
            return
        if not (A.dtype.kind in "biufc" and np.result_type(A.dtype, dtype) == dtype):
            self.op = aslinearoperator(A)
        elif type(A) is np.ndarray:
            self.dense = A
        elif isinstance(A, CSR):
            self.sparse = A
        else:
            try:
                self.sparse = CSR(A)
            except (TypeError, ValueError) as exc:  # (its messages say "A")
                raise renamed(exc, self.name) from None

    def __call__(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        if self.sparse is not None:
            sparse_matmul(self.sparse, p, out=q, n_threads=self.n_threads)
            return q
        if self.dense is not None:
            np.matmul(self.dense, p, out=q)
            return q
        q[...] = _matvec_result(self.op.matvec(p), q.shape[0], q.dtype, self.name)
        return q


def scalar_type(dtype: np.dtype) -> type:
    """The type a solve's scalars take: complex128 for a complex solve (scipy's ``vdot``
    inner products), float64 for a real one, of any precision."""
    return np.complex128 if dtype.kind == "c" else np.float64


def _matvec_result(y, n: int, dtype: np.dtype, name: str) -> np.ndarray:
    """What operator ``name``'s matvec returned, checked as a vector of n values the solve's
    ``dtype`` holds, with shape (n,)."""
    y = np.asarray(y)
    if y.shape not in ((n,), (n, 1)):
        raise ValueError(f"{name}.matvec returned an array of shape {y.shape}, expected ({n},)")
    if not np.can_cast(y.dtype, dtype, "same_kind"):
        # (scipy's solvers fail on it at their next update: a casting TypeError)
        raise TypeError(f"{name}.matvec returned {y.dtype} values, which a {dtype} solve "
                        "cannot hold")
    return y.reshape(n)


def _vector(v, n: int, name: str, shape_a) -> np.ndarray:
    """``v`` as an array of shape (n,) or (n, 1) (scipy's message otherwise)."""
    v = np.asanyarray(v)
    if v.shape not in ((n,), (n, 1)):
        raise ValueError(f"shapes of A {shape_a} and {name} {v.shape} are incompatible")
    return v


def vector_threads(n_threads: int | None, n: int) -> int:
    """Threads of the vector kernels on vectors of n elements (memory-bound: one thread
    per 2**15 / TEAM_GROWTH elements from 2**16 on, as a product of n multiply-adds)."""
    return resolve_n_threads(n_threads, n)


def preconditioned(z, n: int, dtype: np.dtype, avoid: tuple[np.ndarray, ...]) -> np.ndarray:
    """The preconditioner's output as a C-contiguous vector of the solve's dtype that
    shares no memory with the buffers in ``avoid`` (which the solve overwrites before it
    is done with ``z``)."""
    z = np.ascontiguousarray(_matvec_result(z, n, dtype, "M"), dtype=dtype)
    if any(np.may_share_memory(z, a) for a in avoid):
        z = z.copy()
    return z


def apply_m(psolve, u: np.ndarray, n: int, dtype: np.dtype, avoid: tuple[np.ndarray, ...],
             n_threads: int) -> np.ndarray:
    """``M u`` for a solve's step: ``u`` itself without a preconditioner, a diagonal one's
    fused pass (into its two buffers in turn), else the preconditioner's output as
    :func:`preconditioned` makes it."""
    if psolve is None:
        return u
    if isinstance(psolve, Diagonal):
        return psolve.fused(u, n_threads)[0]
    return preconditioned(psolve(u), n, dtype, avoid)


def check_atol(atol, name: str) -> None:
    """scipy's check of ``atol`` (a NaN, which scipy takes and then runs to maxiter, is
    refused too)."""
    if atol is None or isinstance(atol, str) or not atol >= 0:
        raise ValueError(f"'wsesparse.linalg.{name}' called with invalid `atol`={atol}; if "
                         "set, `atol` must be a real, non-negative number.")


def system(A, b, x0, M, n_threads: int | None):
    """The solve's operator, ``b``, dtype and start as scipy's make_system settles them
    (``n_threads`` checked first, before any work): ``(op, b, dtype, start)``, ``b`` as
    given or float64, ``start`` the ``x0`` for :func:`_start`."""
    if n_threads is not None:
        resolve_n_threads(n_threads)
    op = Operator(A, n_threads)
    b = _vector(b, op.shape[0], "b", op.shape)
    if b.dtype.char not in FLOATING:
        b = b.astype("d")
    a_char = op.dtype.char if op.dtype is not None else np.asarray(op.op.matvec(b)).dtype.char
    dtype = np.dtype(_solution_char(a_char, b.dtype.char))
    start, dtype = _mb_start(x0, A, M, b, dtype, op.shape)
    return op, b, dtype, start


def prepared(op: Operator, A, M, b, start, dtype: np.dtype, n_threads: int | None):
    """For a solve that runs here: the products' route settled, ``b`` a C-contiguous
    vector of the solve's dtype, the preconditioner and the starting guess:
    ``(b, psolve, x)``."""
    op.settle(dtype)
    b = np.ascontiguousarray(np.asarray(b, dtype=dtype).ravel())
    psolve = _psolve(A, M, op.shape, dtype, n_threads)
    return b, psolve, _start(start, b, psolve, op.shape[0], dtype, op.shape)


def _mb_start(x0, A, M, b, dtype: np.dtype, shape) -> tuple[object, np.dtype]:
    """``x0="Mb"`` as scipy's make_system makes it: ``M @ b`` (b in the solve's dtype first,
    through ``aslinearoperator(M)``, or ``A.psolve``), whose dtype then carries scipy's
    whole solve: that start and the solve's dtype widened to hold it (a float32 system with
    a float64 M is solved in float64, as scipy's is). Any other ``x0`` as it is."""
    if not (isinstance(x0, str) and x0 == "Mb"):
        return x0, dtype
    bb = np.array(np.asarray(b, dtype=dtype).ravel())
    if M is not None:
        M = aslinearoperator(M)
        if M.shape != shape:
            raise ValueError("matrix and preconditioner have different shapes")
        mb = np.asarray(M.matvec(bb))
    elif hasattr(A, "psolve"):
        mb = np.asarray(A.psolve(bb))
    else:
        return bb, dtype
    return mb, np.result_type(mb.dtype, dtype)


def scipy_solver(name: str, A, b, x0, M, callback, **kwargs):
    """scipy's solver ``name`` itself, products under ``accelerated()``: for what runs
    only there (longdouble solves)."""
    import scipy.sparse.linalg as sla
    from wsesparse.accelerate import accelerated
    with accelerated():
        return getattr(sla, name)(A, b, x0, M=M, callback=callback, **kwargs)


def _psolve(A, M, shape, dtype: np.dtype, n_threads: int | None) -> Callable | None:
    """The preconditioner's matvec, or None for none (scipy's make_system: ``M``, else
    ``A.psolve`` where ``A`` has one). A sparse or ndarray ``M`` whose values the solve's
    dtype holds is applied as ``A`` is, into a buffer the solve reuses (a Jacobi ``M``
    took scipy's single-threaded product and a new array a step); anything else through
    ``aslinearoperator(M).matvec``, as scipy."""
    if M is None:
        return getattr(A, "psolve", None)
    if not (isinstance(M, CSR) or sp.issparse(M) or type(M) is np.ndarray) or M.ndim != 2:
        M = aslinearoperator(M)
    if M.shape != shape:
        raise ValueError("matrix and preconditioner have different shapes")
    d = _diagonal(M, shape[0], dtype)
    if d is not None:
        return Diagonal(d)
    op = Operator(M, n_threads, "M")
    op.settle(dtype)
    if op.op is not None:
        return op.op.matvec
    # Two buffers in turn: bicgstab keeps two outputs at once (phat, shat), and scipy's
    # check=True applies M to what M returned.
    bufs = [np.empty(shape[0], dtype), np.empty(shape[0], dtype)]

    def apply(r):
        bufs.reverse()
        out = bufs[0]
        return op(r, out if not np.may_share_memory(r, out) else np.empty(shape[0], dtype))
    return apply


def _diagonal(M, n: int, dtype: np.dtype) -> np.ndarray | None:
    """The diagonal of a preconditioner that has nothing else (a scipy DIA matrix of offset
    0 alone, or a CSR/CSC one with one entry per row, on the diagonal: what
    ``scipy.sparse.diags(1 / A.diagonal())`` makes), as a C-contiguous vector of the
    solve's dtype; None for any other (or values the dtype cannot hold)."""
    if not (sp.issparse(M) or isinstance(M, CSR)) or not (
            M.dtype.kind in "biufc" and np.result_type(M.dtype, dtype) == dtype):
        return None
    fmt = "csr" if isinstance(M, CSR) else M.format
    if fmt == "dia":
        offsets = np.asarray(M.offsets)
        if (offsets.shape != (1,) or offsets[0] != 0 or M.data.ndim != 2
                or M.data.shape[0] < 1):  # (a corrupt one: the checked path words it)
            return None
        d = np.zeros(n, dtype)
        m = min(n, M.data.shape[1])
        d[:m] = M.data[0, :m]
        return d
    if fmt not in ("csr", "csc"):
        return None
    steps = np.arange(n + 1)
    if (len(M.indptr) != n + 1 or len(M.indices) < n or len(M.data) < n
            or not np.array_equal(M.indptr, steps)
            or not np.array_equal(M.indices[:n], steps[:n])):
        return None
    return np.ascontiguousarray(M.data[:n], dtype=dtype)


class Diagonal:
    """A diagonal preconditioner ``z = d * r`` in one OpenMP pass, into two buffers in turn
    (bicgstab keeps two outputs at once): :meth:`fused` also returns ``vdot(r, z)`` from the
    same pass; calling it (``x0="Mb"``, ``check=True``) gives a new array."""

    def __init__(self, d: np.ndarray):
        self.d = d
        self.bufs = [np.empty_like(d), np.empty_like(d)]

    def __call__(self, r):
        return self.d * np.asarray(r).reshape(self.d.shape)

    def fused(self, r: np.ndarray, n_threads: int):
        self.bufs.reverse()
        return self.bufs[0], _krylov.diag_apply(self.bufs[0], self.d, r, n_threads)


def _start(x0, b: np.ndarray, psolve, n: int, dtype: np.dtype, shape) -> np.ndarray:
    """The starting guess as scipy's make_system makes it, C-contiguous, owned."""
    if x0 is None:
        return np.zeros(n, dtype=dtype)
    if isinstance(x0, str):
        if x0 != "Mb":
            raise ValueError(f"x0 must be an array, None or 'Mb', got {x0!r}")
        x = psolve(b.copy()) if psolve is not None else b
        return np.array(x, dtype=dtype).ravel()
    return np.array(_vector(x0, n, "x0", shape), dtype=dtype).ravel()
