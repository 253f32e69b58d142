"""``wsesparse demo`` (wsesparse/demo.py): its smallest sizes run; every bad value exits with
code 2 and one ``wsesparse demo: error: ...`` line naming the option, before the wafer part.

Before the fixes ``demo --rows 0`` raised an IndexError. Catalogue: docs/adversarial_inputs.md.
"""

import re

import pytest

from wsesparse.cli import main


def run(argv, capsys):
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_demo_smallest_sizes(capsys):
    rc, out, err = run(["demo", "--no-wafer", "--rows", "1", "--cols", "1", "--tokens", "1",
                        "--repeats", "1", "--sparsity", "0.0"], capsys)
    assert rc == 0 and "GFLOP/s" in out


@pytest.mark.parametrize("argv,msg", [
    (["--rows", "0"], "--rows must be a positive int, got 0"),
    (["--rows", "-3"], "--rows must be a positive int, got -3"),
    (["--cols", "0"], "--cols must be a positive int"),
    (["--tokens", "0"], "--tokens must be a positive int"),
    (["--repeats", "0"], "--repeats must be a positive int"),
    (["--repeats", "-1"], "--repeats must be a positive int"),
    (["--sparsity", "1.0"], r"--sparsity must be a number in \[0, 1\), got 1.0"),
    (["--sparsity", "0.5", "nan"], r"--sparsity must be a number in \[0, 1\), got nan"),
])
def test_demo_bad_values(capsys, argv, msg):
    """Checked before the (slow) wafer part: --no-wafer is not needed for a quick error."""
    rc, out, err = run(["demo", "--rows", "8", "--cols", "8", "--tokens", "2", "--repeats",
                        "1"] + argv, capsys)
    assert rc == 2 and out == "" and err.startswith("wsesparse demo: error: ")
    assert re.search(msg, err), err


def test_demo_functions_check_their_arguments_and_draw_complex_values():
    """(IndexError, numpy's messages, a 'best of 0' timing; complex runs used real data, so
    their accuracy check could not see the cross terms)"""
    import numpy as np

    from wsesparse.demo import cpu_comparison, pruned_weights
    for call, word in ((lambda: pruned_weights(0, 5, 0.5), "n_out"),
                       (lambda: pruned_weights(5, 5, 0.5, seed=-1), "seed"),
                       (lambda: cpu_comparison(32, 32, tokens=0, sparsities=(0.5,)), "tokens"),
                       (lambda: cpu_comparison(32, 32, tokens=2, repeats=0), "repeats")):
        with pytest.raises(ValueError, match=word):
            call()
    W = pruned_weights(20, 10, 0.5, dtype=np.complex64)
    assert np.abs(W.data.imag).min() > 0
    row = cpu_comparison(64, 48, tokens=5, sparsities=(0.5,), dtype=np.complex64, repeats=1)[0]
    assert 0 < row["max_rel_err"] < 1e-4
