"""benchmarks/part_trace.py runs and reports a row per product and thread count (tiny grid)."""

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


@pytest.mark.parametrize("bad", [["--threads", "0"], ["--calls", "0"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        part_trace.main(bad)
    assert exc.value.code == 2
    assert "need --threads >= 1" in capsys.readouterr().err
