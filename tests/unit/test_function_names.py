"""No function an index makes can take the name of one simindex's baseline installs.

An index's functions are named ``<index name>_<suffix>`` in simindex's schema; a static
function whose name has that form for a valid index name would be overloaded (or replaced) by
the index's, and every statement naming it without its arguments would fail as ambiguous
(an index named ``minhash`` once made ``minhash_pairs_v1(threshold)`` beside the static
``minhash_pairs_v1(side, key_type, num_bands, threshold)``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from simindex.db.catalog import _INDEX_NAME

ROOT = Path(__file__).resolve().parents[2]
# f"{self.name}_near_v1", f"{name}_visible_v1", ...: what an index's function names end with.
_PER_INDEX = re.compile(r"\{(?:self\.)?name\}(_[a-z_]+_v1)$")


def static_functions() -> list[str]:
    tree = ast.parse((ROOT / "migrations/versions/0001_baseline.py").read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "FUNCTIONS" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            return [name for name, *_ in value]
    raise AssertionError("no FUNCTIONS in the baseline revision")


def per_index_suffixes() -> set[str]:
    found = set()
    for path in (ROOT / "simindex").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.JoinedStr):
                text = "".join(
                    str(part.value)
                    if isinstance(part, ast.Constant)
                    else "{" + ast.unparse(part.value) + "}"
                    for part in node.values
                    if isinstance(part, ast.Constant | ast.FormattedValue)
                )
                match = _PER_INDEX.search(text)
                if match:
                    found.add(match.group(1))
    return found


def test_the_suffixes_are_found() -> None:
    assert {"_near_v1", "_pairs_v1", "_similar_v1", "_similar_key_v1"} <= per_index_suffixes()


def test_no_index_name_makes_a_static_function_name() -> None:
    clashes = [
        (function, function[: -len(suffix)])
        for function in static_functions()
        for suffix in per_index_suffixes()
        if function.endswith(suffix) and _INDEX_NAME.fullmatch(function[: -len(suffix)])
    ]
    assert clashes == []
