"""The examples in the docstrings run, and give what they show.

Every public function's numpydoc docstring carries a runnable example; this runs all of them
(the GPU ones are marked ``+SKIP``: they need a device), module by module, so a stale example
fails here instead of misleading a reader.
"""

import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import wsesparse

# (wsesparse.__main__ runs the command line when imported)
MODULES = sorted(m.name for m in pkgutil.walk_packages(wsesparse.__path__, "wsesparse.")
                 if m.name != "wsesparse.__main__")


# Modules that need an optional package to import at all (their tests skip without it too).
OPTIONAL = {"wsesparse.dask": "dask.array"}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name])
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with np.printoptions(legacy=False):
        for test in finder.find(module, name):  # (globals: a copy of the module's)
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
