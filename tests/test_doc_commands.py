"""The command lines the README and the docs show name commands and options that exist.

Every ``wsesparse <command> ...`` and ``python benchmarks/<script>.py ...`` in a ``bash``
block or an inline code span of the README, ``docs/*.md`` and ``benchmarks/README.md``: its
command answers ``--help``, and each ``--option`` it uses is in that help. The commands do
not run (some take an hour); their own tests run them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "benchmarks" / "README.md"]
BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`((?:wsesparse|python benchmarks/\w+\.py)\b[^`]*)`")


def _program(line: str) -> tuple[tuple[str, ...], list[str]] | None:
    """(the arguments of ``python`` that run the command, the words after it), or None for
    a line that runs neither (pip, pytest, asv...) or a placeholder (``wsesparse <cmd>``)."""
    words = line.split()
    for i, w in enumerate(words):
        if re.fullmatch(r"benchmarks/\w+\.py", w):
            return (w,), words[i + 1:]
        if w in ("wsesparse", ".venv/bin/wsesparse") and i + 1 < len(words):
            if not re.fullmatch(r"[a-z][a-z-]*", words[i + 1]):
                return None
            return ("-m", "wsesparse", words[i + 1]), words[i + 2:]
    return None


def _commands() -> list:
    found = {}
    for page in PAGES:
        text = page.read_text()
        lines = [ln for m in BASH.finditer(text) for ln in m.group(1).splitlines()]
        lines += [m.group(1) for m in INLINE.finditer(text)]
        for line in lines:
            line = re.split(r"\s#\s|\s{2,}#", line)[0].strip()  # (comments)
            parsed = _program(line)
            if parsed:
                found.setdefault(line, (page.relative_to(ROOT).as_posix(), *parsed))
    return [pytest.param(page, prog, words, id=f"{page}: {line}"[:120])
            for line, (page, prog, words) in sorted(found.items())]


COMMANDS = _commands()


@lru_cache(maxsize=None)
def _help(prog: tuple[str, ...]) -> str:
    res = subprocess.run([sys.executable, *prog, "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, f"{' '.join(prog)} --help failed: {res.stderr[-1500:]}"
    return res.stdout


def test_the_pages_show_commands():
    """The pages hold both kinds of command (a changed pattern would leave nothing to check)."""
    progs = {p.values[1] for p in COMMANDS}
    assert ("-m", "wsesparse", "bench") in progs and ("-m", "wsesparse", "train") in progs
    assert sum(p[0].startswith("benchmarks/") for p in progs) >= 5


@pytest.mark.parametrize("page, prog, words", COMMANDS)
def test_documented_options_exist(page, prog, words):
    text = _help(prog)
    for word in words:
        if word.startswith("--"):
            option = word.split("=")[0]
            assert re.search(re.escape(option) + r"(?![\w-])", text), (
                f"{page}: {' '.join(prog)} has no option {option}")
