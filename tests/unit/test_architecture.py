"""The house keeps its layers: imports only go down, no circles (module size is a report:
``tests/conftest.py`` lists the long modules after a run, and a module is cut by concept).

Layers, bottom up: ``simindex.errors``; ``simindex.core`` (pure computation, no driver);
``simindex.db`` (everything that speaks SQL); ``simindex.ops`` (the operations); the faces at
the top of the package (the Index facade, CLI, SQLAlchemy, Alembic, demo, documented aliases).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "simindex"
LAYERS = {"simindex.errors": 0, "simindex.core": 1, "simindex.db": 2, "simindex.ops": 3}
FACES = 4
DRIVERS = ("psycopg", "sqlalchemy", "alembic")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    for prefix, level in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return level
    return FACES


def imports(module: str) -> set[str]:
    """Every module ``module`` imports, anywhere in it (TYPE_CHECKING and function bodies too)."""
    path = modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in modules() else base)
    return found


def internal_imports(module: str) -> set[str]:
    return {name for name in imports(module) if name in modules() and name != module}


def test_the_layers_are_packages() -> None:
    for prefix in LAYERS:
        assert prefix in modules(), prefix


def test_imports_only_go_down() -> None:
    upward = [
        f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
        for module in modules()
        for target in internal_imports(module)
        if layer(target) > layer(module)
    ]
    assert upward == []


def test_the_core_imports_no_database_driver() -> None:
    leaks = [
        f"{module} imports {name}"
        for module in modules()
        if layer(module) <= LAYERS["simindex.core"]
        for name in imports(module)
        if name.split(".")[0] in DRIVERS
    ]
    assert leaks == []


def test_operations_never_take_the_facade() -> None:
    leaks = [
        f"{module} imports {target}"
        for module in modules()
        if layer(module) < FACES
        for target in internal_imports(module)
        if target == "simindex.index"
    ]
    assert leaks == []


def test_no_import_circle() -> None:
    graph = {module: internal_imports(module) for module in modules()}
    # A package imported by its own submodule is how Python resolves any submodule import,
    # not a circle between rooms: ignore edges into a package from inside it.
    for module, targets in graph.items():
        graph[module] = {t for t in targets if not module.startswith(t + ".")}
    circles = _cycles(graph)
    assert circles == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checks_see_a_circle_and_an_upward_import() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert layer("simindex.core.text") < layer("simindex.db.source") < layer("simindex.index")
