"""``wsesparse.bench.bandwidth``: the memory-bandwidth triads."""

import pytest


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
