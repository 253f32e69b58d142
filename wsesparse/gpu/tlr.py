"""TLR-MVM on the GPU: :class:`DeviceTLR` holds one :class:`~wsesparse.TLRMatrix`, or a
batch of them, in device memory and applies it with two launches per product.

Phase 1 (every tile column's stacked V at once) is one launch of ``seg_gemv_t``; phase 3
(every tile row's stacked U) is another, with phase 2's gather fused into its loads. The
adjoint runs ``seg_gemv_h`` (conjugated rows) the same way with the inverse gather. A batch
(``TLRBatch``, e.g. frequency slices) is stacked into the same two launches.
"""

from __future__ import annotations

import numpy as np

from wsesparse._checks import KERNEL_DTYPES, describe, result_dtype
from wsesparse.gpu import _module
from wsesparse.gpu.plan import BLOCK, TLR_COLS, tlr_adjoint_tables, tlr_forward_tables
from wsesparse.gpu.storage import check_storage, encode


class DeviceTLR:
    """A :class:`~wsesparse.TLRMatrix` (or a :class:`~wsesparse.TLRBatch`) on the GPU.

    Parameters
    ----------
    T : TLRMatrix or TLRBatch
        Copied to the current device once (the bases, stacked; the segment tables). The
        matrices of a batch must share one dtype.
    storage : {None, "float16", "bfloat16"}, default None
        Store the bases in 16 bits (``wsesparse.gpu.storage``): a product then reads half the
        bytes of float32/complex64 bases (a quarter of float64/complex128 ones). The kernels
        widen each stored value on load and sum in the product's dtype; the rounding of the
        bases is the only error added. ``basis_error`` reports it. Float16 bases are scaled
        by a power of two into its range (``wsesparse.gpu.storage.scale``), and each phase's
        sums scaled back after it.

    Attributes
    ----------
    basis_error : float
        ``||U' - U||_F / ||U||_F`` and the same for V, the larger, where ``U'``, ``V'`` are
        the stored bases widened back (0.0 without ``storage``).
    nbytes : int
        Bytes of the bases on the device (what one product streams).

    Notes
    -----
    ``D @ x`` / ``D.matvec(x)`` computes ``T @ x`` and ``D.rmatvec(y)`` (or ``D.H @ y``)
    ``T^H @ y`` for ``cupy.ndarray`` operands: ``x`` of shape ``(n,)`` or ``(n, s)`` for one
    matrix; ``(F, n)`` or ``(F, n, s)`` for a batch of F. Results are new ``cupy`` arrays of
    scipy's promoted dtype. A real matrix applied to complex vectors runs the real kernel on
    the real and imaginary parts as ``2s`` right-hand sides. Every output element is summed
    in a fixed order: results are bitwise reproducible run to run.

    Examples
    --------
    >>> import numpy as np, cupy                                    # doctest: +SKIP
    >>> from wsesparse import TLRMatrix                             # doctest: +SKIP
    >>> from wsesparse.gpu import DeviceTLR                         # doctest: +SKIP
    >>> from wsesparse.datasets import seismic_slice                # doctest: +SKIP
    >>> T = TLRMatrix.from_dense(seismic_slice(20, 20), nb=64)       # doctest: +SKIP
    >>> D = DeviceTLR(T)                                            # doctest: +SKIP
    >>> y = D @ cupy.ones(400, dtype=np.complex64)                  # doctest: +SKIP
    >>> bool(np.allclose(y.get(), T @ np.ones(400, np.complex64), atol=1e-4))  # doctest: +SKIP
    True
    """

    def __init__(self, T, storage: str | None = None):
        import cupy
        from wsesparse.tlr import TLRBatch, TLRMatrix
        self.storage = check_storage(storage)
        if isinstance(T, TLRMatrix):
            mats, self.batched = [T], False
        elif isinstance(T, TLRBatch):
            mats, self.batched = list(T.matrices), True
            if not mats:
                raise ValueError("T is an empty TLRBatch")
        else:
            raise TypeError(f"T must be a wsesparse.TLRMatrix or TLRBatch, got {describe(T)}")
        shapes = {M.shape for M in mats}
        dtypes = {M.dtype for M in mats}
        if len(shapes) != 1 or len(dtypes) != 1:
            raise ValueError(f"the matrices of a batch must share one shape and dtype, got "
                             f"{sorted(shapes)} and {sorted(map(str, dtypes))}")
        self.shape, self.dtype, self.n_matrices = mats[0].shape, mats[0].dtype, len(mats)
        self.K = sum(int(M.kcol_ptr[-1]) for M in mats)
        U, V = np.concatenate([M.U for M in mats]), np.concatenate([M.V for M in mats])
        self.basis_error, self._unscale = 0.0, (1.0, 1.0)
        if self.storage is not None:   # (each basis rounded once)
            (U, su, eu), (V, sv, ev) = encode(U, self.storage), encode(V, self.storage)
            self.basis_error = float(np.maximum(eu, ev))   # (max(eu, nan) dropped the nan)
            # (powers of two: exact; one factor each, as 1 / (su * sv) can fall below the
            # product's precision, float32's 2**-149, and zero the product)
            self._unscale = (1.0 / su, 1.0 / sv)
        self.nbytes = int(U.nbytes + V.nbytes)
        self._U, self._V = cupy.asarray(U), cupy.asarray(V)
        self._tables = {}
        for key, (first, third) in (("fwd", tlr_forward_tables(mats)),
                                    ("adj", tlr_adjoint_tables(mats))):
            self._tables[key] = tuple(_to_device(seg, cupy) for seg in (first, third))
        self._cast: dict = {}

    @property
    def H(self) -> "_DeviceTLRAdjoint":
        """The conjugate transpose, as an operator: ``D.H @ y`` is ``D.rmatvec(y)``."""
        return _DeviceTLRAdjoint(self)

    def _bases(self, dtype):
        import cupy
        if dtype == self.dtype or self.storage is not None:  # (stored: widened on load)
            return self._U, self._V
        if dtype not in self._cast:
            self._cast[dtype] = (self._U.astype(dtype), self._V.astype(dtype))
            # kept for other threads, which may read it on their own streams
            cupy.cuda.get_current_stream().synchronize()
        return self._cast[dtype]

    def aslinearoperator(self):
        """A ``cupyx.scipy.sparse.linalg.LinearOperator`` of one matrix (not a batch):
        ``matvec``/``matmat`` ``T @ x``, ``rmatvec``/``rmatmat`` ``T^H @ y``, for cupyx's
        iterative solvers (``lsmr`` calls both, as least-squares redatuming does; cupyx's
        ``lsqr`` is a direct QR solve of a square CSR matrix and takes no operator)."""
        if self.batched:
            raise ValueError("aslinearoperator takes one matrix; this DeviceTLR holds a batch "
                             f"of {self.n_matrices}")
        from cupyx.scipy.sparse.linalg import LinearOperator
        return LinearOperator(self.shape, matvec=self.matvec, rmatvec=self.rmatvec,
                              matmat=self.matvec, rmatmat=self.rmatvec, dtype=self.dtype)

    def matvec(self, x):
        """``T @ x`` (each matrix of a batch with its own x)."""
        return self._apply(x, adjoint=False)

    def rmatvec(self, y):
        """``T^H @ y`` (conjugate transpose)."""
        return self._apply(y, adjoint=True)

    def __matmul__(self, x):
        return self._apply(x, adjoint=False)

    def _apply(self, x, adjoint: bool):
        import cupy
        m, n = self.shape
        n_in, n_out = (m, n) if adjoint else (n, m)
        name = "y" if adjoint else "x"
        if not isinstance(x, cupy.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray, got {describe(x)}")
        lead = (self.n_matrices,) if self.batched else ()
        nd = len(lead)
        if x.ndim not in (nd + 1, nd + 2) or tuple(x.shape[:nd + 1]) != lead + (n_in,):
            op = "T.H" if adjoint else "T"
            want = f"({', '.join(map(str, lead + (n_in,)))}[, s])"
            raise ValueError(f"{op} @ {name}: {op} has shape {(n_out, n_in)}"
                             f"{' x ' + str(self.n_matrices) + ' matrices' if nd else ''} but "
                             f"{name} is {describe(x)}; {name} must be of shape {want}")
        try:
            dtype = result_dtype(self.dtype, x.dtype)
        except TypeError:   # (object arrays: a message naming neither operand, a review)
            dtype = x.dtype
        if dtype not in KERNEL_DTYPES:
            raise TypeError(f"{name} gives {dtype}; TLR-MVM computes float32, float64, "
                            "complex64 or complex128")
        vec = x.ndim == nd + 1
        s = 1 if vec else x.shape[-1]
        X = x.reshape(self.n_matrices * n_in, s)
        if self.dtype.kind != "c" and dtype.kind == "c":
            real = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
            Xs = cupy.ascontiguousarray(cupy.concatenate([X.real, X.imag], axis=1), real)
            Y2 = self._run(Xs, adjoint, real, n_out)
            Y = (Y2[:, :s] + 1j * Y2[:, s:]).astype(dtype)
        else:
            Y = self._run(cupy.ascontiguousarray(X.astype(dtype, copy=False)), adjoint, dtype,
                          n_out)
        shape = lead + (n_out,) + (() if vec else (s,))
        return Y.reshape(shape)

    def _run(self, X, adjoint: bool, dtype, n_out: int):
        import cupy
        U, V = self._bases(dtype)
        s = X.shape[1]
        first, third = self._tables["adj" if adjoint else "fwd"]
        mid = cupy.empty((self.K, s), dtype=dtype)
        Y = cupy.empty((self.n_matrices * n_out, s), dtype=dtype)
        if s == 0:
            return Y
        M1, M3 = (U, V) if adjoint else (V, U)
        narrow, st = _module.TLR_RHS_LANES[0], self.storage
        if s == 1:     # one right-hand side: row groups of a block share each column
            kern = _module.kernel("seg_gemv_h" if adjoint else "seg_gemv_t", dtype, 1,
                                   storage=st)
            ls, kind = 1, ("rows" if adjoint else "groups")
        elif adjoint:  # lanes of a warp over the right-hand sides
            ls = narrow if s <= narrow else _module.TLR_RHS_LANES[-1]
            kern = _module.kernel("seg_gemm_h", dtype, ls, storage=st)
            kind = "rows"
        else:          # 8 sums a thread, passes of 8
            ls, kind = _module.TLR_FORWARD_WIDE, "wide"
            kern = _module.kernel("seg_gemv_t", dtype, ls, storage=st)
        # The scaled 16-bit bases (wsesparse.gpu.storage.scale) scaled back after each
        # phase: after both, the sums ran su * sv times the product's own values and a
        # finite product (tiny bases, or results near the dtype's limit) came back inf
        # (a review).
        f1, f3 = self._unscale if adjoint else self._unscale[::-1]
        for c0 in range(0, s, ls):
            S = min(ls, s - c0)
            _launch(kern, first, M1, X[:, c0:], mid[:, c0:], S, s, kind)
            if f1 != 1.0:
                mid[:, c0:c0 + S] *= f1
            _launch(kern, third, M3, mid[:, c0:], Y[:, c0:], S, s, kind)
        if f3 != 1.0:
            Y *= f3
        return Y


class _DeviceTLRAdjoint:
    def __init__(self, parent: DeviceTLR):
        self.parent = parent
        self.shape = parent.shape[::-1]
        self.dtype = parent.dtype

    def __matmul__(self, y):
        return self.parent.rmatvec(y)


def _to_device(seg, cupy):
    return {"m_off": cupy.asarray(seg.m_off), "rows": cupy.asarray(seg.rows),
            "cols": cupy.asarray(seg.cols), "x_off": cupy.asarray(seg.x_off),
            "y_off": cupy.asarray(seg.y_off), "a": cupy.asarray(seg.work_a),
            "b": cupy.asarray(seg.work_b), "n": int(seg.work_a.size),
            "perm": None if seg.perm is None else cupy.asarray(seg.perm),
            "groups": seg.row_groups}


def _launch(kern, seg, M, x, y, S: int, ld: int, kind: str) -> None:
    n = seg["n"]
    if n == 0:
        return
    perm = seg["perm"] if seg["perm"] is not None else np.uint64(0)
    common = (M, seg["m_off"], seg["rows"], seg["cols"], seg["x_off"], seg["y_off"])
    tail = (perm, x, y, np.int32(S), np.int64(ld), np.int64(ld))
    if kind == "rows":     # adjoint: one warp per output row
        kern((-(-n * 32 // BLOCK),), (BLOCK,), common + (seg["a"], seg["b"], np.int64(n)) + tail)
    elif kind == "groups":  # one right-hand side: 32 columns x 8 or 16 row groups
        kern((n,), (TLR_COLS, seg["groups"]), common + (seg["a"], seg["b"]) + tail)
    else:  # 32 columns x 8 row groups, 8 sums a thread (16 vectors on an H100: 111 us with
        # 8 groups, 148 with 4, 131 with 16; docs/gpu.md)
        kern((n,), (TLR_COLS, 8), common + (seg["a"], seg["b"]) + tail)
