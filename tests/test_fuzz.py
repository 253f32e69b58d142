"""Differential fuzzing of the kernels against scipy / numpy (hypothesis).

* ``test_fuzz_spmm``: random CSR structures -- power-law row lengths, empty rows, one dense
  row, duplicate and unsorted indices, explicit zeros, int32/int64 index arrays -- in all four
  kernel dtypes, N = 1 (vector or one column), small, or wider than the kernel's tile, one-shot
  (scipy operand) and prepared (``CSR.from_arrays``), ``A @ X`` and ``X @ A``, sometimes with
  NaN/±inf in X. Oracle: scipy's product of the same (non-canonical) CSR, compared with
  ``matmul_helpers.assert_matches`` (exact NaN/inf positions, values within a tolerance scaled
  by ``|A| @ |X|``).
* ``test_fuzz_formats``: the same structures as scipy COO (duplicates and order kept), CSC,
  DIA, BSR (random block shapes that divide the matrix), LIL and DOK matrices and arrays,
  through ``sparse_matmul`` and scipy's own ``@`` inside ``wsesparse.accelerated()``.
  Oracle: scipy's product of the same object, type included (outside the switch, for DIA
  and COO that of the CSR they stand for: see ``sparse_matmul``'s Notes on stored zeros).
* ``test_fuzz_tlr_matvec``: TLR compression of random low-rank-plus-noise matrices over
  shape, nb (also larger than the matrix), tol and dtype; ``T @ x``, ``T.H @ y`` and blocks
  agree with the dense products within the tolerance that tol guarantees.

Budget: ``WSESPARSE_FUZZ_EXAMPLES`` examples in all (default 160, a few seconds: 80 SpMM,
40 formats, 40 TLR). ``WSESPARSE_FUZZ_EXAMPLES=20000 python -m pytest -q tests/test_fuzz.py``
runs a long campaign. Failures hypothesis finds are kept below as ``@example`` cases (and in hypothesis's
local database, ``.hypothesis/``).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matmul_helpers import assert_matches
import wsesparse
from wsesparse import CSR, TLRMatrix, sparse_matmul
from wsesparse._kernels import _spmm

TOTAL = int(os.environ.get("WSESPARSE_FUZZ_EXAMPLES", "160"))
SPMM_EXAMPLES = max(1, TOTAL // 2)
FORMAT_EXAMPLES = max(1, TOTAL // 4)
TLR_EXAMPLES = max(1, TOTAL - SPMM_EXAMPLES - FORMAT_EXAMPLES)

FUZZ = dict(deadline=None, derandomize=False, print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def tile_width(dtype) -> int:
    return _spmm.TILE_BYTES_PER_ROW // np.dtype(dtype).itemsize


def values(rng, n, dtype):
    v = rng.standard_normal(n)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(n)
    return v.astype(dtype)


@st.composite
def csr_cases(draw):
    """(indptr, indices, data, shape) of a possibly non-canonical CSR, plus X and the side."""
    dtype = draw(st.sampled_from(DTYPES))
    idx_dtype = draw(st.sampled_from([np.int32, np.int64]))
    m = draw(st.integers(0, 60))
    k = draw(st.integers(0, 60))
    n_kind = draw(st.sampled_from(["vector", "one", "small", "wide"]))
    n = {"vector": None, "one": 1, "small": draw(st.integers(2, 9)),
         "wide": tile_width(dtype) + draw(st.integers(1, 70))}[n_kind]
    side = draw(st.sampled_from(["A@X", "X@A"]))
    prepared = draw(st.booleans())
    method = draw(st.sampled_from(["auto", "sparse", "dense"]))
    alpha = draw(st.sampled_from([0.6, 1.0, 1.5, 3.0]))      # power-law exponent
    density = draw(st.sampled_from([0.0, 0.02, 0.1, 0.3, 0.8]))
    empty_frac = draw(st.sampled_from([0.0, 0.3, 0.9]))
    dense_row = draw(st.booleans())
    dup_frac = draw(st.sampled_from([0.0, 0.2, 0.5]))
    unsorted = draw(st.booleans())
    zeros_frac = draw(st.sampled_from([0.0, 0.1]))
    nonfinite = draw(st.sampled_from([0, 0, 1, 3]))
    seed = draw(st.integers(0, 2**32 - 1))

    rng = np.random.default_rng(seed)
    if k == 0:
        lengths = np.zeros(m, dtype=np.int64)
    else:
        lengths = np.minimum(k, (rng.pareto(alpha, size=m) * density * k).astype(np.int64))
        lengths[rng.random(m) < empty_frac] = 0
        if dense_row and m:
            lengths[rng.integers(m)] = k
    rows = []
    for ln in lengths:
        cols = np.sort(rng.choice(k, size=int(ln), replace=False)) if ln else \
            np.zeros(0, np.int64)
        if ln and dup_frac:
            extra = rng.choice(cols, size=int(np.ceil(dup_frac * ln)))
            cols = np.sort(np.concatenate([cols, extra]))
        if unsorted:
            cols = rng.permutation(cols)
        rows.append(cols)
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in rows])]).astype(idx_dtype)
    indices = (np.concatenate(rows) if rows else np.zeros(0)).astype(idx_dtype)
    data = values(rng, len(indices), dtype)
    data[rng.random(len(data)) < zeros_frac] = 0                  # explicit zeros
    inner = k if side == "A@X" else m
    if n is None:
        xshape = (inner,)
    else:
        xshape = (inner, n) if side == "A@X" else (n, inner)
    X = values(rng, int(np.prod(xshape)), draw(st.sampled_from(DTYPES))).reshape(xshape)
    if nonfinite and X.size:
        flat = X.reshape(-1)
        flat[rng.integers(X.size, size=nonfinite)] = rng.choice([np.nan, np.inf, -np.inf],
                                                                size=nonfinite)
    return dict(indptr=indptr, indices=indices, data=data, shape=(m, k), X=X, side=side,
                prepared=prepared, method=method)


@settings(max_examples=SPMM_EXAMPLES, **FUZZ)
@given(case=csr_cases())
# Found by this fuzzer: method="dense" summed the duplicates of a float32 matrix in float32
# before casting to the float64 result (relative error 1e-8 against scipy).
@example(case=dict(indptr=np.array([0, 2], np.int32), indices=np.array([0, 0], np.int32),
                   data=np.array([0.64042264, 0.10490011], np.float32), shape=(1, 1),
                   X=np.array([1.30400005]), side="A@X", prepared=False, method="dense"))
def test_fuzz_spmm(case):
    A = sp.csr_array((case["data"], case["indices"], case["indptr"]), shape=case["shape"])
    X, side, method = case["X"], case["side"], case["method"]
    if method == "dense" and not np.isfinite(X).all():
        method = "auto"    # dense BLAS turns 0 * inf at implicit zeros into NaN (documented)
    op = CSR.from_arrays(case["data"], case["indices"], case["indptr"], case["shape"]) \
        if case["prepared"] else A
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if side == "A@X":
            got, want = sparse_matmul(op, X, method=method), A @ X
        else:
            got, want = sparse_matmul(X, op, method=method), X @ A
    # Dense BLAS sums in another order: the values agree within the same rounding bound.
    assert_matches(got, want, A if side == "A@X" else X, X if side == "A@X" else A)


FORMATS = ("coo", "csc", "dia", "bsr", "lil", "dok")


@settings(max_examples=FORMAT_EXAMPLES, **FUZZ)
@given(case=csr_cases(), fmt=st.sampled_from(FORMATS), array=st.booleans(),
       accelerated=st.booleans(), block=st.integers(1, 4))
def test_fuzz_formats(case, fmt, array, accelerated, block):
    csr = sp.csr_array if array else sp.csr_matrix
    A = base = csr((case["data"], case["indices"], case["indptr"]), shape=case["shape"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (scipy's efficiency warnings for DIA and LIL)
        if fmt == "coo":
            A = A.tocoo()      # one entry per stored CSR entry: duplicates and order kept
        elif fmt == "bsr":
            m, k = A.shape
            A = A.tobsr(blocksize=(block if m % block == 0 else 1,
                                   block if k % block == 0 else 1))
        else:
            A = A.asformat(fmt)
    X, side = case["X"], case["side"]
    # The oracle: scipy's product of A, but for the two formats whose stored zeros
    # sparse_matmul documents as not imitated (its Notes): DIA's zeros are implicit (the CSR
    # scipy makes of it drops them), COO's entries all count as stored (the CSR it came
    # from, duplicates and explicit zeros kept; scipy's COO multi-vector product skips zeros).
    # Under accelerated() the product is scipy's own (DIA, COO...) or gives its result (CSC).
    ref = A if accelerated else A.tocsr() if fmt == "dia" else base if fmt == "coo" else A
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = ref @ X if side == "A@X" else X @ ref
        if accelerated:
            with wsesparse.accelerated():
                got = A @ X if side == "A@X" else X @ A
        elif side == "A@X":
            got = sparse_matmul(A, X)
        else:
            got = sparse_matmul(X, A)
    assert_matches(got, want, A if side == "A@X" else X, X if side == "A@X" else A)


@st.composite
def tlr_cases(draw):
    dtype = draw(st.sampled_from(DTYPES))
    m = draw(st.integers(1, 90))
    n = draw(st.integers(1, 90))
    nb = draw(st.sampled_from([4, 7, 16, 33, 64, 200]))
    floor = 10.0 * 2.0 * np.finfo(dtype).eps * (1 + np.sqrt(nb))
    log_tol = draw(st.floats(np.log10(max(floor * 2, 1e-10)), np.log10(0.5)))
    rank = draw(st.integers(0, 12))
    noise = draw(st.sampled_from([0.0, 1e-6, 1e-3, 1e-1]))
    s = draw(st.sampled_from([None, 1, 3]))
    seed = draw(st.integers(0, 2**32 - 1))
    return dict(dtype=dtype, m=m, n=n, nb=nb, tol=10.0**log_tol, rank=rank, noise=noise, s=s,
                seed=seed)


@settings(max_examples=TLR_EXAMPLES, **FUZZ)
@given(case=tlr_cases())
@example(case=dict(dtype=np.float32, m=1, n=1, nb=200, tol=0.1, rank=1, noise=0.0, s=None,
                   seed=0))
@example(case=dict(dtype=np.complex64, m=90, n=5, nb=4, tol=1e-3, rank=0, noise=1e-1, s=3,
                   seed=1))
def test_fuzz_tlr_matvec(case):
    dtype, m, n, tol = case["dtype"], case["m"], case["n"], case["tol"]
    rng = np.random.default_rng(case["seed"])
    cplx = np.dtype(dtype).kind == "c"
    A = values(rng, m * case["rank"], np.complex128 if cplx else np.float64).reshape(
        m, case["rank"]) @ values(rng, case["rank"] * n, np.complex128 if cplx else np.float64
                                  ).reshape(case["rank"], n)
    A = A + case["noise"] * values(rng, m * n, np.complex128 if cplx else np.float64
                                   ).reshape(m, n)
    A = A.astype(dtype)
    T = TLRMatrix.from_dense(A, nb=case["nb"], tol=tol, n_threads=1)
    A64 = A.astype(np.complex128 if cplx else np.float64)
    normA = np.linalg.norm(A64)
    # ||A - T||_F <= tol ||A||_F is the guarantee; the product adds rounding in dtype.
    assert np.linalg.norm(A64 - T.toarray()) <= tol * normA * (1 + 1e-9) + 1e-300
    eps = np.finfo(dtype).eps
    shp = (n,) if case["s"] is None else (n, case["s"])
    x = values(rng, int(np.prod(shp)), dtype).reshape(shp)
    y = T @ x
    assert y.shape == (m,) + shp[1:] and y.dtype == dtype
    bound = (tol + 50 * eps * np.sqrt(max(m, n))) * normA * np.linalg.norm(x) + 1e-300
    assert np.linalg.norm(y - A64 @ x) <= bound
    shp_h = (m,) + shp[1:]
    z = values(rng, int(np.prod(shp_h)), dtype).reshape(shp_h)
    w = T.H @ z
    assert w.shape == (n,) + shp[1:]
    assert np.linalg.norm(w - A64.conj().T @ z) <= \
        (tol + 50 * eps * np.sqrt(max(m, n))) * normA * np.linalg.norm(z) + 1e-300


def test_budget_from_environment():
    """The CI budget stays small; WSESPARSE_FUZZ_EXAMPLES scales the three properties."""
    assert SPMM_EXAMPLES + FORMAT_EXAMPLES + TLR_EXAMPLES == max(TOTAL, 3)
    if "WSESPARSE_FUZZ_EXAMPLES" not in os.environ:
        assert TOTAL <= 200
