"""Krylov solvers whose whole iteration runs on the library's kernels.

Under ``accelerated()`` only the product of ``scipy.sparse.linalg.cg`` is ours; the vector
work between products (two dot products, a norm and three scaled additions an iteration,
each a numpy call on one thread that writes a temporary for ``alpha * p``) stays numpy's.
On a 1,000 x 1,000 Poisson matrix it takes more than half of an iteration on 2 cores, and
on 16 cores it is what kept cg near 2x whatever the product cost (docs/accelerate.md,
"Whole solvers"). :func:`cg` here is scipy's algorithm, step for step, with the product on a
prepared :class:`~wsesparse.CSR` and the vector work in OpenMP kernels that read and write
each vector once a step.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from wsesparse._kernels import _krylov
from wsesparse._threads import resolve_n_threads
from wsesparse.csr import CSR
from wsesparse.matmul import sparse_matmul

__all__ = ["cg"]

# scipy.sparse.linalg's rule for the dtype of the solution (make_system's coerce): the
# matrix's and b's kinds, anything not floating taken as float64.
_FLOATING = "fdFD"


def _solution_char(a: str, b: str) -> str:
    a = a if a in _FLOATING else "d"
    b = b if b in _FLOATING else "d"
    cx = a in "FD" or b in "FD"
    double = a in "dD" or b in "dD"
    return ("D" if double else "F") if cx else ("d" if double else "f")


class _Operator:
    """``q = A @ p`` into a buffer, for the operand types :func:`cg` takes."""

    def __init__(self, A, n_threads: int | None):
        self.n_threads = n_threads
        self.sparse: CSR | None = None
        self.dense: np.ndarray | None = None
        self.op: LinearOperator | None = None
        if isinstance(A, CSR):
            self.sparse = A
        elif sp.issparse(A):
            # Checked and narrowed once; value codes come with the third product.
            self.sparse = CSR(A)
        elif type(A) is np.ndarray:
            self.dense = A
        else:
            self.op = aslinearoperator(A)
        held = next(o for o in (self.sparse, self.dense, self.op) if o is not None)
        self.shape = held.shape
        if len(self.shape) != 2 or self.shape[0] != self.shape[1]:
            raise ValueError(f"expected square matrix, but got shape={(self.shape,)}")
        self.dtype = held.dtype

    def __call__(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        if self.sparse is not None:
            sparse_matmul(self.sparse, p, out=q, n_threads=self.n_threads)
            return q
        if self.dense is not None:
            np.matmul(self.dense, p, out=q)
            return q
        y = np.asarray(self.op.matvec(p))
        if y.shape not in ((q.shape[0],), (q.shape[0], 1)):
            raise ValueError(f"A.matvec returned an array of shape {y.shape}, expected "
                             f"{q.shape}")
        q[...] = y.reshape(q.shape)
        return q


def _vector(v, n: int, name: str, shape_a) -> np.ndarray:
    """``v`` as an array of shape (n,) or (n, 1) (scipy's message otherwise)."""
    v = np.asanyarray(v)
    if v.shape not in ((n,), (n, 1)):
        raise ValueError(f"shapes of A {shape_a} and {name} {v.shape} are incompatible")
    return v


def cg(A, b, x0=None, *, rtol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
       M=None, callback: Callable[[np.ndarray], object] | None = None,
       n_threads: int | None = None) -> tuple[np.ndarray, int]:
    """Solve ``A x = b`` by conjugate gradients, as ``scipy.sparse.linalg.cg`` does, on
    the library's kernels.

    The same arguments, iterations and results (to rounding) as scipy's ``cg``: each step
    applies the preconditioner, updates the search direction, multiplies it by ``A``,
    and updates ``x`` and the residual, stopping when ``norm(r) < max(rtol * norm(b),
    atol)``. What differs is where the work runs. A scipy sparse ``A`` is wrapped once in
    a :class:`~wsesparse.CSR` (checked, narrowed, value codes from its third product),
    its product writes into a buffer kept for the solve, and the vector work runs on
    OpenMP threads: ``x += alpha p`` and ``r -= alpha q`` in one pass that also returns
    ``|r|^2`` (scipy reads ``r`` twice more for the norm and ``r . r``), and
    ``p = z + beta p`` in another. Dot products are summed in fixed chunks, so a solve
    gives the same bits with any thread count.

    Parameters
    ----------
    A : scipy.sparse matrix or array, CSR, ndarray or LinearOperator
        The n x n matrix, Hermitian positive definite. Sparse ones run on the library's
        kernels; a 2-D ndarray on numpy's ``matmul``; anything else through
        ``scipy.sparse.linalg.aslinearoperator(A).matvec``. Do not change ``A`` while
        the solve runs.
    b : array_like of shape (n,) or (n, 1)
        Right-hand side.
    x0 : array_like of shape (n,) or (n, 1), or ``"Mb"``, optional
        Starting guess (zeros by default; ``"Mb"``: ``M @ b``).
    rtol, atol : float
        Convergence test ``norm(b - A x) <= max(rtol * norm(b), atol)``, as scipy's.
    maxiter : int, optional
        Iterations at most (default ``10 * n``).
    M : sparse matrix, ndarray or LinearOperator, optional
        Preconditioner (approximates the inverse of ``A``), applied through
        ``aslinearoperator(M).matvec`` as scipy does.
    callback : callable, optional
        ``callback(xk)`` after each iteration, with the current solution (the array the
        solve updates in place, as scipy's).
    n_threads : int, optional
        Threads of the product and the vector kernels (default: as
        :func:`~wsesparse.sparse_matmul` chooses, one below about 65,000 unknowns).

    Returns
    -------
    x : ndarray of shape (n,)
        The solution, of scipy's dtype for ``A`` and ``b`` (float32 only when both are
        single precision).
    info : int
        0 on convergence, else the number of iterations done (``maxiter``).

    See Also
    --------
    scipy.sparse.linalg.cg : the reference; the same iterations.
    wsesparse.accelerated : runs unmodified scipy solvers with this library's products.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse.linalg import cg
    >>> n = 50
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n), format="csr")
    >>> b = np.ones(n)
    >>> x, info = cg(A, b, rtol=1e-10)
    >>> info, bool(np.linalg.norm(A @ x - b) <= 1e-10 * np.linalg.norm(b))
    (0, True)
    """
    if n_threads is not None:
        resolve_n_threads(n_threads)  # (checked here, before any work)
    if atol is None or isinstance(atol, str) or not atol >= 0:
        raise ValueError(f"'wsesparse.linalg.cg' called with invalid `atol`={atol}; if set, "
                         "`atol` must be a real, non-negative number.")
    op = _Operator(A, n_threads)
    n = op.shape[0]
    b = _vector(b, n, "b", op.shape)
    if b.dtype.char not in _FLOATING:
        b = b.astype("d")
    a_char = op.dtype.char if op.dtype is not None else np.asarray(op.op.matvec(b)).dtype.char
    dtype = np.dtype(_solution_char(a_char, b.dtype.char))
    b = np.asarray(b, dtype=dtype).ravel()

    psolve = None
    if M is not None:
        M = aslinearoperator(M)
        if M.shape != op.shape:
            raise ValueError("matrix and preconditioner have different shapes")
        psolve = M.matvec
    elif hasattr(A, "psolve"):
        psolve = A.psolve

    if x0 is None:
        x = np.zeros(n, dtype=dtype)
    elif isinstance(x0, str):
        if x0 != "Mb":
            raise ValueError(f"x0 must be an array, None or 'Mb', got {x0!r}")
        x = np.array(psolve(b.copy()) if psolve is not None else b, dtype=dtype).ravel()
    else:
        x = np.array(_vector(x0, n, "x0", op.shape), dtype=dtype).ravel()
    x = np.ascontiguousarray(x)

    bnrm2 = math.sqrt(_krylov.dot(np.ascontiguousarray(b), np.ascontiguousarray(b),
                                  _threads(n_threads, n)).real)
    atol = max(float(atol), float(rtol) * bnrm2)
    if bnrm2 == 0:
        return b, 0
    if maxiter is None:
        maxiter = n * 10

    scalar = np.complex128 if dtype.kind == "c" else np.float64
    q = np.empty(n, dtype=dtype)
    if x.any():
        r = np.ascontiguousarray(b - op(x, q))
    else:
        r = b.copy()
    nt = _threads(n_threads, n)
    rr = _krylov.dot(r, r, nt).real  # |r|^2, from here on returned by each update
    p = np.empty(n, dtype=dtype)
    rho_prev = None
    for iteration in range(maxiter):
        if math.sqrt(rr) < atol:
            return x, 0
        nt = _threads(n_threads, n)
        if psolve is None:
            z = r
            rho_cur = scalar(rr)
        else:
            z = _preconditioned(psolve(r), n, dtype, p)
            rho_cur = scalar(_krylov.dot(r, z, nt))
        if iteration > 0:
            _krylov.xpby(p, z, rho_cur / rho_prev, nt)
        else:
            p[:] = z
        op(p, q)
        alpha = rho_cur / scalar(_krylov.dot(p, q, nt))
        rr = _krylov.cg_update(x, r, p, q, alpha, nt)
        rho_prev = rho_cur
        if callback:
            callback(x)
    return x, maxiter


def _threads(n_threads: int | None, n: int) -> int:
    """Threads of the vector kernels on vectors of n elements (memory-bound: one thread
    per 2**15 / TEAM_GROWTH elements from 2**16 on, as a product of n multiply-adds)."""
    return resolve_n_threads(n_threads, n)


def _preconditioned(z, n: int, dtype: np.dtype, p: np.ndarray) -> np.ndarray:
    """The preconditioner's output as a C-contiguous vector of the solve's dtype that
    shares no memory with the search direction ``p`` (which the next step overwrites)."""
    z = np.asarray(z)
    if z.shape not in ((n,), (n, 1)):
        raise ValueError(f"M.matvec returned an array of shape {z.shape}, expected ({n},)")
    z = np.ascontiguousarray(z.reshape(n), dtype=dtype)
    if np.may_share_memory(z, p):
        z = z.copy()
    return z
