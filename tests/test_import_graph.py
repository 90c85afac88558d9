"""No import circles among tokengeo's own modules (issue #13, item 1).

The graph is read from the source with ``ast``: every ``import``/``from ... import`` of a
``tokengeo`` module, at module top or inside a function, is an edge. A circle shows up as
a strongly connected component of more than one module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tokengeo

ROOT = Path(tokengeo.__file__).parent

# Circles other branches are removing in parallel (issue #13). Once they are merged, empty
# this list: test_no_import_circles_in_the_package then guards the whole package.
KNOWN_CIRCLES: list[set[str]] = []  # none left: every circle is a failure


def _module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(name: str, modules: set[str]) -> str | None:
    """The longest prefix of ``name`` that is a tokengeo module."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in modules:
            return candidate
    return None


def _imports(module: str, path: Path, modules: set[str]) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found |= {t for t in (_resolve(n, modules) for n in targets) if t and t != module}
    return found


def import_graph() -> dict[str, set[str]]:
    files = _module_names()
    return {m: _imports(m, p, set(files)) for m, p in files.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _known(component: set[str]) -> bool:
    """Every module of ``component`` belongs to (a package named in) one known circle."""
    def inside(m: str, allowed: set[str]) -> bool:
        return any(m == a or m.startswith(a + ".") for a in allowed)

    return any(all(inside(m, allowed) for m in component) for allowed in KNOWN_CIRCLES)


def test_the_graph_sees_function_level_and_relative_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [{"a", "b", "c"}]
    g = import_graph()
    assert "tokengeo.probes.capture" in g["tokengeo.probes.similarity.pairs"]
    assert "tokengeo.probes.similarity.plots" in g["tokengeo.commands.similarity"]  # in a def


def test_probes_hooks_io_and_bench_are_in_no_circle():
    mine = ("tokengeo.probes", "tokengeo.hooks", "tokengeo.io", "tokengeo.bench")
    bad = [c for c in circles(import_graph())
           if any(m == p or m.startswith(p + ".") for m in c for p in mine)]
    assert bad == []


def test_no_import_circles_in_the_package():
    unknown = [sorted(c) for c in circles(import_graph()) if not _known(c)]
    assert unknown == []
