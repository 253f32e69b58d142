"""benchmarks/scaling.py runs and reports rates per thread count and speedups (tiny grid)."""

import pytest

from benchmarks import scaling


def test_scaling_script_prints_every_point_and_thread_count(capsys):
    assert scaling.main(["--sizes", "256", "--tokens", "1,16", "--densities", "0.05",
                     "--dtypes", "float64", "--threads", "2,3", "--budget", "0.01",
                     "--rounds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("teams as asked")
    assert out[1].split("|")[1].split() == ["1", "thr", "2", "thr", "3", "thr"]
    rows = [line for line in out if line.strip().startswith("256")]
    assert len(rows) == 2
    for row in rows:
        rates = row.split("|")[1].split()
        assert len(rates) == 3 and all(float(r) > 0 for r in rates)
        assert row.rstrip().endswith("x")
    assert out[-3].startswith("min 3-thread speedup")
    # The teams were the size asked (the small-product rule lifted), and the rule is back.
    from wsesparse import _thresholds as th
    assert th.MIN_WORK_PER_THREAD > 1
    assert [line.split(",")[1].split()[0] for line in out[-2:]] == ["2", "3"]


@pytest.mark.parametrize("bad", [["--threads", "0"], ["--rounds", "0"], ["--budget", "0"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        scaling.main(bad)
    assert exc.value.code == 2
    assert "need --threads >= 1" in capsys.readouterr().err


def test_references_rows(capsys, monkeypatch):
    """--references prints the GEMM's and the triad's rate per count and their speedup."""
    monkeypatch.setattr(scaling, "REF_GEMM_SIDE", 64)
    monkeypatch.setattr(scaling, "REF_GEMM_COLUMNS", 8)
    monkeypatch.setattr(scaling, "REF_TRIAD_ELEMS", 10_000)
    assert scaling.main(["--sizes", "128", "--tokens", "1", "--densities", "0.05",
                         "--dtypes", "float64", "--threads", "2", "--budget", "0.01",
                         "--rounds", "1", "--references"]) == 0
    out = capsys.readouterr().out.splitlines()
    refs = [line for line in out if line.startswith("reference:")]
    assert [r.split()[1] for r in refs] == ["GEMM", "triad"]
    assert "64^2 @ 8" in refs[0] and "3 x 0.08 MB" in refs[1]
    for r in refs:
        rates = [float(x) for x in r.split("|")[1].split()]
        assert len(rates) == 2 and all(x > 0 for x in rates)
        # The speedup is the rates' ratio (3 significant digits each, 2 decimals printed).
        # Not "> 0": on a loaded 2-core VM a woken team has made the 2-thread reference 200
        # times slower than one thread, and the ratio printed 0.00x.
        ratio = rates[1] / rates[0]
        speedup = float(r.split("|")[2].strip().rstrip("x"))
        assert abs(speedup - ratio) <= 0.011 * ratio + 0.005, (speedup, ratio)
