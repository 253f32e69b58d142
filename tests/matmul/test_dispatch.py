"""``method=`` of ``sparse_matmul``: "auto", "sparse" and "dense" agree; where "auto" picks
dense BLAS (each build's table, prepared operands, big dense copies, stored infinities,
copies that cannot fit); a bad ``method``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from matmul_helpers import KERNEL_DTYPES, assert_matches, random_dense, random_sparse
from wsesparse import CSR, sparse_matmul
from wsesparse._kernels import _spmm
from wsesparse import _hardware
from wsesparse import _thresholds as th
from wsesparse._hardware import HardwareProfile
from wsesparse._thresholds import DENSE_MIN_TOKENS


@pytest.mark.parametrize("dtype", KERNEL_DTYPES, ids=str)
@pytest.mark.parametrize("density", [0.05, 0.5, 1.0])
def test_methods_agree(rng, dtype, density):
    """"auto", "sparse" and "dense" agree with scipy on finite operands, around the
    dense-dispatch crossover."""
    A = random_sparse(rng, 60, 50, density, dtype)
    for n in (1, DENSE_MIN_TOKENS - 1, DENSE_MIN_TOKENS, 100):
        X = random_dense(rng, (50, n), dtype)
        expected = A @ X
        for method in ("auto", "sparse", "dense"):
            assert_matches(sparse_matmul(A, X, method=method), expected, A, X)
            assert_matches(sparse_matmul(X.T, A.T, method=method), X.T @ A.T, X.T, A.T)


# -- the auto rule -----------------------------------------------------------------------------
BUILDS = [32, 64]  # tile vector bytes: AVX2 / portable, AVX-512


def _build(vector_bytes: int) -> HardwareProfile:
    """This machine's profile as a kernel build with ``vector_bytes`` tiles would see it."""
    from dataclasses import replace
    return replace(_hardware.current(), vector_bytes=vector_bytes)


@pytest.mark.parametrize("vector_bytes", BUILDS)
@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("n", [1, 8, 63, 64, 255, 256, 1024])
@pytest.mark.parametrize("prepared", [False, True])
def test_auto_dispatch_rule(dtype, n, prepared, vector_bytes):
    """method="auto" picks dense BLAS exactly where each build's table says."""
    from wsesparse.matmul import _use_dense
    dt, hw = np.dtype(dtype), _build(vector_bytes)
    table = 64 if vector_bytes >= 64 else 32
    if prepared:
        threshold = th.DENSE_DENSITY_PREPARED[table][dt][
            0 if n == 1 else 1 if n < DENSE_MIN_TOKENS else 2 if n < th.DENSE_WIDE_TOKENS else 3]
    elif n < DENSE_MIN_TOKENS:
        threshold = None  # never dense
    else:
        threshold = (th.DENSE_DENSITY_WIDE if n >= th.DENSE_WIDE_TOKENS
                     else th.DENSE_DENSITY)[table][dt]
    if threshold is not None and threshold > 1:
        threshold = None  # a bucket that never goes dense
    X = np.ones((100, n), dtype)
    densities = (0.99, 0.5) if threshold is None else (threshold + 0.01, threshold - 0.01)
    for density, expect in zip(densities, (threshold is not None, False)):
        A = CSR(sp.random(100, 100, density=density, format="csr", random_state=0, dtype=dtype))
        assert _use_dense(A, X, "auto", n, prepared, hw) == expect, (density, n)
    X[0, 0] = np.inf  # implicit zeros must not meet inf: stay sparse
    A = CSR(sp.random(100, 100, density=0.99, format="csr", random_state=0, dtype=dtype))
    assert not _use_dense(A, X, "auto", n, prepared, hw)


def test_dispatch_tables_per_build():
    """Each build reads its own table (AVX-512 tiles vs 32-byte ones): the real types'
    one-shot crossovers differ, complex ones (no tiles) do not; every table covers every
    kernel dtype with densities in (0, 1] or the never-dense 1.01."""
    f32, c64 = np.dtype(np.float32), np.dtype(np.complex64)
    assert th.dense_threshold(f32, 64, False, 64) == th.DENSE_DENSITY[64][f32] > 1
    assert th.dense_threshold(f32, 64, False, 32) == th.DENSE_DENSITY[32][f32] == 0.60
    assert th.dense_threshold(c64, 64, False, 64) == th.dense_threshold(c64, 64, False, 32)
    assert th.dense_threshold(f32, 64, False, 16) == th.dense_threshold(f32, 64, False, 32)
    for tables in (th.DENSE_DENSITY, th.DENSE_DENSITY_WIDE, th.DENSE_DENSITY_PREPARED):
        assert sorted(tables) == [32, 64]
        for table in tables.values():
            assert set(table) == set(map(np.dtype, KERNEL_DTYPES))
            for v in table.values():
                assert all(0 < x <= 1.01 for x in np.atleast_1d(v))
    assert _hardware.current().vector_bytes == _spmm.TILE_VECTOR_BYTES


@pytest.mark.parametrize("n_threads", [None, 1, 2])
def test_prepared_csr_goes_dense_at_high_density_even_for_one_token(n_threads, monkeypatch):
    """A prepared CSR keeps its dense copy, so a dense matrix-vector product pays off; the
    one-shot call (densify every time) stays sparse. Observed through the cached copy."""
    A = sp.random(200, 150, density=0.9, format="csr", random_state=1, dtype=np.float64)
    X = np.random.default_rng(0).standard_normal(150)
    P = CSR(A)
    np.testing.assert_allclose(sparse_matmul(P, X, n_threads=n_threads), A @ X,
                               rtol=1e-12, atol=1e-12)
    assert P._dense is not None and P._dense.shape == A.shape
    np.testing.assert_allclose(P @ X, A @ X, rtol=1e-12, atol=1e-12)
    import wsesparse.matmul as mm
    calls = []
    monkeypatch.setattr(mm, "_dense_product", lambda *a, **k: calls.append(a))
    sparse_matmul(P, X)
    assert len(calls) == 1          # the prepared operand: dense
    np.testing.assert_allclose(sparse_matmul(A, X), A @ X, rtol=1e-12, atol=1e-12)
    assert len(calls) == 1          # the one-shot call: sparse


def test_a_kept_dense_copy_needs_no_memory_check(monkeypatch):
    """A prepared operand that keeps its dense copy goes on using it without asking how
    much memory is free (each ask read five /proc and cgroup files); before the copy
    exists, and for a dtype it has no copy of, the check still decides."""
    import wsesparse.matmul as mm
    A = sp.random(200, 150, density=0.9, format="csr", random_state=1, dtype=np.float64)
    X = np.random.default_rng(0).standard_normal(150)
    asked = []
    monkeypatch.setattr(mm, "fits_in_memory", lambda nbytes: asked.append(nbytes) or True)
    P = CSR(A)
    np.testing.assert_allclose(P @ X, A @ X, rtol=1e-12, atol=1e-12)
    assert P._dense is not None and asked    # the first product built the copy: checked
    asked.clear()
    dense = []
    monkeypatch.setattr(mm, "_dense_product", lambda *a, **k: dense.append(1))
    sparse_matmul(P, X)
    assert dense and not asked
    sparse_matmul(P, X + 0j)  # (a complex product: no complex copy kept)
    assert asked


@pytest.mark.parametrize("vector_bytes", BUILDS)
def test_auto_dispatch_builds_a_big_dense_copy_only_for_wide_products(monkeypatch,
                                                                       vector_bytes):
    """Beyond the dense-copy bound auto densifies only from DENSE_WIDE_TOKENS columns on,
    at the one-shot crossover (measured at 16384^2: the copy costs too much for fewer),
    except a prepared operand whose own arrays take at least as much as the copy."""
    from wsesparse.matmul import _use_dense
    hw = _build(vector_bytes)
    monkeypatch.setattr(_hardware, "_current", hw)
    f64 = np.dtype(np.float64)
    wide, narrow = th.DENSE_WIDE_TOKENS, th.DENSE_WIDE_TOKENS - 1
    one_shot = th.dense_threshold(f64, wide, False, vector_bytes)
    # A: 9000 values and indices (108 kB) against an 80 kB copy; B: 6500 (78 kB).
    A = CSR(sp.random(100, 100, density=0.9, format="csr", random_state=0))
    B = CSR(sp.random(100, 100, density=0.65, format="csr", random_state=0))
    assert B.density >= one_shot  # both go dense at N = wide on every build
    for S in (A, B):
        for n in (narrow, wide):
            for prepared in (False, True):
                expect = S.density >= th.dense_threshold(f64, n, prepared, vector_bytes)
                assert _use_dense(S, np.ones((100, n)), "auto", n, prepared, hw) == expect
    monkeypatch.setattr(th, "KEEP_DENSE_BYTES", 100 * 100 * 8 - 1)
    Xn, Xw = np.ones((100, narrow)), np.ones((100, wide))
    for S in (A, B):
        assert not _use_dense(S, Xn, "auto", narrow, False, hw)
        assert _use_dense(S, Xn, "dense", narrow, False, hw)  # an explicit request goes dense
        assert _use_dense(S, Xw, "auto", wide, False, hw)
    # A keeps its copy (its arrays are larger): the prepared crossover still holds.
    assert _use_dense(A, Xn, "auto", narrow, True, hw) == (
        A.density >= th.dense_threshold(f64, narrow, True, vector_bytes))
    assert not _use_dense(B, Xn, "auto", narrow, True, hw)
    assert _use_dense(B, Xw, "auto", wide, True, hw)
    # The copy is built for every call at the one-shot crossover, not the prepared one.
    C = CSR(sp.random(100, 100, density=one_shot - 0.02, format="csr", random_state=0))
    assert C.density >= th.dense_threshold(f64, wide, True, vector_bytes)
    assert not _use_dense(C, Xw, "auto", wide, True, hw)
    for S, keeps in ((A, True), (B, False)):
        np.testing.assert_allclose(sparse_matmul(S, Xw), S.to_scipy() @ Xw, rtol=1e-12)
        assert (S._dense is not None) == keeps


def test_prepared_csr_with_an_infinite_value_stays_sparse():
    """A stored inf keeps auto on the sparse path (dense BLAS would spread nan through
    0 * inf); the finiteness of a prepared CSR is computed once and kept."""
    A = sp.random(120, 100, density=0.9, format="csr", random_state=2, dtype=np.float64)
    A.data[5] = np.inf
    P = CSR(A)
    X = np.random.default_rng(1).standard_normal((100, 300))
    assert_matches(sparse_matmul(P, X), A @ X, A, X)
    assert P._finite is False and P._dense is None


def test_dense_dispatch_too_big(monkeypatch, assert_early_memory_error):
    """method='dense' on a matrix whose dense copy cannot fit fails at once; method='auto'
    then stays on the sparse kernel instead."""
    indptr = np.full(2**21, 2)
    indptr[:3] = (0, 1, 1)
    W = CSR.from_arrays([2.0, 3.0], [5, 2**21 - 1], indptr, (2**21 - 1, 2**21))
    x = np.ones((2**21, 1))
    assert_early_memory_error(lambda: sparse_matmul(W, x, method="dense"), "densified",
                               f"({2**21 - 1}, {2**21})")
    # auto: a dense-eligible product (above this build's crossover, N = 300) with room
    # for the result but, as far as the check knows, not for the dense copy of A.
    import wsesparse._checks as checks
    import wsesparse.matmul as mm
    from wsesparse import _hardware
    from wsesparse._thresholds import dense_threshold
    crossover = dense_threshold(np.dtype(np.float64), 300, False, _hardware.current().vector_bytes)
    assert crossover < 0.9
    A = sp.random(600, 800, density=crossover + 0.1, format="csr", random_state=5)
    X = np.random.default_rng(5).standard_normal((800, 300))
    monkeypatch.setattr(checks, "CHECK_MIN_BYTES", 0)
    used = []
    monkeypatch.setattr(mm, "_dense_product", lambda *a, **k: used.append(1))
    monkeypatch.setattr(checks, "available_memory", lambda: 600 * 800 * 8 - 1)
    got = sparse_matmul(A, X)
    assert not used
    np.testing.assert_allclose(got, A @ X, rtol=1e-10, atol=1e-9)
    monkeypatch.setattr(checks, "available_memory", lambda: 1 << 40)
    sparse_matmul(A, X)
    assert used, "auto should have chosen dense BLAS here; the test no longer tests anything"


# -- bad method --------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["blas", "", None, "Dense"])
def test_bad_method(S, method):
    with pytest.raises(ValueError, match="method must be 'auto', 'sparse' or 'dense'"):
        sparse_matmul(S, np.ones((4, 2)), method=method)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("n", [DENSE_MIN_TOKENS, th.DENSE_WIDE_TOKENS, 300])
def test_wide_one_shot_below_the_crossover_takes_the_fast_path(dtype, n, monkeypatch):
    """A scipy CSR times >= DENSE_MIN_TOKENS columns at a density below the one-shot
    crossover stays sparse whatever else _use_dense weighs, so it is computed on the fast
    path (no CSR built, indices checked in the kernel) with the prepared product's bits;
    at or above the crossover the general path decides (dense here: finite operands)."""
    import wsesparse.matmul as mm
    dt, hw = np.dtype(dtype), _hardware.current()
    threshold = th.dense_threshold(dt, n, False, hw.vector_bytes)
    rng = np.random.default_rng(n)
    X = random_dense(rng, (120, n), dtype)
    built = []
    real_as_csr = mm._as_csr
    monkeypatch.setattr(mm, "_as_csr", lambda *a: built.append(1) or real_as_csr(*a))
    low = sp.random(150, 120, density=min(0.05, threshold / 2), format="csr",
                    random_state=1, dtype=dtype)
    Y = sparse_matmul(low, X)
    assert not built
    assert Y.tobytes() == sparse_matmul(CSR(low), X, method="sparse").tobytes()
    assert_matches(Y, low @ X, low, X)
    bad = low.copy()
    bad.indices[bad.nnz // 2] = 120  # checked by the kernel on the fast path
    with pytest.raises(ValueError, match="not below 120"):
        sparse_matmul(bad, X)
    if threshold < 0.95:
        high = sp.random(150, 120, density=min(1.0, threshold + 0.05), format="csr",
                         random_state=2, dtype=dtype)
        Y = sparse_matmul(high, X)
        assert built  # the general path's rules
        assert_matches(Y, high @ X, high, X)


@pytest.mark.parametrize("dtype", KERNEL_DTYPES)
@pytest.mark.parametrize("n", [1, 8, DENSE_MIN_TOKENS, 300])
@pytest.mark.parametrize("prepared", [False, True])
def test_method_sparse_takes_the_fast_path(dtype, n, prepared, monkeypatch):
    """method="sparse" has no dense dispatch to weigh, so a CSR (prepared or scipy's) times
    a C-contiguous ndarray of its dtype takes the fast path at every width and density
    (the general path's checks cost a prepared SpMV 6.5 us): the general path is not
    entered, and the bits are those of the general path's sparse product (the fast path
    turned off), below and above the density where "auto" may go dense."""
    import wsesparse.matmul as mm
    general = []
    real = mm.as_dense_operand
    monkeypatch.setattr(mm, "as_dense_operand", lambda *a: general.append(1) or real(*a))
    rng = np.random.default_rng(n)
    X = random_dense(rng, (120, n), dtype)
    X = X[:, 0].copy() if n == 1 else X
    for density in (0.02, 0.6):
        S = sp.random(150, 120, density=density, format="csr", random_state=5, dtype=dtype)
        A = CSR(S) if prepared else S
        Y = sparse_matmul(A, X, method="sparse")
        assert general == [], (density, n)
        # the general path's sparse product (the fast path declining everything)
        monkeypatch.setattr(mm, "_fast_product", lambda *a, **k: None)
        want = sparse_matmul(A, X, method="sparse")
        monkeypatch.undo()
        monkeypatch.setattr(mm, "as_dense_operand", lambda *a: general.append(1) or real(*a))
        assert Y.tobytes() == want.tobytes(), (density, n)
        assert_matches(Y, S @ X, S, X)
        general.clear()


@pytest.mark.parametrize("fmt", ["coo", "dia", "bsr"])
@pytest.mark.parametrize("left", [False, True])
def test_one_vector_of_other_formats_is_scipys_product(fmt, left, monkeypatch):
    """A COO, DIA or BSR operand times one vector is scipy's own product (converting to
    CSR each call cost 2-9x scipy's time: a review): the same bits as scipy's, the kernels
    not called; so are a few columns of a small operand; many columns, method="sparse",
    or (DIA, and COO with columns) an inf in the dense operand: the kernels as before; a
    corrupt structure is still caught first. ``S @ x`` with a 1-D x
    takes the short path (``_fast_scipy_own``), not the general one."""
    import wsesparse.matmul as mm
    calls, general = [], []
    for name in ("csr_spmv", "csr_spmm"):
        real = getattr(_spmm, name)
        monkeypatch.setattr(_spmm, name, lambda *a, _r=real, **k: calls.append(1) or _r(*a, **k))
    real_checked = mm._as_checked_scipy  # (the general path's way to scipy's product)
    monkeypatch.setattr(mm, "_as_checked_scipy", lambda *a: general.append(1) or real_checked(*a))
    own_calls, real_via = [], mm._via_scipy
    monkeypatch.setattr(mm, "_via_scipy",
                        lambda *a: own_calls.append(real_via(*a)) or own_calls[-1])
    rng = np.random.default_rng(3)
    A = sp.random(40, 30, density=0.2, format="csr", random_state=3)
    S = {"coo": A.tocoo(), "dia": A.todia(), "bsr": A.tobsr(blocksize=(2, 2))}[fmt]
    n = 40 if left else 30
    for x in (rng.standard_normal(n), rng.standard_normal((1, n) if left else (n, 1))):
        got = sparse_matmul(x, S) if left else sparse_matmul(S, x)
        want = x @ S if left else S @ x
        assert got.tobytes() == np.asarray(want).tobytes() and calls == [], (x.shape, calls)
        assert bool(general) == left
        general.clear()
    with pytest.raises(ValueError, match="inner dimensions differ"):
        y = rng.standard_normal(n + 1)
        sparse_matmul(y, S) if left else sparse_matmul(S, y)
    # A few columns: scipy's own below SCIPY_OWN_WORK stored values x columns (none for
    # X @ COO), the kernels above it; with an inf, the kernels where scipy's product
    # treats stored zeros otherwise (DIA's padding, COO's explicit zeros with columns).
    work = th.SCIPY_OWN_WORK[fmt, left]
    own_calls.clear()
    for n_cols in (2, max(2, work // S.data.size + 1)):
        X2 = rng.standard_normal((n_cols, n) if left else (n, n_cols))
        for finite in (True, False):
            X2[0, 0] = 1.0 if finite else np.inf
            got = sparse_matmul(X2, S) if left else sparse_matmul(S, X2)
            own = S.data.size * n_cols <= work and (finite or fmt == "bsr")
            assert (True in own_calls) == own, (n_cols, finite)  # (else the kernels or BLAS)
            own_calls.clear()
            if own:
                want = np.asarray(X2 @ S if left else S @ X2)
                assert not calls and got.tobytes() == want.tobytes(), (n_cols, finite)
            else:
                R = S.tocsr() if fmt == "bsr" else A  # (BSR's: with its blocks' zeros)
                assert_matches(got, X2 @ R if left else R @ X2, *((X2, R) if left else (R, X2)))
            calls.clear()
    x = rng.standard_normal(n)
    got = sparse_matmul(x, S, method="sparse") if left else sparse_matmul(S, x, method="sparse")
    assert calls and np.allclose(got, x @ A if left else A @ x)
    if fmt == "dia" and not left:
        calls.clear()
        x[0] = np.inf   # (scipy's DIA product would give nan from a padding zero)
        got = sparse_matmul(S, x)
        assert calls and np.array_equal(np.isnan(got), np.isnan(A @ x))
    if fmt == "coo":
        bad = S.copy()
        bad.coords[1][0] = 99
    elif fmt == "bsr":
        bad = S.copy()
        bad.indices[0] = 99
    else:
        bad = S.copy()
        bad.data = bad.data[:1]
    with pytest.raises(ValueError, match=rf"^A \({fmt}\) has a corrupt structure"):
        sparse_matmul(bad, rng.standard_normal(30))


@pytest.mark.parametrize("n_rows", [2, 7, 8])
def test_few_rows_times_a_big_coo_is_scipys_product(n_rows, monkeypatch):
    """``X @ A`` with a COO ``A`` of ``SCIPY_OWN_COO_RIGHT[0]`` entries or more and fewer
    than ``SCIPY_OWN_COO_RIGHT[1]`` rows in X: scipy's own product (sorting the entries by
    column cost more), its bits; more rows: the kernels."""
    import wsesparse.matmul as mm
    calls = []
    real = mm._as_checked_scipy
    monkeypatch.setattr(mm, "_as_checked_scipy", lambda *a: calls.append(1) or real(*a))
    min_entries, max_rows = th.SCIPY_OWN_COO_RIGHT
    A = sp.random_array((300, 260), density=min(1.0, min_entries / (300 * 260) + 0.01),
                        format="coo", rng=0)
    assert A.nnz >= min_entries
    X = np.random.default_rng(0).standard_normal((n_rows, 300))
    got = sparse_matmul(X, A)
    assert bool(calls) == (n_rows < max_rows)
    if calls:
        assert got.tobytes() == np.asarray(X @ A).tobytes()
    assert_matches(got, X @ A.tocsr(), X, A.tocsr())


@pytest.mark.parametrize("dtype", KERNEL_DTYPES, ids=str)
@pytest.mark.parametrize("itype", [np.int32, np.int64], ids=str)
def test_csc_times_a_vector_takes_the_short_path(dtype, itype, monkeypatch):
    """A scipy CSC operand times a 1-D vector skips the general path (10 us against scipy's
    3.5 at 300 x 300) for the same scatter: the same bits as the general path's, unsorted
    and duplicate indices summed, a bad row index worded as there; other vectors (strided,
    another dtype), an empty matrix, ``out`` and other classes go the general way."""
    from wsesparse import matmul as mm
    calls = []
    real = mm._fast_csc_vector

    def spy(*args):
        y = real(*args)
        calls.append(y is not None)
        return y

    monkeypatch.setattr(mm, "_fast_csc_vector", spy)
    rng = np.random.default_rng(6)
    S = random_sparse(rng, 70, 50, 0.2, dtype=dtype).tocsc()
    S.indices = S.indices.astype(itype)
    S.indptr = S.indptr.astype(itype)
    S.indices[:8] = S.indices[:8][::-1]  # unsorted within the first columns
    x = random_dense(rng, (50,), dtype)
    want = sparse_matmul(S, x, method="sparse")
    got = sparse_matmul(S, x)
    assert calls == [True] and got.tobytes() == want.tobytes() and got.dtype == dtype
    assert_matches(got, S.toarray() @ x, S, x)
    dup = sp.csc_array((np.ones(3, dtype), np.array([2, 2, 5], itype),
                        np.array([0, 3, 3], itype)), shape=(6, 2))
    assert np.array_equal(sparse_matmul(dup, np.array([2, 7], dtype)), [0, 0, 4, 0, 0, 2])
    calls.clear()
    other_dtype = np.complex64 if dtype == np.complex128 else np.complex128
    for other in (random_dense(rng, (100,), dtype)[::2], x.astype(other_dtype)):
        assert_matches(sparse_matmul(S, other), S.toarray() @ other, S, other)
    out = np.empty(70, dtype)
    assert sparse_matmul(S, x, out=out) is out and np.array_equal(out, want)
    assert sparse_matmul(sp.csc_matrix((70, 50), dtype=dtype), x).tolist() == [0] * 70
    assert not any(calls)
    bad = S.copy()
    bad.indices[3] = 70
    with pytest.raises(ValueError) as fast:
        sparse_matmul(bad, x)
    with pytest.raises(ValueError) as general:
        sparse_matmul(bad, x, method="sparse")
    assert str(fast.value) == str(general.value) and "corrupt compressed structure" in str(
        fast.value)


@pytest.mark.parametrize("kind", ["strided", "fortran", "float32 values", "complex64 values",
                                  "float32 B"])
@pytest.mark.parametrize("n", [None, 3, DENSE_MIN_TOKENS - 1])
@pytest.mark.parametrize("cls", [sp.csr_array, sp.csr_matrix, CSR])
def test_converted_operands_take_the_fast_path(kind, n, cls, monkeypatch):
    """A scipy CSR (or prepared CSR) times an ndarray that must be copied first (strided,
    Fortran order, another kernel dtype) goes ``_fast_converted_product``, not the general
    path: no CSR built, the bits of the product of the converted operands, the kernel's
    index check; a prepared CSR with values of another dtype keeps the general path (its
    cast values are cached there)."""
    import wsesparse.matmul as mm
    rng = np.random.default_rng(7)
    S = random_sparse(rng, 40, 30, 0.2, np.complex64 if kind == "complex64 values"
                      else np.float32 if kind == "float32 values" else np.float64)
    B = random_dense(rng, (30, 2 if n is None else 2 * n), np.float32 if kind == "float32 B"
                     else np.float64)
    B = B[:, 0] if n is None else B[:, ::2] if kind == "strided" else B[:, :n]
    if kind == "fortran":
        B = np.asfortranarray(B)
    elif kind == "strided" and n is None:
        assert not B.flags.c_contiguous
    A = cls(S)
    dtype = np.result_type(S.dtype, B.dtype)
    converted = mm._fast_converted_product(A, B, None)
    general = cls is CSR and S.dtype != dtype
    needs_copy = not B.flags.c_contiguous or not S.dtype == B.dtype == dtype  # (1-D: never F)
    assert (converted is None) == (general or not needs_copy)
    built = []
    real_as_csr = mm._as_csr
    monkeypatch.setattr(mm, "_as_csr", lambda *a: built.append(1) or real_as_csr(*a))
    Y = sparse_matmul(A, B)
    assert bool(built) == general
    want = sparse_matmul(CSR(S.astype(dtype)), np.ascontiguousarray(B, dtype=dtype))
    assert Y.dtype == dtype and Y.tobytes() == want.tobytes()
    assert_matches(Y, S.astype(dtype) @ np.ascontiguousarray(B, dtype=dtype))
    if cls is not CSR:
        bad = A.copy()
        bad.indices[bad.nnz // 2] = 30
        with pytest.raises(ValueError, match="not below 30"):
            sparse_matmul(bad, B)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        sparse_matmul(A, np.concatenate([B, B[:1]]))
