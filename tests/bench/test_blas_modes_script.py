"""benchmarks/blas_modes.py: each workflow under both BLAS modes beside scipy, with the
same answers (tiny problems)."""

import pytest

from benchmarks import blas_modes


def test_blas_modes_prints_both_modes_per_workflow(capsys):
    assert blas_modes.main(["--scale", "0.02", "--rounds", "2", "--only", "cg,eigsh"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("shared: ")
    assert [line.split(":")[0] for line in out[1:]] == ["cg", "eigsh"]
    for line in out[1:]:
        cells = line.split(": ", 1)[1].split("; ")
        assert cells[0].startswith("scipy ") and cells[1].startswith("blas_threads=1 ")
        assert cells[2].startswith("shared ")
        for cell in cells[1:]:
            assert float(cell.split("difference ")[1].rstrip(")")) < 1e-8


@pytest.mark.parametrize("bad", [["--rounds", "0"], ["--scale", "2"], ["--only", "gmres"],
                                 ["--only", ","]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        blas_modes.main(bad)
    assert exc.value.code == 2
    assert "need --rounds" in capsys.readouterr().err
