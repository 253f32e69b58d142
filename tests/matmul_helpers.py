"""Oracles, operand builders and hypothesis strategies for the sparse_matmul tests.

The oracle for every product is scipy's own ``A @ B`` (numpy for dense
operands). ``assert_matches`` compares container type, shape, dtype, the exact
positions (and signs) of nan/inf, and the finite values within a tolerance
scaled by ``|A| @ |B|``, the magnitude a rounding error is relative to.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

FORMATS = ("csr", "csc", "coo", "bsr", "dia", "lil", "dok")
KINDS = ("array", "matrix")

SPARSE_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int32, np.int64, np.float32, np.float64, np.complex64, np.complex128))
DENSE_DTYPES = SPARSE_DTYPES + (np.dtype(np.float16),)
KERNEL_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def to_format(A, fmt: str, kind: str = "array"):
    """``A`` (any scipy sparse) as format ``fmt``, ``*_array`` or ``*_matrix`` class."""
    cls = getattr(sp, f"{fmt}_{kind}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SparseEfficiencyWarning)
        if fmt == "bsr":
            m, k = A.shape
            bs = (2 if m % 2 == 0 and m else 1, 2 if k % 2 == 0 and k else 1)
            return cls(sp.csr_array(A), blocksize=bs)
        return cls(sp.csr_array(A))


def random_values(rng: np.random.Generator, n: int, dtype, *, nonzero: bool = False) -> np.ndarray:
    """``n`` random values of ``dtype``: small integers, normal floats/complex.

    ``nonzero`` avoids exact zeros, so that stored entries stay nonzero.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.ones(n, dtype) if nonzero else rng.random(n) < 0.5
    if dtype.kind in "iu":
        v = rng.integers(-4, 5, size=n)
        if nonzero:
            v[v == 0] = 3
        return v.astype(dtype)
    v = rng.standard_normal(n)
    if dtype.kind == "c":
        v = v + 1j * rng.standard_normal(n)
    if nonzero:
        v[v == 0] = 1.0
    return v.astype(dtype)


def random_sparse(rng, m: int, k: int, density: float, dtype=np.float64, *,
                  pattern: str = "uniform") -> sp.csr_array:
    """Canonical CSR ``m x k`` with nonzero values and a row-length ``pattern``.

    pattern: "uniform" (every entry present with probability ``density``),
    "skewed" (power-law row lengths), "empty_rows" (every other row empty, the
    rest at twice the density), "dense_row" (one full row, the rest sparse).
    """
    if m == 0 or k == 0:
        return sp.csr_array((m, k), dtype=dtype)
    if pattern == "uniform":
        mask = rng.random((m, k)) < density
    elif pattern == "skewed":
        lengths = np.minimum(k, (rng.pareto(1.2, size=m) * density * k).astype(int))
        mask = np.zeros((m, k), bool)
        for i, ln in enumerate(lengths):
            mask[i, rng.choice(k, size=ln, replace=False)] = True
    elif pattern == "empty_rows":
        mask = rng.random((m, k)) < min(1.0, 2 * density)
        mask[::2] = False
    elif pattern == "dense_row":
        mask = rng.random((m, k)) < density / 4
        mask[rng.integers(m)] = True
    else:  # pragma: no cover
        raise ValueError(pattern)
    rows, cols = np.nonzero(mask)
    vals = random_values(rng, len(rows), dtype, nonzero=True)
    return sp.csr_array((vals, (rows, cols)), shape=(m, k), dtype=dtype)


def random_dense(rng, shape, dtype=np.float64) -> np.ndarray:
    n = int(np.prod(shape))
    return random_values(rng, n, dtype).reshape(shape)


def _abs_dense(x):
    if sp.issparse(x):
        # abs of the stored values before the conversion: a COO's duplicates then sum to
        # |a| + |b|, not |a + b| (a bound too tight where they cancel; the formats fuzzer
        # found one). Not abs(x): scipy sums the duplicates of x first, in place.
        fmt = x.format
        if fmt in ("lil", "dok"):  # (no duplicates)
            return sp.csr_array(abs(x)).astype(np.float64)
        data = np.abs(x.data).astype(np.float64)  # (also big-endian data, which scipy refuses)
        if fmt == "coo":
            y = sp.coo_array((data, x.coords), shape=x.shape)
        elif fmt == "dia":
            y = sp.dia_array((data, x.offsets), shape=x.shape)
        else:
            y = getattr(sp, f"{fmt}_array")((data, x.indices, x.indptr), shape=x.shape)
        return sp.csr_array(y)
    if hasattr(x, "to_scipy"):
        return _abs_dense(x.to_scipy())
    return np.abs(np.asarray(x)).astype(np.float64)


def tolerance(dtype) -> float:
    """Relative (to ``|A| @ |B|``) tolerance for a result of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return 0.0
    if dtype in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.complex64)):
        return 1e-5
    return 1e-12


def assert_matches(got, expected, A=None, B=None, *, rtol: float | None = None,
                   exact_type: bool = True) -> None:
    """``got`` equals scipy's ``expected`` = ``A @ B``: container, shape, dtype, values.

    nan/inf positions (and the sign of inf, per real/imaginary part) must be
    identical; finite values agree within ``rtol * (|A| @ |B|)``.
    """
    if exact_type:
        assert type(got) is type(expected), (type(got), type(expected))
    if sp.issparse(expected):
        assert sp.issparse(got)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        got, expected = got.toarray(), expected.toarray()
    got_a, exp_a = np.asarray(got), np.asarray(expected)
    assert got_a.shape == exp_a.shape, (got_a.shape, exp_a.shape)
    assert got_a.dtype == exp_a.dtype, (got_a.dtype, exp_a.dtype)
    if exp_a.dtype.kind in "biu":
        np.testing.assert_array_equal(got_a, exp_a)
        return
    parts = ((got_a.real, exp_a.real), (got_a.imag, exp_a.imag)) if exp_a.dtype.kind == "c" \
        else ((got_a, exp_a),)
    for g, e in parts:
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg="nan positions differ")
        np.testing.assert_array_equal(np.isposinf(g), np.isposinf(e), err_msg="+inf positions")
        np.testing.assert_array_equal(np.isneginf(g), np.isneginf(e), err_msg="-inf positions")
    if rtol is None:
        rtol = tolerance(exp_a.dtype)
    if A is not None and B is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bound = _abs_dense(A) @ _abs_dense(B)
            bound = np.asarray(bound.toarray() if sp.issparse(bound) else bound, np.float64)
            bound = np.where(np.isfinite(bound), bound, 0.0)
    else:
        bound = np.abs(exp_a).astype(np.float64)
    fin = np.isfinite(exp_a)
    diff = np.abs(got_a[fin].astype(np.complex128) - exp_a[fin].astype(np.complex128))
    limit = rtol * bound[fin] + 1e-30
    bad = diff > limit
    assert not bad.any(), (
        f"{bad.sum()} of {bad.size} values differ beyond rtol={rtol}: "
        f"max |diff| / bound = {np.max(diff / np.maximum(bound[fin], 1e-300)):.3g}")


# -- hypothesis strategies ----------------------------------------------------
patterns = st.sampled_from(["uniform", "skewed", "empty_rows", "dense_row"])
densities = st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.5, 1.0])


@st.composite
def sparse_operands(draw, dtypes=SPARSE_DTYPES, max_dim: int = 40, formats=FORMATS):
    """(scipy sparse of a random format/class, seed) with random shape/pattern/density/dtype."""
    m = draw(st.integers(0, max_dim))
    k = draw(st.integers(0, max_dim))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    A = random_sparse(rng, m, k, draw(densities), dtype, pattern=draw(patterns))
    fmt = draw(st.sampled_from(formats))
    kind = draw(st.sampled_from(KINDS))
    return to_format(A, fmt, kind), rng


def _dia_as_csr(X):
    return X.tocsr() if sp.issparse(X) and X.format in ("dia", "dok") else X


def scipy_product(A, B):
    # DIA and DOK operands are compared with scipy's product on their CSR form:
    # scipy's own DIA kernel multiplies padding zeros (documented difference,
    # see sparse_matmul's Notes) and raises for bool DIA @ float16 operands;
    # its DOK matvec is a Python loop that rounds each int8 * float16 product
    # to float16 before adding it to the float32 result (found by hypothesis).
    A, B = _dia_as_csr(A), _dia_as_csr(B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf/nan arithmetic
        R = A @ B
    if isinstance(R, np.generic) and (A.ndim == 2 or B.ndim == 2):
        # scipy's COO array product is a scalar wherever its result has one entry (a
        # one-row A @ x, a one-column x @ A); sparse_matmul gives the product's shape
        # (found by hypothesis).
        shape = (B.shape[1],) if A.ndim == 1 else (A.shape[0],) if B.ndim == 1 else ()
        R = np.full(shape, R)
    return R
