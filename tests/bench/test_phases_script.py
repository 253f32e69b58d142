"""benchmarks/phases.py: every phase of a one-shot product timed, the table printed."""

import numpy as np
import pytest
import scipy.sparse as sp

from benchmarks import phases


@pytest.mark.parametrize("N", [1, 8, 64])
def test_phase_times_covers_every_phase(N):
    A = sp.random(400, 300, density=0.05, format="csr", random_state=0, dtype=np.float32)
    X = np.ones((300, N), np.float32) if N > 1 else np.ones(300, np.float32)
    t = phases.phase_times(A, X, 1, rounds=2)
    assert sorted(t) == sorted(phases.PHASES)
    assert all(t[k] > 0 for k in phases.PHASES if k != "glue")
    assert t["glue"] == pytest.approx(t["call"] - t["indptr"] - t["alloc"] - t["kernel"])


def test_phase_times_refuses_a_call_off_the_sparse_path(monkeypatch):
    A = sp.random(200, 200, density=0.05, format="csr", random_state=0)
    real = phases.sparse_matmul

    def other_path(S, X, **kw):  # (as the dense dispatch would: other bits)
        Y = real(S, X, **kw)
        return Y if isinstance(S, phases.CSR) else Y * (1 + 1e-12)

    monkeypatch.setattr(phases, "sparse_matmul", other_path)
    with pytest.raises(ValueError, match="dense dispatch"):
        phases.phase_times(A, np.ones((200, 8)), 1, rounds=1)


def test_main_prints_a_row_per_point_and_thread_count(capsys):
    assert phases.main(["--sizes", "256", "--tokens", "1,8", "--densities", "0.05",
                     "--threads", "1,2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].split()[:4] == ["M=K", "N", "density", "thr"]
    assert len(out) == 3 + 2 * 2
    # thr: the threads the product ran on; a 256^2 product at density 0.05 is below the
    # small-product rule's two-thread work, so "2" asked ran on one (the column said 2).
    from wsesparse import _thresholds as th
    assert int(0.1 * 256 * 256) * 8 + 256 < 2 * th.MIN_WORK_PER_THREAD  # (that premise)
    assert [row.split()[3] for row in out[3:]] == ["1"] * 4


def test_main_rejects_bad_options(capsys):
    for bad in (["--rounds", "0"], ["--threads", "0"]):
        with pytest.raises(SystemExit) as exc:
            phases.main(bad)
        assert exc.value.code == 2
