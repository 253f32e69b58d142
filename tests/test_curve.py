"""``wsesparse curve``: sparsity sweep of the wafer estimate to CSV and PNG; every bad value
exits with code 2 and one ``wsesparse curve: error: ...`` line naming the option."""

import csv
import re

import pytest

from wsesparse.cli import main
from wsesparse.curve import parse_floats, sweep


def test_curve_writes_csv_and_png(tmp_path):
    out, png = tmp_path / "c.csv", tmp_path / "c.png"
    rc = main(["curve", "--shape", "512x2048", "--tokens", "20000", "--sparsities",
               "0.5,0.9,0.99", "--engines", "1,4", "--csv", str(out), "--plot", str(png),
               "--quiet"])
    assert rc == 0
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["sparsity"], r["engines"]) for r in rows] == [
        ("0.5", "1"), ("0.5", "4"), ("0.9", "1"), ("0.9", "4"), ("0.99", "1"), ("0.99", "4")]
    sp1 = [float(r["speedup"]) for r in rows if r["engines"] == "1"]
    assert 1 < sp1[0] < sp1[1] <= sp1[2] * 1.001          # grows with sparsity
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_curve_matches_sweep(capsys):
    assert main(["curve", "--shape", "128x512", "--tokens", "4096", "--sparsities", "0.9",
                 "--engines", "2", "--quiet"]) == 0
    printed = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    want = sweep((128, 512), [0.9], 4096, [2])[0]
    assert int(printed[0]["cycles"]) == want["cycles"]


@pytest.mark.parametrize("argv, msg", [
    (["--sparsities", "0.5,1.0"], "--sparsities needs values in"),
    (["--sparsities", "a"], "--sparsities must be comma-separated"),
    (["--engines", "0"], "--engines must be a positive int, got 0"),
    (["--shape", "12x"], "--shape must look like"),
])
def test_curve_errors(argv, msg, capsys):
    assert main(["curve", "--quiet", "--shape", "64x64", *argv]) == 2
    assert msg in capsys.readouterr().err


def test_parse_floats():
    assert parse_floats("0,0.5") == [0.0, 0.5]


# -- bad command lines -------------------------------------------------------------------------
def run(argv, capsys):
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.parametrize("argv,msg", [
    (["--sparsities", ","], r"--sparsities needs values in \[0, 1\)"),
    (["--sparsities", "nan"], r"--sparsities needs values in \[0, 1\)"),
    (["--sparsities", "0.5,,0.9x"], "--sparsities must be comma-separated numbers"),
    (["--engines", "a,b"], "--engines must be comma-separated ints"),
    (["--engines", ""], "--engines must be comma-separated ints"),
    (["--engines", "1,-2"], "--engines must be a positive int, got -2"),
    (["--engines", "16"], r"engines \(16\) exceeds n_tokens \(8\)"),
    (["--tokens", "0"], "--tokens must be a positive int"),  # (it said n_tokens)
    (["--seed", "-3"], r"--seed must be an int in \[0, 9223372036854775807\], got -3"),
    (["--seed", str(10**20)], r"--seed must be an int in \[0, "),   # (it said "seed"; a review)
])
def test_curve_bad_values(capsys, argv, msg):
    rc, out, err = run(["curve", "--quiet", "--shape", "30x30", "--tokens", "8", "--engines",
                        "1"] + argv, capsys)
    assert rc == 2 and err.startswith("wsesparse curve: error: ")
    assert re.search(msg, err), err


@pytest.mark.parametrize("target", ["missing_dir", "is_dir"])
def test_curve_csv_unwritable(tmp_path, capsys, target):
    path = tmp_path / "no" / "x.csv" if target == "missing_dir" else tmp_path
    rc, out, err = run(["curve", "--quiet", "--shape", "30x30", "--tokens", "8", "--engines",
                        "1", "--sparsities", "0.5", "--csv", str(path)], capsys)
    assert rc == 2 and err.startswith("wsesparse curve: error: ") and "Errno" in err


def test_sweep_names_tokens():
    """(it said n_tokens, the name inside estimate_gemm)"""
    with pytest.raises(ValueError, match="tokens must be a positive int, got 0"):
        sweep((8, 8), [0.5], 0, [1])


def test_sweep_checks_shape_and_sparsities():
    """(an IndexError and "object of type 'float' has no len()")"""
    with pytest.raises(ValueError, match="shape must be a pair"):
        sweep((64,), [0.5], 256, [1])
    with pytest.raises(TypeError, match="sparsities must be a list"):
        sweep((64, 128), 0.5, 256, [1])


def test_plot_draws_in_sparsity_order(tmp_path, monkeypatch):
    """Points given out of order were drawn in that order (a zig-zag line), and the diamond
    marked the first point given that the ring bounds, not the least sparse one."""
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    from wsesparse.curve import plot
    drawn = []
    real = Axes.plot
    monkeypatch.setattr(Axes, "plot", lambda self, *a, **k: drawn.append(a) or real(self, *a, **k))
    rows = [{"sparsity": s, "engines": 1, "speedup": 1 / (1 - s) ** 0.5,
             "bound": "partial-sum ring" if s >= 0.9 else "axpy compute"}
            for s in (0.99, 0.5, 0.9, 0.75)]
    plot(rows, str(tmp_path / "c.png"), "t")
    line, diamond = drawn
    assert list(line[0]) == sorted(line[0])
    assert diamond[0] == pytest.approx(1 / (1 - 0.9))
    assert (tmp_path / "c.png").stat().st_size > 0


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(engines=2), TypeError, "engines must be a list of engine counts, got 2"),
    (dict(engines=None), TypeError, "engines must be a list of engine counts, got None"),
    (dict(shape=(0, 128)), ValueError, r"shape\[0\] must be a positive int, got 0"),
    (dict(shape=(64, -1)), ValueError, r"shape\[1\] must be a positive int, got -1"),
    (dict(shape=(64.0, 128)), TypeError, r"shape\[0\] must be a positive int, got 64.0"),
    # (a review: "unhashable type: 'list'", and the estimate's own name n_tokens)
    (dict(machine=["wse2"]), ValueError, r"machine must be one of .*, got \['wse2'\]"),
    (dict(tokens=10 ** 30), ValueError, r"^tokens=10+ is too large"),
])
def test_sweep_errors_name_its_own_arguments(kw, exc, msg):
    """(an int engines had "no len()"; a bad shape was named n_out / n_in)"""
    args = dict(shape=(64, 128), sparsities=[0.5], tokens=8, engines=[1]) | kw
    with pytest.raises(exc, match=msg):
        sweep(**args)
