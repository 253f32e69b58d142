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
