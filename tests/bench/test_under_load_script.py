"""benchmarks/under_load.py runs beside a busy process and reports every point (tiny grid)."""

import pytest

from benchmarks import under_load


def test_under_load_script_reports_quiet_and_loaded(capsys):
    from wsesparse import _threads
    before = _threads.LOAD_AWARE
    assert under_load.main(["--busy", "1", "--seconds", "0.02", "--rounds", "1",
                            "--scale", "0.05"]) == 0
    assert _threads.LOAD_AWARE == before  # the switch is restored
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("1 rounds of 0.02 s") and "1 busy processes" in out[0]
    rows = out[1:]
    assert len(rows) == len(under_load.GRID)
    for row in rows:
        for name in ("wsesparse", "wsesparse, rule off", "scipy"):
            assert f" {name} " in row
        assert row.count("x)") >= 3


def test_under_load_script_rejects_bad_options(capsys):
    for bad in (["--rounds", "0"], ["--seconds", "0"], ["--busy", "-1"], ["--scale", "-2"]):
        with pytest.raises(SystemExit) as exc:
            under_load.main(bad)
        assert exc.value.code == 2
        assert "need --busy >= 0, --rounds >= 1" in capsys.readouterr().err
