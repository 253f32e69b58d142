"""Krylov solvers whose whole iteration runs on the library's kernels.

Under ``accelerated()`` only the products of scipy's Krylov solvers are ours; the vector
work between them (for cg two dot products, a norm and three scaled additions an
iteration, each a numpy call on one thread, ``alpha * p`` written to a temporary first;
about a dozen such calls for minres and bicgstab, two per basis vector for gmres) stays
numpy's. On a 1,000 x 1,000 Poisson matrix it takes more than half of a cg iteration on 2
cores, and on 16 cores it kept cg near 2x scipy whatever the product cost
(docs/solvers.md). :func:`cg`, :func:`minres`, :func:`bicgstab` and :func:`gmres` here are
scipy's algorithms, step for step, with the products on a prepared
:class:`~wsesparse.CSR` and the vector work in OpenMP kernels (``_kernels/_krylov.h``) that
read and write each vector once a step. :func:`eigsh` is scipy's ARPACK driver with the
prepared product.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from wsesparse._checks import check_real, renamed
from wsesparse._kernels import _krylov
from wsesparse._threads import resolve_n_threads
from wsesparse.csr import CSR
from wsesparse.matmul import sparse_matmul

__all__ = ["bicgstab", "cg", "eigsh", "gmres", "minres"]

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


def _scalar_type(dtype: np.dtype) -> type:
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
        Preconditioner (approximates the inverse of ``A``). A sparse or ndarray ``M`` is
        applied as ``A`` is, into a buffer the solve keeps; anything else through
        ``aslinearoperator(M).matvec``, as scipy's.
    callback : callable, optional
        ``callback(xk)`` after each iteration, with the current solution (the array the
        solve updates in place, as scipy's).
    n_threads : int, optional
        Threads of the products and the vector kernels (default: each as
        :func:`~wsesparse.sparse_matmul` chooses for its work; the vector kernels run on
        one thread below about 65,000 unknowns).

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
    _check_atol(atol, "cg")
    op, b, dtype, start = _system(A, b, x0, M, n_threads)
    if dtype.char not in _FLOATING:
        return _scipy_solver("cg", A, b, x0, M, callback, rtol=rtol, atol=atol,
                             maxiter=maxiter)
    b, psolve, x = _prepared(op, A, M, b, start, dtype, n_threads)
    n = op.shape[0]

    bnrm2 = math.sqrt(_krylov.dot(b, b, _threads(n_threads, n)).real)
    atol = max(float(atol), float(rtol) * bnrm2)
    if bnrm2 == 0:
        return b, 0
    if maxiter is None:
        maxiter = n * 10

    scalar = _scalar_type(dtype)
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
        elif isinstance(psolve, _Diagonal):
            z, rho = psolve.fused(r, nt)
            rho_cur = scalar(rho)
        else:
            z = _preconditioned(psolve(r), n, dtype, (p,))
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


def _preconditioned(z, n: int, dtype: np.dtype, avoid: tuple[np.ndarray, ...]) -> np.ndarray:
    """The preconditioner's output as a C-contiguous vector of the solve's dtype that
    shares no memory with the buffers in ``avoid`` (which the solve overwrites before it
    is done with ``z``)."""
    z = np.ascontiguousarray(_matvec_result(z, n, dtype, "M"), dtype=dtype)
    if any(np.may_share_memory(z, a) for a in avoid):
        z = z.copy()
    return z


def _apply_m(psolve, u: np.ndarray, n: int, dtype: np.dtype, avoid: tuple[np.ndarray, ...],
             n_threads: int) -> np.ndarray:
    """``M u`` for a solve's step: ``u`` itself without a preconditioner, a diagonal one's
    fused pass (into its two buffers in turn), else the preconditioner's output as
    :func:`_preconditioned` makes it."""
    if psolve is None:
        return u
    if isinstance(psolve, _Diagonal):
        return psolve.fused(u, n_threads)[0]
    return _preconditioned(psolve(u), n, dtype, avoid)


def bicgstab(A, b, x0=None, *, rtol: float = 1e-5, atol: float = 0.0,
             maxiter: int | None = None, M=None,
             callback: Callable[[np.ndarray], object] | None = None,
             n_threads: int | None = None) -> tuple[np.ndarray, int]:
    """Solve ``A x = b`` by BiCGSTAB, as ``scipy.sparse.linalg.bicgstab`` does, on the
    library's kernels.

    scipy's algorithm step for step (its breakdown tests and return codes), the same
    arguments, iterations and results to rounding, for a general (nonsymmetric) square
    ``A``. Its two products run on a prepared :class:`~wsesparse.CSR`, and the vector
    work of a step (in scipy two norms, four dot products and seven scaled additions,
    each a numpy call on one thread) in six OpenMP passes, four of which also return the
    inner products the step needs. Sums are taken in fixed chunks: the same bits with any
    thread count.

    Parameters
    ----------
    A : scipy.sparse matrix or array, CSR, ndarray or LinearOperator
        The n x n matrix. Do not change it while the solve runs.
    b : array_like of shape (n,) or (n, 1)
        Right-hand side.
    x0 : array_like of shape (n,) or (n, 1), or ``"Mb"``, optional
        Starting guess (zeros by default).
    rtol, atol : float
        Convergence test ``norm(b - A x) <= max(rtol * norm(b), atol)``, as scipy's.
    maxiter : int, optional
        Iterations at most (default ``10 * n``).
    M : sparse matrix, ndarray or LinearOperator, optional
        Preconditioner, applied as :func:`cg` applies its ``M``.
    callback : callable, optional
        ``callback(xk)`` after each iteration (the array the solve updates in place, as
        scipy's).
    n_threads : int, optional
        Threads of the products and the vector kernels (default: each as
        :func:`~wsesparse.sparse_matmul` chooses for its work).

    Returns
    -------
    x : ndarray of shape (n,)
        The solution.
    info : int
        0 on convergence, ``maxiter`` where it did not converge, -10 or -11 on scipy's
        breakdowns (rho or omega below their tolerances).

    Notes
    -----
    float32, float64, complex64 and complex128 systems run here (complex ones with
    scipy's ``vdot``: conjugated inner products); a longdouble solve (see :func:`cg`) runs
    ``scipy.sparse.linalg.bicgstab`` itself, with its products routed through
    :func:`wsesparse.accelerated` (``n_threads`` is then only checked).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse.linalg import bicgstab
    >>> n = 50
    >>> A = sp.diags([-1.0, 3.0, -1.5], [-1, 0, 1], shape=(n, n), format="csr")
    >>> b = np.ones(n)
    >>> x, info = bicgstab(A, b, rtol=1e-10)
    >>> info, bool(np.linalg.norm(A @ x - b) <= 1e-10 * np.linalg.norm(b))
    (0, True)
    """
    _check_atol(atol, "bicgstab")
    op, b, dtype, start = _system(A, b, x0, M, n_threads)
    if dtype.char not in _FLOATING:
        return _scipy_solver("bicgstab", A, b, x0, M, callback, rtol=rtol, atol=atol,
                             maxiter=maxiter)
    b, psolve, x = _prepared(op, A, M, b, start, dtype, n_threads)
    n = op.shape[0]

    nt = _threads(n_threads, n)
    bnrm2 = math.sqrt(_krylov.dot(b, b, nt).real)
    atol = max(float(atol), float(rtol) * bnrm2)
    if bnrm2 == 0:
        return b, 0
    if maxiter is None:
        maxiter = n * 10
    f64 = np.float64
    scalar = _scalar_type(dtype)
    rhotol = f64(np.finfo(dtype).eps) ** 2
    omegatol = rhotol

    v, t = np.empty(n, dtype), np.empty(n, dtype)
    r = np.ascontiguousarray(b - op(x, v)) if x.any() else b.copy()
    rtilde = r.copy()
    rr = f64(_krylov.dot(r, r, nt).real)
    rho = scalar(rr)  # (rtilde is r: vdot(rtilde, r) is |r|^2, bit for bit)
    p = None
    rho_prev = omega = alpha = None

    for iteration in range(maxiter):
        if math.sqrt(rr) < atol:
            return x, 0
        nt = _threads(n_threads, n)
        if abs(rho) < rhotol:  # rho breakdown
            return x, -10
        if iteration > 0:
            if abs(omega) < omegatol:  # omega breakdown
                return x, -11
            beta = (rho / rho_prev) * (alpha / omega)
            _krylov.bicg_p(p, r, v, beta, omega, nt)
        else:
            p = r.copy()
        phat = _apply_m(psolve, p, n, dtype, (v, t), nt)
        op(phat, v)
        rv = scalar(_krylov.dot(rtilde, v, nt))
        if rv == 0:
            return x, -11
        alpha = rho / rv
        ss = f64(_krylov.minres_b(r, v, alpha, nt))  # r -= alpha v, |r|^2 (scipy's s is r)
        if math.sqrt(ss) < atol:
            x += alpha * phat  # (once a solve: numpy's, as scipy's; an inf stays inf)
            return x, 0
        shat = _apply_m(psolve, r, n, dtype, (v, t, x), nt)
        op(shat, t)
        ts, tt = _krylov.dot2(t, r, nt)
        omega = scalar(ts) / scalar(tt)
        _krylov.bicg_x(x, phat, shat, alpha, omega, nt)
        rr, rho_next = _krylov.bicg_r(r, t, rtilde, omega, nt)
        rr = f64(rr)
        rho_prev, rho = rho, scalar(rho_next)
        if callback:
            callback(x)
    return x, maxiter


def gmres(A, b, x0=None, *, rtol: float = 1e-5, atol: float = 0.0,
          restart: int | None = None, maxiter: int | None = None, M=None,
          callback: Callable | None = None, callback_type: str | None = None,
          n_threads: int | None = None) -> tuple[np.ndarray, int]:
    """Solve ``A x = b`` by restarted GMRES, as ``scipy.sparse.linalg.gmres`` does, on the
    library's kernels.

    scipy's algorithm step for step: Arnoldi with modified Gram-Schmidt, Givens rotations
    (LAPACK ``lartg``), its restart and stopping rules, ``callback_type`` ("x",
    "pr_norm", "legacy") and its DeprecationWarning for a callback without one. The
    products run on a prepared :class:`~wsesparse.CSR`; the Gram-Schmidt loop, which in
    scipy is two numpy calls on one thread per basis vector (a dot product and a scaled
    subtraction) plus two norms a column, runs as one OpenMP pass per basis vector that
    subtracts it and takes the next dot product (or the norm) from the same pass. Sums are
    taken in fixed chunks: the same bits with any thread count.

    Parameters
    ----------
    A : scipy.sparse matrix or array, CSR, ndarray or LinearOperator
        The n x n matrix. Do not change it while the solve runs.
    b : array_like of shape (n,) or (n, 1)
        Right-hand side.
    x0 : array_like of shape (n,) or (n, 1), or ``"Mb"``, optional
        Starting guess (zeros by default).
    rtol, atol : float
        Convergence test ``norm(b - A x) <= max(rtol * norm(b), atol)``, as scipy's.
    restart : int, optional
        Basis vectors before a restart (default 20).
    maxiter : int, optional
        Restart cycles at most (default ``10 * n``).
    M : sparse matrix, ndarray or LinearOperator, optional
        Preconditioner (left, as scipy's), applied as :func:`cg` applies its ``M``.
    callback, callback_type : optional
        As scipy's: ``callback(xk)`` after each restart cycle (``"x"``), or ``callback``
        of the preconditioned residual estimate divided by ``norm(b)`` after each inner
        step (``"pr_norm"`` and ``"legacy"``, the default, where ``maxiter`` then counts
        inner steps). Without ``callback_type`` a callback gets scipy's
        DeprecationWarning, pointing at the caller's line (scipy's points one frame
        above it).
    n_threads : int, optional
        Threads of the products and the vector kernels (default: each as
        :func:`~wsesparse.sparse_matmul` chooses for its work).

    Returns
    -------
    x : ndarray of shape (n,)
        The solution.
    info : int
        0 on convergence, else ``maxiter``.

    Notes
    -----
    float32, float64, complex64 and complex128 systems run here (complex ones with
    scipy's ``vdot``: conjugated inner products); a longdouble solve (see :func:`cg`) runs
    ``scipy.sparse.linalg.gmres`` itself, with its products routed through
    :func:`wsesparse.accelerated` (``n_threads`` is then only checked).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse.linalg import gmres
    >>> n = 50
    >>> A = sp.diags([-1.0, 3.0, -1.5], [-1, 0, 1], shape=(n, n), format="csr")
    >>> b = np.ones(n)
    >>> x, info = gmres(A, b, rtol=1e-10, callback_type="x")
    >>> info, bool(np.linalg.norm(A @ x - b) <= 1e-10 * np.linalg.norm(b))
    (0, True)
    """
    if callback is not None and callback_type is None:
        warnings.warn("wsesparse.linalg.gmres called without specifying `callback_type` "
                      "(as scipy.sparse.linalg.gmres, it defaults to 'legacy', whose "
                      "default scipy will change); specify it, e.g. "
                      "``gmres(..., callback_type='pr_norm')``, or to retain the old "
                      "behavior ``gmres(..., callback_type='legacy')``",
                      category=DeprecationWarning, stacklevel=2)
    if callback_type is None:
        callback_type = "legacy"
    if callback_type not in ("x", "pr_norm", "legacy"):
        raise ValueError(f"Unknown callback_type: {callback_type!r}")
    if callback is None:
        callback_type = None
    _check_atol(atol, "gmres")
    op, b, dtype, start = _system(A, b, x0, M, n_threads)
    if dtype.char not in _FLOATING:
        # (callback_type is set wherever a callback is: scipy gives no second warning)
        return _scipy_solver("gmres", A, b, x0, M, callback, rtol=rtol, atol=atol,
                             restart=restart, maxiter=maxiter,
                             callback_type=callback_type or "x")
    b, psolve, x = _prepared(op, A, M, b, start, dtype, n_threads)
    return _gmres(op, b, x, rtol, atol, restart, maxiter, psolve, callback, callback_type,
                  n_threads)


def _gmres(op: _Operator, b, x, rtol, atol, restart, maxiter, psolve, callback,
           callback_type, n_threads) -> tuple[np.ndarray, int]:
    """scipy's gmres loop (scipy/sparse/linalg/_isolve/iterative.py, BSD-3-Clause), its
    scalar work as written there, its vector work in _krylov's passes."""
    from scipy.linalg import get_lapack_funcs
    n = op.shape[0]
    dtype = x.dtype
    f64 = np.float64
    scalar = _scalar_type(dtype)
    nt = _threads(n_threads, n)

    def norm(u):
        return f64(math.sqrt(_krylov.dot(u, u, nt).real))

    bnrm2 = norm(b)
    atol = max(float(atol), float(rtol) * bnrm2)
    if bnrm2 == 0:
        return b, 0
    eps = np.finfo(dtype).eps
    if maxiter is None:
        maxiter = n * 10
    if restart is None:
        restart = 20
    restart = min(restart, n)
    Mb_nrm2 = np.linalg.norm(psolve(b.copy())) if psolve is not None else bnrm2
    ptol_max_factor = 1.0
    ptol = Mb_nrm2 * min(ptol_max_factor, atol / bnrm2)
    presid = 0.0
    lartg = get_lapack_funcs("lartg", dtype=dtype)
    v = np.empty([restart + 1, n], dtype=dtype)
    h = np.zeros([restart, restart + 1], dtype=dtype)
    givens = np.zeros([restart, 2], dtype=dtype)
    av = np.empty(n, dtype)
    q = np.empty(n, dtype)
    inner_iter = 0
    for iteration in range(maxiter):
        nt = _threads(n_threads, n)
        if iteration == 0:
            r = np.ascontiguousarray(b - op(x, q)) if x.any() else b.copy()
            if norm(r) < atol:
                return x, 0
        v[0, :] = _apply_m(psolve, r, n, dtype, (av, q), nt)
        tmp = norm(v[0, :])
        _krylov.scaled(v[0, :], v[0, :], 1 / tmp, nt)
        S = np.zeros(restart + 1, dtype=dtype)
        S[0] = tmp
        breakdown = False
        for col in range(restart):
            op(v[col, :], av)
            w = _apply_m(psolve, av, n, dtype, (q,), nt)
            if w is not av and not w.flags.writeable:
                w = w.copy()
            # vdot(w, v0) and |w|^2 in one pass: the first Gram-Schmidt product (scipy's
            # vdot(v0, w): its conjugate, bit for bit) and h0 = |w|
            dot0, ww = _krylov.dot2(w, v[0, :], nt)
            h0 = f64(math.sqrt(ww))
            tmp = scalar(dot0).conjugate()
            for k in range(col + 1):
                h[col, k] = tmp
                # w -= tmp v_k, and the next product (vdot(v_{k+1}, w), or |w|^2 after
                # the last)
                nxt = v[k + 1, :] if k < col else w
                tmp = scalar(_krylov.mgs(w, v[k, :], nxt, tmp, nt))
            h1 = f64(math.sqrt(tmp.real))
            h[col, col + 1] = h1
            if h1 <= eps * h0:
                v[col + 1, :] = w
                h[col, col + 1] = 0
                breakdown = True
            else:
                _krylov.scaled(v[col + 1, :], w, 1 / h1, nt)
            for k in range(col):
                c, s = givens[k, 0], givens[k, 1]
                n0, n1 = h[col, [k, k + 1]]
                h[col, [k, k + 1]] = [c * n0 + s * n1, -s.conj() * n0 + c * n1]
            c, s, mag = lartg(h[col, col], h[col, col + 1])
            givens[col, :] = [c, s]
            h[col, [col, col + 1]] = mag, 0
            tmp = -np.conjugate(s) * S[col]
            S[[col, col + 1]] = [c * S[col], tmp]
            presid = np.abs(tmp)
            inner_iter += 1
            if callback_type in ("legacy", "pr_norm"):
                callback(presid / bnrm2)
            if callback_type == "legacy" and inner_iter == maxiter:
                break
            if presid <= ptol or breakdown:
                break
        if h[col, col] == 0:
            S[col] = 0
        y = np.zeros([col + 1], dtype=dtype)
        y[:] = S[:col + 1]
        for k in range(col, 0, -1):
            if y[k] != 0:
                y[k] /= h[k, k]
                tmp = y[k]
                y[:k] -= tmp * h[k, :k]
        if y[0] != 0:
            y[0] /= h[0, 0]
        x += y @ v[:col + 1, :]
        r = np.ascontiguousarray(b - op(x, q))
        rnorm = norm(r)
        if callback_type == "legacy" and inner_iter == maxiter:
            return x, 0 if rnorm <= atol else maxiter
        if callback_type == "x":
            callback(x)
        if rnorm <= atol:
            break
        elif breakdown:
            break
        elif presid <= ptol:
            ptol_max_factor = max(eps, 0.25 * ptol_max_factor)
        else:
            ptol_max_factor = min(1.0, 1.5 * ptol_max_factor)
        ptol = presid * min(ptol_max_factor, atol / rnorm)
    info = 0 if (rnorm <= atol) else maxiter
    return x, info


def _check_atol(atol, name: str) -> None:
    """scipy's check of ``atol`` (a NaN, which scipy takes and then runs to maxiter, is
    refused too)."""
    if atol is None or isinstance(atol, str) or not atol >= 0:
        raise ValueError(f"'wsesparse.linalg.{name}' called with invalid `atol`={atol}; if "
                         "set, `atol` must be a real, non-negative number.")


def minres(A, b, x0=None, *, rtol: float = 1e-5, shift: float = 0.0,
           maxiter: int | None = None, M=None,
           callback: Callable[[np.ndarray], object] | None = None, show: bool = False,
           check: bool = False, n_threads: int | None = None) -> tuple[np.ndarray, int]:
    """Solve ``(A - shift I) x = b`` by MINRES, as ``scipy.sparse.linalg.minres`` does, on
    the library's kernels.

    scipy's algorithm (Paige and Saunders' MINRES as scipy writes it, with its stopping
    tests), the same arguments, iterations and results to rounding. A scipy sparse ``A``
    is wrapped once in a :class:`~wsesparse.CSR`; each step's vector work, about a dozen
    numpy calls with temporaries in scipy, runs as four OpenMP passes that also return
    the inner products and norms the step needs. Sums are taken in fixed chunks: the same
    bits with any thread count.

    Parameters
    ----------
    A : scipy.sparse matrix or array, CSR, ndarray or LinearOperator
        The real symmetric n x n matrix (it may be indefinite or singular). Do not
        change it while the solve runs.
    b : array_like of shape (n,) or (n, 1)
        Right-hand side.
    x0 : array_like of shape (n,) or (n, 1), or ``"Mb"``, optional
        Starting guess (zeros by default).
    rtol : float
        Relative tolerance of scipy's stopping tests.
    shift : float
        Solve with ``A - shift * I``.
    maxiter : int, optional
        Iterations at most (default ``5 * n``).
    M : sparse matrix, ndarray or LinearOperator, optional
        Symmetric positive definite preconditioner, applied as :func:`cg` applies its
        ``M``.
    callback : callable, optional
        ``callback(xk)`` after each iteration; as in scipy's minres, each ``xk`` is a new
        array.
    show, check : bool
        As scipy's: ``show=True`` prints scipy's iteration log (the solve then runs in
        ``scipy.sparse.linalg.minres``, with its products under
        :func:`wsesparse.accelerated`); ``check=True`` tests that ``A`` and ``M`` are
        symmetric first (ValueError otherwise).
    n_threads : int, optional
        Threads of the products and the vector kernels (default: each as
        :func:`~wsesparse.sparse_matmul` chooses for its work).

    Returns
    -------
    x : ndarray of shape (n,)
        The solution.
    info : int
        0 when a stopping test other than the iteration limit ended the solve, else
        ``maxiter``.

    Notes
    -----
    With both ``shift`` and ``x0``, this solve starts from the residual of ``A - shift I``;
    scipy's (1.17) starts from that of ``A`` and so returns the solution of another system.
    Where scipy's minres runs (below), it is given ``b + shift x0`` to the same effect.

    Only float64 systems run here. scipy's minres takes inner products without
    conjugation (it is for real systems), and for float32 ones it carries ``x`` and the
    directions in float64 and the rest in float32 (its result is float64); complex and
    float32 systems, and ``show=True``, run ``scipy.sparse.linalg.minres`` itself, with
    its products routed through :func:`wsesparse.accelerated`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse.linalg import minres
    >>> n = 50
    >>> A = sp.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(n, n), format="csr")
    >>> b = np.ones(n)
    >>> x, info = minres(A, b, rtol=1e-10)
    >>> info, bool(np.linalg.norm(A @ x - b) <= 1e-8 * np.linalg.norm(b))
    (0, True)
    """
    op, b, dtype, start = _system(A, b, x0, M, n_threads)
    shift = np.float64(check_real(shift, "shift", finite=False))
    if show or dtype != np.float64:
        return _scipy_minres(A, b, x0, rtol, shift, maxiter, M, callback, show, check)
    b, psolve, x = _prepared(op, A, M, b, start, dtype, n_threads)
    return _minres(op, b, x, x0 is None, rtol, shift, maxiter, psolve, callback, check,
                   n_threads)


def _system(A, b, x0, M, n_threads: int | None):
    """The solve's operator, ``b``, dtype and start as scipy's make_system settles them
    (``n_threads`` checked first, before any work): ``(op, b, dtype, start)``, ``b`` as
    given or float64, ``start`` the ``x0`` for :func:`_start`."""
    if n_threads is not None:
        resolve_n_threads(n_threads)
    op = _Operator(A, n_threads)
    b = _vector(b, op.shape[0], "b", op.shape)
    if b.dtype.char not in _FLOATING:
        b = b.astype("d")
    a_char = op.dtype.char if op.dtype is not None else np.asarray(op.op.matvec(b)).dtype.char
    dtype = np.dtype(_solution_char(a_char, b.dtype.char))
    start, dtype = _mb_start(x0, A, M, b, dtype, op.shape)
    return op, b, dtype, start


def _prepared(op: _Operator, A, M, b, start, dtype: np.dtype, n_threads: int | None):
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


def _scipy_solver(name: str, A, b, x0, M, callback, **kwargs):
    """scipy's solver ``name`` itself, products under ``accelerated()``: for what runs
    only there (longdouble solves)."""
    import scipy.sparse.linalg as sla
    from wsesparse.accelerate import accelerated
    with accelerated():
        return getattr(sla, name)(A, b, x0, M=M, callback=callback, **kwargs)


def _scipy_minres(A, b, x0, rtol, shift, maxiter, M, callback, show, check):
    """``scipy.sparse.linalg.minres`` under ``accelerated()``, started from the residual of
    ``A - shift I``: with a shift and ``x0``, it is given ``b + shift x0`` (scipy starts
    from ``b - A x0``)."""
    from scipy.sparse.linalg import minres as scipy_minres
    from wsesparse.accelerate import accelerated
    if shift != 0 and x0 is not None and np.any(b):
        if isinstance(x0, str) and x0 == "Mb":  # (scipy's M b, computed here once)
            x0 = aslinearoperator(M).matvec(np.asarray(b).ravel()) if M is not None \
                else np.asarray(b).ravel()
        b = np.asarray(b).ravel() + shift * np.asarray(x0).ravel()
    with accelerated():
        return scipy_minres(A, b, x0, rtol=rtol, shift=shift, maxiter=maxiter, M=M,
                            callback=callback, show=show, check=check)


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
        return _Diagonal(d)
    op = _Operator(M, n_threads, "M")
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


class _Diagonal:
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


def _minres(op: _Operator, b: np.ndarray, x: np.ndarray, zero_start: bool, rtol, shift,
            maxiter, psolve, callback, check: bool, n_threads) -> tuple[np.ndarray, int]:
    """scipy's minres loop (scipy/sparse/linalg/_isolve/minres.py, BSD-3-Clause), its
    scalar recurrences as written there, its vector work in _krylov's passes."""
    n = op.shape[0]
    dtype = x.dtype
    if maxiter is None:
        maxiter = 5 * n
    f64 = np.float64
    eps = np.finfo(dtype).eps
    nt = _threads(n_threads, n)

    def inner(u, v):
        return f64(_krylov.dot(u, v, nt))

    def precondition(r):
        # (what it returns is read at the next step's start, after w, x and v are written)
        return _apply_m(psolve, r, n, dtype, (v, spare, w, w1, w2, x), nt)

    if zero_start:
        r1 = b.copy()
    else:
        # b - (A - shift I) x: scipy's minres (1.17) subtracts A x alone, so with both a
        # shift and x0 it solves another system (tests/test_linalg.py shows it)
        r1 = np.ascontiguousarray(b - op(x, np.empty(n, dtype)))
        if shift != 0:
            r1 += shift * x
    # Buffers: scipy allocates v, y and w afresh each step; here they rotate. r1 and r2
    # start as the same vector, as scipy's.
    w, w1, w2 = (np.zeros(n, dtype) for _ in range(3))
    v = np.empty(n, dtype)
    spare = np.empty(n, dtype)  # the next step's y
    y = precondition(r1)
    beta1 = inner(r1, y)
    if beta1 < 0:
        raise ValueError("indefinite preconditioner")
    elif beta1 == 0:
        return x, 0
    bnorm = math.sqrt(inner(b, b))
    if bnorm == 0:
        return b, 0
    beta1 = f64(math.sqrt(beta1))
    if check:
        _check_symmetric(op, precondition, r1, y, eps, n, dtype)

    oldb = f64(0)
    beta = beta1
    dbar = f64(0)
    epsln = f64(0)
    phibar = beta1
    rhs1 = beta1
    rhs2 = f64(0)
    tnorm2 = f64(0)
    gmax = f64(0)
    gmin = f64(np.finfo(dtype).max)
    cs = f64(-1)
    sn = f64(0)
    istop = 0
    itn = 0
    r2 = r1
    yy = None  # y . y of the new r2 (no preconditioner: its beta^2)
    while itn < maxiter:
        itn += 1
        nt = _threads(n_threads, n)
        s = 1.0 / beta
        _krylov.scaled(v, y, s, nt)
        ynew = op(v, spare)
        alfa = f64(_krylov.minres_a(ynew, v, r1, shift, beta / oldb if itn >= 2 else 0.0,
                                    itn >= 2, nt))
        yy = f64(_krylov.minres_b(ynew, r2, alfa / beta, nt))
        spare = r1 if r1 is not r2 else np.empty(n, dtype)
        r1 = r2
        r2 = ynew
        oldb = beta
        if psolve is None:
            y, beta = r2, yy
        elif isinstance(psolve, _Diagonal):
            y, beta = psolve.fused(r2, nt)
            beta = f64(beta)
        else:
            y = precondition(r2)
            beta = inner(r2, y)
        if beta < 0:
            raise ValueError("non-symmetric matrix")
        beta = f64(math.sqrt(beta))
        tnorm2 += alfa ** 2 + oldb ** 2 + beta ** 2

        if itn == 1:
            if beta / beta1 <= 10 * eps:
                istop = -1  # terminate later

        oldeps = epsln
        delta = cs * dbar + sn * alfa
        gbar = sn * dbar - cs * alfa
        epsln = sn * beta
        dbar = -cs * beta
        root = _norm2(gbar, dbar)
        gamma = _norm2(gbar, beta)
        gamma = max(gamma, eps)
        cs = gbar / gamma
        sn = beta / gamma
        phi = cs * phibar
        phibar = sn * phibar

        denom = 1.0 / gamma
        # w1 = w2; w2 = w; w = (v - oldeps*w1 - delta*w2) * denom; x = x + phi*w: the new w
        # into the old w1's buffer (no longer read), x into a new array where a callback
        # may keep the old one (scipy's x is new every step)
        w1, w2, w = w2, w, w1
        x_out = x if callback is None else np.empty(n, dtype)
        xx = _krylov.minres_c(w, w1, w2, v, x, x_out, oldeps, delta, denom, phi, nt)
        x = x_out

        gmax = max(gmax, gamma)
        gmin = min(gmin, gamma)
        z = rhs1 / gamma
        rhs1 = rhs2 - delta * z
        rhs2 = -epsln * z

        Anorm = f64(math.sqrt(tnorm2))
        ynorm = f64(math.sqrt(xx))
        epsx = Anorm * ynorm * eps
        qrnorm = phibar
        rnorm = qrnorm
        test1 = np.inf if ynorm == 0 or Anorm == 0 else rnorm / (Anorm * ynorm)
        test2 = np.inf if Anorm == 0 else root / Anorm
        Acond = gmax / gmin
        if istop == 0:
            t1 = 1 + test1
            t2 = 1 + test2
            if t2 <= 1:
                istop = 2
            if t1 <= 1:
                istop = 1
            if itn >= maxiter:
                istop = 6
            if Acond >= 0.1 / eps:
                istop = 4
            if epsx >= beta1:
                istop = 3
            if test2 <= rtol:
                istop = 2
            if test1 <= rtol:
                istop = 1
        if callback is not None:
            callback(x)
        if istop != 0:
            break
    return x, (maxiter if istop == 6 else 0)


def _norm2(a, b):
    """``numpy.linalg.norm([a, b])`` as scipy's minres computes it."""
    return np.float64(math.sqrt(a * a + b * b))


def _check_symmetric(op: _Operator, precondition, r1, y, eps, n, dtype) -> None:
    """scipy's ``check=True`` tests of ``A`` and ``M`` (its own arithmetic)."""
    w = op(y, np.empty(n, dtype))
    r2 = op(w, np.empty(n, dtype))
    s, t = np.inner(w, w), np.inner(y, r2)
    if abs(s - t) > (s + eps) * eps ** (1.0 / 3.0):
        raise ValueError("non-symmetric matrix")
    r2 = precondition(y)
    s, t = np.inner(y, y), np.inner(r1, r2)
    if abs(s - t) > (s + eps) * eps ** (1.0 / 3.0):
        raise ValueError("non-symmetric preconditioner")


class _ProductOperator(LinearOperator):
    """A LinearOperator whose matvec is ``_Operator``'s product into one buffer, returned
    as it is: for ARPACK, whose scipy driver copies each product into its work array at
    once."""

    def __init__(self, op: _Operator, dtype: np.dtype):
        super().__init__(dtype, op.shape)
        self._op = op
        self._out = np.empty(op.shape[0], dtype)

    def _matvec(self, x):
        x = np.ascontiguousarray(np.asarray(x).reshape(-1), dtype=self.dtype)
        return self._op(x, self._out)


def eigsh(A, k: int = 6, M=None, sigma=None, which: str = "LM", v0=None, ncv=None,
          maxiter=None, tol: float = 0, return_eigenvectors: bool = True, Minv=None,
          OPinv=None, mode: str = "normal", rng=None, *, n_threads: int | None = None,
          **kwargs):
    """Eigenvalues of a symmetric or Hermitian matrix by ARPACK, as
    ``scipy.sparse.linalg.eigsh`` finds them, with the library's products.

    scipy's ``eigsh`` itself (its arguments, checks, errors and results) runs with two
    changes. A sparse or ndarray ``A`` of a floating dtype, in the standard mode (no
    ``sigma``, ``M``, ``Minv`` or ``OPinv``) with ``0 < k < n`` (``k < n - 1`` for a
    complex ``A``, which scipy's ``eigs`` takes to a dense ``eig`` from there on), is
    wrapped once in a :class:`~wsesparse.CSR` (checked, narrowed, value codes from its
    third product) and multiplied into a buffer the call keeps; and the call runs inside
    :func:`wsesparse.accelerated`, so ARPACK's own BLAS calls (its reorthogonalization)
    share the kernels' threads, and the products of any other mode run on the kernels too
    (a ``CSR`` given as ``A`` or ``M`` there is handed to scipy as its scipy matrix,
    ``CSR.to_scipy()``, which shift-invert factorizes). ARPACK's vector work stays
    ARPACK's. scipy's warnings (``k >= N``, ``M``'s precision) point at this function's
    call of scipy's, not at the caller's line.

    Parameters
    ----------
    A : scipy.sparse matrix or array, CSR, ndarray or LinearOperator
        The n x n real symmetric or complex Hermitian matrix. Do not change it while the
        call runs.
    k, M, sigma, which, v0, ncv, maxiter, tol, return_eigenvectors, Minv, OPinv, mode
        As ``scipy.sparse.linalg.eigsh``'s.
    rng : optional
        scipy's (1.15 and later), passed on where given.
    n_threads : int, optional
        Threads of the prepared sparse operand's products in the standard mode (default:
        as :func:`~wsesparse.sparse_matmul` chooses). An ndarray ``A`` multiplies through
        numpy's ``matmul`` (BLAS threads), and the other modes' products take the threads
        ``accelerated()`` gives them.
    **kwargs
        Passed to scipy's ``eigsh`` as they are.

    Returns
    -------
    w : ndarray
        The ``k`` eigenvalues.
    v : ndarray
        Their eigenvectors, one a column (only with ``return_eigenvectors``).

    See Also
    --------
    scipy.sparse.linalg.eigsh : the reference.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse.linalg import eigsh
    >>> n = 100
    >>> A = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n)).tocsr()
    >>> w = eigsh(A, k=2, which="LA", return_eigenvectors=False)
    >>> want = 2 - 2 * np.cos(np.pi * np.arange(n - 1, n + 1) / (n + 1))
    >>> bool(np.allclose(np.sort(w), want))
    True
    """
    import scipy.sparse.linalg as sla
    from wsesparse.accelerate import accelerated
    if n_threads is not None:
        resolve_n_threads(n_threads)
    if rng is not None:
        kwargs["rng"] = rng
    operand = A
    if _Operator.holds(A):
        standard = sigma is None and M is None and Minv is None and OPinv is None
        shape = A.shape
        # (scipy's eigsh takes a complex A to eigs, which goes dense from k = n - 1 on)
        k_max = shape[0] - 1 if A.dtype.kind == "c" else shape[0]
        if (standard and len(shape) == 2 and shape[0] == shape[1]
                and isinstance(k, (int, np.integer)) and 0 < k < k_max
                and A.dtype.char in _FLOATING):
            op = _Operator(A, n_threads)
            op.settle(A.dtype)
            operand = _ProductOperator(op, A.dtype)
        elif isinstance(A, CSR):  # (the matrix itself: shift-invert factorizes it, as
            operand = A.to_scipy()  # scipy's eigsh does a scipy matrix)
    if isinstance(M, CSR):
        M = M.to_scipy()
    with accelerated():
        return sla.eigsh(operand, k, M, sigma, which, v0, ncv, maxiter, tol,
                         return_eigenvectors, Minv, OPinv, mode, **kwargs)
