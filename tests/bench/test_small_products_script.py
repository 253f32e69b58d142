"""benchmarks/small_products.py: the work of a product as the drivers count it, the ladder,
and a tiny run that prints every point in both modes."""

import pytest

from benchmarks import small_products as sp
from wsesparse import _thresholds as th


def test_work_matches_the_drivers_count():
    assert sp.product_work(100, 10, 1) == th.SPMV_WORK * 110
    assert sp.product_work(100, 10, 8) == 810
    for work in (4096, 65536, 1 << 19):
        for n_tokens in (1, 8, 64):
            n = sp.rows_for_work(work, n_tokens)
            got = sp.product_work(n * sp.ROW_NNZ, n, n_tokens)
            assert n == 16 or abs(got - work) <= work * 0.05 + n_tokens * sp.ROW_NNZ


def test_tiny_run_prints_both_modes_and_the_verdict(capsys):
    before = th.MIN_WORK_PER_THREAD
    assert sp.main(["--tokens", "1,4", "--work", "2048,40000", "--threads", "2",
                    "--rounds", "1", "--inner", "1", "--gap", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"MIN_WORK_PER_THREAD = {th.MIN_WORK_PER_THREAD}")
    rows = [line for line in out if line.split() and line.split()[0] in ("1", "4")]
    assert len(rows) == 4
    for row in rows:
        cells = row.split("|")
        assert len(cells) == 3
        for part in cells[1:]:
            times = part.split()
            assert len(times) == 4 and all(float(t) > 0 for t in times[:3])
            assert times[3].endswith("x")
    verdicts = [line for line in out if line.startswith("N=")]
    assert len(verdicts) == 2 and all("MIN_WORK_PER_THREAD" in v for v in verdicts)
    assert th.MIN_WORK_PER_THREAD == before  # the threshold lifted for the team is put back


@pytest.mark.parametrize("bad", [["--threads", "1"], ["--rounds", "0"], ["--gap", "-1"],
                                 ["--work", "0"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        sp.main(bad)
    assert exc.value.code == 2
    assert "need --threads >= 2" in capsys.readouterr().err
