"""benchmarks/panel_threads.py: every point with the library's width and the forced ones,
and the drivers put back (tiny problems)."""

import pytest

from benchmarks import panel_threads
from wsesparse import _drivers
from wsesparse import _thresholds as th


def test_panel_script_prints_each_width_and_restores_the_drivers(capsys):
    saved = (_drivers.panel_width, _drivers.k_block, th.MIN_WORK_PER_THREAD)
    assert panel_threads.main(["--size", "512", "--tokens", "8,40", "--densities", "0.1",
                               "--dtypes", "float64", "--lines", "1,2", "--threads", "2",
                               "--rounds", "1"]) == 0
    assert (_drivers.panel_width, _drivers.k_block, th.MIN_WORK_PER_THREAD) == saved
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("L2 ")
    rows = out[1:]
    assert [r.split(" (")[0] for r in rows] == ["float64 d=0.1 N=8", "float64 d=0.1 N=40"]
    # N = 8: the default and one line (8 float64); N = 40: the default, 8 and 16 columns.
    for row, widths in zip(rows, (["8"], ["8", "16"])):
        cells = row.split("): ", 1)[1].split("; ")
        assert cells[0].startswith("default(")
        assert [c.split(":")[0] for c in cells[1:]] == widths
        for c in cells:
            one, all_ = map(float, c.split(": ")[1].split()[0].split("/"))
            assert one > 0 and all_ > 0


@pytest.mark.parametrize("bad", [["--rounds", "0"], ["--threads", "0"], ["--lines", "0"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        panel_threads.main(bad)
    assert exc.value.code == 2
    assert "need --rounds" in capsys.readouterr().err
