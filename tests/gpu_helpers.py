"""A stand-in ``cupy`` on numpy, and the kernels of wsesparse/gpu/kernels.cu replayed in
Python, so the host side of the GPU backend (checks, launch geometry, strides, offsets,
segment tables, dispatch) runs without a GPU.

The replay follows each kernel's thread mapping: which thread reads which element and which
lane writes which output, from the same launch arguments the host passes to CuPy. It does not
check CUDA itself (the gpu-marked tests in tests/gpu/test_device.py do, on a device).
"""

from __future__ import annotations

import ctypes
import re
import sys
import types

import numpy as np

_CTYPES = {"float": np.float32, "double": np.float64, "wc64": np.complex64,
           "wc128": np.complex128, "int": np.int32, "long long": np.int64}


def cupy_on_a_device():
    """The real cupy module where a CUDA device answers; else the calling test is skipped."""
    import pytest
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # CUDA runtime without a driver/device
        pytest.skip(f"no CUDA device: {exc}")
    return cupy


def random_values(rng, shape, dtype) -> np.ndarray:
    """Standard normal values of ``dtype`` (real and imaginary parts for complex)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def tlr_test_matrix(rng, dtype, m: int = 70, n: int = 50, nb: int = 20):
    """A TLRMatrix with ragged edge tiles and zero-rank tiles (the block right of the first
    tile row is zero)."""
    from wsesparse import TLRMatrix
    A = rng.standard_normal((m, n)) @ np.diag(np.exp(-np.arange(n) / 3)) \
        @ rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        A = A + 0.5j * A[::-1]
    A[:nb, nb:] = 0
    return TLRMatrix.from_dense(A.astype(dtype), nb=nb, tol=1e-3)


def stored_tlr(T, storage: str):
    """T with its bases rounded to ``storage`` and widened back: what the kernels of
    ``DeviceTLR(T, storage=storage)`` sum."""
    from wsesparse import TLRMatrix
    from wsesparse.gpu.storage import stored_values
    return TLRMatrix(T.shape, T.nb, T.ranks, stored_values(T.U, storage),
                     stored_values(T.V, storage))


class FakeNdarray(np.ndarray):
    """A numpy array whose class claims to be cupy's, with cupy's ``get``."""
    __module__ = "cupy"

    def get(self):
        return np.asarray(self).copy()


def dev(x):
    return np.asarray(x).view(FakeNdarray)


def _wrap(fn):
    def call(*args, **kw):
        args = [np.asarray(a) if isinstance(a, FakeNdarray) else a for a in args]
        if "out" in kw and isinstance(kw["out"], FakeNdarray):
            kw["out"] = np.asarray(kw["out"])
        r = fn(*args, **kw)
        return dev(r) if isinstance(r, np.ndarray) else r
    return call


def _flat(a) -> np.ndarray:
    """The memory from ``a``'s first element to its buffer's end, as a 1-D element array."""
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    start = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    n = (base.nbytes - start) // a.itemsize
    return np.lib.stride_tricks.as_strided(np.asarray(a), shape=(n,), strides=(a.itemsize,))


class _Pinned(np.ndarray):
    """Host memory with cupy's PinnedMemoryPointer ``ptr``."""

    def __new__(cls, buf):
        obj = buf.view(cls)
        obj.ptr = buf.ctypes.data
        return obj


class FakeLinearOperator:
    """cupyx's ``LinearOperator(shape, matvec, rmatvec, matmat, dtype, rmatmat)``: keeps the
    callables (what the tests check is what they compute)."""

    def __init__(self, shape, matvec, rmatvec=None, matmat=None, dtype=None, rmatmat=None):
        self.shape, self.dtype = tuple(shape), dtype
        self.matvec, self.rmatvec, self.matmat, self.rmatmat = matvec, rmatvec, matmat, rmatmat


class Launches(list):
    """Every launch: (kernel name expression, grid, block)."""


def make_kernel(expr: str, launches: Launches):
    family, params = re.fullmatch(r"(\w+)<(.*)>", expr).groups()
    params = [p.strip() for p in params.split(",")]

    def run(grid, block, args):
        launches.append((expr, tuple(grid), tuple(block)))
        return globals()[f"_run_{family}"](params, tuple(grid), tuple(block), args)
    return run


def _run_csr_check(params, grid, block, args):
    indptr, indices, n_rows, n_cols, n_stored, flags = args
    ip, ix = np.asarray(indptr), np.asarray(indices)
    assert ip.dtype == _CTYPES[params[0]] and ix.dtype == ip.dtype
    n = min(max(int(ip[n_rows]), 0), int(n_stored))
    f = 0
    f |= 1 if ip[0] != 0 else 0
    f |= 2 if (np.diff(ip[:n_rows + 1]) < 0).any() else 0
    f |= 4 if ip[n_rows] > n_stored else 0
    f |= 8 if ((ix[:n] < 0) | (ix[:n] >= n_cols)).any() else 0
    flags[0] |= f


def _fault_bits(indptr, indices, n_rows: int, n_inner: int, n_stored: int) -> int:
    """The csr_check bits a checking product kernel stores for this structure (0: valid)."""
    ip = np.asarray(indptr)
    n = min(max(int(ip[n_rows]), 0), int(n_stored))
    f = (1 if ip[0] != 0 else 0) | (2 if (np.diff(ip) < 0).any() else 0) \
        | (4 if ip[n_rows] > n_stored else 0)
    ix = np.asarray(indices)[:n]
    return f | (8 if ((ix < 0) | (ix >= n_inner)).any() else 0)


def _run_csr_dense(params, grid, block, args):
    T, I, V, chk = _CTYPES[params[0]], _CTYPES[params[1]], int(params[2]), params[3] == "true"
    (indptr, indices, data, X, Y, n_rows, n_cols, ldx, ldy_row, ldy_col, gs_log, q_log,
     n_inner, n_stored, flags) = args
    assert block == (256,)
    if chk:     # the kernel's checks: flags, and nothing read out of bounds
        f = _fault_bits(indptr, indices, n_rows, n_inner, n_stored)
        assert int(flags) != 0
        if f:
            ctypes.c_int32.from_address(int(flags)).value = f
            return
    else:
        assert int(flags) == 0
    for a, t in ((indptr, I), (indices, I), (data, T), (X, T), (Y, T)):
        assert a.dtype == t, (a.dtype, t)
    ip, ix, vals = np.asarray(indptr), np.asarray(indices), np.asarray(data)
    Xf, Yf = _flat(X), _flat(Y)
    G, Q = 1 << gs_log, 1 << q_log
    P = G // Q
    for by in range(grid[1]):
        for tid in range(grid[0] * 256):
            row, lane = tid >> gs_log, (tid % 256) & (G - 1)
            q, p = lane & (Q - 1), lane >> q_log
            col = (by * Q + q) * V
            if p != 0 or row >= n_rows or col >= n_cols:
                continue
            if V > 1 and col + V <= n_cols:     # a vector access: aligned (the host's promise)
                assert (Xf[col:].__array_interface__["data"][0] % (V * X.itemsize)) == 0
                assert ldx % V == 0
                if ldy_col == 1:                 # ... and so is the vector store
                    y_addr = Yf[row * ldy_row + col:].__array_interface__["data"][0]
                    assert y_addr % (V * Y.itemsize) == 0
            acc = np.zeros(V, dtype=T)
            for pp in range(P):             # the P nonzero lanes, then the shuffle tree
                for k in range(int(ip[row]) + pp, int(ip[row + 1]), P):
                    c = int(ix[k])
                    for v in range(V):
                        if col + v < n_cols:
                            acc[v] += vals[k] * Xf[c * ldx + col + v]
            for v in range(V):
                if col + v < n_cols:
                    Yf[row * ldy_row + (col + v) * ldy_col] = acc[v]


def _spmv4_lane_order(start: int, end: int, lane: int) -> list[int]:
    """The nonzeros lane ``lane`` of csr_spmv4 sums, in its order (kernels.cu): its one of the
    head before the first multiple of 4, its 4 of every 128 from there, its one of the tail
    after the last multiple of 4."""
    a = min((start + 3) & ~3, end)
    b = max(end & ~3, a)
    order = [start + lane] if lane < a - start else []
    for k in range(a + 4 * lane, b, 128):
        order += range(k, k + 4)
    return order + ([b + lane] if lane < end - b else [])


def _run_csr_spmv4(params, grid, block, args):
    T, I, chk = _CTYPES[params[0]], _CTYPES[params[1]], params[2] == "true"
    indptr, indices, data, x, y, n_rows, ldx, ldy, n_inner, n_stored, flags = args
    assert block == (256,) and len(grid) == 1 and grid[0] * 256 >= 32 * n_rows
    for a, t in ((indptr, I), (indices, I), (data, T), (x, T), (y, T)):
        assert a.dtype == t, (a.dtype, t)
    for a in (indices, data):       # the 16-byte loads: the host's promise
        assert a.__array_interface__["data"][0] % 16 == 0
    if chk:
        assert int(flags) != 0
        f = _fault_bits(indptr, indices, n_rows, n_inner, n_stored)
        if f:
            ctypes.c_int32.from_address(int(flags)).value = f
            return
    else:
        assert int(flags) == 0
    ip, ix, vals = np.asarray(indptr), np.asarray(indices), np.asarray(data)
    xf, yf = _flat(x), _flat(y)
    for row in range(n_rows):
        start, end = int(ip[row]), int(ip[row + 1])
        seen = []
        acc = np.zeros(1, dtype=T)
        for lane in range(32):
            for k in _spmv4_lane_order(start, end, lane):
                seen.append(k)
                acc[0] += vals[k] * xf[int(ix[k]) * ldx]
        assert sorted(seen) == list(range(start, end))     # each nonzero once
        yf[row * ldy] = acc[0]


def _run_csr_densify(params, grid, block, args):
    T, I = _CTYPES[params[0]], _CTYPES[params[1]]
    indptr, indices, data, D, n_rows, ldd = args
    assert block == (256,) and grid[0] * 8 >= n_rows and D.dtype == T and indptr.dtype == I
    ip, ix, vals, Df = np.asarray(indptr), np.asarray(indices), np.asarray(data), _flat(D)
    for row in range(int(n_rows)):
        for k in range(int(ip[row]), int(ip[row + 1])):
            Df[row * ldd + ix[k]] += vals[k]


def _rows(perm, xo, r):
    return int(perm[xo + r]) if perm is not None else xo + r


def _stored(M, T, mt: str | None) -> np.ndarray:
    """The bases a TLR kernel reads, as values of T: M itself, or its 16-bit elements (pairs
    (re, im) for complex) widened."""
    if mt is None:
        assert M.dtype == T
        return M
    from wsesparse.gpu.storage import widen
    assert M.dtype == np.uint16, M.dtype
    storage = "float16" if mt.startswith("w_f16") else "bfloat16"
    assert mt.endswith("x2") == (np.dtype(T).kind == "c")
    v = widen(M, storage)
    return (v[0::2] + 1j * v[1::2] if mt.endswith("x2") else v).astype(T)


def _segment_args(params, args):
    """The value type, the segment arrays, the perm (None for the null pointer), x and y as
    flat element arrays, and the tail (S, ldx, ldy) of a TLR kernel's arguments."""
    T = _CTYPES[params[0]]
    M, m_off, rows, cols, x_off, y_off = (np.asarray(a) for a in args[:6])
    M = _stored(M, T, params[2] if len(params) > 2 else None)
    perm, x, y, S, ldx, ldy = args[-6:]
    assert x.dtype == T and y.dtype == T
    perm = None if isinstance(perm, np.integer) else np.asarray(perm)
    return T, (M, m_off, rows, cols, x_off, y_off), perm, _flat(x), _flat(y), (S, ldx, ldy)


def _column_sum(T, seg, g, c, s, perm, xf, ldx):
    """sum over the rows r of segment g of M_g[r, c] * x[xrow(r), s] (the forward phases)."""
    M, m_off, rows, cols, x_off, _ = seg
    R, C = int(rows[g]), int(cols[g])
    acc = T(0)
    for r in range(R):
        acc += M[m_off[g] + r * C + c] * xf[_rows(perm, int(x_off[g]), r) * ldx + s]
    return acc


def _run_seg_gemv_t(params, grid, block, args):
    T, seg, perm, xf, yf, (S, ldx, ldy) = _segment_args(params, args)
    blk_seg, blk_c0 = args[6:8]
    assert grid == (len(blk_seg),) and block[0] == 32 and block[1] in (8, 16)
    assert 1 <= S <= int(params[1])
    for b in range(grid[0]):
        g, c0 = int(blk_seg[b]), int(blk_c0[b])
        for c in range(c0, min(c0 + 32, int(seg[3][g]))):
            for s in range(S):
                yf[(seg[5][g] + c) * ldy + s] = _column_sum(T, seg, g, c, s, perm, xf, ldx)


def _run_seg_rows(params, grid, block, args):
    """seg_gemv_h and seg_gemm_h (one warp per output row; lanes differ, the sums do not):
    y[y_off + c, s] = sum over r of conj(M_g[c, r]) * x[xrow(r), s]."""
    T, (M, m_off, rows, cols, x_off, y_off), perm, xf, yf, (S, ldx, ldy) = \
        _segment_args(params, args)
    out_seg, out_row, n_out = args[6:9]
    assert block == (256,) and grid[0] * 8 >= n_out and 1 <= S <= int(params[1])
    for w in range(int(n_out)):
        g, c = int(out_seg[w]), int(out_row[w])
        assert c < rows[g]
        L = int(cols[g])
        for s in range(S):
            acc = T(0)
            for r in range(L):
                acc += np.conj(M[m_off[g] + c * L + r]) * xf[_rows(perm, int(x_off[g]), r)
                                                             * ldx + s]
            yf[(y_off[g] + c) * ldy + s] = acc


_run_seg_gemv_h = _run_seg_gemm_h = _run_seg_rows


def install(monkeypatch, device_name: str = "NVIDIA H100 80GB HBM3", free_bytes: int = 1 << 34):
    """Put the stand-in ``cupy``/``cupyx`` in ``sys.modules`` and the replayed kernels behind
    ``wsesparse.gpu._module.kernel``; returns the list that records every launch."""
    import scipy.sparse as sp
    from wsesparse.gpu import _module

    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeNdarray
    for name in ("zeros", "empty", "arange", "searchsorted", "argsort", "bincount", "cumsum",
                 "concatenate", "diff", "ascontiguousarray", "asfortranarray", "full",
                 "may_share_memory", "isfinite"):
        setattr(cupy, name, _wrap(getattr(np, name)))
    cupy.asarray = lambda a, dtype=None: dev(np.array(a, dtype=dtype, copy=True)) \
        if not isinstance(a, FakeNdarray) else (a if dtype is None else dev(np.asarray(a,
                                                                                   dtype)))
    cupy.int64, cupy.complex64 = np.int64, np.complex64
    def alloc_pinned_memory(nbytes):
        return _Pinned(np.zeros(-(-nbytes // 8), dtype=np.int64))    # (a view keeps it)

    cupy.cuda = types.SimpleNamespace(
        alloc_pinned_memory=alloc_pinned_memory,
        get_current_stream=lambda: types.SimpleNamespace(synchronize=lambda: None),
        Device=lambda *a: types.SimpleNamespace(id=0),
        runtime=types.SimpleNamespace(getDeviceProperties=lambda i: {"name": device_name.encode()},
                                      getDeviceCount=lambda: 1, getDevice=lambda: 0,
                                      memGetInfo=lambda: (free_bytes, 2 * free_bytes)))

    class csr_matrix(sp.csr_matrix):  # noqa: N801 - cupyx's name
        __module__ = "cupyx.scipy.sparse._csr"

        def toarray(self):
            return dev(sp.csr_matrix(self).toarray())

    class csc_matrix(sp.csc_matrix):  # noqa: N801 - cupyx's name
        __module__ = "cupyx.scipy.sparse._csc"

        def tocsr(self):
            return csr_matrix(sp.csc_matrix(self).tocsr())

    cupyx = types.ModuleType("cupyx")
    cupyx_scipy = types.ModuleType("cupyx.scipy")
    csp = types.ModuleType("cupyx.scipy.sparse")
    csp.csr_matrix, csp.csc_matrix = csr_matrix, csc_matrix
    csp.issparse = lambda x: isinstance(x, (csr_matrix, csc_matrix))
    cupyx.scipy, cupyx_scipy.sparse = cupyx_scipy, csp
    linalg = types.ModuleType("cupyx.scipy.sparse.linalg")
    linalg.LinearOperator = FakeLinearOperator
    csp.linalg = linalg
    for name, mod in (("cupy", cupy), ("cupyx", cupyx), ("cupyx.scipy", cupyx_scipy),
                      ("cupyx.scipy.sparse", csp), ("cupyx.scipy.sparse.linalg", linalg)):
        monkeypatch.setitem(sys.modules, name, mod)
    launches = Launches()
    monkeypatch.setattr(_module, "kernel", lambda family, dtype, *p, storage=None: make_kernel(
        _module.name(family, dtype, *p, storage=storage) if family != "csr_check"
        else _module.name(family, p[0]), launches))
    from wsesparse.gpu import csr
    csr._rates.cache_clear()
    return types.SimpleNamespace(cupy=cupy, csr_matrix=csr_matrix, csc_matrix=csc_matrix,
                                 launches=launches)
