"""CSR x dense products on the GPU with our own kernel (``csr_dense`` in kernels.cu).

:class:`DeviceCSR` holds a CSR matrix in device memory, its structure checked once, its
transpose and value casts kept; :func:`product` computes ``S @ D`` or ``D @ S`` for a
``DeviceCSR`` ``S`` and a ``cupy.ndarray`` ``D``, choosing between the kernel and a dense
cuBLAS product (``method="auto"``, see ``wsesparse/gpu/_machine.py``).
``wsesparse.sparse_matmul`` calls :func:`product` for CuPy operands.
"""

from __future__ import annotations

import operator
import sys
import threading
from functools import lru_cache

import numpy as np

from wsesparse._checks import (KERNEL_DTYPES, csr_error_message, describe, renamed,
                               result_dtype)
from wsesparse._kernels._csr_tools import (CSR_BAD_INDEX, CSR_BAD_START, CSR_DECREASING,
                                           CSR_SHORT)
from wsesparse.gpu import _machine, _module
from wsesparse.gpu.plan import BLOCK, csr_launch, spmv4_grid, uses_spmv4

_FLAG_CODES = ((1, CSR_BAD_START), (2, CSR_DECREASING), (4, CSR_SHORT), (8, CSR_BAD_INDEX))
_MAX_GRID_Y = 65535
_local = threading.local()


def _fault_word():
    """(device address, host view) of this thread's word of mapped pinned memory that a
    checking kernel stores a fault into: read after a stream sync, no copy and no memset
    (with unified addressing, pinned host memory is addressable from kernels as it is)."""
    word = getattr(_local, "word", None)
    if word is None:
        cupy = _cupy()
        mem = cupy.cuda.alloc_pinned_memory(64)
        word = _local.word = (mem.ptr, np.frombuffer(mem, dtype=np.int32, count=1), mem)
    return word


_MODULES: tuple = (None, None)


def cupy_modules():
    """(cupy, cupyx.scipy.sparse), imported once per cupy module object: an import
    statement costs microseconds a call in a solver loop (``import cupyx.scipy.sparse``
    runs cupyx.scipy's lazy ``__getattr__`` each time)."""
    global _MODULES
    if _MODULES[0] is None or sys.modules.get("cupy") is not _MODULES[0]:
        import cupy
        import cupyx.scipy.sparse as csp
        _MODULES = (cupy, csp)
    return _MODULES


def _cupy():
    return cupy_modules()[0]


def _built(arr):
    """``arr`` once the current stream has finished building it: a kept copy may next be
    read by another thread on another stream."""
    _cupy().cuda.get_current_stream().synchronize()
    return arr


class DeviceCSR:
    """A CSR matrix in GPU memory, checked once, for repeated products with our kernel.

    Parameters
    ----------
    A : cupyx.scipy.sparse matrix (any format), scipy.sparse matrix or array,
        wsesparse.CSR, or a ``(data, indices, indptr)`` tuple of 1-D ``cupy.ndarray``
        The matrix. Host matrices are copied to the current device; cupyx formats other
        than CSR are converted. The tuple form takes int32 or int64 indices (cupyx's own
        matrices hold int32). Values of other dtypes than the four the kernels compute
        (bool, integers, float16) are converted once, by scipy's promotion with float32
        (int8 to float32, int64 to float64): products with them are floating point, where
        scipy's would stay integer. Contiguous device arrays are referenced, not copied: changing
        them afterwards changes this operand without a new check (as for ``wsesparse.CSR``),
        and the copies it keeps (values cast to another dtype, the transpose, the dense
        copy, whether the values are all finite) keep the old values: after changing the
        arrays, build a new ``DeviceCSR``.
    shape : tuple of int, optional
        Needed with the tuple form; with a matrix, if given, it must be the matrix's.
    name : str
        How error messages call the matrix.
    keep_dense : bool or "auto"
        Where ``method="auto"`` finds a dense cuBLAS product faster than our kernel, keep the
        dense copy for later products: ``"auto"`` (default) when it takes at most a quarter of
        the device memory free at that moment.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    nnz : int
        Stored entries (``indptr[-1]``); duplicates and unsorted indices are kept and add up.

    Examples
    --------
    >>> import scipy.sparse as sp, cupy                            # doctest: +SKIP
    >>> from wsesparse.gpu import DeviceCSR                         # doctest: +SKIP
    >>> S = DeviceCSR(sp.random(1000, 800, density=0.01, format="csr"))   # doctest: +SKIP
    >>> Y = S @ cupy.ones((800, 16))                               # doctest: +SKIP
    """

    _on_gpu = True   # wsesparse._cupy_backend.is_cupy sends products with it to the GPU
    # cupy.ndarray @ DeviceCSR defers to __rmatmul__ (as for cupyx's matrices)
    __array_priority__ = 1000
    __array_ufunc__ = None

    def __init__(self, A, shape=None, *, name: str = "A", keep_dense="auto"):
        if keep_dense not in (True, False, "auto"):
            raise ValueError(f"keep_dense must be True, False or 'auto', got {keep_dense!r}")
        self._setup(A, shape, name, keep_dense)
        self.ensure_checked()

    @classmethod
    def unchecked(cls, A, name: str = "A") -> "DeviceCSR":
        """A one-shot view of a cupyx matrix: nothing is checked here; the product kernel
        checks what it reads and raises after the launch (``sparse_matmul``'s path)."""
        obj = cls.__new__(cls)
        obj._setup(A, None, name, False)
        return obj

    def _setup(self, A, shape, name, keep_dense) -> None:
        given = shape
        data, indices, indptr, shape = _arrays(A, shape, name, _cupy())
        if given is not None and not isinstance(A, tuple) and _shape_ints(given) != shape:
            # (it was ignored: a review)
            raise ValueError(f"shape={given!r} differs from the shape of {name}, {shape}")
        self.name, self.shape, self.keep_dense = name, shape, keep_dense
        self.data, self.indices, self.indptr = data, indices, indptr
        self.dtype = np.dtype(data.dtype)
        self.checked = False
        self.nnz = int(indices.size)        # an upper bound until checked
        self._casts: dict = {}
        self._transpose: DeviceCSR | None = None
        self._dense: dict = {}
        self._finite: bool | None = None

    def ensure_checked(self) -> None:
        """Check the structure (once) and read ``nnz``; raises ValueError if corrupt."""
        if not self.checked:
            check_structure(self.indptr, self.indices, self.shape, self.name)
            self.nnz = int(self.indptr[-1])
            self.checked = True

    def _all_finite(self) -> bool:
        """Whether every stored value is finite: a device reduction read back, once for a
        checked matrix (like its kept dense copy; at every call it cost a prepared dense
        product at density 0.3 0.55-0.58 ms on an H200, docs/gpu.md "Session 47")."""
        if self._finite is not None:
            return self._finite
        finite = bool(_cupy().isfinite(self.data[:self.nnz]).all())
        if self.checked:    # (one-shot: nnz is an upper bound until checked)
            self._finite = finite
        return finite

    def values(self, dtype) -> "object":
        """The stored values as ``dtype`` (cast once and kept)."""
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self.data
        if dtype not in self._casts:
            self._casts[dtype] = _built(self.data.astype(dtype))
        return self._casts[dtype]

    @property
    def T(self) -> "DeviceCSR":  # noqa: N802 - numpy's name
        """The transpose (not conjugated) as a DeviceCSR, built once (a stable sort)."""
        if self._transpose is None:
            self.ensure_checked()
            self._transpose = _transposed(self)
            _built(None)
        return self._transpose

    def toarray(self, dtype=None):
        """The dense matrix (``cupy.ndarray``, C order), duplicates added in a fixed order."""
        cupy = _cupy()
        self.ensure_checked()
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        if dtype not in KERNEL_DTYPES:
            raise TypeError(f"dtype must be float32, float64, complex64 or complex128, "
                            f"got {dtype}")
        m, k = self.shape
        dense = cupy.zeros((m, k), dtype=dtype)
        if m and k and self.nnz:
            _module.kernel("csr_densify", dtype, self.indices.dtype)(
                (-(-m * 32 // BLOCK),), (BLOCK,),
                (self.indptr, self.indices, self.values(dtype), dense, np.int64(m), np.int64(k)))
        return dense

    def dense(self, dtype, keep: bool):
        """The dense matrix as ``dtype``, kept for later calls when ``keep``."""
        d = self._dense.get(np.dtype(dtype))
        if d is None:
            d = self.toarray(dtype)
            if keep:
                self._dense[np.dtype(dtype)] = _built(d)
        return d

    def aslinearoperator(self):
        """A ``cupyx.scipy.sparse.linalg.LinearOperator`` applying this matrix with our
        kernel, for cupyx's iterative solvers (``cg``, ``gmres``, ``minres``, ``lsmr``, ...):
        ``matvec``/``matmat`` compute ``S @ x``, ``rmatvec``/``rmatmat`` ``S^H @ y`` (through
        the kept transpose).

        Examples
        --------
        >>> import cupy, cupyx.scipy.sparse.linalg as cla               # doctest: +SKIP
        >>> x, info = cla.cg(S.aslinearoperator(), cupy.ones(S.shape[0]))  # doctest: +SKIP
        """
        from cupyx.scipy.sparse.linalg import LinearOperator

        def adjoint(y):       # S^H y = conj(conj(y)^T S), for a vector or a block
            return (y.conj().T @ self).conj().T

        return LinearOperator(self.shape, matvec=self.__matmul__, rmatvec=adjoint,
                              matmat=self.__matmul__, rmatmat=adjoint, dtype=self.dtype)

    def __matmul__(self, D):
        return product(self, D, transpose=False)

    def __rmatmul__(self, D):
        return product(self, D, transpose=True)

    def __repr__(self) -> str:
        return (f"<DeviceCSR {self.shape[0]}x{self.shape[1]}, {self.nnz} stored, "
                f"{self.dtype}, {self.indices.dtype} indices>")


def _shape_ints(shape) -> tuple:
    """``shape`` as a tuple of ints, or ``()`` where it is no sequence of ints
    (``operator.index``: no floats, no strings)."""
    try:
        return tuple(operator.index(n) for n in shape)
    except TypeError:
        return ()


def _arrays(A, shape, name, cupy):
    csp = cupy_modules()[1]
    if isinstance(A, tuple):
        if len(A) != 3 or shape is None:
            raise TypeError(f"{name}: the tuple form is (data, indices, indptr) with shape=")
        data, indices, indptr = A
        for what, arr in (("data", data), ("indices", indices), ("indptr", indptr)):
            if not isinstance(arr, cupy.ndarray) or arr.ndim != 1:
                raise TypeError(f"{name}: {what} must be a 1-D cupy.ndarray, got {describe(arr)}")
        sizes = _shape_ints(shape)
        if len(sizes) != 2 or min(sizes) < 0:
            raise ValueError(f"{name}: shape must be two nonnegative ints, got {shape!r}")
        shape = sizes
    elif csp.issparse(A):
        if A.format == "csc":
            # cupyx's tocsr writes where the row indices point: the CSC arrays are checked
            # first, as the CSR arrays of A.T (as the CPU path checks a scipy CSC).
            ip, ix = A.indptr, A.indices
            # (lengths first: csr_check reads indptr[n_cols] of a short indptr: a review)
            _check_lengths(A.data, ix, ip, tuple(A.shape), name, csc=True)
            if ip.dtype != ix.dtype or np.dtype(ix.dtype) not in _module.INDEX_TYPES:
                ip, ix = ip.astype(np.int64), ix.astype(np.int64)
            check_structure(cupy.ascontiguousarray(ip), cupy.ascontiguousarray(ix),
                            tuple(A.shape[::-1]), name, csc=True)
        A = A if A.format == "csr" else A.tocsr()
        data, indices, indptr, shape = A.data, A.indices, A.indptr, tuple(A.shape)
    else:
        data, indices, indptr, shape = _host_arrays(A, name, cupy)
    # The kernels take the arrays' addresses: strided views are copied.
    data, indices, indptr = (a if a.flags.c_contiguous else cupy.ascontiguousarray(a)
                             for a in (data, indices, indptr))
    idx_t = np.dtype(indices.dtype)
    if idx_t.kind not in "iu" or np.dtype(indptr.dtype).kind not in "iu":
        raise TypeError(f"{name} has a corrupt structure: indices and indptr must be integer "
                        f"arrays, got {indices.dtype} and {indptr.dtype}")
    if idx_t not in _module.INDEX_TYPES or indptr.dtype != idx_t:
        wide = np.dtype(np.int64)
        indices, indptr = indices.astype(wide), indptr.astype(wide)
    if np.dtype(data.dtype) not in KERNEL_DTYPES:
        data = data.astype(_check_value_dtype(data.dtype, name))
    _check_lengths(data, indices, indptr, shape, name)
    return data, indices, indptr, shape


def _check_lengths(data, indices, indptr, shape, name: str, csc: bool = False) -> None:
    """ValueError unless ``indptr`` has a row's entry more than the rows of ``shape`` (of its
    columns for a CSC operand, ``csc``) and ``indices`` as many entries as ``data``."""
    n = shape[1] if csc else shape[0]
    if indptr.size != n + 1:
        raise ValueError(f"{name} has a corrupt compressed structure ({shape[0]}x{shape[1]}"
                         + (", CSC" if csc else "")
                         + f"): indptr has {indptr.size} entries, not {n + 1}")
    if indices.size != data.size:
        raise ValueError(f"{name} has a corrupt compressed structure: {indices.size} indices "
                         f"but {data.size} values")


def _host_arrays(A, name: str, cupy) -> tuple:
    """``(data, indices, indptr, shape)`` on the device of a scipy sparse operand or a
    ``wsesparse.CSR``. A scipy CSR goes as it is (the device checks it); every other format
    is checked and converted on the host as the CPU path does it (``wsesparse.CSR``: COO,
    DOK and LIL read in C, duplicates kept), never by scipy's ``tocsr`` before a check
    (which writes where a bad index points, and races with a thread changing a LIL)."""
    import scipy.sparse as sp
    from wsesparse.csr import CSR
    if not isinstance(A, CSR):
        if not sp.issparse(A):
            raise TypeError(f"{name} must be a sparse matrix (cupyx, scipy or wsesparse.CSR) "
                            f"or a (data, indices, indptr) tuple, got {describe(A)}")
        if A.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got a sparse operand of shape {A.shape}")
        _check_value_dtype(A.dtype, name)
        if A.format != "csr":
            try:
                A = CSR(A)
            except (TypeError, ValueError) as exc:
                raise renamed(exc, name) from None
    if isinstance(A, CSR):
        A = A.to_scipy()  # (its arrays may run past its stored entries: those only)
    return (*(cupy.asarray(a) for a in (A.data, A.indices, A.indptr)), tuple(A.shape))


def _check_value_dtype(dtype, name: str) -> np.dtype:
    """The kernel dtype values of ``dtype`` compute in (scipy's promotion with float32),
    or TypeError (long double, object, ...)."""
    try:
        kernel = result_dtype(dtype, np.float32)
    except TypeError:
        kernel = None
    if kernel not in KERNEL_DTYPES:
        raise TypeError(f"{name} has values of dtype {np.dtype(dtype)}; the GPU kernels compute "
                        "float32, float64, complex64 or complex128")
    return kernel


def check_structure(indptr, indices, shape, name: str, csc: bool = False) -> None:
    """Raise the CPU path's ValueError if the CSR structure is corrupt (one kernel launch,
    one 4-byte read back); with ``csc``, the arrays are those of a CSC operand of shape
    ``shape[::-1]`` (the message speaks of it)."""
    cupy = _cupy()
    flags = cupy.zeros(1, dtype=np.int32)
    work = max(shape[0], indices.size, 1)
    grid = min(-(-work // BLOCK), 2048)
    _module.kernel("csr_check", None, indptr.dtype)(
        (grid,), (BLOCK,), (indptr, indices, np.int64(shape[0]), np.int64(shape[1]),
                            np.int64(indices.size), flags))
    f = int(flags.get()[0])
    for bit, code in _FLAG_CODES:
        if f & bit:
            raise ValueError(csr_error_message(code, name, shape, indices.size, csc=csc))


def _expand_rows(indptr, nnz, cupy, dtype):
    """Row number of each stored entry (length nnz), from indptr, on the device, as
    ``dtype``."""
    entries = cupy.arange(nnz, dtype=indptr.dtype)
    return (cupy.searchsorted(indptr, entries, side="right") - 1).astype(dtype)


def _transposed(S: DeviceCSR) -> DeviceCSR:
    cupy = _cupy()
    m, k = S.shape
    nnz = S.nnz
    # S's row numbers become the column indices: int64 where they pass the index type
    # (int32 indices of more than 2**31 - 1 rows wrapped negative: a review)
    itype = S.indptr.dtype
    if m - 1 > np.iinfo(itype).max:
        itype = np.dtype(np.int64)
    rows = _expand_rows(S.indptr, nnz, cupy, itype)
    cols = S.indices[:nnz]
    order = cupy.argsort(cols, kind="stable")          # stable: rows stay in order per column
    counts = cupy.bincount(cols, minlength=k) if nnz else cupy.zeros(k, dtype=cupy.int64)
    indptr = cupy.zeros(k + 1, dtype=itype)
    cupy.cumsum(counts, out=indptr[1:])
    T = DeviceCSR.__new__(DeviceCSR)
    T.name, T.shape, T.dtype, T.nnz = f"{S.name}.T", (k, m), S.dtype, nnz
    T.data, T.indices, T.indptr = S.data[:nnz][order], rows[order], indptr
    T._casts, T._transpose, T._dense, T._finite = {}, S, {}, S._finite
    T.checked, T.keep_dense = True, S.keep_dense
    return T


@lru_cache(maxsize=8)
def _rates(device_id: int) -> _machine.GPURates:
    cupy = _cupy()
    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return _machine.rates_for(name)


def _keeps_dense(S: DeviceCSR, dtype) -> bool:
    if S.keep_dense != "auto":
        return bool(S.keep_dense)
    free = _cupy().cuda.runtime.memGetInfo()[0]
    return S.shape[0] * S.shape[1] * np.dtype(dtype).itemsize * 4 <= free


#: Fewer output columns than this always take our kernel: cuBLAS reads the whole dense
#: matrix for any N, and at N <= 8 the kernel won at every density up to 0.3 (docs/gpu.md).
MIN_DENSE_COLUMNS = 32


def choose(S: DeviceCSR, n_cols: int, dtype, vector: bool, transpose: bool = False) -> str:
    """``"sparse"`` (our kernel) or ``"dense"`` (cuBLAS on a dense copy) for ``S @ X`` with
    ``n_cols`` columns (``X @ S`` with ``n_cols`` rows where ``transpose``: the kernel runs
    on ``S.T`` and writes ``S.shape[1]`` rows): the smaller estimate of
    wsesparse/gpu/_machine.py, the dense copy counted only where it is not kept from an
    earlier product.

    Examples
    --------
    >>> choose(None, 1, "float64", vector=True)
    'sparse'
    """
    if vector or n_cols < MIN_DENSE_COLUMNS:
        return "sparse"
    r = _rates(_cupy().cuda.runtime.getDevice())
    m, k = S.shape
    # (the output rows of the kernel: S.T's for X @ S, which a review found charged m)
    t_sparse = _machine.sparse_seconds(r, k if transpose else m, n_cols, S.nnz, dtype,
                                       S.indices.itemsize)
    t_dense = _machine.gemm_seconds(r, m, k, n_cols, dtype)
    if np.dtype(dtype) not in S._dense and not (S.checked and _keeps_dense(S, dtype)):
        t_dense += _machine.densify_seconds(r, m, k, S.nnz, dtype)
    return "dense" if t_dense < t_sparse else "sparse"


def _address(arr) -> int:
    """Device address of ``arr``'s first element (numpy's for the host-side tests)."""
    ptr = getattr(arr.data, "ptr", None)
    return ptr if ptr is not None else arr.__array_interface__["data"][0]


def _aligned(arr, row_stride: int, itemsize: int) -> bool:
    return _address(arr) % 16 == 0 and (row_stride * itemsize) % 16 == 0


def run_kernel(S: DeviceCSR, X, Y, dtype, ldx: int, ldy_row: int, ldy_col: int,
               n_cols: int, transposed: bool = False) -> None:
    """``Y = S @ X`` by ``csr_dense`` (``csr_spmv4`` for an SpMV of long rows): X row-major
    (unit column stride, row stride ``ldx``, ``S.shape[1]`` rows), Y at element strides
    ``ldy_row``, ``ldy_col``; ``n_cols`` columns (1 for a vector), Y's rows where
    ``transposed``. An unchecked ``S`` is checked by the kernel: ValueError after it."""
    cupy = _cupy()
    m, k = S.shape
    if m == 0 or n_cols == 0:
        if not S.checked:
            S.ensure_checked()
        return
    check = not S.checked
    if check:
        flag_ptr, flag, _ = _fault_word()
        flag[0] = 0
    else:
        flag_ptr = 0
    vals = S.values(dtype)
    if (uses_spmv4(m, n_cols, S.nnz, dtype, check) and _address(S.indices) % 16 == 0
            and _address(vals) % 16 == 0):
        kern = _module.kernel("csr_spmv4", dtype, S.indices.dtype, check)
        kern((spmv4_grid(m),), (BLOCK,), (S.indptr, S.indices, vals, X, Y, np.int64(m),
                                          np.int64(ldx), np.int64(ldy_row), np.int64(k),
                                          np.int64(S.indices.size), np.uint64(flag_ptr)))
    else:
        _launch_dense(S, X, Y, vals, dtype, ldx, ldy_row, ldy_col, n_cols, transposed,
                      flag_ptr)
    if check:
        cupy.cuda.get_current_stream().synchronize()
        if flag[0]:     # the full check names the first fault as the CPU path does
            check_structure(S.indptr, S.indices, S.shape, S.name)
            raise ValueError(f"{S.name} has a corrupt compressed structure")   # not reached


def _launch_dense(S: DeviceCSR, X, Y, vals, dtype, ldx: int, ldy_row: int, ldy_col: int,
                  n_cols: int, transposed: bool, flag_ptr: int) -> None:
    """The launches of ``csr_dense`` for ``run_kernel`` (more than one where the columns
    need more than 65535 blocks)."""
    m, k = S.shape
    item = dtype.itemsize
    vec = _module.max_vector(dtype)
    if (n_cols % vec or not _aligned(X, ldx, item)
            or (ldy_col == 1 and not _aligned(Y, ldy_row, item))):
        vec = 1
    launch = csr_launch(m, n_cols, S.nnz, vec)
    kern = _module.kernel("csr_dense", dtype, S.indices.dtype, vec, flag_ptr != 0)
    step = _MAX_GRID_Y * launch.column_lanes * vec
    for c0 in range(0, n_cols, step):   # grid.y is at most 65535 blocks of columns
        cols = min(step, n_cols - c0)
        grid = (launch.grid[0], -(-cols // (launch.column_lanes * vec)))
        kern(grid, (BLOCK,), (S.indptr, S.indices, vals, X[:, c0:] if c0 else X,
                              _from_column(Y, c0, transposed), np.int64(m), np.int64(cols),
                              np.int64(ldx), np.int64(ldy_row), np.int64(ldy_col),
                              np.int32(launch.gs_log), np.int32(launch.q_log), np.int64(k),
                              np.int64(S.indices.size), np.uint64(flag_ptr)))


def _from_column(Y, c0: int, transposed: bool):
    """A view of Y whose first element is the kernel's output column ``c0`` (the kernel
    takes the strides): Y's column ``c0``, or its row for ``D @ S`` (``transposed``: the
    kernel's columns are Y's rows). (Told, not read off the strides: those of a C-ordered
    (n, 1) Y are equal.)"""
    if c0 == 0:
        return Y
    return Y[c0:] if transposed else Y[:, c0:]


def _finite(S: "DeviceCSR", D) -> bool:
    """Whether S's stored values and D are all finite (device reductions read back; S's
    kept by a checked S)."""
    return S._all_finite() and bool(_cupy().isfinite(D).all())


def product(S: DeviceCSR, D, transpose: bool, out=None, method: str = "auto"):
    """``S @ D`` (``transpose=False``) or ``D @ S`` for a ``cupy.ndarray`` ``D`` (1-D or
    2-D). The result dtype is scipy's promotion of the two; ``out`` (checked by the caller
    for shape and dtype) may have any strides."""
    cupy = _cupy()
    if method not in ("auto", "sparse", "dense"):
        raise ValueError(f"method must be 'auto', 'sparse' or 'dense', got {method!r}")
    if not isinstance(D, cupy.ndarray):
        raise TypeError(f"the dense operand must be a cupy.ndarray, got {describe(D)}")
    if D.ndim not in (1, 2):
        raise ValueError(f"the dense operand must be 1-D or 2-D, got {describe(D)}")
    m, k = S.shape
    if D.shape[-1 if transpose else 0] != (m if transpose else k):
        a, b = (describe(D), repr(S)) if transpose else (repr(S), describe(D))
        raise ValueError(f"inner dimensions differ: A is {a}, B is {b}")
    try:
        dtype = result_dtype(S.dtype, D.dtype)
    except TypeError:   # (object arrays: a message naming neither operand, a review)
        dtype = D.dtype
    if dtype not in KERNEL_DTYPES:
        raise TypeError(f"on the GPU the product must be float32, float64, complex64 or "
                        f"complex128; {repr(S)} with {describe(D)} gives {dtype}")
    vector = D.ndim == 1
    n_cols = 1 if vector else (D.shape[0] if transpose else D.shape[1])
    if method == "auto":
        method = choose(S, n_cols, dtype, vector, transpose)
        if method == "dense" and not _finite(S, D):
            # Implicit zeros of a sparse matrix meet no inf/nan of D, a dense copy's do
            # (0 * inf = nan everywhere): as on the CPU, only finite operands go dense.
            method = "sparse"
    if D.dtype != dtype:
        D = D.astype(dtype)
    if method == "dense":
        dense = S._dense.get(dtype)
        if dense is None:
            dense = S.dense(dtype, keep=S.checked and _keeps_dense(S, dtype))
        res = D @ dense if transpose else dense @ D
        if out is None:     # D @ S in Fortran order, as on the sparse path
            return cupy.asfortranarray(res) if transpose else res
        out[...] = res
        return out
    # D @ S = (S^T @ D^T)^T: the rows of S^T are the output's columns.
    P = S.T if transpose else S
    if vector:
        res_shape = (P.shape[0],)
    else:
        res_shape = (D.shape[0], P.shape[0]) if transpose else (m, n_cols)
    if out is not None and (cupy.may_share_memory(out, D) or
                            cupy.may_share_memory(out, P.data)):
        # out overlaps an operand (x = A @ x): the kernel would read what it has written
        out[...] = product(S, D, transpose, method="sparse")
        return out
    if out is not None:
        Y = out
    else:   # D @ S in Fortran order, as scipy and the CPU path return it: coalesced stores
        Y = cupy.empty(res_shape, dtype=dtype, order="F" if transpose else "C")
    item = dtype.itemsize
    if vector:
        X = D if D.strides[0] % item == 0 and D.strides[0] >= 0 else cupy.ascontiguousarray(D)
        run_kernel(P, X, Y, dtype, X.strides[0] // item,
                   Y.strides[0] // item, 0, 1)
        return Y
    X = D.T if transpose else D          # row-major view of the kernel's X: rows = P's columns
    if X.strides[1] != item or X.strides[0] < 0 or X.strides[0] % item:
        X = cupy.ascontiguousarray(X)
    if transpose:
        ldy_row, ldy_col = Y.strides[1] // item, Y.strides[0] // item
    else:
        ldy_row, ldy_col = Y.strides[0] // item, Y.strides[1] // item
    run_kernel(P, X, Y, dtype, X.strides[0] // item, ldy_row, ldy_col, n_cols, transpose)
    return Y
