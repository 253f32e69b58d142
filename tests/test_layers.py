"""The package's layering: no module imports (at any depth, lazily or not) a module
that imports it back, so the walk from ``sparse_matmul`` down to a kernel goes one way."""

import ast
from pathlib import Path

import wsesparse

ROOT = Path(wsesparse.__file__).parent


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Modules of the package that ``name`` imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in mods:  # a.b.c where only a.b is a module
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def test_the_import_graph_finds_edges():
    """The checker itself: the edges this test relies on are seen."""
    graph = _graph()
    assert "wsesparse.csr" in graph["wsesparse.matmul"]
    assert "wsesparse._drivers" in graph["wsesparse.csr"]
    assert "wsesparse._hardware" in graph["wsesparse._drivers"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    # (Importing a name through the package's __init__, which imports everything,
    # would show up here as a circle too.)
    assert _cycles(_graph()) == []


def test_operand_and_drivers_stay_below_the_dispatch():
    graph = _graph()
    below = {"wsesparse.csr", "wsesparse._drivers", "wsesparse._hardware",
             "wsesparse._thresholds", "wsesparse._threads"}
    for name in below:
        assert "wsesparse.matmul" not in graph[name], name
    assert graph["wsesparse._thresholds"] == set()  # measured numbers read nothing
