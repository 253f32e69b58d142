"""benchmarks/part_trace.py runs and reports a row per product and thread count (tiny grid)."""

import numpy as np
import pytest

from benchmarks import part_trace
from wsesparse._kernels import _spmm


def test_part_trace_script_prints_every_point_and_thread_count(capsys):
    assert part_trace.main(["--sizes", "512", "--tokens", "1,8", "--densities", "0.05",
                            "--dtypes", "float64", "--threads", "2,3", "--calls", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "a queue per thread" in out[0] or "one shared queue" in out[0]
    assert out[1].split()[:4] == ["product", "thr", "call", "sweep"]
    rows = [line.split() for line in out[2:]]
    # (label of 4 words, thread count, call, sweep, starts, busy, x1, end/mean, stolen,
    # speedup)
    assert [(r[0], r[2], r[4]) for r in rows] == [
        ("512^2", "N=1", t) for t in ("1", "2", "3")] + [("512^2", "N=8", t) for t in "123"]
    for r in rows:
        assert len(r) == 13
        call, sweep, busy = float(r[5]), float(r[6]), float(r[8])
        assert 0 < sweep <= call and 0 < busy
        assert (r[-2] == "-" if _spmm.PARTS_SHARED else r[-2].endswith("%"))
        assert float(r[-1]) >= 0
    assert [r[9] for r in rows if r[4] == "1"] == ["1.00", "1.00"]  # (busy over its own)
    # The teams were the size asked (the small-product rule lifted), and the rule is back.
    from wsesparse import _thresholds as th
    assert th.MIN_WORK_PER_THREAD > 1


@pytest.mark.parametrize("grids", ["9xa", "0x5", "x"])
def test_bad_grids(grids, capsys):
    with pytest.raises(SystemExit) as exc:
        part_trace.main(["--tlr", "--grids", grids])
    assert exc.value.code == 2 and "argument --grids: a grid" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--threads", "0"], ["--calls", "0"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        part_trace.main(bad)
    assert exc.value.code == 2
    assert "need --threads >= 1" in capsys.readouterr().err


def test_tlr_trace_prints_every_product_and_thread_count(capsys):
    assert part_trace.main(["--tlr", "--grids", "12", "--vectors", "1,4", "--threads", "2",
                            "--calls", "2", "--previous-cut"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "TLR kernels" in out[0] and out[1].split()[:4] == ["product", "thr", "call", "sweep"]
    rows = [line.split() for line in out[2:]]
    # (label of 3 words, thread count, call, sweep, ph1 / ph2 / ph3, x1 ph1/ph3, end/mean
    # ph1/ph3, speedup)
    assert [tuple(r[:4]) for r in rows] == [
        ("144^2", d, f"s={s}", t) for s in (1, 4) for d in ("fwd", "adj", "fwd-prev")
        for t in "12"]
    for r in rows:
        assert len(r) == 14 and r[7] == r[9] == "/"
        call, sweep, phases = float(r[4]), float(r[5]), [float(r[i]) for i in (6, 8, 10)]
        assert 0 < sweep <= call and 0 <= sum(phases) <= sweep
    assert all(r[11] == r[12] == "1.00/1.00" for r in rows if r[3] == "1")


def test_phase_summary_of_a_made_up_trace():
    """Two threads: phase 1 two items (thread 0 ends at 4 us, thread 1 at 2), phase 2 one
    block on thread 1 (to 5 us), phase 3 one item on thread 0 (to 9 us), joined at 10."""
    parts = np.array([[0, 0, 4000], [1, 500, 2000], [1, 4200, 5000], [0, 5100, 9000]])
    got = part_trace.phase_summary(parts, 10000, (2, 3), 2)
    assert got["sweep"] == 10.0
    assert (got["ph1"], got["ph2"], got["ph3"]) == (4.0, 1.0, 4.0)
    assert got["busy1"] == 5.5 and got["busy3"] == 3.9
    assert got["end/mean1"] == 4 / 3        # (ends 4 and 2 from the sweep's start)
    assert got["end/mean3"] == 2.0          # (thread 1 took no item: it ends at the start)
