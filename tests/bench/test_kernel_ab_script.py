"""benchmarks/kernel_ab.py: its A/B loop, with the installed kernels standing in for the
second build (building one takes a minute; tiny problems)."""

from pathlib import Path

import numpy as np
import pytest

from benchmarks import kernel_ab
from wsesparse import _drivers, matmul
from wsesparse._kernels import _spmm


def test_ab_loop_prints_every_product_and_puts_the_kernels_back(capsys, monkeypatch):
    built = []
    folder = Path(_spmm.__file__).parent
    monkeypatch.setattr(kernel_ab, "build_alternative",
                        lambda cflags, where, source: built.append(cflags) or folder)
    assert kernel_ab.main(["--cflags=-DX=1", "--threads", "1,2", "--rounds", "1",
                           "--scale", "0.01"]) == 0
    assert built == ["-DX=1"]
    out = capsys.readouterr().out.splitlines()
    rows = out[3:]
    # 5 random matrices x 2 widths, Poisson, lsqr; one-shot and prepared; 2 thread counts
    assert len(rows) == (5 * 2 + 2) * 2 * 2
    for row in rows:
        a, b, ratio = map(float, row.split()[-3:])
        # (times printed to 0.1 us, the ratio to 0.01, from the unrounded times)
        assert a > 0 and b > 0
        assert (b - 0.05) / (a + 0.05) - 0.005 <= ratio <= (b + 0.05) / (a - 0.05) + 0.005
    assert _drivers._spmm is _spmm and matmul._spmm is _spmm       # put back


def test_row_set_times_prepared_spmv_of_every_row_length(capsys, monkeypatch):
    folder = Path(_spmm.__file__).parent
    monkeypatch.setattr(kernel_ab, "build_alternative", lambda cflags, where, source: folder)
    assert kernel_ab.main(["--set", "rows", "--threads", "1", "--rounds", "1",
                           "--scale", "0.002"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:]
    # 3 widths of x, 2 dtypes, each length fixed and spread; then Poisson; prepared only
    assert len(rows) == 3 * 2 * len(kernel_ab.ROW_LENGTHS) * 2 + 1
    assert all(row.split()[-5] == "prepared" for row in rows)
    labels = [row.split()[1] for row in rows[:2 * len(kernel_ab.ROW_LENGTHS)]]
    assert labels == [f"{s}{n}/row" for n in kernel_ab.ROW_LENGTHS for s in ("", "~")]


def test_tlr_set_times_forward_and_adjoint_through_the_b_module(capsys, monkeypatch):
    """--set tlr swaps TLRMatrix's _tlrmvm (the B build) and times four calls of each
    operator; the installed module stands in for B."""
    from wsesparse._kernels import _tlrmvm
    from wsesparse.tlr import matrix as tlr_matrix
    folder = Path(_tlrmvm.__file__).parent
    monkeypatch.setattr(kernel_ab, "build_alternative", lambda cflags, where, source: folder)
    seen = []
    real = kernel_ab.load_beside
    monkeypatch.setattr(kernel_ab, "load_beside",
                        lambda folder, name: seen.append(name) or real(folder, name))
    assert kernel_ab.main(["--set", "tlr", "--threads", "1", "--rounds", "1",
                           "--scale", "0.05"]) == 0
    assert seen == ["_tlrmvm"]
    out = capsys.readouterr().out.splitlines()
    assert "modules _tlrmvm" in out[0]
    rows = out[3:]
    assert [" ".join(r.split()[4:6]) for r in rows] == ["fwd s=1", "adj s=1", "fwd s=4",
                                                        "fwd s=16", "fwd s=64"] * 2
    assert all(r.startswith("TLR ") for r in rows)
    assert tlr_matrix._tlrmvm is _tlrmvm                               # put back


def test_swapped_reaches_tlr_products_planned_before(monkeypatch):
    """A TLRMatrix keeps the kernels' plan (made by the module's ``Plan``): inside swapped()
    its products plan with the B module all the same (before session 47 they kept calling
    the installed build, so every --set tlr A/B compared a build with itself), and after it
    the installed one."""
    import types
    from wsesparse._kernels import _tlrmvm
    from wsesparse.tlr import TLRMatrix
    rng = np.random.default_rng(0)
    T = TLRMatrix.from_dense(rng.standard_normal((300, 300)).astype(np.float32), nb=64,
                             tol=1e-3)
    x = np.ones(300, np.float32)
    calls = []

    def plan(adjoint, *a):
        calls.append("adjoint" if adjoint else "forward")
        return _tlrmvm.Plan(adjoint, *a)

    fake = types.SimpleNamespace(Plan=plan)
    monkeypatch.setattr(kernel_ab, "_TLR_OPERATORS", [T])
    want = T.matvec(x), T.rmatvec(x)                     # plans made with the installed build
    with kernel_ab.swapped({"_tlrmvm": fake}):
        got = T.matvec(x), T.rmatvec(x)
    assert calls == ["forward", "adjoint"]
    np.testing.assert_array_equal(got[0], want[0])
    T.matvec(x)
    assert calls == ["forward", "adjoint"]               # the installed build again


def test_swapped_runs_tlr_builds_from_before_the_plan(monkeypatch):
    """A ``_tlrmvm`` from before session 51 has no ``Plan``: swapped() runs its
    ``tlr_matmat``/``tlr_rmatmat`` as TLRMatrix did then (``--source`` of an older tree),
    vectors and blocks, and vectors the checked path takes stay there."""
    import types
    from wsesparse._kernels import _tlrmvm
    from wsesparse.tlr import TLRMatrix
    rng = np.random.default_rng(0)
    T = TLRMatrix.from_dense(rng.standard_normal((300, 200)), nb=64, tol=1e-3)
    x, y, X = np.ones(200), np.ones(300), np.ones((200, 3))
    calls = []

    def counted(name):
        real = getattr(_tlrmvm, name)
        return lambda *a, **k: calls.append(name) or real(*a, **k)

    old = types.SimpleNamespace(tlr_matmat=counted("tlr_matmat"),
                                tlr_rmatmat=counted("tlr_rmatmat"))
    monkeypatch.setattr(kernel_ab, "_TLR_OPERATORS", [T])
    want = T @ x, T.H @ y, T @ X
    with kernel_ab.swapped({"_tlrmvm": old}):
        got = T @ x, T.H @ y, T @ X
        monkeypatch.setattr(kernel_ab.tlr_matrix, "CHECK_MIN_BYTES", 0)
        T.__dict__.pop("_plan_cache")
        checked = []
        monkeypatch.setattr(kernel_ab.tlr_matrix, "check_allocation",
                            lambda n, what: checked.append(n))
        got_checked = T @ x
    assert calls == ["tlr_matmat", "tlr_rmatmat", "tlr_matmat", "tlr_matmat"]
    assert len(checked) == 1
    for a, b in zip(got + (got_checked,), want + want[:1]):
        np.testing.assert_array_equal(a, b)


def test_swapped_replaces_only_inside_the_block():
    fake = object()
    with kernel_ab.swapped({"_spmm": fake}):
        assert _drivers._spmm is fake and matmul._spmm is fake
    assert _drivers._spmm is _spmm and matmul._spmm is _spmm


def test_bad_options(capsys):
    with pytest.raises(SystemExit) as exc:
        kernel_ab.main(["--rounds", "0"])
    assert exc.value.code == 2
    assert "need --threads >= 1" in capsys.readouterr().err
