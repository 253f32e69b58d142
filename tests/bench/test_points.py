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


def test_libraries_after_a_blas_call_are_timed_after_a_pause(no_peers, monkeypatch):
    """OpenBLAS's threads spin for about 0.1 s after a threaded call, and a product timed
    then ran up to 1.9x slower: the library timed after the scipy reference's check (a
    BLAS product) and the one after the dense peer (round 2's first) wait SETTLE_SECONDS;
    no other step waits."""
    from wsesparse import bench
    events = []
    real = bench.retime
    monkeypatch.setattr(bench.points.time, "sleep", lambda s: events.append(("sleep", s)))
    monkeypatch.setattr(bench.points, "check_reference",
                        lambda *a, **k: events.append(("check", 0)) or True)

    def spy(fn, best, budget):
        events.append(("retime", 0))
        return real(fn, best, budget)

    monkeypatch.setattr(bench.points, "retime", spy)
    args = bench.parse_args(["--sizes", "64", "--tokens", "2", "--densities", "0.3",
                             "--dtypes", "float64", "--no-triad", "--budget", "0.02",
                             "--repeats", "1", "--threads", "1", "--rounds", "2"])
    row = bench.run_point(64, 2, 0.3, "float64", {}, args)
    assert isinstance(row["dense"], float)
    kinds = [k for k, _ in events]
    # round 1: scipy, its check, pause, wsesparse, wse.CSR, dense; round 2: pause, then all 4
    assert kinds == ["check", "sleep", "sleep"] + ["retime"] * 4, kinds
    assert all(s == bench.points.SETTLE_SECONDS for k, s in events if k == "sleep")
