"""The host side of the GPU backend, without a GPU (runs in CI).

``gpu_helpers.install`` puts a stand-in ``cupy`` (numpy underneath) in ``sys.modules`` and
replays each kernel of wsesparse/gpu/kernels.cu in Python from the exact launch arguments, so
these tests check the launch geometry, strides, offsets, dtypes, segment tables, the check
word and the dispatch. The kernels' CUDA is tested on a device (tests/gpu/test_device.py).
"""

import re
import shutil
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_helpers
from gpu_helpers import random_values, stored_tlr, tlr_test_matrix
from wsesparse import TLRBatch, sparse_matmul
from wsesparse.gpu import _machine, _module, plan

DTYPES = ["float32", "float64", "complex64", "complex128"]


@pytest.fixture
def env(monkeypatch):
    return gpu_helpers.install(monkeypatch)


def _tol(dtype):
    return 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12



def _close(Y, ref, dtype):
    Y = np.asarray(Y)
    assert Y.dtype == ref.dtype and Y.shape == ref.shape
    scale = max(np.abs(ref).max(initial=0), 1)
    np.testing.assert_allclose(Y, ref, rtol=_tol(dtype), atol=_tol(dtype) * scale)


# ------------------------------------------------------------------------------ kernel source
def test_every_instantiation_names_a_template_of_the_source():
    src = _module.source()
    templates = set(re.findall(r"template <[^>]*>\s*__global__ void __launch_bounds__\(\d+\) "
                               r"(\w+)\(", src))
    families = {"csr_dense", "csr_spmv4", "csr_densify", "csr_check", "seg_gemv_t",
                "seg_gemv_h", "seg_gemm_h"}
    assert templates == families
    for fam in families - {"csr_check"}:
        for dtype in DTYPES:
            for st in (None, "float16", "bfloat16") if fam.startswith("seg_") else (None,):
                for expr in _module.family_names(fam, dtype, st):
                    assert re.fullmatch(rf"{fam}<(float|double|wc64|wc128)(, [\w ]+)*>", expr)
                    assert (st is None) == (", w_" not in expr)
    assert _module.family_names("csr_check", np.int64) == ["csr_check<long long>"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed")
@pytest.mark.parametrize("unroll", [None, 2, 8])
def test_source_compiles_with_nvcc(tmp_path, unroll):
    # Every family for a real and a complex type (csr_spmv4 for all four), both index types:
    # what NVRTC builds at first use on a GPU, compiled here for sm_90 (no GPU needed); also
    # at the unroll depths benchmarks/gpu_spmv.py compiles csr_dense with.
    lines = [f'#include "{_module.SOURCE_PATH}"']
    for dtype in ("float32", "complex128"):
        for fam in ("csr_dense", "csr_densify", "seg_gemv_t", "seg_gemv_h", "seg_gemm_h"):
            stores = (None, "float16", "bfloat16") if fam.startswith("seg_") else (None,)
            lines += [f"template __global__ void {e}({_SIGNATURES[fam].format(*_ctypes(e))});"
                      for st in stores for e in _module.family_names(fam, dtype, st)]
    lines += [f"template __global__ void {e}({_SIGNATURES['csr_spmv4'].format(*_ctypes(e))});"
              for dtype in DTYPES for e in _module.family_names("csr_spmv4", dtype)]
    lines += ["template __global__ void csr_check<long long>(const long long*, "
              "const long long*, long long, long long, long long, int*);"]
    src = tmp_path / "inst.cu"
    src.write_text("\n".join(lines) + "\n")
    depth = [] if unroll is None else [f"-DCSR_UNROLL={unroll}", f"-DSPMV4_UNROLL={unroll}"]
    res = subprocess.run(["nvcc", "-arch=sm_90", *depth, "-cubin", "-o",
                          str(tmp_path / "k.cubin"), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]


def _ctypes(expr):
    """C++ types of an instantiation: value, index ("" if none), stored basis element."""
    args = [a.strip() for a in expr.partition("<")[2].rstrip(">").split(",")]
    return (args[0], (args[1] if len(args) > 1 and not args[1].isdigit() else ""),
            args[2] if len(args) > 2 and args[2].startswith("w_") else args[0])


_SEG = ("const {2}*, const long long*, const int*, const int*, const long long*, "
        "const long long*, const int*, const int*, ")
_SIGNATURES = {
    "csr_dense": "const {1}*, const {1}*, const {0}*, const {0}*, {0}*, long long, long long, "
                 "long long, long long, long long, int, int, long long, long long, "
                 "volatile int*",
    "csr_spmv4": "const {1}*, const {1}*, const {0}*, const {0}*, {0}*, long long, long long, "
                 "long long, long long, long long, volatile int*",
    "csr_densify": "const {1}*, const {1}*, const {0}*, {0}*, long long, long long",
    "seg_gemv_t": _SEG + "const long long*, const {0}*, {0}*, int, long long, long long",
    "seg_gemv_h": _SEG + "long long, const long long*, const {0}*, {0}*, int, long long, "
                         "long long",
    "seg_gemm_h": _SEG + "long long, const long long*, const {0}*, {0}*, int, long long, "
                         "long long",
}


# -------------------------------------------------------------------------- launch geometry
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(1, 300), st.integers(0, 4000),
       st.sampled_from([1, 2, 4]))
def test_csr_launch_writes_every_output_once(n_rows, n_cols, nnz, vec):
    launch = plan.csr_launch(n_rows, n_cols, nnz, vec)
    assert 0 <= launch.q_log <= launch.gs_log <= 5
    cells = plan.covered_cells(launch, n_rows, n_cols)
    assert len(cells) == len(set(cells)) == n_rows * n_cols


def test_csr_launch_shapes():
    spmv = plan.csr_launch(100_000, 1, 100_000 * 200, 1)
    assert (spmv.column_lanes, spmv.nonzero_lanes) == (1, 32)       # long rows: a warp a row
    wide = plan.csr_launch(1000, 1024, 1000 * 16, 4)
    assert (wide.column_lanes, wide.nonzero_lanes, wide.grid[1]) == (32, 1, 8)
    with pytest.raises(ValueError, match="power of two"):
        plan.csr_launch(10, 10, 10, 3)


# ------------------------------------------------------------------------------ TLR tables

@pytest.mark.parametrize("nb", [7, 20, 64])
def test_segment_tables_compute_the_tlr_product(rng, nb):
    mats = [tlr_test_matrix(rng, "complex128", nb=nb), tlr_test_matrix(rng, "complex128", nb=nb)]
    assert nb > 50 or any((T.ranks == 0).any() for T in mats)
    U = np.concatenate([T.U for T in mats])
    V = np.concatenate([T.V for T in mats])
    K = sum(int(T.kcol_ptr[-1]) for T in mats)
    x = random_values(rng, (2 * 50, 3), "complex128")
    p1, p3 = plan.tlr_forward_tables(mats)
    mid, y = np.full((K, 3), np.nan, complex), np.full((140, 3), np.nan, complex)
    plan.run_segments_numpy(p1, V, x, mid, transposed=True)
    plan.run_segments_numpy(p3, U, mid, y, transposed=True)
    for f, T in enumerate(mats):
        np.testing.assert_allclose(y[70 * f:70 * (f + 1)], T @ x[50 * f:50 * (f + 1)],
                                   rtol=1e-12, atol=1e-12)
    yin = random_values(rng, (140, 2), "complex128")
    a1, a3 = plan.tlr_adjoint_tables(mats)
    mid, z = np.full((K, 2), np.nan, complex), np.full((100, 2), np.nan, complex)
    plan.run_segments_numpy(a1, U, yin, mid, transposed=False)
    plan.run_segments_numpy(a3, V, mid, z, transposed=False)
    for f, T in enumerate(mats):
        np.testing.assert_allclose(z[50 * f:50 * (f + 1)], T.rmatvec(yin[70 * f:70 * (f + 1)]),
                                   rtol=1e-12, atol=1e-12)
    # block tables cover every column of every segment once
    for seg in (p1, p3):
        cover = sorted((g, c) for g, c0 in zip(seg.work_a, seg.work_b)
                       for c in range(c0, min(c0 + plan.TLR_COLS, seg.cols[g])))
        assert cover == [(g, c) for g in range(len(seg.cols)) for c in range(seg.cols[g])]


# ------------------------------------------------------------------------- CSR products
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_device_csr_products(env, rng, dtype, index):
    from wsesparse.gpu import DeviceCSR
    W = sp.random(23, 17, density=0.3, format="csr", random_state=rng).astype(dtype)
    S = DeviceCSR((gpu_helpers.dev(W.data), gpu_helpers.dev(W.indices.astype(index)),
                   gpu_helpers.dev(W.indptr.astype(index))), shape=W.shape)
    assert S.checked and S.nnz == W.nnz
    for n in (1, 5, 8):
        X = random_values(rng, (17, n), dtype)
        _close(S @ gpu_helpers.dev(X), W @ X, dtype)
        Z = random_values(rng, (n, 23), dtype)
        ZW = gpu_helpers.dev(Z) @ S
        _close(ZW, Z @ W, dtype)
        assert ZW.flags.f_contiguous           # as scipy's and the CPU path's X @ W
    _close(S @ gpu_helpers.dev(X[:, 0]), W @ X[:, 0], dtype)
    assert S.T is S.T                                        # built once
    assert {n.partition("<")[2].split(", ")[1] for n, _, _ in env.launches
            if n.startswith("csr_dense")} == {_module.INDEX_TYPES[np.dtype(index)]}


def test_scipy_coo_keeps_duplicates_and_is_checked(env):
    """A scipy COO operand: its duplicates each meet x (scipy's tocsr summed them in float32
    first, 1 + 1e-8 -> 1), and a corrupt one is refused before scipy converts it."""
    from wsesparse.gpu import DeviceCSR
    A = sp.coo_array((np.array([1.0, 1e-8], np.float32), ([0, 0], [0, 0])), shape=(1, 1))
    S = DeviceCSR(A)
    assert S.nnz == 2
    A.row[0] = 5
    with pytest.raises(ValueError, match="a row index is negative or not below 1"):
        DeviceCSR(A)


@pytest.mark.parametrize("fmt", ["coo", "csc", "lil", "dok", "bsr", "dia"])
@pytest.mark.parametrize("dtype", ["float32", "complex128", "int8", "bool"])
def test_scipy_formats_match_scipy(env, rng, fmt, dtype):
    """Every scipy format goes through the CPU path's conversion (``wsesparse.CSR``), the
    product as scipy's in the kernel dtype (ints and bools compute in float32)."""
    from wsesparse.gpu import DeviceCSR
    W = sp.random_array((13, 11), density=0.3, format="csr", rng=rng, dtype=np.float64)
    W.data[:] = rng.integers(1, 4, W.nnz)   # (no zeros for the integer casts to drop)
    W = W.astype(dtype)
    S = DeviceCSR(W.asformat(fmt))
    kernel = np.result_type(dtype, np.float32)
    assert S.dtype == kernel and S.nnz == W.nnz
    X = random_values(rng, (11, 3), kernel)
    _close(S @ gpu_helpers.dev(X), W.astype(kernel) @ X, kernel)


def test_lil_and_dok_are_read_by_the_host_checks_not_scipy(env, monkeypatch):
    """A LIL or DOK operand is checked and converted by ``wsesparse.CSR`` (in C), never
    by scipy's ``tocsr``, which writes where a bad index points and races with a thread
    changing the lists; a bad index names the operand."""
    from wsesparse.gpu import DeviceCSR
    for cls in (sp.lil_array, sp.dok_array):
        monkeypatch.setattr(cls, "tocsr", lambda *a, **k: pytest.fail("scipy's tocsr ran"))
    L = sp.lil_array((3, 4))
    L[0, 1], L[2, 3] = 1.0, 2.0
    assert DeviceCSR(L).nnz == 2
    L.rows[2][0] = 9
    with pytest.raises(ValueError, match=r"^W .*column index"):
        DeviceCSR(L, name="W")
    D = sp.dok_array((3, 4))
    D[1, 2] = 5.0
    assert np.array_equal(np.asarray(DeviceCSR(D).toarray()), D.toarray())
    with pytest.raises(TypeError, match="^W has values of dtype float128"):
        DeviceCSR(sp.lil_array(np.ones((2, 2), dtype=np.longdouble)), name="W")


def test_a_prepared_csr_sends_its_stored_entries_only(env):
    """A ``wsesparse.CSR`` whose arrays run past its stored entries (narrowed from int64)
    goes to the device with ``nnz`` entries."""
    from wsesparse import CSR
    from wsesparse.gpu import DeviceCSR
    C = CSR.from_arrays(np.array([1.0, 2.0, 7.0]), np.array([1, 0, 0], np.int64),
                        np.array([0, 1, 2], np.int64), (2, 2))
    S = DeviceCSR(C)
    assert S.nnz == 2 and S.data.size == S.indices.size == 2
    assert np.array_equal(np.asarray(S.toarray()), [[0.0, 1.0], [2.0, 0.0]])


def test_layouts_out_and_vector_widths(env, rng):
    from wsesparse.gpu import DeviceCSR
    W = sp.random(30, 20, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    S = DeviceCSR(W)
    X = random_values(rng, (20, 8), "float32")
    wide = np.zeros((20, 16), np.float32)
    wide[:, ::2] = X
    for Xd, vec in ((X, 4), (np.asfortranarray(X), 4), (wide[:, ::2], 4),   # (copied)
                    (np.concatenate([X[:, :1], X], axis=1)[:, 1:], 1)):
        env.launches.clear()
        _close(sparse_matmul(S, gpu_helpers.dev(Xd), method="sparse"), W @ X, "float32")
        assert env.launches[-1][0] == f"csr_dense<float, int, {vec}, false>"
    out = gpu_helpers.dev(np.full((30, 16), np.nan, np.float32))
    sparse_matmul(S, gpu_helpers.dev(X), out=out[:, 1::2], method="sparse")
    _close(out[:, 1::2], W @ X, "float32")
    assert np.isnan(np.asarray(out)[:, ::2]).all()
    outT = gpu_helpers.dev(np.full((8, 30), np.nan, np.float32))
    r = sparse_matmul(gpu_helpers.dev(X.T.copy()), DeviceCSR(W.T.tocsr()), out=outT,
                      method="sparse")
    assert r is outT
    _close(outT, X.T @ W.T, "float32")


def test_degenerate_shapes(env, rng):
    from wsesparse.gpu import DeviceCSR
    for m, k, n in ((0, 5, 3), (5, 0, 3), (5, 4, 0), (1, 1, 1)):
        W = sp.random(m, k, density=0.5, format="csr", random_state=rng)
        X = rng.standard_normal((k, n))
        Y = sparse_matmul(DeviceCSR(W), gpu_helpers.dev(X), method="sparse")
        _close(Y, W @ X, "float64")
        Y = sparse_matmul(env.csr_matrix(W), gpu_helpers.dev(X))      # one-shot
        _close(Y, W @ X, "float64")


def test_unsorted_duplicates_and_dense_copies(env, rng):
    from wsesparse.gpu import DeviceCSR
    indptr = np.array([0, 4, 4, 7])
    indices = np.array([3, 0, 3, 3, 2, 0, 2])
    data = np.arange(1.0, 8.0)
    W = sp.csr_matrix((data, indices, indptr), shape=(3, 4))
    assert not W.has_canonical_format
    X = rng.standard_normal((4, 40))
    for keep in (True, False):
        S = DeviceCSR(W, keep_dense=keep)
        np.testing.assert_array_equal(np.asarray(S.toarray()), W.toarray())
        for _ in range(2):
            _close(sparse_matmul(S, gpu_helpers.dev(X), method="dense"), W @ X, "float64")
        assert bool(S._dense) == keep
        _close(sparse_matmul(S, gpu_helpers.dev(X), method="sparse"), W @ X, "float64")
        Z = rng.standard_normal((6, 3))
        _close(sparse_matmul(gpu_helpers.dev(Z), S, method="sparse"), Z @ W, "float64")
    with pytest.raises(ValueError, match="keep_dense must be"):
        DeviceCSR(W, keep_dense="yes")


def _corrupted(M, fault: str, bound: int):
    """Copies of the ``indptr`` and ``indices`` of compressed ``M`` with ``fault``: an
    index equal to ``bound``, a negative one, a decreasing, short or nonzero-start
    ``indptr``."""
    indptr, indices = M.indptr.copy(), M.indices.copy()
    if fault == "index":
        indices[4] = bound
    elif fault == "negative":
        indices[-1] = -3
    elif fault == "decreasing":
        indptr[5] = indptr[6] + 1
    elif fault == "short":
        indptr[-1] += 2
    else:
        indptr[0] = 1
    return indptr, indices


@pytest.mark.parametrize("fault, message", [
    ("index", "a stored column index is negative or not below 20"),
    ("negative", "a stored column index is negative"),
    ("decreasing", "indptr decreases somewhere"),
    ("short", "indptr\\[-1\\] exceeds the number of stored indices"),
    ("start", "indptr\\[0\\] is not 0"),
])
def test_corrupt_structures_raise_the_cpu_message(env, rng, fault, message):
    from wsesparse.gpu import DeviceCSR
    W = sp.random(30, 20, density=0.3, format="csr", random_state=rng)
    indptr, indices = _corrupted(W, fault, 20)
    arrays = (gpu_helpers.dev(W.data), gpu_helpers.dev(indices), gpu_helpers.dev(indptr))
    with pytest.raises(ValueError, match=message):
        DeviceCSR(arrays, shape=W.shape)
    bad = env.csr_matrix(W)
    bad.indices, bad.indptr = indices, indptr          # (scipy's constructor would refuse)
    for n in (1, 3, 64):
        X = gpu_helpers.dev(np.ones((20, n)) if n > 1 else np.ones(20))
        env.launches.clear()    # one-shot: the product kernel finds it, csr_check names it
        with pytest.raises(ValueError, match="A has a corrupt compressed structure.*" + message):
            sparse_matmul(bad, X, method="sparse")
        assert [n.partition("<")[0] for n, _, _ in env.launches] == ["csr_dense", "csr_check"]
        with pytest.raises(ValueError, match=message):
            sparse_matmul(bad, X, method="dense")       # checked before densifying
    with pytest.raises(ValueError, match=message):
        sparse_matmul(gpu_helpers.dev(np.ones((2, 30))), bad)           # transposed


@pytest.mark.parametrize("fault, message", [
    ("index", r"\(30x20, CSC\): a stored row index is negative or not below 30"),
    ("negative", "a stored row index is negative"),
    ("decreasing", "indptr decreases somewhere"),
    ("short", r"indptr\[-1\] exceeds the number of stored indices"),
])
def test_corrupt_scipy_csc_raises_before_scipy_converts_it(env, rng, fault, message):
    """A scipy CSC bound for the device is checked whole before scipy's tocsr, which
    writes where the row indices point (a bad one crashed the process); a cupyx CSC on
    the device before cupyx's tocsr (csr_check launched on its arrays)."""
    from wsesparse.gpu import DeviceCSR
    A = sp.random(30, 20, density=0.3, format="csc", random_state=rng)
    C = env.csc_matrix(A)                                # (a cupyx CSC)
    for ok in (A, C):
        np.testing.assert_array_equal(np.asarray(DeviceCSR(ok).toarray()), A.toarray())
    for M in (A, C):                                     # (constructors would refuse)
        M.indptr, M.indices = _corrupted(M, fault, 30)
        with pytest.raises(ValueError, match="^A has a corrupt compressed structure.*" + message):
            DeviceCSR(M)


def test_a_conflicting_shape_and_object_operands_are_named(env, rng):
    """DeviceCSR(matrix, shape=...) ignored a shape that differed from the matrix's, and an
    object-dtype operand raised "no scipy.sparse dtype holds the product", naming neither
    operand (a review)."""
    from wsesparse.gpu import DeviceCSR, DeviceTLR
    W = sp.random(5, 4, density=0.5, format="csr", random_state=rng)
    with pytest.raises(ValueError, match=r"shape=\(7, 7\) differs from the shape of A"):
        DeviceCSR(W, shape=(7, 7))
    with pytest.raises(ValueError, match="shape=5 differs"):
        DeviceCSR(W, shape=5)
    assert DeviceCSR(W, shape=(5, 4)).shape == (5, 4)
    with pytest.raises(TypeError, match="on the GPU the product must be .* gives object"):
        DeviceCSR(W) @ gpu_helpers.dev(np.ones((4, 2), object))
    T = tlr_test_matrix(rng, "float64")
    with pytest.raises(TypeError, match="gives object; TLR-MVM computes"):
        DeviceTLR(T) @ gpu_helpers.dev(np.ones(50, object))


def test_a_cupyx_csc_of_the_wrong_lengths_is_refused_before_any_launch(env, rng):
    """The cupyx CSC check read indptr[n_cols] past a short indptr (a review): its lengths
    are now checked first, as a CSR's are."""
    from wsesparse.gpu import DeviceCSR
    A = sp.random(6, 5, density=0.5, format="csc", random_state=rng)
    for fault, message in (("short", r"\(6x5, CSC\): indptr has 4 entries, not 6"),
                           ("values", "indices but")):
        C = env.csc_matrix(A)
        if fault == "short":
            C.indptr = C.indptr[:4]
        else:
            C.data = C.data[:-1]
        env.launches.clear()
        with pytest.raises(ValueError, match="^A has a corrupt compressed structure.*" + message):
            DeviceCSR(C)
        assert not env.launches


def test_the_transpose_of_more_rows_than_int32_holds_has_int64_indices(env, tmp_path):
    """D @ S runs on S.T, whose column indices are S's row numbers: with int32 indices and
    2**31 + 1 rows they wrapped to -2**31 in a transpose marked checked (a review). The
    indptr is a sparse file of 8 GiB (a few pages written)."""
    from wsesparse.gpu import DeviceCSR
    from wsesparse.gpu.csr import _transposed
    m = 2 ** 31 + 1
    indptr = np.memmap(tmp_path / "indptr", dtype=np.int32, mode="w+", shape=(m + 1,))
    indptr[m] = 1                               # one entry, in the last row (2**31)
    S = DeviceCSR.__new__(DeviceCSR)
    S.name, S.shape, S.dtype, S.nnz = "A", (m, 1), np.dtype(np.float64), 1
    S.data, S.indices, S.indptr = (gpu_helpers.dev(np.array([1.0])),
                                   gpu_helpers.dev(np.array([0], np.int32)), indptr)
    S.checked, S.keep_dense, S._casts, S._transpose, S._dense = True, False, {}, None, {}
    S._finite = None
    T = _transposed(S)
    assert T.shape == (1, m) and T.indices.dtype == T.indptr.dtype == np.int64
    assert np.asarray(T.indices).tolist() == [m - 1]
    assert np.asarray(T.indptr).tolist() == [0, 1]
    del indptr


def test_out_overlapping_an_operand(env, rng):
    W = sp.random(40, 40, density=0.2, format="csr", random_state=rng)
    for shape in ((40, 3), (40,)):
        x = rng.standard_normal(shape)
        xd = gpu_helpers.dev(x.copy())
        r = sparse_matmul(env.csr_matrix(W), xd, out=xd, method="sparse")    # x = A @ x
        assert r is xd
        _close(xd, W @ x, "float64")


def test_strided_arrays_are_copied_and_misaligned_out(env, rng):
    from wsesparse.gpu import DeviceCSR
    W = sp.random(30, 20, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    big = np.zeros(2 * W.nnz, np.float32)
    big[::2] = W.data
    wide = np.zeros(2 * W.nnz, W.indices.dtype)
    wide[::2] = W.indices
    S = DeviceCSR((gpu_helpers.dev(big)[::2], gpu_helpers.dev(wide)[::2],
                   gpu_helpers.dev(W.indptr)), shape=W.shape)
    X = random_values(rng, (20, 8), "float32")
    _close(S @ gpu_helpers.dev(X), W @ X, "float32")
    out = gpu_helpers.dev(np.full((30, 12), np.nan, np.float32))[:, 1:9]     # rows 4 B off
    env.launches.clear()
    sparse_matmul(S, gpu_helpers.dev(X), out=out, method="sparse")
    _close(out, W @ X, "float32")
    assert env.launches[-1][0] == "csr_dense<float, int, 1, false>"     # no 16-byte stores


def _long_rows(rng, m, k, dtype, index="int32"):
    """A CSR of rows 0-150 long (mean above SPMV4_MIN_MEAN), so row starts fall on every
    offset from a multiple of 4, with an empty row, rows of 1-3 and unsorted duplicates."""
    lengths = rng.integers(0, 151, m)
    lengths[:5] = (0, 1, 2, 3, 140)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(index)
    indices = rng.integers(0, k, int(indptr[-1])).astype(index)
    W = sp.csr_matrix((random_values(rng, int(indptr[-1]), dtype), indices, indptr), (m, k))
    assert W.nnz >= plan.SPMV4_MIN_MEAN * m and not W.has_canonical_format
    return W


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 600), st.integers(0, 700))
def test_spmv4_lanes_sum_every_nonzero_once(start, length):
    order = [k for lane in range(32)
             for k in gpu_helpers._spmv4_lane_order(start, start + length, lane)]
    assert sorted(order) == list(range(start, start + length))
    a = min((start + 3) & ~3, start + length)
    b = max((start + length) & ~3, a)
    for lane in range(32):       # between head and tail: 4 consecutive from a multiple of 4
        mid = [k for k in gpu_helpers._spmv4_lane_order(start, start + length, lane)
               if a <= k < b]
        assert len(mid) % 4 == 0
        for g in range(0, len(mid), 4):
            assert mid[g] % 4 == 0 and mid[g:g + 4] == list(range(mid[g], mid[g] + 4))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_long_row_spmv_takes_spmv4(env, rng, dtype, index):
    """An SpMV of rows averaging SPMV4_MIN_MEAN or more takes csr_spmv4, one-shot (checked
    in the kernel) and prepared, for x and y at any stride; shorter rows, more columns and
    arrays off a 16-byte boundary take csr_dense."""
    from wsesparse.gpu import DeviceCSR
    W = _long_rows(rng, 40, 90, dtype, index)
    x = random_values(rng, 90, dtype)
    ref = W @ x
    ctype, itype = _module.VALUE_TYPES[np.dtype(dtype)], _module.INDEX_TYPES[np.dtype(index)]
    prepared = DeviceCSR((gpu_helpers.dev(W.data), gpu_helpers.dev(W.indices.astype(index)),
                          gpu_helpers.dev(W.indptr.astype(index))), shape=W.shape)
    one_shot = np.dtype(dtype) in plan.SPMV4_ONE_SHOT
    prep = np.dtype(dtype) in plan.SPMV4_PREPARED
    assert np.dtype(dtype) != np.complex128 or not (one_shot or prep)  # (1.06-1.27x slower)
    for A, family, launch in (
            (env.csr_matrix(W), "csr_spmv4" if one_shot else "csr_dense",   # (cupyx: int32)
             f"csr_spmv4<{ctype}, int, true>"),
            (prepared, "csr_spmv4" if prep else "csr_dense",
             f"csr_spmv4<{ctype}, {itype}, false>")):
        env.launches.clear()
        _close(sparse_matmul(A, gpu_helpers.dev(x), method="sparse"), ref, dtype)
        if family == "csr_dense":
            assert env.launches[-1][0].startswith("csr_dense<")
            continue
        assert env.launches[-1] == (launch, (plan.spmv4_grid(40),), (256,))
        wide = np.zeros((90, 3), dtype)
        wide[:, 1] = x
        out = gpu_helpers.dev(np.full((40, 2), np.nan, dtype))
        sparse_matmul(A, gpu_helpers.dev(wide)[:, 1], out=out[:, 1], method="sparse")
        _close(out[:, 1], ref, dtype)
        assert np.isnan(np.asarray(out)[:, 0]).all()
        assert env.launches[-1][0].startswith("csr_spmv4<")
        _close(sparse_matmul(A, gpu_helpers.dev(x[:, None]), method="sparse"), ref[:, None],
               dtype)                                              # (90, 1): one column too
        assert env.launches[-1][0].startswith("csr_spmv4<")
        _close(sparse_matmul(A, gpu_helpers.dev(wide[:, :2]), method="sparse"),
               W @ wide[:, :2], dtype)
        assert env.launches[-1][0].startswith("csr_dense<")
    z = random_values(rng, 90, dtype)          # z @ W^T: the rows of W, transposed back
    _close(sparse_matmul(gpu_helpers.dev(z), DeviceCSR(W.T.tocsr())), z @ W.T, dtype)
    assert env.launches[-1][0].startswith(f"csr_spmv4<{ctype}, int, false>" if prep
                                          else "csr_dense<")
    short = sp.csr_matrix(W[:, :10])          # rows of a sixth: below the mean
    assert short.nnz < plan.SPMV4_MIN_MEAN * 40
    _close(sparse_matmul(env.csr_matrix(short), gpu_helpers.dev(x[:10])), short @ x[:10],
           dtype)
    assert env.launches[-1][0].startswith("csr_dense<")
    # indices (or values) off a 16-byte boundary, as views: csr_dense, the same result
    for what in ("indices", "data"):
        arr = getattr(W, what)
        buf = np.zeros(arr.size + 16, arr.dtype)
        offs = [i for i in range(16) if buf[i:].__array_interface__["data"][0] % 16]
        if not offs:            # (complex128 values: every element is on a boundary)
            continue
        buf[offs[0]:offs[0] + arr.size] = arr
        parts = {"data": W.data, "indices": W.indices,
                 what: gpu_helpers.dev(buf)[offs[0]:offs[0] + arr.size]}
        S = DeviceCSR((gpu_helpers.dev(parts["data"]), gpu_helpers.dev(parts["indices"]),
                       gpu_helpers.dev(W.indptr)), shape=W.shape)
        _close(S @ gpu_helpers.dev(x), ref, dtype)
        assert env.launches[-1][0].startswith("csr_dense<")


@pytest.mark.parametrize("where", ["head", "middle", "tail", "negative", "indptr"])
def test_long_row_spmv_one_shot_finds_faults(env, rng, where):
    W = _long_rows(rng, 40, 90, "float32")
    bad = env.csr_matrix(W)
    row = next(r for r in range(5, 40) if W.indptr[r] % 4 and W.indptr[r + 1] - W.indptr[r]
               > 10 and W.indptr[r + 1] % 4)
    start, end = int(W.indptr[row]), int(W.indptr[row + 1])
    message = "a stored column index is negative or not below 90"
    if where == "indptr":
        bad.indptr[3] = bad.indptr[4] + 1
        message = "indptr decreases somewhere"
    else:
        k = {"head": start, "middle": (start + 3) & ~3, "tail": end - 1,
             "negative": (start + end) // 2}[where]
        bad.indices[k] = -1 if where == "negative" else 90
    env.launches.clear()
    with pytest.raises(ValueError, match="A has a corrupt compressed structure.*" + message):
        sparse_matmul(bad, gpu_helpers.dev(np.ones(90, np.float32)), method="sparse")
    assert [n.partition("<")[0] for n, _, _ in env.launches] == ["csr_spmv4", "csr_check"]


@pytest.mark.parametrize("transpose", [False, True])
def test_column_blocks_beyond_one_grid(env, rng, monkeypatch, transpose):
    from wsesparse.gpu import DeviceCSR, csr
    monkeypatch.setattr(csr, "_MAX_GRID_Y", 1)           # one block of columns a launch
    W = sp.random(30, 20, density=0.3, format="csr", random_state=rng)
    S = DeviceCSR(W)
    if transpose:
        Z = rng.standard_normal((70, 30))
        _close(sparse_matmul(gpu_helpers.dev(Z), S, method="sparse"), Z @ W, "float64")
    else:
        X = rng.standard_normal((20, 70))
        _close(sparse_matmul(S, gpu_helpers.dev(X), method="sparse"), W @ X, "float64")
    assert sum(n.startswith("csr_dense") for n, _, _ in env.launches) > 1


def test_one_column_out_in_c_order_beyond_one_grid(env, rng, monkeypatch):
    """D @ S with S of one column into a C-ordered (n, 1) out, over several launches: its
    two strides are equal, and the launches' rows were taken as columns (wrong rows)."""
    from wsesparse.gpu import DeviceCSR, csr
    monkeypatch.setattr(csr, "_MAX_GRID_Y", 1)
    W = sp.random(6, 1, density=0.6, format="csr", random_state=rng)
    Z = rng.standard_normal((150, 6))
    out = gpu_helpers.dev(np.full((150, 1), np.nan))
    sparse_matmul(gpu_helpers.dev(Z), DeviceCSR(W), out=out, method="sparse")
    _close(out, Z @ W, "float64")
    assert sum(n.startswith("csr_dense") for n, _, _ in env.launches) > 1


def test_auto_dense_only_for_finite_operands_and_in_fortran_order(env, rng, monkeypatch):
    """Where the estimate picks cuBLAS, inf/nan in D or S keep the product sparse (a dense
    copy's zeros times inf give nan where scipy gives none), and D @ S comes back in
    Fortran order on both paths."""
    from wsesparse.gpu import DeviceCSR, csr
    monkeypatch.setattr(csr, "choose", lambda *a: "dense")
    W = sp.random(64, 64, density=0.5, format="csr", random_state=0)
    S = DeviceCSR(W)
    X = rng.standard_normal((64, 40))
    _close(sparse_matmul(S, gpu_helpers.dev(X)), W @ X, "float64")
    assert env.launches[-1][0].startswith("csr_densify")       # dense: finite operands
    X[3, 0] = np.inf
    Y = np.asarray(sparse_matmul(S, gpu_helpers.dev(X)))
    assert env.launches[-1][0].startswith("csr_dense<")
    np.testing.assert_array_equal(np.isnan(Y), np.isnan(W @ X))
    Wi = W.copy()
    Wi.data[0] = -np.inf
    Yi = np.asarray(sparse_matmul(DeviceCSR(Wi), gpu_helpers.dev(X[:, 1:])))
    assert env.launches[-1][0].startswith("csr_dense<")     # sparse: an inf in S
    np.testing.assert_array_equal(np.isnan(Yi), np.isnan(Wi @ X[:, 1:]))
    Z = rng.standard_normal((40, 64))
    for method in ("auto", "dense", "sparse"):
        R = np.asarray(sparse_matmul(gpu_helpers.dev(Z), S, method=method))
        assert R.flags.f_contiguous, method
        _close(R, Z @ W, "float64")


def test_prepared_values_checked_finite_once(env, rng, monkeypatch):
    """A prepared DeviceCSR reduces its values to 'all finite' once, not at every product
    that goes dense (0.55-0.58 ms a call at density 0.3 on an H200); D is checked every
    time, and the transpose inherits the answer. A False is kept too (D's check is then
    skipped), and an unchecked (one-shot) matrix keeps nothing: its nnz is an upper bound."""
    import sys
    from wsesparse.gpu import DeviceCSR, csr
    monkeypatch.setattr(csr, "choose", lambda *a: "dense")
    cupy = sys.modules["cupy"]
    sizes = []
    real = cupy.isfinite
    monkeypatch.setattr(cupy, "isfinite", lambda a: (sizes.append(a.size), real(a))[1])
    W = sp.random(64, 50, density=0.5, format="csr", random_state=0)
    S = DeviceCSR(W)
    X = rng.standard_normal((50, 40))
    for _ in range(3):
        _close(sparse_matmul(S, gpu_helpers.dev(X)), W @ X, "float64")
    assert sizes == [W.nnz, X.size, X.size, X.size]
    Z = rng.standard_normal((40, 64))
    _close(sparse_matmul(gpu_helpers.dev(Z), S, method="sparse"), Z @ W, "float64")
    del sizes[:]
    _close(sparse_matmul(S.T, gpu_helpers.dev(Z.T)), W.T @ Z.T, "float64")
    assert sizes == [Z.size]
    X[0, 0] = np.nan        # D is still checked: its NaN keeps the product sparse
    Y = np.asarray(sparse_matmul(S, gpu_helpers.dev(X)))
    assert env.launches[-1][0].startswith("csr_dense<")
    np.testing.assert_array_equal(np.isnan(Y), np.isnan(W @ X))
    Wi = W.copy()
    Wi.data[1] = np.inf
    Si = DeviceCSR(Wi)
    X[0, 0] = 1.0
    del sizes[:]
    for _ in range(2):
        sparse_matmul(Si, gpu_helpers.dev(X))
        assert env.launches[-1][0].startswith("csr_dense<")
    assert sizes == [Wi.nnz]
    U = DeviceCSR.unchecked(env.csr_matrix(Wi))
    assert U._all_finite() is False and U._finite is None


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_linear_operators(env, rng, dtype):
    from wsesparse.gpu import DeviceCSR, DeviceTLR
    W = sp.random(30, 20, density=0.3, format="csr", random_state=rng).astype(dtype)
    if np.dtype(dtype).kind == "c":
        W = sp.csr_matrix(W + 0.5j * W)
    T = tlr_test_matrix(rng, dtype)
    for op, A in ((DeviceCSR(W).aslinearoperator(), W.toarray()),
                  (DeviceTLR(T).aslinearoperator(), T.toarray())):
        m, n = A.shape
        assert op.shape == (m, n) and op.dtype == np.dtype(dtype)
        x, X = random_values(rng, n, dtype), random_values(rng, (n, 3), dtype)
        y, Y = random_values(rng, m, dtype), random_values(rng, (m, 2), dtype)
        _close(op.matvec(gpu_helpers.dev(x)), A @ x, dtype)
        _close(op.matmat(gpu_helpers.dev(X)), A @ X, dtype)
        _close(op.rmatvec(gpu_helpers.dev(y)), A.conj().T @ y, dtype)
        _close(op.rmatmat(gpu_helpers.dev(Y)), A.conj().T @ Y, dtype)
    with pytest.raises(ValueError, match="holds a batch of 2"):
        DeviceTLR(TLRBatch([T, T])).aslinearoperator()


def test_bad_arguments(env, rng):
    from wsesparse.gpu import DeviceCSR
    W = sp.random(5, 4, density=0.5, format="csr", random_state=rng)
    with pytest.raises(TypeError, match="tuple form"):
        DeviceCSR((gpu_helpers.dev(W.data), gpu_helpers.dev(W.indices)), shape=(5, 4))
    with pytest.raises(TypeError, match="indices must be a 1-D cupy.ndarray"):
        DeviceCSR((gpu_helpers.dev(W.data), W.indices, gpu_helpers.dev(W.indptr)), shape=(5, 4))
    with pytest.raises(ValueError, match="indptr has 6 entries, not 4"):
        DeviceCSR((gpu_helpers.dev(W.data), gpu_helpers.dev(W.indices),
                   gpu_helpers.dev(W.indptr)), shape=(3, 4))
    with pytest.raises(TypeError, match="must be a sparse matrix"):
        DeviceCSR(np.eye(3))
    empty = (gpu_helpers.dev(np.zeros(0)), gpu_helpers.dev(np.zeros(0, np.int32)),
             gpu_helpers.dev(np.zeros(0, np.int32)))
    for shape in ((-1, 3), (5.7, 4.2), "ab", (1, 2, 3), None, 4):
        with pytest.raises((ValueError, TypeError), match="shape must be two nonnegative ints"
                           "|the tuple form is"):
            DeviceCSR(empty, shape=shape)
    with pytest.raises(ValueError, match="A must be 2-D, got a sparse operand of shape"):
        DeviceCSR(sp.coo_array(np.ones(3)))
    with pytest.raises(TypeError,
                       match="A has values of dtype (float128|longdouble); the GPU kernels"):
        DeviceCSR(sp.csr_array(np.eye(3, dtype=np.longdouble)))
    S = DeviceCSR(W)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        S @ gpu_helpers.dev(np.ones((5, 2)))
    with pytest.raises(TypeError, match="cupy.ndarray"):
        S @ np.ones((4, 2))
    with pytest.raises(TypeError, match="not DeviceCSR"):
        sparse_matmul(S, env.csr_matrix(W.T.tocsr()))
    with pytest.raises(TypeError, match="dtype must be float32"):
        S.toarray(np.float16)
    from wsesparse.gpu.csr import product
    with pytest.raises(ValueError, match="method must be"):
        product(S, gpu_helpers.dev(np.ones((4, 2))), False, method="bogus")


# ----------------------------------------------------------------------------- dispatch
@pytest.mark.parametrize("dtype, density, n, expected", [
    ("float32", 0.01, 256, "sparse"),    # measured: kernel 0.31 ms, GEMM 2.71
    ("float32", 0.3, 64, "dense"),       # kernel 1.92, GEMM 0.78
    ("float64", 0.3, 256, "dense"),      # kernel 15.1, GEMM 2.33
    ("float64", 0.001, 1024, "sparse"),  # kernel 0.28, GEMM 8.85
    ("float64", 0.3, 8, "sparse"),       # N < 32: always the kernel
])
def test_choice_on_the_h200_rates(monkeypatch, dtype, density, n, expected):
    S, choose = _square_for_choice(monkeypatch, "NVIDIA H200", density)
    assert choose(S, n, dtype, vector=False) == expected
    assert choose(S, 1, dtype, vector=True) == "sparse"


def _square_for_choice(monkeypatch, device_name: str, density: float, m: int = 16384):
    """A DeviceCSR holding only the shape and counts choose() reads (no arrays), on a
    stand-in device of that name; and choose itself."""
    gpu_helpers.install(monkeypatch, device_name=device_name)
    from wsesparse.gpu import DeviceCSR
    from wsesparse.gpu.csr import choose
    S = DeviceCSR.__new__(DeviceCSR)
    S.shape, S.nnz, S.checked, S.keep_dense, S._dense = (m, m), int(density * m * m), True, True, {}
    S.indices = np.empty(0, np.int32)
    return S, choose


@pytest.mark.parametrize("dtype, density, n, expected", [   # H100 run 2, ms (docs/gpu.md)
    ("float32", 0.1, 64, "sparse"),      # kernel 0.786, GEMM 0.945
    ("float32", 0.1, 256, "dense"),      # kernel 3.00, GEMM 2.76
    ("float64", 0.05, 256, "dense"),     # kernel 3.23, GEMM 2.32
    ("float64", 0.01, 1024, "sparse"),   # kernel 2.78, GEMM 8.92
    ("float32", 0.05, 1024, "sparse"),   # kernel 6.61, GEMM 10.95
])
def test_choice_on_the_h100_rates(monkeypatch, dtype, density, n, expected):
    """The H100's rates, measured there: a held GEMM wins at float64 density 0.05 and
    float32 density 0.1 from N = 256, where the H200's gather rate had the kernel chosen
    (1.4-1.5x slower at float64, density 0.05, N >= 256)."""
    S, choose = _square_for_choice(monkeypatch, "NVIDIA H100 80GB HBM3", density)
    assert choose(S, n, dtype, vector=False) == expected


def test_choice_for_x_times_s_counts_the_rows_of_s_t(monkeypatch):
    """D @ S runs the kernel on S.T, which writes S.shape[1] rows: choose() charged
    S.shape[0], and sent a tall S (10^6 x 16) to a dense copy estimated 4x slower than
    the kernel (a review)."""
    S, choose = _square_for_choice(monkeypatch, "NVIDIA H200", 0.01)
    S.shape, S.nnz = (10 ** 6, 16), 160_000
    assert choose(S, 256, "float64", vector=False) == "dense"          # 10^6 output rows
    assert choose(S, 256, "float64", vector=False, transpose=True) == "sparse"   # 16


def test_rates_and_estimates():
    assert _machine.rates_for("NVIDIA H200").gemm["float64"] == 63e12
    t_s = _machine.sparse_seconds(_machine.H200, 16384, 1024, 268_435, np.float64, 4)
    assert 0.1e-3 < t_s < 0.5e-3                         # measured 0.28 ms
    t_g = _machine.gemm_seconds(_machine.H200, 16384, 16384, 1024, np.float64)
    assert 7e-3 < t_g < 10e-3                            # measured 8.8 ms


# ----------------------------------------------------------------------------------- TLR
@pytest.mark.parametrize("dtype", ["float32", "complex64", "complex128"])
@pytest.mark.parametrize("s", [None, 1, 3, 5, 18])
def test_devicetlr_test_matrix(env, rng, dtype, s):
    from wsesparse.gpu import DeviceTLR
    T = tlr_test_matrix(rng, dtype)
    D = DeviceTLR(T)
    x = random_values(rng, (50,) if s is None else (50, s), dtype)
    y = random_values(rng, (70,) if s is None else (70, s), dtype)
    _close(D @ gpu_helpers.dev(x), T @ x, dtype)
    _close(D.H @ gpu_helpers.dev(y), T.rmatvec(y), dtype)
    used = {n.partition("<")[0] for n, _, _ in env.launches}
    if s is None or s == 1:
        assert used == {"seg_gemv_t", "seg_gemv_h"}
    else:   # 8 sums a thread forward, in passes of 8
        assert used == {"seg_gemv_t", "seg_gemm_h"}
        fwd = [n for n, _, _ in env.launches if n.startswith("seg_gemv_t")]
        assert len(fwd) == 2 * -(-s // _module.TLR_FORWARD_WIDE)
        assert all(n.endswith(f", {_module.TLR_FORWARD_WIDE}>") for n in fwd)


def test_device_tlr_batch_promotion_and_errors(env, rng):
    from wsesparse.gpu import DeviceTLR
    T = tlr_test_matrix(rng, "float32")
    xc = random_values(rng, (50, 2), "complex64")
    _close(DeviceTLR(T) @ gpu_helpers.dev(xc), T @ xc, "complex64")      # [Re, Im] trick
    B = TLRBatch([tlr_test_matrix(rng, "complex64") for _ in range(3)])
    D = DeviceTLR(B)
    xs = random_values(rng, (3, 50, 2), "complex64")
    ys = np.asarray(D @ gpu_helpers.dev(xs))
    assert ys.shape == (3, 70, 2)
    for f in range(3):
        _close(ys[f], B[f] @ xs[f], "complex64")
    with pytest.raises(ValueError, match=r"x must be of shape \(3, 50\[, s\]\)"):
        D @ gpu_helpers.dev(np.ones(50, np.complex64))
    with pytest.raises(TypeError, match="x must be a cupy.ndarray"):
        D @ np.ones((3, 50))
    with pytest.raises(TypeError, match="TLRMatrix or TLRBatch"):
        DeviceTLR(np.eye(3))
    with pytest.raises(ValueError, match="share one shape and dtype"):
        DeviceTLR(TLRBatch([tlr_test_matrix(rng, "complex64"), tlr_test_matrix(rng, "complex128")]))


@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s", [None, 3, 18])
def test_devicetlr_16_bit_storage(env, rng, storage, dtype, s):
    from wsesparse.gpu import DeviceTLR
    from wsesparse.gpu.storage import FORMATS
    T = tlr_test_matrix(rng, dtype)
    D = DeviceTLR(T, storage=storage)
    assert D.storage == storage and D.nbytes * np.dtype(dtype).itemsize // 2 \
        == T.nbytes * (2 if np.dtype(dtype).kind == "c" else 1)
    assert 0 < D.basis_error <= 2.0 ** -FORMATS[storage]
    R = stored_tlr(T, storage)
    x = random_values(rng, (50,) if s is None else (50, s), dtype)
    y = random_values(rng, (70,) if s is None else (70, s), dtype)
    _close(D @ gpu_helpers.dev(x), R @ x, dtype)        # the rounded bases, summed in dtype
    _close(D.H @ gpu_helpers.dev(y), R.rmatvec(y), dtype)
    mt = _module.STORAGE_TYPES[storage][np.dtype(dtype).kind == "c"]
    assert env.launches and all(n.endswith(f", {mt}>") for n, _, _ in env.launches)
    # against the bases as given: the rounding of the bases is the only error added
    ref = T @ x
    err = np.linalg.norm(np.asarray(D @ gpu_helpers.dev(x)) - ref) / np.linalg.norm(ref)
    assert err <= 50 * D.basis_error


@pytest.mark.parametrize("dtype,u_scale", [("float32", 1e-36), ("float32", 1e-30),
                                           ("float64", 1e-306)])
def test_devicetlr_float16_bases_of_tiny_magnitude(env, rng, dtype, u_scale):
    """A review: float16's power-of-two scale for a float32 basis near 1e-36 was 2**135, inf in
    float32: the stored basis was inf and the product NaN, with no error (float64 at 1e-306:
    the scale inf, the error reported 0 as the norms underflowed). The scale stops at the
    dtype's largest power of two, the product is scaled back one factor per basis, and the
    error is computed relative to the largest magnitude."""
    from wsesparse import TLRMatrix
    from wsesparse.gpu import DeviceTLR
    from wsesparse.gpu.storage import encode, scale
    tiles = {(i, j): ((rng.standard_normal((32, 2)) * u_scale).astype(dtype),
                      (rng.standard_normal((32, 2)) * 1e3).astype(dtype))
             for i in range(2) for j in range(2)}
    T = TLRMatrix.from_tiles((64, 64), 32, tiles)
    D = DeviceTLR(T, storage="float16")
    assert 0 < D.basis_error <= 2.0 ** -11
    top = float.fromhex("0x1p126") if dtype == "float32" else float.fromhex("0x1p1022")
    assert scale(T.U, "float16") <= top and np.isfinite(encode(T.U, "float16")[1])
    x = np.ones(64, dtype)
    ref = T.toarray().astype(np.float64) @ x
    y = np.asarray(D @ gpu_helpers.dev(x)).astype(np.float64)
    assert np.isfinite(y).all()
    top = np.abs(ref).max()     # (norms of values near 1e-303 underflow)
    assert np.linalg.norm((y - ref) / top) / np.linalg.norm(ref / top) <= 50 * D.basis_error


@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
def test_devicetlr_storage_promotion_batch_and_errors(env, rng, storage):
    from wsesparse.gpu import DeviceTLR
    T = tlr_test_matrix(rng, "float32")
    xc = random_values(rng, (50, 2), "complex128")          # real kernel on [Re, Im], float64
    _close(DeviceTLR(T, storage=storage) @ gpu_helpers.dev(xc), stored_tlr(T, storage) @ xc,
           "complex128")
    assert re.fullmatch(rf"seg_gemv_t<double, {_module.TLR_FORWARD_WIDE}, w_b?f16>",
                        env.launches[-1][0])            # the 4 columns in one pass
    B = TLRBatch([tlr_test_matrix(rng, "complex64") for _ in range(2)])
    xs = random_values(rng, (2, 50), "complex64")
    ys = np.asarray(DeviceTLR(B, storage=storage) @ gpu_helpers.dev(xs))
    for f in range(2):
        _close(ys[f], stored_tlr(B[f], storage) @ xs[f], "complex64")
    assert DeviceTLR(T).basis_error == 0.0 and DeviceTLR(T).storage is None
    for bad in ("half", np.float16, np.dtype(np.float16)):
        with pytest.raises(ValueError, match="storage must be None, 'float16' or 'bfloat16', "
                                             "got .*half|float16"):
            DeviceTLR(T, storage=bad)


@pytest.mark.parametrize("factor", [1e5, 1e-7, 1e-30])
@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
def test_storage_of_bases_far_from_one(env, rng, factor, storage):
    """Float16 bases are scaled by a power of two into its range (bases of 1e5 overflowed
    it, of 1e-7 fell below its normal numbers: 10 % error); the product is scaled back."""
    from wsesparse import TLRMatrix
    from wsesparse.gpu import DeviceTLR
    from wsesparse.gpu.storage import FORMATS
    T = tlr_test_matrix(rng, "float32")
    F = TLRMatrix(T.shape, T.nb, T.ranks, T.U * factor, T.V)
    D = DeviceTLR(F, storage=storage)
    assert 0 < D.basis_error <= 2.0 ** -FORMATS[storage]
    x = random_values(rng, 50, "float32")
    ref = (F @ x).astype(np.float64)              # (float64 norms: 1e-30 squared underflows)
    got = np.asarray(D @ gpu_helpers.dev(x)).astype(np.float64)
    top = np.abs(ref).max()
    _close((got / top).astype(np.float32), (stored_tlr(F, storage) @ x) / np.float32(top),
           "float32")
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 50 * D.basis_error


@pytest.mark.parametrize("adjoint", [False, True])
def test_float16_storage_scales_back_after_each_phase(env, rng, adjoint):
    """Both bases scaled, the product scaled back only after phase 3: the sums ran su * sv
    times the product's values, and bases near 1e-20 (su * sv = 2**158) or a float32 result
    near 1e31 came back inf though finite (a review). A NaN in either basis's error is
    reported (max(e, nan) kept e)."""
    from wsesparse import TLRMatrix
    from wsesparse.gpu import DeviceTLR
    A = rng.standard_normal((64, 8)) @ rng.standard_normal((8, 64))
    T = TLRMatrix.from_dense(A.astype(np.float32), nb=32, tol=1e-4)
    for F, mag in ((TLRMatrix(T.shape, T.nb, T.ranks, T.U * np.float32(1e-20),
                              T.V * np.float32(1e-20)), 1e30),
                   (T, 1e29)):
        x = np.full(64, mag, np.float32)
        D = DeviceTLR(F, storage="float16")
        got = np.asarray((D.H if adjoint else D) @ gpu_helpers.dev(x)).astype(np.float64)
        ref = (F.toarray().astype(np.float64).conj().T if adjoint
               else F.toarray().astype(np.float64)) @ x.astype(np.float64)
        assert np.isfinite(got).all()
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 50 * D.basis_error
    for where in ("U", "V"):
        U, V = T.U.copy(), T.V.copy()
        (U if where == "U" else V)[0] = np.inf
        assert np.isnan(DeviceTLR(TLRMatrix(T.shape, T.nb, T.ranks, U, V),
                                  storage="float16").basis_error), where


def test_storage_rounding():
    from wsesparse.gpu.storage import stored_values, to_storage, widen
    # float16: numpy's conversion; bfloat16: nearest, ties to even, from the float32 bits
    # (the bfloat16 spacing at 1 is 2**-7: 1 + 2**-8 and 1 + 3 * 2**-8 are ties)
    v = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, -(1 + 2 ** -8 + 2 ** -20),
                  2.0 ** -133, 0.0, -0.0], np.float32)
    got = widen(to_storage(v, "bfloat16"), "bfloat16")
    want = np.array([1.0, 1.0, 1 + 2 ** -6, 1.0, -(1 + 2 ** -7), 2.0 ** -133, 0.0, -0.0],
                    np.float32)
    assert np.array_equal(got, want) and np.signbit(got[-1])
    h = np.array([1 / 3, 70000 / 2, -1e-8], np.float64)
    assert np.array_equal(widen(to_storage(h, "float16"), "float16"),
                          h.astype(np.float16).astype(np.float32))
    nan = widen(to_storage(np.array([np.nan, np.inf], np.float32), "bfloat16"), "bfloat16")
    assert np.isnan(nan[0]) and nan[1] == np.inf
    with pytest.raises(ValueError, match="storage='float16' cannot hold a basis value"):
        to_storage(np.array([7e4], np.float32), "float16")      # (unscaled: DeviceTLR scales)
    c = np.array([[1 / 3 - 2j]], np.complex128)
    assert stored_values(c, "float16").shape == (1, 1) and to_storage(c, "float16").size == 2
    with pytest.raises(TypeError, match="values must be float or complex"):
        to_storage(np.arange(3), "float16")
    from wsesparse.gpu.storage import encode, relative_error
    with pytest.raises(TypeError, match="values must be float or complex"):
        encode(np.arange(3), "bfloat16")
    with pytest.raises(ValueError, match="storage must be None, 'float16' or 'bfloat16'"):
        encode(np.ones(3), "half")
    bits, s, err = encode(c, "float16")
    assert bits.size == 2 and err == relative_error(c, "float16") and 0 < err <= 2.0 ** -11


def test_bench_gpu_without_cupy(monkeypatch, capsys):
    import sys
    from wsesparse.cli import main
    monkeypatch.setitem(sys.modules, "cupy", None)          # import cupy raises ImportError
    assert main(["bench", "--gpu"]) == 2
    assert "needs cupy and a CUDA device" in capsys.readouterr().out


def test_bench_gpu_grid_checks_every_timed_result(env, rng, monkeypatch):
    """The GPU grid timed its columns without comparing any result (the CPU grid checks
    every one against scipy's): grid_errors compares auto, prep and kernel with cuSPARSE."""
    from wsesparse.bench import gpu as bgpu
    from wsesparse.gpu import DeviceCSR
    W = sp.random(40, 30, density=0.2, format="csr", random_state=rng, dtype=np.float32)
    A = env.csr_matrix(W)
    X = gpu_helpers.dev(random_values(rng, (30, 8), "float32"))
    S = DeviceCSR(A)
    assert bgpu.grid_errors(A, S, X) <= bgpu.GRID_TOLERANCE["float32"]
    import wsesparse
    real = wsesparse.sparse_matmul
    monkeypatch.setattr(wsesparse, "sparse_matmul",
                        lambda a, b, **kw: real(a, b, **kw) * np.float32(1.01))
    assert bgpu.grid_errors(A, S, X) > bgpu.GRID_TOLERANCE["float32"]
