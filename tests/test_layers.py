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


def _is_module(dotted: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, AttributeError, ValueError):  # a parent that is not a package
        return False


def _private_names_used(name: str, path: Path, mods: dict[str, Path]) -> list[str]:
    """``from M import _x`` and ``M._x`` in module ``name``, M another module of the
    package and ``_x`` a name in it (private submodules such as ``_thresholds`` are fine)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("wsesparse"):
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                if full in mods or _is_module(full):
                    aliases[a.asname or a.name] = full
                elif a.name.startswith("_") and not a.name.startswith("__") and base != name:
                    found.append(f"from {base} import {a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name.startswith("wsesparse"):
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            target = aliases[node.value.id]
            if target != name and not _is_module(f"{target}.{node.attr}"):
                found.append(f"{target}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    """A helper two modules need is public in the module that owns it (``plan_gemm`` in
    wafer.estimate, ``kernel_dtype`` in tlr._validate); tests may still reach in."""
    mods = _modules()
    used = {name: _private_names_used(name, path, mods) for name, path in mods.items()}
    assert {name: u for name, u in used.items() if u} == {}


def test_the_private_name_check_finds_them(tmp_path):
    mods = _modules()
    src = tmp_path / "m.py"
    src.write_text("from wsesparse.wafer.estimate import as_csr_pattern, _hidden\n"
                   "from wsesparse import _thresholds as th\n"
                   "from wsesparse.wafer import estimate\n"
                   "x = th.MIN_WORK_PER_THREAD, estimate._other\n")
    assert _private_names_used("wsesparse.m", src, mods) == [
        "from wsesparse.wafer.estimate import _hidden", "wsesparse.wafer.estimate._other"]
