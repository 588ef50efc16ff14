"""Rules the Python package keeps as a whole: no import circles.

An import circle is modules that import each other, directly or through others, counting imports
inside functions too (a local import hides a circle from the interpreter, not from the reader).
``from pkg import sub`` where ``sub`` is a module is an import of ``pkg.sub``; ``from pkg import
name`` is an import of ``pkg`` itself. A module's implicit import of its own package is not
counted."""

from __future__ import annotations

import ast
import pathlib

PYTHON = pathlib.Path(__file__).resolve().parents[1]


def modules(root: pathlib.Path) -> dict[str, tuple[pathlib.Path, bool]]:
    """Every module of the ``ksmith`` package under ``root``: name -> (file, is a package)."""
    found = {}
    for path in sorted((root / "ksmith").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """Which ``ksmith`` modules each ``ksmith`` module imports."""
    mods = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, (path, package) in mods.items():
        here = name if package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names]
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other (strongly connected, more than one), each as
    one cycle through the group, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_cycle(graph, group) for group in groups)


def _cycle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """One cycle through a strongly connected group, from its first module back to it."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{sorted(group)} is not strongly connected")


def test_the_package_has_no_import_circles():
    graph = import_graph(PYTHON)
    assert "ksmith.probe.sizing" in graph and "ksmith.probe.loading" in graph["ksmith.probe.sizing"]
    found = circles(graph)
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_circles_are_found_through_local_and_relative_imports(tmp_path):
    pkg = tmp_path / "ksmith" / "p"
    pkg.mkdir(parents=True)
    (tmp_path / "ksmith" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n    return g()\n")
    (pkg / "b.py").write_text("from ..p import c\n")
    (pkg / "c.py").write_text("import ksmith.p.a\n")
    (pkg / "d.py").write_text("from . import c\nfrom ksmith.p import f\n")
    graph = import_graph(tmp_path)
    assert graph["ksmith.p.d"] == {"ksmith.p.c", "ksmith.p"}
    assert circles(graph) == [["ksmith.p.a", "ksmith.p.b", "ksmith.p.c", "ksmith.p.a"]]
    (pkg / "c.py").write_text("X = 1\n")
    assert circles(import_graph(tmp_path)) == []
