"""The package's layers point one way: edges import the core, the core never imports an edge, and no module imports
itself back through others (no cycles).

The graph is read from the source with ``ast``: every ``import`` and ``from … import`` of a contextfold module, at
module level or inside ``if TYPE_CHECKING:``, resolved through the packages' lazy export maps to the module that
defines each name. Imports inside functions are deliberate deferrals (an optional backend, a heavy module): they may
reach an edge only from the composition root, and they may not close a cycle either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "contextfold"
# Edges: they may import the core; the core imports none of them.
EDGES = ("cli", "exporters", "fleet", "importers", "integrations", "providers", "replay", "report", "serve", "stores",
         "testing", "__main__")
# The public API (contextfold/__init__.py) is a lazy facade over everything, edges included (ContextManager and
# RedisBlobStore alike); it imports nothing at run time until a name is asked for.
FACADES = frozenset({"contextfold"})
# The composition root turns names ("redis://…", "openai:gpt-4o-mini", "ariadne") into edge objects, lazily, inside
# functions: the one core module allowed to reach an edge.
COMPOSITION_ROOTS = frozenset({"contextfold.manager._build"})
# Core modules that name an edge only to resolve a provider or exporter the user asked for by name, inside a function
# (the summarizer's "openai:gpt-4o-mini").
LAZY_EDGE_USERS = frozenset({"contextfold.summarize.llm"})


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def lazy_exports(package: str) -> dict[str, str]:
    """The ``_EXPORTS`` map of a package ``__init__`` (name -> absolute module), or {}."""
    tree = ast.parse(MODULES[package].read_text())
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign)
                                                                       else None)
        if isinstance(target, ast.Name) and target.id == "_EXPORTS" and node.value is not None:
            mapping = ast.literal_eval(node.value)
            return {name: resolve(package, True, rel.lstrip("."), len(rel) - len(rel.lstrip(".")))
                    for name, rel in mapping.items()}
    return {}


def resolve(importer: str, importer_is_package: bool, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if importer_is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def targets(importer: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The contextfold modules an import statement loads, names resolved to their defining modules."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == PACKAGE:
                yield alias.name
        return
    base = resolve(importer, is_package(importer), node.module, node.level)
    if base.split(".")[0] != PACKAGE:
        return
    exports = lazy_exports(base) if base in MODULES and is_package(base) else {}
    for alias in node.names:
        if f"{base}.{alias.name}" in MODULES:
            yield f"{base}.{alias.name}"
        elif alias.name in exports:
            yield exports[alias.name]
        elif base in MODULES:
            yield base


def imports(name: str) -> tuple[set[str], set[str]]:
    """(module-level imports, TYPE_CHECKING included; every import, function bodies included) of ``name``."""
    tree = ast.parse(MODULES[name].read_text())
    top: set[str] = set()
    every: set[str] = set()

    def visit(body: list[ast.stmt], at_top: bool) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found = set(targets(name, node))
                every.update(found)
                if at_top:
                    top.update(found)
            elif isinstance(node, ast.If):
                visit(node.body, at_top)
                visit(node.orelse, at_top)
            elif isinstance(node, ast.Try):
                visit(node.body, at_top)
                for handler in node.handlers:
                    visit(handler.body, at_top)
                visit(node.orelse, at_top)
                visit(node.finalbody, at_top)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.For,
                                   ast.While)):
                visit(node.body, False)

    visit(tree.body, True)
    return top - {name}, every - {name}


GRAPH = {name: imports(name) for name in MODULES}


def is_edge(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[1] in EDGES


def test_the_core_never_imports_an_edge() -> None:
    offences = []
    for name, (top, every) in sorted(GRAPH.items()):
        if is_edge(name) or name in COMPOSITION_ROOTS or name in FACADES:
            continue
        reached = every if name not in LAZY_EDGE_USERS else top
        offences += [f"{name} -> {target}" for target in sorted(reached) if is_edge(target)]
    assert offences == []


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def test_no_import_cycles() -> None:
    # A package's __init__ imports nothing at run time (lazy exports), so it is no node of a cycle.
    graph = {name: top for name, (top, _) in GRAPH.items()}
    assert find_cycle(graph) is None


def test_no_import_cycles_through_deferred_imports() -> None:
    # An import inside a function still ties two modules: neither can be understood, tested or moved alone.
    graph = {name: every for name, (_, every) in GRAPH.items() if not is_package(name)}
    assert find_cycle(graph) is None


def test_the_cycle_check_catches_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("package", sorted(n for n in MODULES if is_package(n) and lazy_exports(n)))
def test_every_lazy_export_resolves(package: str) -> None:
    import importlib

    module = importlib.import_module(package)
    assert set(module.__all__) - {"__version__"} == set(lazy_exports(package))
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"


@pytest.mark.parametrize("package", sorted(n for n in MODULES if is_package(n) and lazy_exports(n)))
def test_no_export_shares_its_name_with_a_submodule(package: str) -> None:
    # Once `package.name` is imported as a module, Python sets it on the package and the lazy export of the same
    # name is never looked up again: `from contextfold.manager import reconcile` would give the module.
    clashes = sorted(name for name in lazy_exports(package) if f"{package}.{name}" in MODULES)
    assert clashes == []
