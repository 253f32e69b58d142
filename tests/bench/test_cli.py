"""``wsesparse bench`` (wsesparse/bench/cli.py): a tiny CPU peer comparison, both sides, its
progress bar, and bad arguments."""

import csv
import io
import sys

import pytest

from wsesparse.cli import main


TINY = ["--sizes", "256", "--tokens", "1,8", "--densities", "0.1,0.01",
        "--dtypes", "float32,float64", "--no-triad", "--budget", "0.005", "--repeats", "1",
        "--threads", "1"]


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
    with path.open() as f:  # (closed: an open one was a ResourceWarning under -W error)
        points = list(csv.DictReader(f))
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
    with path.open() as f:
        assert {p["side"] for p in csv.DictReader(f)} == {"left"}
    # The check is real: a wrong dense @ sparse result is reported as FAIL.
    import wsesparse
    real = wsesparse.sparse_matmul
    monkeypatch.setattr(wsesparse, "sparse_matmul", lambda a, b, **kw: real(a, b, **kw) * 1.01)
    assert main(["bench", *TINY, "--left", "--tokens", "8", "--dtypes", "float64"]) == 0
    rows = _table(capsys.readouterr()[0])
    assert rows and all(r[1].split()[:2] == ["FAIL", "FAIL"] for r in rows)


@pytest.fixture
def text_bar(monkeypatch):
    """The one-line text bar these tests read, also where tqdm is installed (it then draws
    the bar: a machine with tqdm failed them)."""
    from wsesparse import _progress
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)


def test_bench_forced_progress_goes_to_stderr_only(no_peers, capsys, text_bar):
    args = ["--sizes", "128", "--tokens", "4", "--densities", "0.1,0.05", "--dtypes", "float64",
            "--no-triad", "--budget", "0.002", "--repeats", "1", "--threads", "1"]
    assert main(["bench", *args, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "bench [" in err and "2/2 points" in err and err.endswith("\n")
    assert "\r" not in out and len([ln for ln in out.splitlines() if ln.startswith("   128 ")]) == 2


def test_bench_progress_on_a_terminal_by_default(no_peers, capsys, monkeypatch, text_bar):
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


def test_bench_rejects_unknown_dtype(capsys):
    assert main(["bench", "--dtypes", "float16", "--no-triad"]) == 2
    assert "--dtypes must be among float32" in capsys.readouterr().err


def test_bench_rejects_rounds_below_one(capsys):
    assert main(["bench", "--rounds", "0", "--no-triad"]) == 2
    assert "--rounds must be a positive int, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("args,message", [
    (["--sizes", "0"], "--sizes must be a positive int, got 0"),
    (["--tokens", "8,0"], "--tokens must be a positive int, got 0"),
    (["--densities", "0"], "--densities must be a number in (0, 1], got 0.0"),
    (["--densities", "1.5"], "--densities must be a number in (0, 1], got 1.5"),
    (["--repeats", "0"], "--repeats must be a positive int, got 0"),
    (["--budget", "nan"], "--budget must be a positive finite number, got nan"),
    (["--budget", "-5"], "--budget must be a positive finite number, got -5.0"),
    (["--max-call", "-1"], "--max-call must be a positive finite number, got -1.0"),
    # (--threads 0 failed later with "max_workers must be greater than 0", and torch was
    # listed as not installed; the --gpu options were not checked at all)
    (["--threads", "0"], "--threads must be a positive int, got 0"),
    (["--workflows", "--threads", "0"], "--threads must be a positive int, got 0"),
    (["--gpu", "--gpu-size", "0"], "--gpu-size must be a positive int, got 0"),
    (["--gpu", "--gpu-densities", "2,-0.5"], "--gpu-densities must be a number in (0, 1]"),
    (["--gpu", "--nb", "-3"], "--nb must be a positive int, got -3"),
    # (an empty grid printed an empty table and exited 0; the others failed after the
    # header, naming n_threads, seed, scale, iterations)
    (["--sizes", ""], "--sizes needs at least one value"),
    (["--tokens", ","], "--tokens needs at least one value"),
    (["--densities", ""], "--densities needs at least one value"),
    (["--threads", "100000"], "--threads must be at most"),
    (["--seed", "-1"], "--seed must be an int in [0, "),
    (["--workflows", "--scale", "0"], "--scale must be a positive finite number, got 0.0"),
    (["--workflows", "--iterations", "0"], "--iterations must be a positive int, got 0"),
    # (a review: each was accepted and did nothing, or failed after the grid had run)
    (["--tlr", "--csv", "x.csv"], "--csv writes the product grid's points; --tlr has no CSV"),
    (["--workflows", "--csv", "x.csv"], "--workflows has no CSV"),
    (["--gpu", "--csv", "x.csv"], "(--json FILE writes its results)"),
    (["--json", "x.json"], "--json is written by --gpu only"),
    (["--tlr", "--gpu"], "--tlr and --gpu are separate sections"),
    (["--csv", "no/such/dir/x.csv"], "the directory"),
    (["--csv", "."], "--csv . is a directory"),
    (["--gpu", "--dtypes", "complex64"], "--gpu times float32 and float64, got --dtypes complex64"),
])
def test_bench_rejects_bad_grid_options_before_any_table(capsys, args, message):
    """(--sizes 0 and --tokens 0 failed inside numpy after the header was printed, the
    others were taken silently.)"""
    assert main(["bench", *args, "--no-triad"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "density" not in captured.out


def test_bench_point_without_nonzeros(capsys):
    """A point with no nonzeros (all rates 0) prints dashes for the ratios; it raised
    ZeroDivisionError."""
    assert main(["bench", "--sizes", "64", "--tokens", "1", "--densities", "0.0001",
                 "--dtypes", "float32", "--budget", "0.02", "--rounds", "1", "--no-triad"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "0.0001" in line)
    assert " 0 |" in row and row.split("|")[-1].split()[1:4] == ["-", "-", "-"]


def test_bench_gives_the_peers_their_thread_counts_back(capsys):
    """--threads 1 left torch on one thread after run() returned (BLAS was restored)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert main(["bench", "--sizes", "64", "--tokens", "1", "--densities", "0.1",
                     "--dtypes", "float32", "--budget", "0.01", "--rounds", "1",
                     "--threads", "1", "--no-triad"]) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("gather, long_rows, runs, x64, says", [
    (False, True, False, 0, "(SpMV gathers only rows of 160+ nonzeros in float32 with x over "
                            "16 KiB (512+ with less), 64+ nonzeros in float64)"),
    (False, True, False, 32768,
     "(SpMV gathers only rows of 160+ nonzeros in float32 with x over 16 KiB (512+ with "
     "less), 64+ nonzeros in float64 with x over 32 KiB (512+ with less in a matrix within "
     "half of L3))"),
    (False, False, False, 0, "(SpMV without gathers)"),
    (True, False, True, 0, "(SpMV gathers, but not for rows in runs of one length)"),
])
def test_build_line_names_the_spmv_rule_of_avx512_builds(gather, long_rows, runs, x64, says,
                                                         monkeypatch, capsys):
    from wsesparse.bench import cli
    from wsesparse._kernels import _spmm
    monkeypatch.setattr(cli, "kernel_build", lambda: "avx512f")
    monkeypatch.setattr(_spmm, "SPMV_GATHER", gather)
    monkeypatch.setattr(_spmm, "SPMV_GATHER_LONG", long_rows)
    monkeypatch.setattr(_spmm, "SPMV_RUN_SCALAR", runs)
    monkeypatch.setattr(_spmm, "SPMV_GATHER_ROW_MIN", {"float32": 160, "float64": 64})
    monkeypatch.setattr(_spmm, "SPMV_GATHER_LONG_X_BYTES", {"float32": 16384, "float64": x64})
    monkeypatch.setattr(_spmm, "SPMV_GATHER_NEAR_ROW_MIN",
                        {"float32": 512, "float64": 512 if x64 else 64})
    monkeypatch.setattr(_spmm, "SPMV_GATHER_NEAR_ANY_MATRIX", {"float32": True, "float64": False})
    cli.print_load_average()
    line = next(x for x in capsys.readouterr().out.splitlines() if "kernels built for" in x)
    assert line.split("; numpy")[0].endswith(f"avx512f {says}")


def test_quick_keeps_the_grid_options_given_with_it():
    """--quick replaced a --sizes or --dtypes given with it, silently (a review: it ran
    4096 / float32 when asked for 256 / float64)."""
    from wsesparse.bench.cli import GRID_DEFAULTS, QUICK_GRID, parse_args
    a = parse_args(["--quick", "--sizes", "256", "--dtypes", "float64"])
    assert (a.sizes, a.dtypes) == ([256], ["float64"])
    assert (a.tokens, a.densities, a.repeats) == (QUICK_GRID["tokens"], QUICK_GRID["densities"],
                                                  QUICK_GRID["repeats"])
    b = parse_args(["--tokens", "8"])
    assert (b.sizes, b.tokens, b.repeats) == (GRID_DEFAULTS["sizes"], [8], 5)


def test_peers_script_reports_a_bad_option_in_one_line(capsys):
    """benchmarks/peers.py (bench.main) printed a ValueError traceback and exited 1."""
    from wsesparse.bench.cli import main as bench_main
    assert bench_main(["--sizes", "0"], prog="peers.py") == 2
    err = capsys.readouterr().err
    assert err.strip() == "peers.py: error: --sizes must be a positive int, got 0"
