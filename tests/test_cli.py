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
