"""benchmarks/transposed.py times every transposed product against scipy (tiny problems)."""

import pytest

from benchmarks import transposed


def test_transposed_script_prints_every_product(capsys):
    assert transposed.main(["--scale", "0.01", "--threads", "1,2", "--budget", "0.001",
                            "--rounds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["product", "scipy", "1", "thr", "2", "thr", "scipy/2"]
    rows = out[2:]
    # X @ W at 5 token counts for 2 matrices, CSC @ X at 3 widths, R.T @ u, F.T @ r
    assert len(rows) == 10 + 3 + 2
    for row in rows:
        times = row.split()[-4:-1]
        assert all(float(t) > 0 for t in times) and row.endswith("x")


@pytest.mark.parametrize("bad", [["--threads", "0"], ["--rounds", "0"], ["--budget", "0"],
                                 ["--scale", "0"], ["--scale", "2"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        transposed.main(bad)
    assert exc.value.code == 2
    assert "need --threads >= 1" in capsys.readouterr().err
