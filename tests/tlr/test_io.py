"""``TLRMatrix.save`` / ``TLRMatrix.load``: the exact round trip, and every file that is not
one ``save`` wrote.

Before the fixes ``load`` failed with EOFError, BadZipFile, KeyError or IndexError, or
truncated silently. Catalogue: docs/adversarial_inputs.md.
"""

from __future__ import annotations

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
    "nan_bases": lambda T, p: _save(T, p, U=np.full_like(T.U, np.nan)),
}


LAYOUT_ERRORS = {
    "ranks_negative": (lambda T, p: _save(T, p, ranks=-T.ranks), "ranks must be a nonnegative"),
    "ranks_float": (lambda T, p: _save(T, p, ranks=T.ranks * 1.0), "ranks must be a nonnegative"),
    "nb_other": (lambda T, p: _save(T, p, nb=np.array(8)), "ranks must be a nonnegative"),
    "nb_zero": (lambda T, p: _save(T, p, nb=np.array(0)), "nb must be a positive int"),
    "shape_negative": (lambda T, p: _save(T, p, shape=np.array([-40, 30])), "shape must be"),
    "U_short": (lambda T, p: _save(T, p, U=T.U[:-1]), "U and V must be 1-D of lengths"),
    "U_2d": (lambda T, p: _save(T, p, U=T.U[:, None]), "U and V must be 1-D of lengths"),
    "U_int": (lambda T, p: _save(T, p, U=T.U.astype(int)), "U and V must share"),
}


@pytest.mark.parametrize("how", sorted(BAD_FILES))
def test_load_bad_files(T, tmp_path, how):
    path = BAD_FILES[how](T, tmp_path / "t.npz")
    with pytest.raises(ValueError, match="is not a TLRMatrix file written by TLRMatrix.save"):
        TLRMatrix.load(path)


@pytest.mark.parametrize("how", sorted(LAYOUT_ERRORS))
def test_load_inconsistent_layout(T, tmp_path, how):
    make, match = LAYOUT_ERRORS[how]
    with pytest.raises((ValueError, TypeError), match=match):
        TLRMatrix.load(make(T, tmp_path / "t.npz"))


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
