"""Every named SQL block (``-- name:`` in ``simindex/db/sql/*.sql``) is used by the code, and
every block the code names exists: no dead block, no missing one.

A block is used where the code calls ``statement("name", ...)`` with the name written out. The
few calls that compute the name are listed in :data:`COMPUTED`, each with the strings it is
made from; a new computed call fails the test until it is listed there. The migrations' ``.sql``
files are held to the same, by their ``.py``.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from simindex.db.statements import _blocks

PACKAGE = Path(__file__).resolve().parents[2] / "simindex"
MIGRATIONS = PACKAGE.parent / "migrations" / "versions"

# module -> (the pattern of the names it computes, the strings that fill the pattern)
COMPUTED: dict[str, tuple[str, frozenset[str]]] = {
    # grant(): the blocks of a right, in a list
    "db/privileges.py": (
        "{}",
        frozenset({"grant_reader", "grant_writer", "grant_worker_tables", "grant_worker"}),
    ),
    # Triggers._event_statements: run(block), by name or as EXECUTE format(...)
    "db/triggers.py": (
        "{}",
        frozenset(
            {
                "sync_trigger_insert",
                "sync_trigger_insert_wait",
                "sync_trigger_insert_replaced",
                "sync_trigger_update",
                "sync_trigger_update_wait",
                "sync_trigger_update_replaced",
            }
        ),
    ),
    # clusters: the steps after the edges, statement(f"clusters_{block}")
    "ops/clusters.py": (
        "clusters_{}",
        frozenset(
            {"nodes", "nodes_index", "links", "labels", "leader_labels", "labels_key", "analyze"}
        ),
    ),
}


@cache
def calls() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Names written out in ``statement(...)`` calls, and the calls that compute the name, by
    module (``where`` as ``module:line``)."""
    written: dict[str, list[str]] = {}
    computed: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            function = node.func
            called = function.id if isinstance(function, ast.Name) else None
            if isinstance(function, ast.Attribute):
                called = function.attr
            if called != "statement":
                continue
            first = node.args[0]
            where = f"{module}:{node.lineno}"
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                written.setdefault(first.value, []).append(where)
            else:
                computed.setdefault(module, []).append(where)
    return written, computed


def strings_in(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def computed_names() -> set[str]:
    return {pattern.format(part) for pattern, parts in COMPUTED.values() for part in parts}


def test_every_block_named_in_code_exists() -> None:
    written, _ = calls()
    missing = {name: where for name, where in written.items() if name not in _blocks()}
    assert not missing, f"statement() names blocks no .sql file defines: {missing}"
    unknown = sorted(computed_names() - set(_blocks()))
    assert not unknown, f"COMPUTED lists blocks no .sql file defines: {unknown}"


def test_computed_names_are_all_listed() -> None:
    _, computed = calls()
    assert set(computed) == set(COMPUTED), (
        f"statement() calls with a computed name: {computed}; list each module in COMPUTED "
        "with the names it makes"
    )
    for module, (_, parts) in COMPUTED.items():
        absent = sorted(parts - strings_in(module))
        assert not absent, f"{module} no longer holds {absent}: COMPUTED is stale"


def test_no_dead_block() -> None:
    written, _ = calls()
    dead = sorted(set(_blocks()) - set(written) - computed_names())
    assert not dead, f"named blocks no code runs (delete them): {dead}"


def test_every_named_block_is_parsed() -> None:
    """A ``-- name:`` line the loader's pattern missed would hide a block from both checks."""
    lines = [
        line
        for path in sorted((PACKAGE / "db" / "sql").glob("*.sql"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("-- name:")
    ]
    assert len(lines) == len(_blocks())


def test_the_migrations_blocks_are_all_used() -> None:
    """A migration's ``.sql`` beside its ``.py``: every block named in the ``.py``, every
    ``blocks["name"]`` the ``.py`` reads defined in the ``.sql``."""
    migrations = sorted(MIGRATIONS.glob("*.sql"))
    assert migrations
    for path in migrations:
        names = set(re.findall(r"^-- name: (\S+)", path.read_text(encoding="utf-8"), re.M))
        tree = ast.parse(path.with_suffix(".py").read_text(encoding="utf-8"))
        strings = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        read = {
            node.slice.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        }
        assert not names - strings, f"{path.name}: blocks no code names: {names - strings}"
        assert not read - names, f"{path.name}: blocks read but not defined: {read - names}"
