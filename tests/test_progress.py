"""Progress bars (``wsesparse._progress``): on stderr only when forced or on a terminal."""

import io
import sys
import types

import numpy as np
import pytest

from wsesparse import TLRMatrix
from wsesparse._progress import Progress, progress_enabled
from wsesparse.cli import main

CURVE = ["curve", "--shape", "64x256", "--tokens", "2048", "--sparsities", "0.5,0.9",
         "--engines", "1,2"]


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def no_tqdm(monkeypatch):
    """The text bar (tqdm absent), whatever this environment has installed."""
    monkeypatch.setitem(sys.modules, "tqdm", None)


def test_progress_enabled_rules():
    assert progress_enabled(None, Tty()) is True
    assert progress_enabled(None, io.StringIO()) is False
    assert progress_enabled(True, io.StringIO()) is True
    assert progress_enabled(False, Tty()) is False
    closed = io.StringIO()
    closed.close()
    assert progress_enabled(None, closed) is False


def test_text_bar(no_tqdm, capsys):
    with Progress(3, True, label="job", unit="items") as bar:
        for _ in range(3):
            bar.step()
    err = capsys.readouterr().err
    assert "job [" in err and "3/3 items" in err and err.endswith("\n")
    assert err.count("\n") == 1


def test_disabled_bar_is_silent_and_write_still_prints(no_tqdm, capsys):
    with Progress(2, False, label="job") as bar:
        bar.write("row 1")
        bar.step()
        bar.step()
    assert capsys.readouterr() == ("row 1\n", "")


def test_write_keeps_bar_off_stdout(no_tqdm, capsys):
    bar = Progress(4, True, label="job", unit="points")
    bar.step()
    bar.write("a row")
    bar.close()
    out, err = capsys.readouterr()
    assert out == "a row\n"
    assert "1/4 points" in err and err.endswith("\n")


def test_uses_tqdm_when_installed(monkeypatch, capsys):
    # A stand-in tqdm module injected into sys.modules (tqdm is not a dependency): checks that
    # Progress hands the work to tqdm.tqdm with the total, label and stderr, and nothing else.
    calls = []

    class FakeTqdm:
        def __init__(self, **kw):
            calls.append(("init", kw))

        def update(self, k):
            calls.append(("update", k))

        def write(self, line, file):
            calls.append(("write", line))

        def close(self):
            calls.append(("close",))

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    with Progress(2, True, label="curve", unit="points") as bar:
        bar.write("x")
        bar.step()
        bar.step()
    (kind, kw), *rest = calls
    assert kind == "init" and kw["total"] == 2 and kw["desc"] == "curve"
    assert kw["file"] is sys.stderr
    assert rest == [("write", "x"), ("update", 1), ("update", 1), ("close",)]
    assert capsys.readouterr() == ("", "")


def test_curve_captured_output_has_no_progress_noise(capsys):
    assert main(CURVE) == 0                      # no --quiet: stderr is not a terminal here
    out, err = capsys.readouterr()
    assert err == "" and "\r" not in out.replace("\r\n", "") and out.startswith("sparsity,engines,")


def test_curve_forced_progress(no_tqdm, capsys):
    assert main([*CURVE, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "curve [" in err and "4/4 points" in err and err.endswith("\n")
    assert len(out.splitlines()) == 1 + 4 and "\r" not in out.replace("\r\n", "")


def test_curve_progress_on_a_terminal_and_quiet(no_tqdm, monkeypatch):
    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    assert main([*CURVE, "--csv", "/dev/null"]) == 0
    assert "4/4 points" in fake.getvalue()
    fake.seek(0)
    fake.truncate()
    assert main([*CURVE, "--csv", "/dev/null", "--quiet"]) == 0
    assert main([*CURVE, "--csv", "/dev/null", "--no-progress"]) == 0
    assert fake.getvalue() == ""


def test_tlr_progress_only_when_asked(no_tqdm, capsys, monkeypatch):
    A = np.eye(40)
    TLRMatrix.from_dense(A, nb=10, tol=1e-3)
    TLRMatrix.from_dense(A, nb=10, tol=1e-3, progress=None)     # None: stderr not a terminal
    assert capsys.readouterr() == ("", "")
    TLRMatrix.from_function(lambda r, c: A[r, c], A.shape, nb=20, tol=1e-3, progress=True)
    err = capsys.readouterr().err
    assert "compressing [" in err and "4/4 tiles" in err and err.endswith("\n")
    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    TLRMatrix.from_dense(A, nb=20, tol=1e-3, progress=None)
    assert "4/4 tiles" in fake.getvalue()
