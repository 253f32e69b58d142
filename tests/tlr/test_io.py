"""``TLRMatrix.save`` / ``TLRMatrix.load``: the exact round trip, and every file that is not
one ``save`` wrote.

Before the fixes ``load`` failed with EOFError, BadZipFile, KeyError or IndexError, or
truncated silently. Catalogue: docs/adversarial_inputs.md.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from wsesparse import TLRMatrix
from wsesparse.datasets import seismic_slice


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_save_load_roundtrip(tmp_path, dtype):
    A = seismic_slice(nx=12, ny=12, dtype=dtype)
    T = TLRMatrix.from_dense(A, nb=50, tol=1e-3)
    path = tmp_path / "t.npz"
    T.save(path)
    L = TLRMatrix.load(path)
    assert L.shape == T.shape and L.nb == T.nb and L.tol == T.tol and L.dtype == T.dtype
    assert np.array_equal(L.ranks, T.ranks)
    assert np.array_equal(L.toarray(), T.toarray())
    x = np.ones(144, dtype=dtype)
    assert np.array_equal(L @ x, T @ x)


def test_load_rejects_foreign_file(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.ones(3))
    with pytest.raises(ValueError, match="not a TLRMatrix file"):
        TLRMatrix.load(tmp_path / "x.npz")


def _save(T, path, **over):
    d = dict(U=T.U, V=T.V, ranks=T.ranks, shape=np.array(T.shape), nb=np.array(T.nb),
             tol=np.array(1e-6), format=np.array("wsesparse.TLRMatrix/1"))
    d.update(over)
    np.savez(path, **{k: v for k, v in d.items() if v is not None})
    return path


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


BAD_FILES = {
    "empty": lambda T, p: _write(p, b""),
    "garbage": lambda T, p: _write(p, b"not a zip archive at all"),
    "truncated": lambda T, p: _write(p, _save(T, p).read_bytes()[:300]),
    "npy": lambda T, p: (np.save(p.with_suffix(".npy"), np.ones(3)), p.with_suffix(".npy"))[1],
    "object_array": lambda T, p: _save(T, p, U=np.array([None], object)),
    "missing_U": lambda T, p: _save(T, p, U=None),
    "no_format": lambda T, p: _save(T, p, format=None),
    "format_v2": lambda T, p: _save(T, p, format=np.array("wsesparse.TLRMatrix/2")),
    "shape_1": lambda T, p: _save(T, p, shape=np.array([40])),
    "shape_3": lambda T, p: _save(T, p, shape=np.array([40, 30, 1])),
    "shape_float": lambda T, p: _save(T, p, shape=np.array([40.5, 30.0])),
    "nb_float": lambda T, p: _save(T, p, nb=np.array(16.7)),
    "nb_array": lambda T, p: _save(T, p, nb=np.array([16, 16])),
    "tol_str": lambda T, p: _save(T, p, tol=np.array("abc")),
    "tol_negative": lambda T, p: _save(T, p, tol=np.array(-1.0)),
    "tol_inf": lambda T, p: _save(T, p, tol=np.array(np.inf)),
    "nan_bases": lambda T, p: _save(T, p, U=np.full_like(T.U, np.nan)),
    # A damaged zip directory: zipfile raised NotImplementedError ("zip file version") or
    # RuntimeError ("encrypted").
    "zip_version": lambda T, p: _patched(_save(T, p), b"PK\x01\x02",
                                         b"PK\x01\x02\x14\x00\xff"),
    "encrypted": lambda T, p: _patched(_save(T, p), b"PK\x01\x02",
                                       b"PK\x01\x02\x14\x00\x14\x00\x01"),
}


def _patched(path, old: bytes, new: bytes):
    """``path`` with the first ``old`` overwritten by ``new``."""
    data = bytearray(path.read_bytes())
    at = data.index(old)
    data[at:at + len(new)] = new
    return _write(path, bytes(data))


LAYOUT_ERRORS = {
    "ranks_negative": (lambda T, p: _save(T, p, ranks=-T.ranks), "ranks must be a nonnegative"),
    "ranks_float": (lambda T, p: _save(T, p, ranks=T.ranks * 1.0), "ranks must be a nonnegative"),
    "nb_other": (lambda T, p: _save(T, p, nb=np.array(8)), "ranks must be a nonnegative"),
    "nb_zero": (lambda T, p: _save(T, p, nb=np.array(0)), "nb must be a positive int"),
    "shape_negative": (lambda T, p: _save(T, p, shape=np.array([-40, 30])), "shape must be"),
    "U_short": (lambda T, p: _save(T, p, U=T.U[:-1]), "U and V must be 1-D of lengths"),
    "U_2d": (lambda T, p: _save(T, p, U=T.U[:, None]), "U and V must be 1-D of lengths"),
    "U_int": (lambda T, p: _save(T, p, U=T.U.astype(int)), "U and V must share"),
    # (a MemoryError before: the tile bounds of the declared shape came first)
    "shape_huge": (lambda T, p: _save(T, p, shape=np.array([2**40, 2**40])),
                   "ranks must be a nonnegative"),
}


@pytest.mark.parametrize("how", sorted(BAD_FILES))
def test_load_bad_files(T, tmp_path, how):
    path = BAD_FILES[how](T, tmp_path / "t.npz")
    with pytest.raises(ValueError, match="is not a TLRMatrix file written by TLRMatrix.save") \
            as exc:
        TLRMatrix.load(path)
    # (numpy's advice to load a pickle unsafely, for files neither .npz nor .npy, is left out)
    assert "unsafely" not in str(exc.value)


@pytest.mark.parametrize("how", sorted(LAYOUT_ERRORS))
def test_load_inconsistent_layout(T, tmp_path, how):
    make, match = LAYOUT_ERRORS[how]
    with pytest.raises((ValueError, TypeError), match=match):
        TLRMatrix.load(make(T, tmp_path / "t.npz"))


def test_load_damaged_npy_header():
    """A .npy header length too long, in a file object whose U holds more than the 255
    bytes then read as the header: numpy's header parser raised tokenize.TokenError."""
    A = np.random.default_rng(0).standard_normal((90, 70))
    buf = io.BytesIO()
    TLRMatrix.from_dense(A, nb=32, tol=1e-3).save(buf)
    data = bytearray(buf.getvalue())
    data[data.index(b"\x93NUMPY\x01\x00") + 8] = 0xFF
    with pytest.raises(ValueError, match="is not a TLRMatrix file written by TLRMatrix.save"):
        TLRMatrix.load(io.BytesIO(bytes(data)))


def test_save_writes_the_path_it_is_given(T, tmp_path):
    """np.savez appends ".npz" to a name without it, so save("x.tlr") wrote "x.tlr.npz" and
    load("x.tlr") failed; bytes paths failed in save."""
    for path in (tmp_path / "slice.tlr", str(tmp_path / "s2"), bytes(tmp_path / "s3.npz")):
        T.save(path)
        np.testing.assert_array_equal(TLRMatrix.load(path).toarray(), T.toarray())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s2", "s3.npz", "slice.tlr"]


def test_load_paths(T, tmp_path):
    with pytest.raises(FileNotFoundError):
        TLRMatrix.load(tmp_path / "missing.npz")
    with pytest.raises(IsADirectoryError):
        TLRMatrix.load(tmp_path)
    with pytest.raises(TypeError, match="file must be a path or a binary file object"):
        TLRMatrix.load(None)
    with pytest.raises(TypeError, match="file must be a path or a binary file object"):
        TLRMatrix.load(3)
    # a file object works, and the round trip is exact
    with open(_save(T, tmp_path / "ok.npz"), "rb") as fh:
        T2 = TLRMatrix.load(fh)
    np.testing.assert_array_equal(T2.toarray(), T.toarray())


@pytest.mark.parametrize("how", ["protocol 2", "protocol 4", "protocol 5", "deepcopy"])
def test_pickles_and_copies_keep_what_init_guarantees(how):
    """Pickles carried the cast copies of the bases (a complex128 product tripled one), and
    protocols below 5 and deepcopy made ranks writable (a write then made toarray and the
    products disagree) and the bases unaligned for the kernels."""
    import copy
    import pickle
    T = TLRMatrix.from_dense(seismic_slice(nx=12, ny=12), nb=48, tol=1e-3)
    x = np.ones(T.shape[1], np.complex128)
    fresh = len(pickle.dumps(T, protocol=5))
    want = T @ x  # fills the complex128 cast cache
    assert T._cast_cache
    assert len(pickle.dumps(T, protocol=5)) == fresh
    if how == "deepcopy":
        Q = copy.deepcopy(T)
    else:
        Q = pickle.loads(pickle.dumps(T, protocol=int(how[-1])))
    assert not Q._cast_cache
    with pytest.raises(ValueError, match="read-only"):
        Q.ranks[0, 0] = 0
    for a in (Q.U, Q.V):
        assert a.flags.c_contiguous and a.ctypes.data % 64 == 0
    np.testing.assert_array_equal(Q @ x, want)


def test_pickle_of_an_older_version_still_multiplies():
    """A pickled ``TLRMatrix`` of an older version, without ``_K`` (the count of
    coefficients) or the plan and item caches, loads and gives the same products."""
    import pickle
    T = TLRMatrix.from_dense(seismic_slice(nx=8, ny=9), nb=24, tol=1e-3)
    x = np.ones(T.shape[1], T.dtype)
    want = T @ x
    state = T.__getstate__()
    for name in ("_K", "_plan_cache", "_item_cache"):
        del state[name]
    Q = TLRMatrix.__new__(TLRMatrix)
    Q.__setstate__(pickle.loads(pickle.dumps(state)))
    np.testing.assert_array_equal(Q @ x, want)
    np.testing.assert_array_equal(Q.H @ want, T.H @ want)
    assert pickle.dumps(Q) == pickle.dumps(T)  # (the same dask key as a fresh matrix's)


def test_pickle_from_a_host_of_the_other_byte_order():
    """A pickle made where the bases' byte order is the other one loads with native bases
    and dtype: the kernels read native values only (they raise on swapped ones, and
    before session 51 a swapped x with swapped bases gave values off by 1e301)."""
    import pickle
    T = TLRMatrix.from_dense(seismic_slice(nx=8, ny=9), nb=24, tol=1e-3)
    x = np.ones(T.shape[1], T.dtype)
    want = T @ x
    state = T.__getstate__()
    swapped = T.dtype.newbyteorder()
    state.update(U=T.U.astype(swapped), V=T.V.astype(swapped), dtype=swapped)
    # (numpy's pickle may hand the arrays back native; the dtype stays as it was pickled)
    for given in (state, pickle.loads(pickle.dumps(state))):
        Q = TLRMatrix.__new__(TLRMatrix)
        Q.__setstate__(dict(given))
        assert Q.dtype == T.dtype and Q.dtype.isnative
        for a in (Q.U, Q.V):
            assert a.dtype == T.dtype and a.flags.c_contiguous and a.ctypes.data % 64 == 0
        np.testing.assert_array_equal(Q @ x, want)
        np.testing.assert_array_equal(Q @ x.astype(swapped), want)


def test_load_from_a_pipe(T):
    """save writes to a pipe; load of its read end said the intact file was "not a TLRMatrix
    file written by TLRMatrix.save" (numpy reads an .npz archive by seeking)."""
    import os
    import threading

    r, w = os.pipe()
    with os.fdopen(r, "rb") as fr, os.fdopen(w, "wb") as fw:
        writer = threading.Thread(target=lambda: (T.save(fw), fw.close()))
        writer.start()   # (a pipe holds 64 KiB: the writer must not wait for the reader)
        L = TLRMatrix.load(fr)
        writer.join()
    np.testing.assert_array_equal(L.toarray(), T.toarray())


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_bases_in_the_other_byte_order(T, dtype):
    """Bases of the other byte order (what save writes on such a host) load as native ones;
    they were a TypeError listing the very dtype they had."""
    S = TLRMatrix.from_dense(T.toarray().astype(dtype), nb=T.nb, tol=1e-3)
    buf = io.BytesIO()
    np.savez(buf, U=S.U.astype(S.U.dtype.newbyteorder()), V=S.V.astype(S.V.dtype.newbyteorder()),
             ranks=S.ranks, shape=np.array(S.shape), nb=np.array(S.nb), tol=np.array(S.tol),
             format=np.array("wsesparse.TLRMatrix/1"))
    buf.seek(0)
    L = TLRMatrix.load(buf)
    assert L.dtype == np.dtype(dtype) and L.U.dtype.isnative and L.V.dtype.isnative
    x = np.arange(S.shape[1], dtype=dtype)
    assert np.array_equal(L @ x, S @ x)
