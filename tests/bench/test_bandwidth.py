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


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("nbytes", [1, 8, 1000, 1 << 20])
def test_read_pass_sums_the_whole_buffer(n_threads, nbytes):
    """The cache read of ``bench --tlr`` reads every word (its sum is checked), on any
    number of threads; its byte count is whole 8-byte words, at least one."""
    from wsesparse.bench import bandwidth
    pytest.importorskip("wsesparse._kernels._tlrmvm")
    step, check, n = bandwidth.read_kernel_pass(n_threads, nbytes)
    assert n == max(nbytes // 8, 1) * 8
    with pytest.raises(AssertionError):
        check()  # nothing read yet
    step()
    check()


def test_stream_read_sum_wraps_like_uint64():
    _tlrmvm = pytest.importorskip("wsesparse._kernels._tlrmvm")
    import numpy as np
    a = np.full(5, 2**63 + 1, dtype=np.uint64)
    assert _tlrmvm.stream_read(a, 2) == int(a.sum(dtype=np.uint64)) == (5 * (2**63 + 1)) % 2**64
    assert _tlrmvm.stream_read(a[:0], 2) == 0


@pytest.mark.parametrize("args, exc, match", [
    ((0, 1000), ValueError, "n_threads must be a positive int, got 0"),
    ((2, 0), ValueError, "nbytes must be a positive int, got 0"),
    ((2, 10.5), TypeError, "nbytes must be a positive int, got 10.5"),
    ((None, 8), TypeError, "n_threads must be a positive int"),
])
def test_read_pass_rejects_bad_arguments(args, exc, match):
    from wsesparse.bench import bandwidth
    with pytest.raises(exc, match=match):
        bandwidth.read_kernel_pass(*args)
