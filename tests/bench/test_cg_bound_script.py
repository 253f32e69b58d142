"""benchmarks/cg_bound.py: every quantity timed, the bounds ordered as they must be, on a
tiny grid."""

import re

import pytest

from benchmarks import cg_bound


def test_tiny_run_prints_times_and_bounds(capsys):
    assert cg_bound.main(["--grid", "20", "--iterations", "5", "--rounds", "2",
                          "--reps", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cg on the Poisson matrix 20x20, 5 iterations")
    rows = out[1:-1]
    assert len(rows) == 7
    for row in rows:
        times = row.split("  ")[-1].split()
        assert times[-1] == "ms" and len(times) == 3 and all(float(t) > 0 for t in times[:2])
    m = re.fullmatch(r"bounds: routed product ([\d.]+)x, prepared product ([\d.]+)x, a "
                     r"product of no cost ([\d.]+)x; measured: routed cg ([\d.]+)x, "
                     r"wsesparse.linalg.cg ([\d.]+)x", out[-1])
    assert m, out[-1]
    # (a product of no cost bounds the others: its denominator is the smallest)
    assert float(m[3]) >= max(float(m[1]), float(m[2]))


def test_report_arithmetic():
    ms = 1e-3
    lines = cg_bound.report({"scipy": [17 * ms], "numpy_only": [9 * ms],
                             "routed": [15 * ms], "linalg": [7 * ms],
                             "product_scipy": [8 * ms], "product_routed": [6 * ms],
                             "product_csr": [4 * ms]})
    assert lines[-1] == ("bounds: routed product 1.13x, prepared product 1.31x, a product of "
                         "no cost 1.89x; measured: routed cg 1.13x, wsesparse.linalg.cg 2.43x")


@pytest.mark.parametrize("bad", [["--grid", "3"], ["--rounds", "0"], ["--reps", "0"],
                                 ["--iterations", "0"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        cg_bound.main(bad)
    assert exc.value.code == 2
    assert "need --grid" in capsys.readouterr().err
