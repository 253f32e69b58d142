"""The libraries ``wsesparse bench`` compares against: loading them, and one zero-argument
call per library that runs the product on operands converted beforehand."""

from __future__ import annotations

import glob
import operator
import os
import sys
import warnings

from wsesparse._timing import best_time

# The kernels this compares share the machine's cores; peers get the same thread count.
PEER_ORDER = ("wsesparse", "wse.CSR", "scipy", "mkl", "graphblas", "torch", "dense")
# Columns that are "peers" (what wsesparse is compared against).
PEERS = ("scipy", "mkl", "graphblas", "torch", "dense")


def _find_mkl_rt() -> None:
    """sparse_dot_mkl looks for libmkl_rt.so; pip's mkl ships libmkl_rt.so.<N> only."""
    if os.environ.get("MKL_RT"):
        return
    for prefix in {sys.prefix, sys.base_prefix}:
        hits = sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*")))
        if hits:
            os.environ["MKL_RT"] = hits[0]
            return


def load_peers(n_threads: int) -> tuple[dict, dict]:
    """Import the optional peers and give each ``n_threads`` threads.

    Parameters
    ----------
    n_threads : int
        Threads for MKL, SuiteSparse:GraphBLAS and torch.

    Returns
    -------
    mods : dict
        ``{name: module}`` of the peers that loaded ("mkl", "graphblas", "torch").
    missing : dict
        ``{name: reason}`` of the ones that did not.
    """
    mods, missing = {}, {}
    _find_mkl_rt()
    # One OpenMP runtime for everybody (the kernels use GNU OpenMP): MKL's own Intel runtime
    # would spin on the cores after each call and slow whichever library runs next.
    os.environ.setdefault("MKL_THREADING_LAYER", "GNU")
    try:
        import sparse_dot_mkl
        _previous.setdefault("mkl", sparse_dot_mkl.mkl_get_max_threads())
        sparse_dot_mkl.mkl_set_num_threads(n_threads)
        mods["mkl"] = sparse_dot_mkl
    except Exception as exc:  # ImportError, or MKL's runtime not loadable
        missing["mkl"] = f"{type(exc).__name__}: {str(exc)[:60]}"
    try:
        import graphblas as gb
        gb.init("suitesparse", blocking=True)
        _previous.setdefault("graphblas", gb.ss.config["nthreads"])
        gb.ss.config["nthreads"] = n_threads
        mods["graphblas"] = gb
    except Exception as exc:
        missing["graphblas"] = f"{type(exc).__name__}: {str(exc)[:60]}"
    try:
        import torch
        _previous.setdefault("torch", torch.get_num_threads())
        torch.set_num_threads(n_threads)
        mods["torch"] = torch
    except Exception as exc:
        missing["torch"] = f"{type(exc).__name__}: {str(exc)[:60]}"
    return mods, missing


# The peers' own thread counts before the first load_peers, for restore_peer_threads.
_previous: dict[str, int] = {}


def restore_peer_threads() -> None:
    """Give the peers that :func:`load_peers` set their thread counts from before it
    (``wsesparse bench`` does at the end, for callers in the same process).

    Examples
    --------
    >>> mods, _ = load_peers(1)
    >>> restore_peer_threads()
    """
    for name, count in list(_previous.items()):
        if name == "torch":
            import torch
            torch.set_num_threads(count)
        elif name == "mkl":
            import sparse_dot_mkl
            sparse_dot_mkl.mkl_set_num_threads(count)
        elif name == "graphblas":
            import graphblas as gb
            gb.ss.config["nthreads"] = count
        del _previous[name]


def make_calls(A, X, mods, n_threads, left=False, skip=()):
    """One zero-argument callable per library present, each computing the product.

    Conversions to each library's own format happen here, outside the timed region. Peers
    named in ``skip`` (predicted too slow) are left out before any conversion or warm-up.

    Parameters
    ----------
    A : scipy.sparse.csr_matrix
        The sparse operand (M x K).
    X : ndarray of shape (K, N)
        The dense operand; N = 1 is passed to every library as a vector.
    mods : dict
        The peers :func:`load_peers` loaded.
    n_threads : int
        Threads for ``sparse_matmul``.
    left : bool
        Compute ``X.T @ A`` (dense @ sparse; ``X.T`` C-contiguous) instead of ``A @ X``.
    skip : collection of str
        Peers to leave out.

    Returns
    -------
    dict
        ``{name: callable}`` in :data:`PEER_ORDER` names; a callable with a ``to_numpy``
        method returns a result that needs it before the check.
    """
    import numpy as np

    import wsesparse as wse
    one = X.shape[1] == 1
    if one:
        D = X[:, 0].copy()
    else:
        D = np.ascontiguousarray(X.T) if left else X

    def pair(S):
        """The operands in product order: (dense, sparse) with --left."""
        return (D, S) if left else (S, D)

    calls = {"wsesparse": lambda: wse.sparse_matmul(*pair(A), n_threads=n_threads)}
    P = wse.CSR(A)
    # A prepared operand's first product caches what later ones reuse (its transpose
    # for --left, its dense copy where dense BLAS wins): done here, outside the timing,
    # as the dense peer's A.toarray() is (best_time reports a lone warm-up call for
    # slow points, which would time the copy: 16384^2, density 0.5, N = 64: 6 GFLOP/s
    # for the densifying call, 107 for the next ones).
    wse.sparse_matmul(*pair(P), n_threads=n_threads)
    calls["wse.CSR"] = lambda: wse.sparse_matmul(*pair(P), n_threads=n_threads)
    if "scipy" not in skip:
        calls["scipy"] = lambda: operator.matmul(*pair(A))

    if "mkl" in mods and "mkl" not in skip:
        dot = mods["mkl"].dot_product_mkl
        calls["mkl"] = lambda: dot(*pair(A))

    if "graphblas" in mods and "graphblas" not in skip:
        calls["graphblas"] = _graphblas_call(mods["graphblas"], A, X, D, one, left)

    if "torch" in mods and "torch" not in skip:
        torch = mods["torch"]
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                     torch.from_numpy(A.data), size=A.shape, check_invariants=False)
        Dt = torch.from_numpy(np.ascontiguousarray(D))
        calls["torch"] = _TorchCall(*((Dt, At) if left else (At, Dt)))

    if "dense" not in skip:
        Ad = A.toarray()
        calls["dense"] = lambda: operator.matmul(*pair(Ad))
    return calls


def _graphblas_call(gb, A, X, D, one, left=False):
    """The faster of two ways to run A @ X in SuiteSparse:GraphBLAS, picked by one timing.

    Operands are converted once here. "A*X": mxm of A (CSR) with X as a full row-major
    matrix; "(X'*A')'": mxm of X' (full) with A' (CSR), i.e. the transposed product, whose
    result is Y'. GraphBLAS picks its own algorithm (saxpy/dot) inside either. For N = 1 it
    is mxv. With ``left`` (D = X.T, or the vector): "X*A" (mxm), or vxm for N = 1. The
    result stays a GraphBLAS object inside the timed call; converting it back to numpy
    (for the check) is not timed.
    """
    import numpy as np
    Ag = gb.io.from_scipy_sparse(A)
    if one:
        xg = gb.Vector.from_dense(D)
        if left:
            return _GraphBLASCall(lambda: xg.vxm(Ag).new(), transposed=False, variant="vxm")
        return _GraphBLASCall(lambda: Ag.mxv(xg).new(), transposed=False, variant="mxv")
    if left:
        Dg = gb.Matrix.from_dense(D)
        return _GraphBLASCall(lambda: Dg.mxm(Ag).new(), transposed=False, variant="X*A")
    Xg = gb.Matrix.from_dense(X)
    XTg = gb.Matrix.from_dense(np.ascontiguousarray(X.T))
    ATg = gb.io.from_scipy_sparse(A.T.tocsr())
    variants = [_GraphBLASCall(lambda: Ag.mxm(Xg).new(), transposed=False, variant="A*X"),
                _GraphBLASCall(lambda: XTg.mxm(ATg).new(), transposed=True, variant="(X'*A')'")]
    times = [best_time(v, 1)[1] for v in variants]  # a warm-up and one timed call each
    return variants[int(np.argmin(times))]


class _GraphBLASCall:
    """Timed part: the mxm/mxv; ``to_numpy`` converts a result for the check."""

    def __init__(self, fn, transposed, variant):
        self.fn, self.transposed, self.variant = fn, transposed, variant

    def __call__(self):
        return self.fn()

    def to_numpy(self, r):
        Y = r.to_dense(fill_value=0)
        return Y.T if self.transposed else Y


class _TorchCall:
    """``a @ b`` (sparse @ dense, or dense @ sparse for ``--left``); a dense operand is
    1-D for N = 1 (a matrix-vector product)."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self):
        return self.a @ self.b

    @staticmethod
    def to_numpy(r):
        return r.numpy()
