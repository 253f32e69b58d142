"""CuPy backend of ``sparse_matmul``: ``cupyx.scipy.sparse`` and ``cupy`` operands run on the GPU.

``sparse_matmul`` sends a product here as soon as one operand is a CuPy object (or a
:class:`wsesparse.gpu.DeviceCSR`); sparse @ dense and dense @ sparse then run our kernels
(:mod:`wsesparse.gpu`) or cuBLAS on a dense copy, sparse @ sparse is cupyx's, with the result
dtype, shape and ``out=`` rules of the CPU path.

CuPy is never imported by wsesparse unless an operand already is a CuPy object (its module is
loaded then anyway) or the user asks (:func:`available`, :class:`TLRDevice`): :func:`is_cupy`
looks only at the operand's type's ``__module__``. :class:`TLRDevice` runs a ``TLRMatrix``'s
TLR-MVM on the device one GEMV per tile row and column: the reference for
:class:`wsesparse.gpu.DeviceTLR` (two launches a product).
"""

from __future__ import annotations

from wsesparse._checks import (KERNEL_DTYPES, check_numeric_dtype, describe, product_shape,
                               result_dtype)
from wsesparse._threads import resolve_n_threads
from wsesparse.gpu.csr import DeviceCSR, cupy_modules, product

_ROOTS = ("cupy", "cupyx")


def is_cupy(x) -> bool:
    """Whether ``x`` is a CuPy object (``cupy.ndarray``, ``cupyx.scipy.sparse`` matrix, ...).

    Decided from ``type(x).__module__`` alone, so it never imports cupy.

    Examples
    --------
    >>> import numpy as np
    >>> is_cupy(np.ones(3)), is_cupy(type("ndarray", (), {"__module__": "cupy"})())
    (False, True)
    """
    if getattr(type(x), "_on_gpu", False):     # wsesparse.gpu.DeviceCSR
        return True
    module = getattr(type(x), "__module__", None)
    return isinstance(module, str) and module.partition(".")[0] in _ROOTS


def available() -> bool:
    """Whether CuPy imports and sees at least one CUDA device (this imports cupy)."""
    try:
        cupy, _ = cupy_modules()
        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # ImportError, or CUDA driver/runtime errors without a device
        return False


def _device_description(x, cupy, csp) -> str:
    if csp.issparse(x) or isinstance(x, cupy.ndarray):
        return describe(x)
    return f"{describe(x)} (host memory)"


def sparse_matmul(A, B, *, out=None, n_threads: int | None = None, method: str = "auto"):
    """``A @ B`` on the GPU for CuPy operands (called by :func:`wsesparse.sparse_matmul`).

    At least one operand must be a ``cupyx.scipy.sparse`` matrix and the other a
    ``cupyx.scipy.sparse`` matrix or a 1-D/2-D ``cupy.ndarray``; host (numpy/scipy) operands
    are not moved implicitly. The result dtype is the CPU path's (scipy's promotion rule) and
    must be float32, float64, complex64 or complex128. ``out`` must be a ``cupy.ndarray`` of
    the product's exact shape and dtype (any strides).

    Sparse @ dense and dense @ sparse run our kernel (``wsesparse.gpu``; the structure is
    checked on every call, as on the CPU: wrap a matrix used many times in
    :class:`wsesparse.gpu.DeviceCSR` to check it once and keep its transpose), or densify the
    sparse operand for cuBLAS where the estimate of ``wsesparse/gpu/_machine.py`` says that
    is faster (``method="auto"``); ``method="sparse"`` / ``"dense"`` force one.
    Sparse @ sparse is cupyx's (cuSPARSE). ``n_threads`` is validated and has no effect.
    """
    if method not in ("auto", "sparse", "dense"):
        raise ValueError(f"method must be 'auto', 'sparse' or 'dense', got {method!r}")
    if n_threads is not None:
        resolve_n_threads(n_threads)
    if A is None or B is None:
        raise TypeError(f"operands must not be None (A: {describe(A)}, B: {describe(B)})")
    cupy, csp = cupy_modules()
    a_sparse = csp.issparse(A) or isinstance(A, DeviceCSR)
    b_sparse = csp.issparse(B) or isinstance(B, DeviceCSR)
    for name, x, sparse in (("A", A, a_sparse), ("B", B, b_sparse)):
        if not sparse and not isinstance(x, cupy.ndarray):
            raise TypeError(
                f"{name} is {_device_description(x, cupy, csp)} but the other operand is a CuPy "
                "object: both must be on the device (cupy.asarray, cupyx.scipy.sparse.csr_matrix)")
    if not (a_sparse or b_sparse):
        raise TypeError(
            "sparse_matmul needs at least one cupyx.scipy.sparse operand; "
            f"got A: {describe(A)}, B: {describe(B)} (use cupy's @ for dense products)")
    for name, x in (("A", A), ("B", B)):
        check_numeric_dtype(x.dtype, name)
    if a_sparse and b_sparse:
        if out is not None:
            raise ValueError("out is only supported for dense results; sparse @ sparse is sparse")
        if isinstance(A, DeviceCSR) or isinstance(B, DeviceCSR):
            raise TypeError("sparse @ sparse takes cupyx.scipy.sparse matrices, not DeviceCSR")
        if A.shape[-1] != B.shape[0]:
            raise ValueError(f"inner dimensions differ: A is {describe(A)}, B is {describe(B)}")
        return A @ B

    S, D, transpose = (A, B, False) if a_sparse else (B, A, True)
    if D.ndim not in (1, 2):
        raise ValueError(f"the dense operand must be 1-D or 2-D, got {describe(D)}")
    res_shape = product_shape(S.shape, D.shape, transpose)
    if res_shape is None:
        raise ValueError(f"inner dimensions differ: A is {describe(A)}, B is {describe(B)}")
    dtype = result_dtype(S.dtype, D.dtype)
    if dtype not in KERNEL_DTYPES:
        raise TypeError(f"on the GPU the product must be float32, float64, complex64 or "
                        f"complex128; A {describe(A)} @ B {describe(B)} gives {dtype}")
    if out is not None:
        if not isinstance(out, cupy.ndarray):
            raise TypeError(f"out must be a cupy.ndarray for CuPy operands, got {describe(out)}")
        if tuple(out.shape) != res_shape:
            raise ValueError(f"out has shape {tuple(out.shape)}, but the product has shape "
                             f"{res_shape}")
        if out.dtype != dtype:
            raise ValueError(f"out has dtype {out.dtype}, but the product has dtype {dtype}")

    if not isinstance(S, DeviceCSR):   # checked by the product kernel (or before a transpose)
        S = DeviceCSR.unchecked(S, name="B" if transpose else "A")
    return product(S, D, transpose, out=out, method=method)


class TLRDevice:
    """A :class:`~wsesparse.TLRMatrix` copied to the GPU, applied as the three-phase TLR-MVM.

    ``TLRDevice(T)`` copies the stacked bases once; ``D @ x`` (``x`` a 1-D or 2-D
    ``cupy.ndarray`` with ``T.shape[1]`` rows) runs phase 1 as one GEMV/GEMM per tile column
    (stacked V), phase 2 as one gather (the reshuffle), phase 3 as one GEMV/GEMM per tile row
    (stacked U), all on the device. ``xp`` is the array module (default: cupy, imported here:
    building a ``TLRDevice`` is asking for cupy); numpy gives the same computation on the host.
    """

    def __init__(self, T, xp=None):
        from wsesparse.tlr import TLRMatrix
        if not isinstance(T, TLRMatrix):
            raise TypeError(f"T must be a wsesparse.TLRMatrix, got {describe(T)}")
        if xp is None:
            xp, _ = cupy_modules()
        self.xp, self.shape, self.dtype = xp, T.shape, T.dtype
        self.row_ptr, self.col_ptr = T.row_ptr.tolist(), T.col_ptr.tolist()
        self.krow_ptr, self.kcol_ptr = T.krow_ptr.tolist(), T.kcol_ptr.tolist()
        U, V = xp.asarray(T.U), xp.asarray(T.V)
        # Stacked bases per tile row (Kr_i x h_i) and per tile column (w_j x Kc_j).
        self._U = [U[T.u_off[i]:T.u_off[i + 1]].reshape(self.krow_ptr[i + 1] - self.krow_ptr[i],
                                                        self.row_ptr[i + 1] - self.row_ptr[i])
                   for i in range(len(self.row_ptr) - 1)]
        self._V = [V[T.v_off[j]:T.v_off[j + 1]].reshape(self.col_ptr[j + 1] - self.col_ptr[j],
                                                        self.kcol_ptr[j + 1] - self.kcol_ptr[j])
                   for j in range(len(self.col_ptr) - 1)]
        self._perm = xp.asarray(T.perm)
        self._cast: dict = {}

    def _bases(self, dtype):
        if dtype == self.dtype:
            return self._U, self._V
        if dtype not in self._cast:
            self._cast[dtype] = ([u.astype(dtype) for u in self._U],
                                 [v.astype(dtype) for v in self._V])
        return self._cast[dtype]

    def __matmul__(self, x):
        xp = self.xp
        if getattr(x, "ndim", None) not in (1, 2) or x.shape[0] != self.shape[1]:
            raise ValueError(f"T @ x: T has shape {self.shape} but x is {describe(x)}; "
                             f"x needs {self.shape[1]} rows")
        dtype = result_dtype(self.dtype, x.dtype)
        if dtype not in KERNEL_DTYPES:
            raise TypeError(f"T @ x gives {dtype}; TLR-MVM computes float32, float64, "
                            "complex64 or complex128")
        Ub, Vb = self._bases(dtype)
        X = x.reshape(x.shape[0], -1).astype(dtype, copy=False)
        s = X.shape[1]
        yv = xp.empty((self.kcol_ptr[-1], s), dtype=dtype)
        for j, v in enumerate(Vb):             # phase 1: yv_j = V_j^T x_j
            if v.shape[1]:
                yv[self.kcol_ptr[j]:self.kcol_ptr[j + 1]] = \
                    v.T @ X[self.col_ptr[j]:self.col_ptr[j + 1]]
        yu = yv[self._perm]                     # phase 2: reshuffle to tile-row order
        Y = xp.zeros((self.shape[0], s), dtype=dtype)
        for i, u in enumerate(Ub):             # phase 3: y_i = U_i yu_i
            if u.shape[0]:
                Y[self.row_ptr[i]:self.row_ptr[i + 1]] = \
                    u.T @ yu[self.krow_ptr[i]:self.krow_ptr[i + 1]]
        return Y[:, 0] if x.ndim == 1 else Y
