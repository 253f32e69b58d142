"""Solvers for general square systems: :func:`bicgstab` and :func:`gmres`."""

from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np

from wsesparse._kernels import _krylov
from wsesparse.linalg._common import (
    apply_m, check_atol, FLOATING, Operator, prepared, scalar_type, scipy_solver,
    system, vector_threads)


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
    check_atol(atol, "bicgstab")
    op, b, dtype, start = system(A, b, x0, M, n_threads)
    if dtype.char not in FLOATING:
        return scipy_solver("bicgstab", A, b, x0, M, callback, rtol=rtol, atol=atol,
                             maxiter=maxiter)
    b, psolve, x = prepared(op, A, M, b, start, dtype, n_threads)
    n = op.shape[0]

    nt = vector_threads(n_threads, n)
    bnrm2 = math.sqrt(_krylov.dot(b, b, nt).real)
    atol = max(float(atol), float(rtol) * bnrm2)
    if bnrm2 == 0:
        return b, 0
    if maxiter is None:
        maxiter = n * 10
    f64 = np.float64
    scalar = scalar_type(dtype)
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
        nt = vector_threads(n_threads, n)
        if abs(rho) < rhotol:  # rho breakdown
            return x, -10
        if iteration > 0:
            if abs(omega) < omegatol:  # omega breakdown
                return x, -11
            beta = (rho / rho_prev) * (alpha / omega)
            _krylov.bicg_p(p, r, v, beta, omega, nt)
        else:
            p = r.copy()
        phat = apply_m(psolve, p, n, dtype, (v, t), nt)
        op(phat, v)
        rv = scalar(_krylov.dot(rtilde, v, nt))
        if rv == 0:
            return x, -11
        alpha = rho / rv
        ss = f64(_krylov.minres_b(r, v, alpha, nt))  # r -= alpha v, |r|^2 (scipy's s is r)
        if math.sqrt(ss) < atol:
            x += alpha * phat  # (once a solve: numpy's, as scipy's; an inf stays inf)
            return x, 0
        shat = apply_m(psolve, r, n, dtype, (v, t, x), nt)
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
    check_atol(atol, "gmres")
    op, b, dtype, start = system(A, b, x0, M, n_threads)
    if dtype.char not in FLOATING:
        # (callback_type is set wherever a callback is: scipy gives no second warning)
        return scipy_solver("gmres", A, b, x0, M, callback, rtol=rtol, atol=atol,
                             restart=restart, maxiter=maxiter,
                             callback_type=callback_type or "x")
    b, psolve, x = prepared(op, A, M, b, start, dtype, n_threads)
    return _gmres(op, b, x, rtol, atol, restart, maxiter, psolve, callback, callback_type,
                  n_threads)


def _gmres(op: Operator, b, x, rtol, atol, restart, maxiter, psolve, callback,
           callback_type, n_threads) -> tuple[np.ndarray, int]:
    """scipy's gmres loop (scipy/sparse/linalg/_isolve/iterative.py, BSD-3-Clause), its
    scalar work as written there, its vector work in _krylov's passes."""
    from scipy.linalg import get_lapack_funcs
    n = op.shape[0]
    dtype = x.dtype
    f64 = np.float64
    scalar = scalar_type(dtype)
    nt = vector_threads(n_threads, n)

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
        nt = vector_threads(n_threads, n)
        if iteration == 0:
            r = np.ascontiguousarray(b - op(x, q)) if x.any() else b.copy()
            if norm(r) < atol:
                return x, 0
        v[0, :] = apply_m(psolve, r, n, dtype, (av, q), nt)
        tmp = norm(v[0, :])
        _krylov.scaled(v[0, :], v[0, :], 1 / tmp, nt)
        S = np.zeros(restart + 1, dtype=dtype)
        S[0] = tmp
        breakdown = False
        for col in range(restart):
            op(v[col, :], av)
            w = apply_m(psolve, av, n, dtype, (q,), nt)
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
