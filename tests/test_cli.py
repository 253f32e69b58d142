"""``wsesparse`` (wsesparse/cli.py): the dispatch to the subcommands. Each subcommand's own
tests: tests/wafer/test_cli.py (simulate), tests/test_curve.py, tests/test_demo.py,
tests/bench/test_cli.py."""

import pytest

from wsesparse.cli import main


def test_no_or_unknown_subcommand(capsys):
    for argv in ([], ["frobnicate"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    assert "usage: wsesparse" in capsys.readouterr().err


def test_a_reader_that_goes_away_gets_no_error_message():
    """``wsesparse simulate ... | head -1`` printed "wsesparse simulate: error: [Errno 32]
    Broken pipe" on stderr."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # (the writes then fail inside main)
    p = subprocess.Popen([sys.executable, "-m", "wsesparse", "simulate", "--shape", "64x64",
                          "--tokens", "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env)
    p.stdout.close()  # the reader is gone before the first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 1 and err == "", err
