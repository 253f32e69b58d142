"""Sphinx configuration: the Markdown pages of docs/, an API reference from the
numpydoc docstrings, and the jupytext notebooks of notebooks/ executed (small).

Build: ``pip install -e '.[docs]' && sphinx-build -W --keep-going -b html docs docs/_build/html``
"""

import os
from pathlib import Path

import jupytext

import wsesparse

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

project = "wsesparse"
author = "wsesparse developers"
copyright = "wsesparse developers"
release = version = wsesparse.__version__

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_nb",  # Markdown (MyST) and executed notebooks
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
html_theme = "alabaster"
html_title = f"wsesparse {release}"

# -- Markdown ------------------------------------------------------------------
myst_heading_anchors = 3          # [text](page.md#a-heading) links resolve


# benchmarks/README.md is on the site as benchmarks.md (an include): the pages' links to it,
# right on GitHub, point there in the site.
def _link_benchmarks(app, docname, source):
    source[0] = source[0].replace("](../benchmarks/README.md", "](benchmarks.md")


def setup(app):
    app.connect("source-read", _link_benchmarks)


# -- API reference ---------------------------------------------------------------
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"        # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# -- Notebooks -------------------------------------------------------------------
# notebooks/*.py (jupytext percent format, no outputs) become docs/_notebooks/*.ipynb,
# executed by myst-nb at their small size (WSESPARSE_SMALL=1, as tests/test_notebooks.py
# runs them) in the inline matplotlib backend; the PNG files they save go to
# docs/_build/notebook_figures.
NOTEBOOKS = DOCS / "_notebooks"
NOTEBOOKS.mkdir(exist_ok=True)
for src in sorted((ROOT / "notebooks").glob("*.py")):
    text = jupytext.writes(jupytext.read(src), fmt="ipynb")
    dst = NOTEBOOKS / (src.stem + ".ipynb")
    if not dst.exists() or dst.read_text() != text:   # unchanged: Sphinx keeps its build
        dst.write_text(text)
for stale in NOTEBOOKS.glob("*.ipynb"):
    if not (ROOT / "notebooks" / (stale.stem + ".py")).exists():
        stale.unlink()

os.environ["WSESPARSE_SMALL"] = "1"
os.environ["WSESPARSE_FIGURES"] = str(DOCS / "_build" / "notebook_figures")
os.environ.pop("MPLBACKEND", None)
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True   # a cell that raises fails the build
nb_execution_show_tb = True
nb_merge_streams = True
