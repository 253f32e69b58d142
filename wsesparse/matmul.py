"""``sparse_matmul``: a drop-in for ``A @ B`` with one sparse operand."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import scipy.sparse as sp

from wsesparse import _blas, _cupy_backend, _hardware
from wsesparse import _thresholds as th
from wsesparse._checks import (CHECK_MIN_BYTES, KERNEL_DTYPES, array_nbytes, as_dense_operand,
                               check_array_allocation, check_numeric_dtype, describe,
                               fits_in_memory, product_shape, renamed, result_dtype)
from wsesparse._drivers import (contiguous_operand, product_into, scatter_chunks, scatter_into,
                                scatter_panels, scatter_tokens)
from wsesparse._hardware import HardwareProfile, available_cores
from wsesparse._outputs import empty_output
from wsesparse._structure import check_sparse_structure, tocsr_keeping_duplicates
from wsesparse._threads import resolve_n_threads
from wsesparse._kernels import _csr_tools, _scatter, _spmm
from wsesparse.csr import CSR

Method = Literal["auto", "sparse", "dense"]


def _is_sparse(x) -> bool:
    return isinstance(x, CSR) or sp.issparse(x)


def _compressed(S, name: str) -> tuple[CSR, bool] | None:
    """Validated CSR view of a scipy CSR/CSC operand: ``(op, transposed)``, else None.

    CSR and CSC structures are validated *before* scipy touches them: scipy's
    own conversions and products index memory with the stored indices
    unchecked, and crash or return garbage on a corrupt structure.
    """
    if S.format != "csr":
        check_sparse_structure(S, name)  # COO/BSR/DIA/LIL/DOK arrays, before scipy uses them
        if S.format != "csc":            # (of a CSC, the index types: CSR._csc_view below)
            return None
    try:
        if S.format == "csr":
            return CSR(S), False
        # The CSC arrays of S are the CSR arrays of S.T.
        return CSR._csc_view(S), True
    except (TypeError, ValueError) as exc:
        raise renamed(exc, name) from None


def _as_csr(S, transpose: bool, name: str, scatter_ok: bool) -> tuple[CSR, bool]:
    """The CSR operand ``op`` of ``S`` (or of ``S.T``), as ``(op, scatter)``.

    With ``scatter`` the product is ``op.T @ X``, to be computed by scatter
    from op's arrays: a CSR operand used transposed (``X @ W``), or a CSC one
    used as it is, if ``scatter_ok`` (few tokens: that costs less than
    transposing the arrays). A prepared ``CSR`` caches its transpose instead.
    """
    if isinstance(S, CSR):
        return (S.T if transpose else S), False
    if S.ndim != 2:
        raise ValueError(f"the sparse operand must be 2-D, got shape {S.shape}")
    if S.format in ("coo", "dok"):  # (one counting sort, which checks the coordinates too)
        try:
            return CSR._from_triplets(S, name, transpose), False
        except (TypeError, ValueError) as exc:
            raise renamed(exc, name) from None
    if S.format == "lil":  # (CSR checks and converts it, in C where it can)
        try:
            comp = CSR(S), False
        except (TypeError, ValueError) as exc:
            raise renamed(exc, name) from None
    else:
        comp = _compressed(S, name)
    if comp is not None:
        op, flipped = comp
        if flipped == transpose:
            return op, False
        return (op, True) if scatter_ok else (op.T, False)
    try:
        return CSR(tocsr_keeping_duplicates(S.T if transpose else S)), False
    except (TypeError, ValueError) as exc:
        raise renamed(exc, name) from None


def _dia_within_shape(S, name: str):
    """DIA ``S`` (checked) with its data cut to the matrix's columns. ``X @ S`` goes through
    scipy's DIA transpose (in scipy's product and in the conversion here), which misplaced
    entries where ``data`` is wider than the matrix's larger side (a review: ``X @ D`` and
    ``X @ CSR(D)`` differed, and only the second was ``X @ D.toarray()``). Stored columns
    past the matrix's last are not part of it."""
    check_sparse_structure(S, name)
    data = np.asarray(S.data)
    if data.shape[1] <= S.shape[1]:
        return S
    return type(S)((data[:, :S.shape[1]], S.offsets), shape=S.shape)


def _as_checked_scipy(S, name: str):
    """``S`` as a scipy sparse operand, its structure checked if it is CSR/CSC."""
    if isinstance(S, CSR):
        return S.to_scipy()
    if S.ndim == 2:
        _compressed(S, name)
    return S


def _via_scipy(S, D: np.ndarray, transpose: bool) -> bool:
    """Whether a product of a COO, DIA or BSR operand is scipy's own (with ``method="auto"``).

    scipy multiplies those formats as they are stored; the kernels need a CSR built (and
    COO's entries sorted) on every call, which took 3.8x (COO), 8.9x (DIA) and 1.9x (BSR)
    scipy's time with one vector and 250,000 nonzeros (docs/tuning.md, "Other formats with
    one vector"), and up to 18x with a few columns of a small operand ("Other formats with
    several vectors"). So: one vector always; several of the matrix's own dtype up to
    ``SCIPY_OWN_WORK`` stored values times columns (and ``X @ COO`` with a few rows and
    many entries: ``SCIPY_OWN_COO_RIGHT``). Where scipy's product treats stored
    zeros unlike a CSR product (DIA multiplies its padding, COO's multi-vector product
    skips explicit zeros), only with a finite D, where that cannot show (``0 * inf``).
    (A ``CSR`` has no ``format``.)"""
    fmt = getattr(S, "format", None)
    if fmt not in ("coo", "dia", "bsr"):
        return False
    n_tokens = 1 if D.ndim == 1 else D.shape[0 if transpose else 1]
    if n_tokens != 1:
        if S.dtype != D.dtype:  # (scipy's kernels refuse some mixes)
            return False
        stored = np.size(S.data)
        if stored * n_tokens > th.SCIPY_OWN_WORK[fmt, transpose] and not (
                fmt == "coo" and transpose and stored >= th.SCIPY_OWN_COO_RIGHT[0]
                and n_tokens < th.SCIPY_OWN_COO_RIGHT[1]):
            return False
    if fmt == "coo":  # (scipy's product rejects uint64 coordinates; the kernels take them)
        for c in S.coords:
            t = getattr(c, "dtype", None)
            if t is not None and t.kind == "u" and t.itemsize == 8:
                return False
    if fmt == "bsr" or (fmt == "coo" and n_tokens == 1):
        return True
    return _csr_tools.all_finite(D)  # (4.5 -> 0.3 us at 1,000 entries)


def _scipy_result(y, shape: tuple[int, ...]) -> np.ndarray:
    """scipy's product ``y`` as an array of the product's ``shape``, as the kernels give it:
    scipy's COO array product returns a scalar wherever its result has one entry (a rule for
    1-D arrays that also takes a 2-D array of one row, and ``x @ A`` of one column)."""
    y = np.asarray(y)
    return y if y.shape == shape else np.broadcast_to(y, shape).copy()


def _check_out(out, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {describe(out)}")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, but the product has shape {shape}")
    if out.dtype != dtype:
        raise ValueError(f"out has dtype {out.dtype}, but the product has dtype {dtype}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out


def _wrap(result: np.ndarray, sparse_op, dense_in) -> np.ndarray:
    """Give the result the container scipy would: np.matrix only for spmatrix @ np.matrix."""
    if isinstance(dense_in, np.matrix) and isinstance(sparse_op, sp.spmatrix):
        return np.asmatrix(result)
    return result


def _use_dense(S: CSR, X: np.ndarray, method: str, n_tokens: int, prepared: bool,
               hw: HardwareProfile) -> bool:
    if method == "dense":
        return True
    if method == "sparse":
        return False
    dense_bytes = array_nbytes(S.shape, X.dtype)
    if dense_bytes > (S._dense_keep_bytes() if prepared else th.KEEP_DENSE_BYTES):
        # A copy that is not kept is built for every call, and one this big
        # costs more per element (fresh pages, DRAM) than at the 4096^2 of the
        # crossover measurement: it pays off only from DENSE_WIDE_TOKENS
        # columns on, at the one-shot crossover (docs/tuning.md).
        if n_tokens < th.DENSE_WIDE_TOKENS:
            return False
        prepared = False
    return (S.density >= th.dense_threshold(X.dtype, n_tokens, prepared, hw.vector_bytes)
            # Implicit zeros of a sparse matrix do not meet the dense operand,
            # so inf/nan in X only propagate where A stores a value; dense
            # BLAS would turn 0 * inf into nan everywhere. And BLAS's complex
            # arithmetic places nan/inf differently from scipy's when A
            # stores infinities, so A must be finite too.
            and _csr_tools.all_finite(X)
            and S._all_finite()
            # A dense copy of A that does not fit in memory: stay sparse. (A copy the
            # prepared operand keeps needs no check: reading /proc for it cost 0.2 ms a
            # product of a 4096^2 matrix under load.)
            and ((prepared and S._keeps_dense(X.dtype)) or fits_in_memory(dense_bytes)))


def sparse_matmul(A, B, *, out: np.ndarray | None = None, n_threads: int | None = None,
                  method: Method = "auto"):
    """Matrix product ``A @ B`` where ``A`` or ``B`` is sparse.

    Returns what ``A @ B`` returns in numpy/scipy (shape, dtype, container),
    computed by the OpenMP AXPY-per-nonzero kernels for float32, float64,
    complex64 and complex128 results (float16 operands promote to one of
    these unless both are float16). Other result dtypes (bool, integers,
    float16, long double) and sparse @ sparse are computed by scipy.

    Parameters
    ----------
    A, B : scipy.sparse matrix/array (any format), wsesparse.CSR, or array-like
        At least one operand must be sparse. Dense operands may be 1-D or 2-D,
        in any memory order, strided or read-only. CuPy operands
        (``cupyx.scipy.sparse`` with ``cupy.ndarray``) run on the GPU, see
        ``wsesparse._cupy_backend``.
    out : ndarray, optional
        Where to write a dense result. It must have the product's exact shape
        and dtype and be writeable; it may overlap the inputs (the product is
        then computed into a temporary first). ``out`` is returned. A
        C-contiguous ``out`` that overlaps nothing costs no more than a new
        result (the kernel writes into it).
    n_threads : int, optional
        OpenMP threads for the kernel. Default: the cores this process may
        use that no other thread is busy on (one for a small product called
        after an idle spell: docs/cpu_kernels.md, "Threads"), limited by
        ``OMP_NUM_THREADS`` and ``threadpoolctl.threadpool_limits``. Results
        are bitwise identical for every thread count on the sparse path.
        (Between a one-shot and a prepared operand they may differ in the
        last bits for ``X @ W`` with ``W`` in CSR, or a CSC operand times
        ``X``, where the one-shot product scatters from the stored arrays
        instead of transposing them (a token row of at most 128 bytes, or 256
        with many nonzeros per output row: docs/cpu_kernels.md), which sums in
        another order; its row chunks follow the cores this process may run on
        and the L2 size, not the thread count.)
    method : {"auto", "sparse", "dense"}, default "auto"
        "sparse" always uses the AXPY kernels; "dense" densifies the sparse
        operand and calls BLAS; "auto" uses dense BLAS only when the density
        is at least a crossover measured per dtype, token count and kernel
        build (the tables ``DENSE_DENSITY``, ``DENSE_DENSITY_WIDE`` and, for
        a prepared ``CSR``, which keeps its dense copy,
        ``DENSE_DENSITY_PREPARED`` in ``wsesparse._thresholds``; a one-shot
        product needs at least ``DENSE_MIN_TOKENS`` = 64 columns) and both
        operands are finite everywhere (a dense product would turn ``0 * inf``
        at implicit zeros into nan, and BLAS's complex arithmetic places
        nan/inf unlike scipy's). A dense copy of over 256 MiB is built only
        for ``DENSE_WIDE_TOKENS`` = 256 columns or more (a prepared ``CSR``
        keeps a copy no larger than its arrays).

    Returns
    -------
    ndarray, numpy.matrix or sparse matrix/array
        As ``A @ B``.

    Raises
    ------
    TypeError
        No sparse operand, None, or a non-numeric dtype (object, str, ...).
    ValueError
        Scalars, operands with more than 2 dimensions, mismatched inner
        dimensions, a corrupt sparse structure, or a bad ``out``.
    MemoryError
        The dense result (or, with ``method="dense"``, the densified sparse
        operand) would need more memory than is available; raised before
        anything is allocated, naming the size, shape and dtype.

    Notes
    -----
    Non-finite values follow scipy's CSR product: inf/nan in the dense
    operand propagate only through stored entries, and a stored (explicit)
    zero meeting inf gives nan (IEEE ``0 * inf``). Two scipy formats are
    inconsistent about stored zeros and are not imitated: DIA's padding zeros
    are treated as implicit (scipy's DIA product multiplies them), and COO's
    explicit zeros count as stored (scipy's COO multi-vector product skips
    them, its vector product does not). A COO, DIA or BSR operand times one
    vector, or times a few columns of a small dense operand (up to
    ``SCIPY_OWN_WORK`` stored values times columns, ``wsesparse._thresholds``),
    is scipy's own product with ``method="auto"``, after the structure check:
    converting it to CSR on every call cost more than the product. Where
    scipy's product treats stored zeros otherwise (DIA; COO with several
    columns), only with a finite dense operand; ``n_threads`` does not apply.

    Results of at least 32 MiB are allocated through a numpy memory handler
    that keeps the buffers of two freed ones for reuse by the next result of
    the same size (see ``wsesparse.release_cached_outputs``).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from wsesparse import sparse_matmul
    >>> W = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    >>> X = np.random.default_rng(0).standard_normal((200, 16))
    >>> Y = sparse_matmul(W, X)
    >>> Y.shape, np.allclose(Y, W @ X)
    ((300, 16), True)
    >>> sparse_matmul(X.T, W.T).shape   # dense @ sparse
    (16, 300)
    """
    fast_tried = (type(B) is np.ndarray and (method == "auto" or method == "sparse")
                  and type(A) in _FAST_CSR_TYPES)
    if fast_tried:
        sparse_only = method == "sparse"
        Y = _fast_product(A, B, n_threads, out, sparse_only=sparse_only)
        if Y is None and out is None:
            Y = _fast_converted_product(A, B, n_threads, sparse_only)
        if Y is not None:
            return Y
    elif (type(A) in _SCIPY_CSC_TYPES and type(B) is np.ndarray and out is None
          and method == "auto"):
        y = _fast_csc_vector(A, B, n_threads)
        if y is not None:
            return y
    elif (type(A) in _SCIPY_AS_STORED_TYPES and type(B) is np.ndarray and out is None
          and method == "auto"):
        y = _fast_scipy_own(A, B, n_threads)
        if y is not None:
            return y
    if _cupy_backend.is_cupy(A) or _cupy_backend.is_cupy(B):  # GPU; imports cupy only then
        return _cupy_backend.sparse_matmul(A, B, out=out, n_threads=n_threads, method=method)
    if method not in ("auto", "sparse", "dense"):
        raise ValueError(f"method must be 'auto', 'sparse' or 'dense', got {method!r}")
    if n_threads is not None:
        resolve_n_threads(n_threads)  # validate on every path, not only the kernel's
        n_threads = int(n_threads)  # numpy integers too (threadpoolctl takes int only)
    a_sparse, b_sparse = _is_sparse(A), _is_sparse(B)
    if A is None or B is None:
        raise TypeError(f"operands must not be None (A: {describe(A)}, B: {describe(B)})")
    if not (a_sparse or b_sparse):
        raise TypeError(
            "sparse_matmul needs at least one scipy.sparse or wsesparse.CSR operand; "
            f"got A: {describe(A)}, B: {describe(B)} (use numpy's @ for dense products)")
    if a_sparse and b_sparse:
        for name, S in (("A", A), ("B", B)):
            check_numeric_dtype(S.dtype, name)
        if out is not None:
            raise ValueError("out is only supported for dense results; sparse @ sparse is sparse")
        a = _as_checked_scipy(A, "A")
        b = _as_checked_scipy(B, "B")
        if a.shape[-1] != b.shape[0]:
            raise ValueError(
                f"inner dimensions differ: A is {describe(A)}, B is {describe(B)}")
        return a @ b

    if a_sparse:
        S, dense_in, dense_name, transpose = A, B, "B", False
    else:
        S, dense_in, dense_name, transpose = B, A, "A", True
    sparse_name = "A" if a_sparse else "B"
    check_numeric_dtype(S.dtype, sparse_name)
    D = as_dense_operand(dense_in, dense_name)
    if S.ndim != 2:
        raise ValueError(f"the sparse operand must be 2-D, got {describe(S)}")
    if transpose and getattr(S, "format", None) == "dia":
        S = _dia_within_shape(S, sparse_name)
    res_shape = product_shape(S.shape, D.shape, transpose)
    if res_shape is None:
        # D's shape and dtype, but the type the caller passed (list, np.matrix, ...).
        d_desc = f"{type(dense_in).__name__}{describe(D)[len(type(D).__name__):]}"
        a_desc, b_desc = (describe(S), d_desc) if a_sparse else (d_desc, describe(S))
        raise ValueError(f"inner dimensions differ: A is {a_desc}, B is {b_desc}")
    dtype = result_dtype(S.dtype, D.dtype)
    if out is not None:
        out = _check_out(out, res_shape, dtype)
    else:  # fail now, not after converting the operands or inside the allocator
        check_array_allocation(res_shape, dtype, "the result of sparse_matmul")

    if dtype not in KERNEL_DTYPES or (method == "auto" and _via_scipy(S, D, transpose)):
        # bool/int results follow scipy's own (wrapping, saturating) rules; small products
        # of COO/DIA/BSR operands are scipy's (above).
        s = _as_checked_scipy(S, sparse_name)
        result = _scipy_result(s @ D if a_sparse else D @ s, res_shape)
        if out is not None:
            out[...] = result
            return out
        return _wrap(result, S, dense_in)

    # Y = S @ X, or for X @ S: Y.T = S.T @ X.T, which needs X.T and Y.T C-contiguous.
    X = contiguous_operand(D.T if transpose else D, dtype, n_threads)
    n_tokens = 1 if X.ndim == 1 else X.shape[1]
    if not transpose and method != "dense" and type(S) in _FAST_CSR_TYPES:
        # Only the dense operand needed a copy (a strided column, Fortran order, another
        # dtype) or method="sparse" was asked: the fast path takes it from here where it
        # can, without building a CSR (for a scipy operand with int64 indices that took
        # 3-4x the product's time; docs/tuning.md, "Checks"). Values of another dtype
        # (float32 A, float64 x) are converted, the indices used as they are.
        data = None
        if (type(S) is not CSR and S.data.dtype != dtype
                and n_tokens < th.DENSE_MIN_TOKENS):  # (wider ones may go dense)
            data = _values_as(S, dtype)
        if not (fast_tried and X is B and data is None):  # (else tried above as it is)
            Y = _fast_product(S, X, n_threads, out, data, sparse_only=method == "sparse")
            if Y is not None:
                return Y if out is not None else _wrap(Y, S, dense_in)
    scatter_ok = _scatter_ok(S, res_shape[-1] if transpose else res_shape[0], X.shape[0],
                             n_tokens, dtype)
    # A scipy CSR used transposed or CSC used as it is, for a scatter: its own
    # arrays, indptr checked here, the column indices by the kernel as it goes.
    plain = _scatter_arrays(S, transpose, dtype) if scatter_ok and method != "dense" else None
    if plain is None:
        csr, scatter = _as_csr(S, transpose, sparse_name, scatter_ok)
    target = None
    if out is not None:
        view = out.T if transpose else out
        # (index arrays too: a scatter reads them as it writes, and an out over them
        # read back indices it had overwritten, out of bounds)
        sparse_arrays = (csr.indptr, csr.indices, csr.data) if plain is None else plain[:3]
        overlaps = any(np.may_share_memory(out, a) for a in (D, *sparse_arrays))
        if (view.flags.c_contiguous and not overlaps
                and (plain is None and not scatter or _on_lines(view, n_tokens))):
            target = view  # the kernel writes straight into out
    if target is None:
        target = empty_output(res_shape[::-1] if transpose else res_shape, dtype,
                              array_nbytes(res_shape, dtype),
                              aligned=plain is not None or scatter)

    if plain is not None:
        scatter_into(*plain, X, target, n_threads, check_cols=True, name=sparse_name,
                     csc=S.format == "csc")
    elif csr.nnz == 0 or target.size == 0:
        target[...] = 0
    elif _use_dense(csr, X, method, n_tokens, isinstance(S, CSR), _hardware.current()):
        _dense_product(csr, X, target, n_threads, prepared=isinstance(S, CSR),
                       transposed=scatter)
    elif scatter:
        scatter_into(csr.indptr, csr.indices, csr._values(dtype), csr.shape, csr.nnz, X,
                      target, n_threads)
    else:
        csr._multiply_into(X, target, n_threads, _hardware.current())

    result = target.T if transpose else target
    if out is not None:
        if target is not view:
            out[...] = result
        return out
    return _wrap(result, S, dense_in)


def _scatter_ok(S, n_out: int, n_rows: int, n_tokens: int, dtype: np.dtype) -> bool:
    """Whether a one-shot transposed product (X @ W_csr, W_csc @ X) scatters from the stored
    arrays instead of transposing them (``n_rows``: X's rows, the sparse operand's inner
    dimension). In one token panel, always. In two 128-byte panels (AVX builds; real values;
    docs/tuning.md, "Transposed products (scatter) and copies"), where the transpose costs
    most next to two sweeps: at least ``SCATTER2_MIN_NNZ_PER_ROW`` nonzeros per output row,
    a last panel of at least a quarter of a panel's columns unless ``scatter_tokens`` pads
    the rows (unpadded, one column took a whole second sweep, its lines shared with the
    first panel's) and a result of at most ``SCATTER2_L3_SHARE`` of L3 (the sweeps read and
    write it at random), and only where its row chunks (``scatter_chunks``) give each core a
    panel to sweep: a 16-core machine with a result beyond two L2s would run it on two. In
    two of the portable build's 64-byte panels, always (its limit before, 128 bytes)."""
    panels = scatter_panels(n_tokens, dtype.itemsize)
    if panels <= 1:
        return True
    if panels > th.SCATTER_MAX_PANELS:
        return False
    width = _scatter.scatter_panel_width(dtype.itemsize)
    if width * dtype.itemsize < 128:   # the portable build's 64-byte panels: as before
        return True
    if dtype.kind == "c":
        return False
    nnz = _stored(S)
    padded = scatter_tokens(n_tokens, dtype.itemsize, nnz, n_rows)  # (what scatter_into does)
    if (nnz < th.SCATTER2_MIN_NNZ_PER_ROW * n_out
            or (4 * (n_tokens - width) < width and padded == n_tokens)
            or n_out * padded * dtype.itemsize * th.SCATTER2_L3_SHARE
            > (_hardware.current().l3_bytes or th.STREAM_DEFAULT_L3_BYTES)):
        return False
    # Every core needs a work item (a panel of a row chunk), as in the transposed product.
    items = max(th.SCATTER_MIN_ITEMS, available_cores())
    return panels * scatter_chunks(nnz, n_out, padded, dtype.itemsize, items) >= items


def _stored(S) -> int:
    """Entries of a compressed operand (``indptr[-1]``; its structure is checked later),
    else 0: the scatter reads only those (``S.nnz`` of a corrupt COO raises scipy's
    message before ours)."""
    indptr = getattr(S, "indptr", None)
    if (not isinstance(indptr, np.ndarray) or indptr.ndim != 1 or not indptr.size
            or indptr.dtype.kind not in "iu"):
        return 0    # (a malformed indptr: the checks after this name it)
    return int(indptr[-1])


def _on_lines(Z: np.ndarray, n_tokens: int) -> bool:
    """Whether a scatter may write straight into the C-contiguous ``Z``: it sweeps one
    panel, or Z starts on a 64-byte line as the result it would make instead does (else
    the threads of two panels write the same lines wherever rows of a line multiple
    would; docs/tuning.md, "Transposed products (scatter) and copies")."""
    if scatter_panels(n_tokens, Z.itemsize) <= 1:
        return True
    return Z.__array_interface__["data"][0] % 64 == 0


_FAST_CSR_TYPES = (CSR, sp.csr_matrix, sp.csr_array)  # (exactly these: _fast_product)
_SCIPY_COMPRESSED_TYPES = (sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.csc_array)
_SCIPY_CSC_TYPES = (sp.csc_matrix, sp.csc_array)  # (exactly these: _fast_csc_vector)
_SCIPY_AS_STORED_TYPES = (sp.coo_matrix, sp.coo_array, sp.dia_matrix, sp.dia_array,
                          sp.bsr_matrix, sp.bsr_array)  # (exactly these: _fast_scipy_own)


def _scatter_arrays(S, transpose: bool, dtype: np.dtype) -> tuple | None:
    """``(indptr, indices, data, shape, nnz)``: the CSR arrays of B, the matrix whose
    transpose the product needs (a scipy CSR operand used transposed, or a CSC one used
    as it is), when the kernels can take them as they are (exact scipy classes, values
    of ``dtype``, a valid indptr, nnz > 0); else None (the general path converts)."""
    if type(S) not in _SCIPY_COMPRESSED_TYPES or len(S.shape) != 2:
        return None
    is_csr = S.format == "csr"
    if is_csr != transpose or S.data.dtype != dtype:
        return None
    shape = S.shape if is_csr else S.shape[::-1]
    nnz = _spmm.plain_csr_nnz(S.indptr, S.indices, S.data, shape[0], shape[1])
    return None if nnz <= 0 else (S.indptr, S.indices, S.data, shape, nnz)


def _fast_csc_vector(A, x: np.ndarray, n_threads: int | None) -> np.ndarray | None:
    """``A @ x`` for a scipy CSC matrix/array ``A`` (exactly those classes) with the plain
    arrays scipy makes and a 1-D C-contiguous ``x`` of its kernel dtype, or None to take
    the general path: the scatter the general path runs (the CSC arrays are the CSR arrays
    of ``A.T``; the kernel checks the row indices), without its conversions and dispatch,
    which made a 300 x 300 product 10 us against scipy's 3.5 (docs/tuning.md, "Other
    formats with one vector"). Also what ``accelerated()``'s hook gets for ``x @ A_csr``."""
    shape = A.shape
    data = A.data
    dtype = data.dtype
    if (len(shape) != 2 or x.ndim != 1 or x.dtype is not dtype or dtype.char not in "fdFD"
            or not dtype.isnative or x.shape[0] != shape[1] or x.size == 0
            or not x.flags.c_contiguous):
        return None
    # (_scatter_arrays(A, False, dtype) inlined: calling it took 5.7 us a call, not 5.0)
    nnz = _spmm.plain_csr_nnz(A.indptr, A.indices, data, shape[1], shape[0])
    if nnz <= 0:
        return None
    nbytes = shape[0] * dtype.itemsize
    if nbytes >= CHECK_MIN_BYTES:  # (as in _fast_product)
        check_array_allocation(shape[:1], dtype, "the result of sparse_matmul")
    y = empty_output(shape[:1], dtype, nbytes, aligned=True, view_ok=False)
    scatter_into(A.indptr, A.indices, data, shape[::-1], nnz, x, y, n_threads,
                 check_cols=True, name="A", csc=True)
    return y


def _fast_converted_product(A, B: np.ndarray, n_threads: int | None,
                            sparse_only: bool = False) -> np.ndarray | None:
    """``A @ B`` for ``_fast_product``'s operands where B must be copied first (a strided
    column, Fortran order, a kernel dtype other than A's values: float32 A times float64 B),
    fewer than ``DENSE_MIN_TOKENS`` columns; or None for the general path (wider products,
    which may go dense; a prepared ``CSR`` of other values, which caches them; anything it
    words an error for). The same conversions and kernel as the general path, without its
    checks and dispatch: about 12 of a 20 us call on a 10 x 10 product (docs/tuning.md,
    "Checks", "`out=` on the fast path"). ``sparse_only`` (``method="sparse"``): wider
    products too, which cannot go dense then."""
    a_dtype, shape = A.dtype, A.shape
    if (len(shape) != 2 or not 0 < B.ndim < 3 or B.shape[0] != shape[1]
            or B.dtype.char not in "fdFD"
            or a_dtype.char not in "fdFD"
            or (not sparse_only and B.ndim == 2 and B.shape[1] >= th.DENSE_MIN_TOKENS)):
        return None
    dtype = result_dtype(a_dtype, B.dtype)
    X = contiguous_operand(B, dtype, n_threads)
    data = None
    if A.data.dtype == dtype:
        if X is B:
            return None  # (nothing to convert: _fast_product declined it for another reason)
    else:
        if type(A) is CSR:
            return None
        data = _values_as(A, dtype)
    return _fast_product(A, X, n_threads, None, data, sparse_only=sparse_only)


def _values_as(S, dtype: np.dtype) -> np.ndarray:
    """The values of scipy operand ``S`` converted to ``dtype``, in a buffer from the result
    pool (a fresh buffer this big faults in its pages on every call)."""
    data = empty_output(S.data.shape, dtype, S.data.size * dtype.itemsize)
    np.copyto(data, S.data)
    return data


def _fast_scipy_own(A, X: np.ndarray, n_threads: int | None) -> np.ndarray | None:
    """``A @ X`` for a scipy COO, DIA or BSR matrix/array ``A`` (exactly those classes) and
    a 1-D ``X`` or a C-contiguous 2-D one, both of kernel dtypes, A with rows and columns,
    where the general path would take scipy's own product (``_via_scipy``: DIA, and COO
    with columns, only with a finite X): that product after the structure check, without
    the general path's checks and dispatch, about 10 us a call (a 1,000-row tridiagonal
    DIA took 39 us against scipy's 9; docs/tuning.md, "Other formats with one vector").
    None: the general path. ``n_threads`` is only validated (scipy's product runs on one
    thread)."""
    shape = A.shape
    if (len(shape) != 2 or X.ndim not in (1, 2) or X.shape[0] != shape[1] or 0 in shape
            or 0 in X.shape or A.dtype.char not in "fdFD" or X.dtype.char not in "fdFD"
            or (X.ndim == 2 and not X.flags.c_contiguous)):
        return None
    if not _via_scipy(A, X, False):
        return None
    if n_threads is not None:
        resolve_n_threads(n_threads)  # (validated on every path)
    res_shape = (shape[0],) + X.shape[1:]
    if math.prod(res_shape) * 16 >= CHECK_MIN_BYTES:  # (16: the widest kernel dtype)
        check_array_allocation(res_shape, result_dtype(A.dtype, X.dtype),
                               "the result of sparse_matmul")
    check_sparse_structure(A, "A")
    return _scipy_result(A @ X, res_shape)


def _fast_product(A, B: np.ndarray, n_threads: int | None,
                  out: np.ndarray | None = None,
                  data: np.ndarray | None = None,
                  sparse_only: bool = False) -> np.ndarray | None:
    """``A @ B`` for the commonest call, or None to take the general path.

    The common call in inference and training loops: a prepared ``CSR``, or a
    scipy CSR matrix/array (exactly those classes) with the plain arrays
    scipy makes, times a C-contiguous ndarray of the same kernel dtype, on the
    sparse path, into a new array or an ``out`` that is an exact, writeable,
    C-contiguous ndarray of the result's shape and dtype sharing no memory with
    the operands. It skips the general path's conversions and checks (only
    where they cannot apply) and, for a scipy operand, the ``CSR`` object: at
    64 x 64 the call then costs less than scipy's own product. Everything
    unusual (other classes or array types, a corrupt structure, empty or dense
    products, any other ``out``) goes the general way, which converts,
    dispatches and words the errors. (Without ``out`` on this path, a one-shot
    SpMV of an int64 matrix took 3.7x its time: the general path narrows and
    checks the indices first; docs/tuning.md, "Checks".) ``data``: a scipy
    operand's values converted to B's dtype, in place of its own. ``sparse_only``
    (``method="sparse"``): no dense dispatch to leave to the general path, so products of
    any width and density take this path (the general path's checks cost a prepared SpMV
    6.5 us a call on the 2-core Zen 4, 120 against 126.5 us at 16384^2, density 0.001).
    """
    shape = A.shape
    if len(shape) != 2:  # scipy's 1-D CSR arrays
        return None
    indptr, indices = A.indptr, A.indices
    if data is None:
        data = A.data
    dtype = data.dtype
    if (B.dtype is not dtype or not dtype.isnative or not 0 < B.ndim < 3 or B.shape[0] != shape[1]
            or not B.flags.c_contiguous or B.size == 0):
        return None
    n_tokens = 1 if B.ndim == 1 else B.shape[1]
    hw = _hardware.current()
    if type(A) is CSR:
        if n_tokens >= th.DENSE_MIN_TOKENS and not sparse_only:
            return None  # the dense-dispatch rules of a prepared operand: general path
        nnz = int(indptr[-1])
        # A.density (without its property calls): nnz > 0 implies a nonempty shape.
        if (nnz <= 0 or dtype.char not in "fdFD"
                or (not sparse_only and nnz / (shape[0] * shape[1])
                    >= th.dense_threshold(dtype, n_tokens, True, hw.vector_bytes))):
            return None
        bounds = A._bounds
    else:
        # (indptr is checked by several threads from PARALLEL_INDPTR_ROWS rows on)
        nnz = _spmm.plain_csr_nnz(indptr, indices, data, shape[0], shape[1],
                                  1 if shape[0] < _spmm.PARALLEL_INDPTR_ROWS
                                  else resolve_n_threads(n_threads, shape[0]))
        bounds = None  # used once: the kernel cuts the rows and checks the column indices
        # From DENSE_MIN_TOKENS columns on, a one-shot product below the one-shot
        # crossover stays sparse whatever else _use_dense weighs: take it here rather
        # than build a CSR on the general path (docs/tuning.md, "One-shot wide products").
        if (n_tokens >= th.DENSE_MIN_TOKENS and nnz > 0 and not sparse_only
                and nnz / (shape[0] * shape[1])
                >= th.dense_threshold(dtype, n_tokens, False, hw.vector_bytes)):
            return None
    if nnz <= 0:
        return None
    out_shape = shape[:1] + B.shape[1:]
    if out is not None:
        if (type(out) is not np.ndarray or out.shape != out_shape or out.dtype != dtype
                or not (out.flags.c_contiguous and out.flags.writeable)
                or any(np.may_share_memory(out, a) for a in (B, indptr, indices, data))):
            return None
        Y = out
    else:
        out_bytes = shape[0] * n_tokens * dtype.itemsize
        if out_bytes >= CHECK_MIN_BYTES:  # spare small calls the check
            check_array_allocation(out_shape, dtype, "the result of sparse_matmul")
        Y = empty_output(out_shape, dtype, out_bytes)
    product_into(indptr, indices, data, shape, nnz, B, Y, n_threads, bounds, hw)
    return Y


def _dense_product(csr: CSR, X: np.ndarray, Y: np.ndarray, n_threads: int | None,
                   prepared: bool, transposed: bool = False) -> None:
    """Y = D @ X with D the dense ``csr`` (or its transpose), by BLAS."""
    # Only a CSR the caller prepared lives on to reuse a cached dense copy.
    dense = csr._densified(X.dtype, keep=prepared)
    if transposed:
        dense = dense.T  # BLAS takes the transposed layout as it is
    if n_threads is None or n_threads >= available_cores():
        # BLAS already uses every core; a limit would only add its cost (about 50 us).
        np.matmul(dense, X, out=Y)
        return
    # (a hold shared with overlapping calls and accelerated(): a per-call limit that
    # restores what it found left BLAS on n_threads for good when two calls overlapped)
    with _blas.limited(n_threads):
        np.matmul(dense, X, out=Y)


CSR._matmul = sparse_matmul  # ``CSR @ X`` and ``X @ CSR`` (see CSR._matmul)
