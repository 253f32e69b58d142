"""The Python examples of the README and of docs/*.md run as they are written.

Each fenced ``python`` block runs on its own, in a fresh namespace and an empty working
directory (examples that save files write there), so a renamed function, a changed default
or a stale argument in an example fails here instead of in a user's first session. Blocks
that import cupy need a CUDA device (marked ``gpu``, skipped without one, like
tests/gpu/); the Dask example starts a real ``LocalCluster``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_helpers import cupy_on_a_device

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
CUPY = re.compile(r"^\s*import cupy", re.M)  # (a block that needs a CUDA device)


def _blocks() -> list:
    params = []
    for page in PAGES:
        text = page.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            name = f"{page.relative_to(ROOT)}:{line}"
            code = m.group(1)
            marks = [pytest.mark.gpu] if CUPY.search(code) else []
            params.append(pytest.param(name, code, id=name, marks=marks))
    return params


BLOCKS = _blocks()


def test_the_pages_have_examples():
    """The README and the docs pages hold examples at all (a changed fence would leave this
    module with nothing to run)."""
    names = [p.values[0] for p in BLOCKS]
    assert sum(n.startswith("README.md") for n in names) >= 2
    assert any(n.startswith("docs/dask.md") for n in names)
    assert len(names) >= 8


@pytest.mark.parametrize("name, code", BLOCKS)
def test_example_runs(name, code, tmp_path, monkeypatch):
    if CUPY.search(code):
        cupy_on_a_device()
    if "distributed" in code:
        pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WSESPARSE_SMALL", "1")
    exec(compile(code, name, "exec"), {"__name__": "__main__"})
