"""benchmarks/scatter_zones.py: one chunk against zones per core count (tiny problems)."""

import pytest

from benchmarks import scatter_zones
from wsesparse import _drivers
from wsesparse import _thresholds as th
from wsesparse._kernels import _scatter


def test_prints_every_product_and_takes_zones_only_in_their_column(capsys, monkeypatch):
    seen = []
    real = _scatter.csr_spmm_t
    monkeypatch.setattr(_scatter, "csr_spmm_t",
                        lambda *a, **k: seen.append(k.get("zones")) or real(*a, **k))
    cores, work = _drivers.available_cores, th.SCATTER_ZONE_MIN_WORK
    assert scatter_zones.main(["--scale", "0.3", "--threads", "1,2", "--budget", "0.001",
                               "--rounds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["product", "scipy", "1", "thr", "2", "thr"]
    rows = out[2:]
    assert len(rows) == 5 + 2 + 1      # Poisson 2-D at 5 widths, 3-D at 2, random
    for row in rows:
        pairs = row.split()[-2:]
        assert all(float(t) > 0 for p in pairs for t in p.split("/"))
    assert 2 in seen and 0 in seen     # zones in one column, none in the other
    assert (_drivers.available_cores, th.SCATTER_ZONE_MIN_WORK) == (cores, work)  # put back


@pytest.mark.parametrize("bad", [["--threads", "0"], ["--rounds", "0"], ["--budget", "0"],
                                 ["--scale", "0"]])
def test_bad_options(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        scatter_zones.main(bad)
    assert exc.value.code == 2
    assert "need --threads >= 1" in capsys.readouterr().err
