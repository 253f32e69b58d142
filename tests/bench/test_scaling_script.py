"""benchmarks/scaling.py runs and reports a speedup per point (tiny grid)."""

import importlib.util
from pathlib import Path


def test_scaling_script_prints_every_point(capsys):
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "scaling.py"
    spec = importlib.util.spec_from_file_location("scaling_script", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--sizes", "256", "--tokens", "1,16", "--densities", "0.05",
                     "--dtypes", "float64", "--threads", "2", "--budget", "0.01",
                     "--rounds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.strip().startswith("256")]
    assert len(rows) == 2
    for row in rows:
        rates = row.split("|")[1].split()
        assert all(float(r) > 0 for r in rates)
        assert row.rstrip().endswith("x")
    assert out[-1].startswith("min speedup")
