"""``wsesparse bench`` (CPU peer comparison) and its thin wrapper ``benchmarks/peers.py``."""

import csv
import io
import sys

import pytest

from wsesparse.cli import main

PEER_MODULES = ("sparse_dot_mkl", "graphblas", "torch")
TINY = ["--sizes", "256", "--tokens", "1,8", "--densities", "0.1,0.01",
        "--dtypes", "float32,float64", "--no-triad", "--budget", "0.005", "--repeats", "1",
        "--threads", "1"]


@pytest.fixture
def no_peers(monkeypatch):
    """Make the optional peers unimportable (None in sys.modules raises ImportError).

    The environment variables the peer loader sets for MKL are restored afterwards.
    """
    for mod in PEER_MODULES:
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.setenv("MKL_THREADING_LAYER", "GNU")
    monkeypatch.setenv("MKL_RT", "")


def _table(out: str) -> list[list[str]]:
    """The data rows of the printed table, split into their |-separated parts."""
    return [line.split("|") for line in out.splitlines() if line.startswith("   256 ")]


def test_bench_tiny_run_prints_checked_rows_and_missing_peers(no_peers, capsys, tmp_path):
    path = tmp_path / "bench.csv"
    assert main(["bench", *TINY, "--csv", str(path)]) == 0   # about 1 s
    out, err = capsys.readouterr()
    for name in ("mkl", "graphblas", "torch"):
        assert f"peer {name}: not installed (ModuleNotFoundError" in out
    head = next(line for line in out.splitlines() if line.lstrip().startswith("M "))
    assert head.split("|")[1].split() == ["wsesparse", "wse.CSR", "scipy", "dense"]
    rows = _table(out)
    assert len(rows) == 2 * 2 * 2                    # dtypes x densities x tokens
    for lead, rates, tail in rows:
        # Every library verified against scipy and timed: a GFLOP/s, never FAIL ("0.000"
        # when a call lost its core for a while).
        assert all(float(v) >= 0 for v in rates.split()), rates
        assert tail.split()[0] in ("scipy", "dense")  # the best peer
    assert "Summary (ratio = wsesparse GFLOP/s" in out and f"wrote {path}" in out
    assert err == ""                                  # stderr is not a terminal: no bar
    points = list(csv.DictReader(path.open()))
    assert [(p["dtype"], p["density"], p["N"]) for p in points] == [
        (d, r, n) for d in ("float32", "float64") for r in ("0.1", "0.01") for n in ("1", "8")]
    assert all(float(p["wsesparse"]) > 0 and float(p["wsesparse_t"]) > 0 for p in points)
    assert all("spmv_GBs" in p and (p["spmv_GBs"] != "") == (p["N"] == "1") for p in points)


def test_bench_left_times_dense_at_sparse_checked(no_peers, capsys, tmp_path, monkeypatch):
    """--left: X @ A for every library, each result checked (as its transpose) against
    scipy's; a wrong wsesparse result would be a FAIL, not a rate."""
    path = tmp_path / "left.csv"
    assert main(["bench", *TINY, "--left", "--csv", str(path)]) == 0
    out, _ = capsys.readouterr()
    assert "Products: dense @ sparse" in out
    rows = _table(out)
    assert len(rows) == 8
    for lead, rates, tail in rows:
        # Every column a rate, none FAIL ("0.000" when a call lost its core for a while).
        assert all(float(v) >= 0 for v in rates.split()), rates
    assert {p["side"] for p in csv.DictReader(path.open())} == {"left"}
    # The check is real: a wrong dense @ sparse result is reported as FAIL.
    import wsesparse
    real = wsesparse.sparse_matmul
    monkeypatch.setattr(wsesparse, "sparse_matmul", lambda a, b, **kw: real(a, b, **kw) * 1.01)
    assert main(["bench", *TINY, "--left", "--tokens", "8", "--dtypes", "float64"]) == 0
    rows = _table(capsys.readouterr()[0])
    assert rows and all(r[1].split()[:2] == ["FAIL", "FAIL"] for r in rows)


def test_bench_forced_progress_goes_to_stderr_only(no_peers, capsys):
    args = ["--sizes", "128", "--tokens", "4", "--densities", "0.1,0.05", "--dtypes", "float64",
            "--no-triad", "--budget", "0.002", "--repeats", "1", "--threads", "1"]
    assert main(["bench", *args, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "bench [" in err and "2/2 points" in err and err.endswith("\n")
    assert "\r" not in out and len([ln for ln in out.splitlines() if ln.startswith("   128 ")]) == 2


def test_bench_progress_on_a_terminal_by_default(no_peers, capsys, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    assert main(["bench", "--sizes", "64", "--tokens", "2", "--densities", "0.2",
                 "--dtypes", "float32", "--no-triad", "--budget", "0.002", "--repeats", "1"]) == 0
    assert "1/1 points" in fake.getvalue()
    assert main(["bench", "--sizes", "64", "--tokens", "2", "--densities", "0.2",
                 "--dtypes", "float32", "--no-triad", "--budget", "0.002", "--repeats", "1",
                 "--no-progress"]) == 0
    assert fake.getvalue().count("1/1 points") == 1   # --no-progress silences it


def test_peers_script_is_the_same_command(no_peers, capsys):
    from benchmarks import peers
    args = ["--sizes", "64", "--tokens", "1,3", "--densities", "0.3", "--dtypes", "float32",
            "--no-triad", "--budget", "0.002", "--repeats", "1", "--threads", "1"]
    assert peers.main(args) == 0
    script = capsys.readouterr().out
    assert main(["bench", *args]) == 0
    cli = capsys.readouterr().out
    # Same lines apart from the measured numbers: compare the table's shape and labels.
    def shape(text):
        return [(ln.split("|")[0], len(ln.split("|"))) for ln in text.splitlines()
                if "|" in ln]
    assert shape(script) == shape(cli) and len(shape(cli)) == 3
    assert peers.random_csr is __import__("wsesparse.bench").bench.random_csr  # crossover.py


def test_bench_rejects_unknown_dtype(capsys):
    assert main(["bench", "--dtypes", "float16", "--no-triad"]) == 2
    assert "--dtypes must be among float32" in capsys.readouterr().err


def test_bench_rejects_rounds_below_one(capsys):
    assert main(["bench", "--rounds", "0", "--no-triad"]) == 2
    assert "--rounds must be a positive int, got 0" in capsys.readouterr().err


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


def test_best_time_single_call_threshold():
    from wsesparse._timing import best_time
    calls = []
    _, t = best_time(lambda: calls.append(1) or sum(range(20000)), repeats=3, budget=1e-9,
                     single_call_above=10.0)
    assert len(calls) >= 3 and t > 0                # under the threshold: repeats
    calls.clear()
    best_time(lambda: calls.append(1) or sum(range(20000)), repeats=3, budget=1e-9)
    assert len(calls) == 1                           # default 2 * budget: the warm-up only


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


def test_triad_passes(monkeypatch):
    """The OpenMP triad times repeats + 1 passes (the first included), or a warm-up and
    repeats passes (benchmarks/bench_tlr.py); every triad checks its result."""
    from wsesparse.bench import bandwidth
    assert bandwidth.triad_bandwidth(2, n_elems=10_000, repeats=2) > 0
    _tlrmvm = pytest.importorskip("wsesparse._kernels._tlrmvm")
    passes = []
    real = _tlrmvm.stream_triad
    monkeypatch.setattr(_tlrmvm, "stream_triad", lambda *a: passes.append(a[3]) or real(*a))
    assert bandwidth.triad_bandwidth_kernel(1, n_elems=1000, repeats=3) > 0
    assert passes == [3.0] * 4
    passes.clear()
    assert bandwidth.triad_bandwidth_kernel(1, n_elems=1000, repeats=3, warmup=True) > 0
    assert len(passes) == 4
