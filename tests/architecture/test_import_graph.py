"""No import circles among tokengeo's own modules, and no arrow back up the layers.

The graph is read from the source with ``ast``: every ``import``/``from ... import`` of a
``tokengeo`` module, at module top or inside a function, is an edge; so is every module
name a module hands to ``importlib.import_module`` (a string constant naming a tokengeo
module, or a name under ``f"{__name__}.…"``), which an import statement would not show. A
circle shows up as a strongly connected component of more than one module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tokengeo

ROOT = Path(tokengeo.__file__).parent

KNOWN_CIRCLES: list[set[str]] = []  # none left: every circle is a failure

# The layers, bottom first (DESIGN.md: cli -> experiments -> train/probes/flows -> models ->
# nn): a module may import its own layer's and lower layers' modules, never a higher one's.
LAYERS = [
    {"errors", "_deps", "checks", "io", "hooks", "runlock", "outmarker", "plotting", "lifetime"},
    {"nn", "data"},
    {"models"},
    {"train", "probes", "flows"},
    {"dino", "bench", "view"},
    {"experiments"},
    {"commands"},
    {"cli", "__main__", "<root>"},
]


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


def _imports(module: str, path: Path, modules: set[str], source: str | None = None) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    targets: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # the version string is a constant of the package, not its lazy API
            targets += [f"{base}.{a.name}" for a in node.names if a.name != "__version__"]
    targets += _import_module_names(tree, module)
    return {t for t in (_resolve(n, modules) for n in targets) if t and t != module}


def _import_module_names(tree: ast.AST, module: str) -> list[str]:
    """Module names a module may pass to ``importlib.import_module``: where it calls it,
    every string constant, also under the module's own name (``f"{__name__}.{x}"``)."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        getattr(n.func, "attr", None) == "import_module"
        or getattr(n.func, "id", None) == "import_module")]
    if not calls:
        return []
    strings = [n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    relative = any("__name__" in ast.dump(c) for c in calls)
    names = [s for s in strings if s.startswith("tokengeo.") and " " not in s]
    if relative:
        names += [f"{module}.{s}" for s in strings if s.isidentifier()]
    return names


def import_graph(extra: dict[str, str] | None = None) -> dict[str, set[str]]:
    """``{module: the tokengeo modules it imports}``; ``extra`` maps a module to stand-in
    source (to test the reader)."""
    files = _module_names()
    extra = extra or {}
    return {m: _imports(m, p, set(files), extra.get(m)) for m, p in files.items()}


def layer_of(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "<root>"
    return next(i for i, layer in enumerate(LAYERS) if top in layer)


def arrows_up(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Edges from a module to one of a higher layer."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if layer_of(b) > layer_of(a))


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


def test_the_graph_sees_import_module_by_name():
    """A module loaded by a string is an edge (train.tasks once loaded tokengeo.dino.task
    this way, an arrow back up that the graph did not show)."""
    stand_in = ('import importlib\n'
                'BUILTIN = ("tokengeo.dino.task",)\n'
                'def load():\n    importlib.import_module(BUILTIN[0])\n')
    g = import_graph({"tokengeo.train.tasks": stand_in})
    assert "tokengeo.dino.task" in g["tokengeo.train.tasks"]
    assert ("tokengeo.train.tasks", "tokengeo.dino.task") in arrows_up(g)
    real = import_graph()
    assert "tokengeo.commands.train" in real["tokengeo.cli"]  # cli's command table
    assert "tokengeo.probes.similarity.run" in real["tokengeo.probes.similarity"]  # __name__


def test_every_module_has_a_layer():
    for module in import_graph():
        layer_of(module)  # StopIteration names a package missing from LAYERS


def test_no_arrow_back_up_the_layers():
    assert arrows_up(import_graph()) == []


# ---- models/ and its Hugging Face bridge, models/hf/ -----------------------------------

HF = "tokengeo.models.hf"
# inside models/, only the package door (it registers the hf:<source> names) and the name
# resolver (whose Hugging Face part is models/hf/names.py) reach the bridge
HF_DOORS = {"tokengeo.models", "tokengeo.models.names"}


def _in_hf(module: str) -> bool:
    return module == HF or module.startswith(HF + ".")


def hf_imports_from_models(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Edges from a module of models/ outside models/hf/ (and not a door) into models/hf/."""
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if a.startswith("tokengeo.models") and not _in_hf(a) and _in_hf(b)
                  and a not in HF_DOORS)


def test_nothing_in_models_imports_models_hf_except_the_resolver():
    graph = import_graph()
    assert hf_imports_from_models(graph) == []
    assert any(_in_hf(m) for m in graph["tokengeo.models.names"])  # the resolver does
    stand_in = import_graph({"tokengeo.models.gpt": "from tokengeo.models.hf import patch\n"})
    assert hf_imports_from_models(stand_in) == [("tokengeo.models.gpt", f"{HF}.patch")]


def test_the_hf_bridge_imports_no_family_of_tokengeo_models():
    """models/hf/ adapts Hugging Face models; it needs the registry, the resolver and nn/,
    never one of tokengeo's own families."""
    families = {"tokengeo.models.gpt", "tokengeo.models.vit", "tokengeo.models.encoder",
                "tokengeo.models.ltransformer", "tokengeo.models.transformer",
                "tokengeo.models.zoo"}
    graph = import_graph()
    assert sorted((a, b) for a, t in graph.items() if _in_hf(a) for b in t & families) == []


def test_models_lists_only_tokengeos_own_modules():
    """``ls models/`` shows tokengeo's families; every Hugging Face module is under hf/."""
    folder = ROOT / "models"
    assert not [p.name for p in folder.glob("*.py") if p.stem.startswith(("hf", "pretrained",
                                                                          "gguf", "mpnet"))]
