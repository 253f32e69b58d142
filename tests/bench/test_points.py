"""``wsesparse.bench.points``: one point of the comparison (later rounds, peers predicted
too slow to build)."""

import pytest


def test_later_rounds_time_every_fast_library_again(no_peers, monkeypatch):
    """With --rounds 3 each fast library is timed again in rounds 2 and 3 (its best over
    all rounds counts); one whose call takes over half a round's budget is not."""
    import numpy as np

    from wsesparse import bench
    seen = []
    real = bench.retime

    def spy(fn, best, budget):
        seen.append((best, budget))
        return real(fn, best, budget)

    monkeypatch.setattr(bench.points, "retime", spy)      # what run_point calls
    args = bench.parse_args(["--sizes", "64", "--tokens", "2", "--densities", "0.3",
                             "--dtypes", "float64", "--no-triad", "--budget", "0.03",
                             "--repeats", "1", "--threads", "1", "--rounds", "3"])
    row = bench.run_point(64, 2, 0.3, "float64", {}, args)
    libraries = [k for k in ("wsesparse", "wse.CSR", "scipy", "dense") if k in row]
    assert all(isinstance(row[k], float) for k in libraries) and len(libraries) == 4
    assert len(seen) == 2 * len(libraries)          # rounds 2 and 3, every library
    assert all(budget == pytest.approx(0.01) for _, budget in seen)
    assert np.isfinite(row["ratio"])

    calls = []
    assert bench.retime(lambda: calls.append(1), 0.02, 0.03) == 0.02 and not calls
    t = bench.retime(lambda: calls.append(1), 0.001, 0.003)
    assert len(calls) > 10 and t < 0.001             # fast calls: timed until the budget


def test_peers_predicted_slow_are_not_built(no_peers, monkeypatch):
    """A peer whose earlier time predicts a call over --max-call is reported 'slow' without
    converting its operands or warming it up (GraphBLAS's variant pick alone ran minutes)."""
    from wsesparse import bench
    args = bench.parse_args(["--sizes", "64", "--tokens", "2", "--densities", "0.3",
                             "--dtypes", "float64", "--no-triad", "--budget", "0.01",
                             "--repeats", "1", "--threads", "1", "--max-call", "5"])
    args.history[("dense", 64, 0.3, "float64")] = (1, 3.0)   # 6 s predicted at N = 2
    args.history[("scipy", 64, 0.3, "float64")] = (1, 1.0)   # 2 s: still timed
    skipped = []
    real = bench.make_calls
    monkeypatch.setattr(bench.points, "make_calls",
                        lambda *a, skip=(), **k: skipped.append(set(skip)) or real(*a, skip=skip, **k))
    row = bench.run_point(64, 2, 0.3, "float64", {}, args)
    assert skipped == [{"dense"}]
    assert row["dense"] == "slow" and isinstance(row["scipy"], float)
    assert isinstance(row["wsesparse"], float) and row["best_peer"] == "scipy"
