"""Solvers for Hermitian systems: :func:`cg` and :func:`minres`."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.sparse.linalg import aslinearoperator

from wsesparse._checks import check_real
from wsesparse._kernels import _krylov
from wsesparse.linalg._common import (
    apply_m, check_atol, Diagonal, FLOATING, Operator, preconditioned, prepared,
    scalar_type, scipy_solver, system, vector_threads)


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
    check_atol(atol, "cg")
    op, b, dtype, start = system(A, b, x0, M, n_threads)
    if dtype.char not in FLOATING:
        return scipy_solver("cg", A, b, x0, M, callback, rtol=rtol, atol=atol,
                             maxiter=maxiter)
    b, psolve, x = prepared(op, A, M, b, start, dtype, n_threads)
    n = op.shape[0]

    bnrm2 = math.sqrt(_krylov.dot(b, b, vector_threads(n_threads, n)).real)
    atol = max(float(atol), float(rtol) * bnrm2)
    if bnrm2 == 0:
        return b, 0
    if maxiter is None:
        maxiter = n * 10

    scalar = scalar_type(dtype)
    q = np.empty(n, dtype=dtype)
    if x.any():
        r = np.ascontiguousarray(b - op(x, q))
    else:
        r = b.copy()
    nt = vector_threads(n_threads, n)
    rr = _krylov.dot(r, r, nt).real  # |r|^2, from here on returned by each update
    p = np.empty(n, dtype=dtype)
    rho_prev = None
    for iteration in range(maxiter):
        if math.sqrt(rr) < atol:
            return x, 0
        nt = vector_threads(n_threads, n)
        if psolve is None:
            z = r
            rho_cur = scalar(rr)
        elif isinstance(psolve, Diagonal):
            z, rho = psolve.fused(r, nt)
            rho_cur = scalar(rho)
        else:
            z = preconditioned(psolve(r), n, dtype, (p,))
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
    op, b, dtype, start = system(A, b, x0, M, n_threads)
    shift = np.float64(check_real(shift, "shift", finite=False))
    if show or dtype != np.float64:
        return _scipy_minres(A, b, x0, rtol, shift, maxiter, M, callback, show, check)
    b, psolve, x = prepared(op, A, M, b, start, dtype, n_threads)
    return _minres(op, b, x, x0 is None, rtol, shift, maxiter, psolve, callback, check,
                   n_threads)


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


def _minres(op: Operator, b: np.ndarray, x: np.ndarray, zero_start: bool, rtol, shift,
            maxiter, psolve, callback, check: bool, n_threads) -> tuple[np.ndarray, int]:
    """scipy's minres loop (scipy/sparse/linalg/_isolve/minres.py, BSD-3-Clause), its
    scalar recurrences as written there, its vector work in _krylov's passes."""
    n = op.shape[0]
    dtype = x.dtype
    if maxiter is None:
        maxiter = 5 * n
    f64 = np.float64
    eps = np.finfo(dtype).eps
    nt = vector_threads(n_threads, n)

    def inner(u, v):
        return f64(_krylov.dot(u, v, nt))

    def precondition(r):
        # (what it returns is read at the next step's start, after w, x and v are written)
        return apply_m(psolve, r, n, dtype, (v, spare, w, w1, w2, x), nt)

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
        nt = vector_threads(n_threads, n)
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
        elif isinstance(psolve, Diagonal):
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


def _check_symmetric(op: Operator, precondition, r1, y, eps, n, dtype) -> None:
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
