"""``wsesparse bench``: the peer comparison, in ``wsesparse.bench.cli`` (was ``wsesparse/bench.py``)."""

from wsesparse.bench.cli import *  # noqa: F401,F403
