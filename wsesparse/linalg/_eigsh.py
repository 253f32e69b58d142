""":func:`eigsh`: scipy's ARPACK driver with the prepared product."""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from wsesparse._threads import resolve_n_threads
from wsesparse.csr import CSR
from wsesparse.linalg._common import FLOATING, Operator


class _ProductOperator(LinearOperator):
    """A LinearOperator whose matvec is ``Operator``'s product into one buffer, returned
    as it is: for ARPACK, whose scipy driver copies each product into its work array at
    once."""

    def __init__(self, op: Operator, dtype: np.dtype):
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
    if Operator.holds(A):
        standard = sigma is None and M is None and Minv is None and OPinv is None
        shape = A.shape
        # (scipy's eigsh takes a complex A to eigs, which goes dense from k = n - 1 on)
        k_max = shape[0] - 1 if A.dtype.kind == "c" else shape[0]
        if (standard and len(shape) == 2 and shape[0] == shape[1]
                and isinstance(k, (int, np.integer)) and 0 < k < k_max
                and A.dtype.char in FLOATING):
            op = Operator(A, n_threads)
            op.settle(A.dtype)
            operand = _ProductOperator(op, A.dtype)
        elif isinstance(A, CSR):  # (the matrix itself: shift-invert factorizes it, as
            operand = A.to_scipy()  # scipy's eigsh does a scipy matrix)
    if isinstance(M, CSR):
        M = M.to_scipy()
    with accelerated():
        return sla.eigsh(operand, k, M, sigma, which, v0, ncv, maxiter, tol,
                         return_eigenvectors, Minv, OPinv, mode, **kwargs)
