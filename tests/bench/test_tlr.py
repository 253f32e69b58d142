"""``wsesparse bench --tlr`` (wsesparse/bench/tlr.py): the numpy three-phase product equals
``T @ x``, the rates and their table, the CLI section on small sizes, and bad arguments.
No test looks at a time beyond its being positive."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from wsesparse import TLRMatrix
from wsesparse.bench import tlr as btlr
from wsesparse.bench import tlr_setup
from wsesparse.cli import main

# One tiny run of the CLI section: 144 x 144 slice in 64-tiles, a 72 x 72 cache operator.
TINY = ["bench", "--tlr", "--nx", "12", "--nb", "64", "--rounds", "2", "--cache-grid", "8x9",
        "--threads", "1", "--no-triad"]


def _uneven_tlr(dtype, m=150, n=131, nb=32, seed=0):
    """Random factors of uneven ranks, a zero tile row and column, edge tiles of 22 and 3."""
    rng = np.random.default_rng(seed)
    tiles = {}
    for i in range(-(-m // nb)):
        for j in range(-(-n // nb)):
            if i == 1 or j == 2:
                continue
            h, w = min(nb, m - i * nb), min(nb, n - j * nb)
            k = int(rng.integers(0, min(h, w, 9) + 1))
            tiles[(i, j)] = (tlr_setup.random_operand(rng, (h, k), dtype),
                             tlr_setup.random_operand(rng, (w, k), dtype))
    return TLRMatrix.from_tiles((m, n), nb, tiles, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.float64, np.float32, np.complex128])
def test_numpy_three_phase_equals_the_kernel(dtype):
    T = _uneven_tlr(dtype)
    assert (T.ranks == 0).any() and T.ranks.max() > 0
    three = btlr.NumpyThreePhase(T)
    rng = np.random.default_rng(1)
    for shape in [(T.shape[1],), (T.shape[1], 5)]:
        x = tlr_setup.random_operand(rng, shape, dtype)
        y = three(x)
        assert y.dtype == dtype and y.shape == (T.shape[0],) + shape[1:]
        assert tlr_setup.relative_difference(y, T @ x) <= btlr.rounding_bound(T)
        # ... and both are the dense product of the factors.
        ref = T.toarray().astype(np.complex128) @ x
        assert tlr_setup.relative_difference(y, ref) <= btlr.rounding_bound(T)


@pytest.mark.parametrize("dtype", [np.complex64, np.float64])
def test_numpy_three_phase_of_a_compressed_slice(dtype):
    from wsesparse.datasets import seismic_slice
    A = seismic_slice(nx=9, ny=10, dtype=np.complex64)
    A = A.real.astype(dtype) if np.dtype(dtype).kind == "f" else A
    T = TLRMatrix.from_dense(A, nb=16, tol=1e-3)
    x = tlr_setup.random_operand(np.random.default_rng(2), T.shape[1], dtype)
    assert tlr_setup.relative_difference(btlr.NumpyThreePhase(T)(x), T @ x) \
        <= btlr.rounding_bound(T)
    c = btlr.compare_numpy(T, rounds=2, inner=1, n_threads=1, settle=0)
    assert c.difference <= c.bound and all(t > 0 for t in c.wsesparse + c.numpy)
    assert c.speedup[0] > 0 and len(c.format().splitlines()) == 4
    assert c.read is not None and 0 < c.read[0] <= c.read[1]
    assert "% of it" in c.format().splitlines()[-1]
    # Without the read (kernels built without it) the table keeps its three lines.
    assert len(dataclasses.replace(c, read=None).format().splitlines()) == 3


def test_compare_numpy_refuses_a_wrong_numpy_result(monkeypatch):
    T = _uneven_tlr(np.complex64)
    real = btlr.NumpyThreePhase.__call__
    monkeypatch.setattr(btlr.NumpyThreePhase, "__call__",
                        lambda self, x: real(self, x) * np.float32(1.001))
    with pytest.raises(AssertionError, match="differs from T @ x by"):
        btlr.compare_numpy(T, rounds=1, inner=1, n_threads=1, settle=0)


def test_rates_and_their_table():
    T = _uneven_tlr(np.complex64)
    r = btlr.tlr_rates(T, sizes=(1, 4, 16), rounds=2, n_threads=1, triad_elems=10_000,
                       settle=0.001)
    assert set(r.products) == {(k, s) for k in ("forward", "adjoint") for s in (1, 4, 16)}
    assert all(0 < b <= md for b, md in r.products.values())
    assert r.triad_bytes == 24 * 10_000 and r.triad is not None
    assert r.gemm_shape[2] == 16 and r.gemm_shape[0] ** 2 == pytest.approx(
        T.U.size + T.V.size, rel=0.05)
    assert r.flops_per_rhs == 8 * (T.U.size + T.V.size)
    assert r.gbs("forward", 1)[0] == pytest.approx(T.nbytes / r.products[("forward", 1)][0] / 1e9)
    text = btlr.format_rates(r)
    rows = [line.split()[:2] for line in text.splitlines()]
    for kind in ("forward", "adjoint"):
        for s in (1, 4, 16):
            assert [kind, f"s={s}"] in rows
    for part in ("STREAM triad", "dense complex64 GEMM", "adjoint / forward time: s=1",
                 "forward time(s) / time(s=1): s=4", "s=16", "s=16 GFLOP/s as % of the dense",
                 "forward s=1 GB/s as % of the triad's"):
        assert part in text, part
    bare = btlr.tlr_rates(T, sizes=(2,), rounds=1, n_threads=1, triad_elems=None, gemm=False)
    assert bare.triad is None and bare.gemm is None
    assert "triad" not in btlr.format_rates(bare) and "GEMM" not in btlr.format_rates(bare)


def test_bench_cli_tlr_section(capsys):
    assert main(TINY) == 0
    out = capsys.readouterr().out
    assert "TLR-MVM: seismic_slice(12 x 12) 144 x 144 complex64" in out
    rows = [line.split()[:2] for line in out.splitlines()]
    for kind in ("forward", "adjoint"):
        for s in (1, 4, 16, 64):
            assert [kind, f"s={s}"] in rows, (kind, s)
    for part in ("2 interleaved rounds (0.15 s pauses around the GEMM), 1 threads",
                 "dense complex64 GEMM",
                 "adjoint / forward time", "time(s) / time(s=1): s=4", "s=16",
                 "s=64 GFLOP/s as % of the dense GEMM's",
                 "Cache-resident: seismic_slice(8 x 9) 72 x 72", "numpy three-phase",
                 "same result: relative difference", "speedup over numpy"):
        assert part in out, part
    assert "STREAM triad" not in out                    # --no-triad
    assert main([*TINY, "--cache-grid", "none"]) == 0
    assert "Cache-resident" not in capsys.readouterr().out


def test_bench_tlr_script_uses_the_package():
    bench_tlr = pytest.importorskip("benchmarks.bench_tlr")
    assert bench_tlr.tlr_rates is btlr.tlr_rates and bench_tlr.format_rates is btlr.format_rates


@pytest.mark.parametrize("extra, message", [
    (["--nx", "0"], "--nx must be a positive int, got 0"),
    (["--nb", "-1"], "--nb must be a positive int, got -1"),
    (["--tol", "0"], "--tol must be"),
    (["--tol", "1.5"], "--tol must be"),
    (["--rounds", "0"], "--rounds must be a positive int, got 0"),
    (["--cache-grid", "0x5"], "--cache-grid must be a positive int, got 0"),
    (["--threads", "0"], "--threads must be a positive int"),
    (["--workflows"], "--workflows and --tlr are separate sections"),
])
def test_bench_cli_tlr_rejects_bad_options(capsys, extra, message):
    assert main([*TINY, *extra]) == 2
    assert message in capsys.readouterr().err


def test_bench_cli_tlr_rejects_a_malformed_cache_grid(capsys):
    with pytest.raises(SystemExit) as exc:
        main([*TINY, "--cache-grid", "49by51"])
    assert exc.value.code == 2
    assert "expected NXxNY (as 49x51) or none, got '49by51'" in capsys.readouterr().err


@pytest.mark.parametrize("call, exc, match", [
    (lambda T: btlr.run_tlr(nx=0), ValueError, "nx must be a positive int, got 0"),
    (lambda T: btlr.run_tlr(nx=4, ny=-2), ValueError, "ny must be a positive int, got -2"),
    (lambda T: btlr.run_tlr(nx=4, rounds=0), ValueError, "rounds must be a positive int"),
    (lambda T: btlr.run_tlr(nx=4, tol=2.0), ValueError, "tol must be"),
    (lambda T: btlr.run_tlr(nx=4, cache_grid=(3, 4, 5)), ValueError, "cache_grid must be"),
    (lambda T: btlr.run_tlr(nx=4, cache_grid=(3, 0)), ValueError, "cache_grid must be a posi"),
    (lambda T: btlr.run_tlr(nx=4, sizes=()), ValueError, "sizes must name at least one"),
    (lambda T: btlr.tlr_rates(T, sizes=(1, 0)), ValueError, "sizes must be a positive int"),
    (lambda T: btlr.tlr_rates(T, sizes=(1.5,)), TypeError, "sizes must be a positive int"),
    (lambda T: btlr.tlr_rates(T, rounds=0), ValueError, "rounds must be a positive int"),
    (lambda T: btlr.tlr_rates(T, n_threads=0), ValueError, "n_threads must be a positive"),
    (lambda T: btlr.tlr_rates(T, triad_elems=0), ValueError, "triad_elems must be a posi"),
    (lambda T: btlr.tlr_rates(T.toarray()), TypeError, "T must be a TLRMatrix"),
    (lambda T: btlr.compare_numpy(T, inner=0), ValueError, "inner must be a positive int"),
    (lambda T: btlr.interleaved({}, rounds=-1), ValueError, "rounds must be a positive int"),
    (lambda T: btlr.interleaved({"a": print}, 1, pause_after={"b": 1}), ValueError,
     "pause_after names 'b', which is not among the calls"),
    (lambda T: btlr.interleaved({"a": print}, 1, pause_after={"a": -1}), ValueError,
     r"pause_after\['a'\] must be"),
    (lambda T: btlr.tlr_rates(T, settle=-0.1), ValueError, "settle must be"),
    (lambda T: btlr.compare_numpy(T, settle=float("nan")), ValueError, "settle must be"),
    (lambda T: btlr.NumpyThreePhase(T)(np.ones(3)), ValueError, "x must have 131 rows"),
    (lambda T: btlr.NumpyThreePhase(None), TypeError, "T must be a TLRMatrix"),
    (lambda T: btlr.seismic_operator(0), ValueError, "nx must be a positive int, got 0"),
])
def test_functions_reject_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_uneven_tlr(np.float64))


def test_interleaved_pauses_and_rewarms():
    """After a pause the next call gets one untimed call (``warmup=0``); every call one
    warm-up first, and the warm-up ends like a round (round 1's first sample came straight
    after the last call's warm-up, without its pause and re-warm)."""
    seen = []
    t = btlr.interleaved({"a": lambda: seen.append("a"), "b": lambda: seen.append("b")},
                         rounds=2, inner=2, pause_after={"b": 0.0}, warmup=0)
    assert seen == ["a", "b"] + ["a"] * 3 + ["b"] * 2 + ["a"] * 3 + ["b"] * 2
    assert set(t) == {"a", "b"}


def test_interleaved_warms_up_every_call_before_the_next_pause():
    """After a pause the warm-up runs every call timed before the next pause, not only the
    next one (a later call may use threads the first leaves idle), and never the pausing
    call unless it is the next one."""
    seen = []
    calls = {k: (lambda k=k: seen.append(k)) for k in "abcd"}
    btlr.interleaved(calls, rounds=1, pause_after={"c": 0.0, "d": 0.0}, warmup=0)
    # first calls a b c d, then (after d's pause) a b warm, a, b, c timed; c pauses: d
    # warms itself, then its sample.
    assert seen == list("abcd") + list("ab") + list("abc") + list("dd")
    seen.clear()  # no pause after the last call: the stretch runs to the end of the round
    btlr.interleaved(calls, rounds=1, pause_after={"a": 0.0}, warmup=0)
    assert seen == list("abcd") + list("a") + list("bcd") + list("bcd")


def test_interleaved_warms_up_for_the_given_time():
    """After a pause the next call runs untimed for ``warmup`` seconds before its sample."""
    import time
    stamps = []
    btlr.interleaved({"a": lambda: stamps.append(("a", time.perf_counter())),
                      "b": lambda: stamps.append(("b", time.perf_counter()))},
                     rounds=2, pause_after={"b": 0.0}, warmup=0.01)
    a = [t for k, t in stamps if k == "a"]
    # a[0]: the first warm-up, then untimed calls after the warm-up's pause (at least
    # 10 ms of them), round 1's sample, untimed calls after round 1's pause, the sample.
    assert len(a) > 4 and a[-2] - a[1] >= 0.0095
    with pytest.raises(ValueError, match="warmup must be"):
        btlr.interleaved({"a": print}, 1, warmup=-1)

