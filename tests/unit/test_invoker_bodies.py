"""The query functions that set no search_path of their own (a call would switch the caller's
path and back) run on the caller's path: every operator in their bodies is pg_catalog's, by
``OPERATOR(pg_catalog.x)``, so none resolves there. Checked in the text of each, as every
design generates it (the planted shadows of tests/security catch only the operators a plan
evaluates: a filter placed after a test that fails never calls its shadow)."""

from __future__ import annotations

import re

import pytest
from psycopg import sql

from simindex.core.design import LshDesign, MankuDesign
from simindex.core.spec import MinHash, SimHash, resolve
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore

# PL/pgSQL syntax spelled with operator characters: not operators.
_SYNTAX = re.compile(
    r"#variable_conflict \w+|:=|::|ERRCODE\s*=|DIAGNOSTICS\s+\w+\s*=|\$\d+|^SET \w+ =",
    re.MULTILINE,
)
_OPERATOR = re.compile(r"[+\-*/<>=~!@#%^&|`?]+")


def unqualified_operators(statement: str) -> list[str]:
    """The operators a statement names without a schema (comments and literals aside)."""
    text = re.sub(r"--[^\n]*", " ", statement)
    text = re.sub(r"'(?:[^']|'')*'", " ", text)
    text = re.sub(r'"(?:[^"]|"")*"', " ", text)
    text = re.sub(r"OPERATOR\(pg_catalog\.[^)\s]+\)", " ", text)
    text = _SYNTAX.sub(" ", text)
    return _OPERATOR.findall(text)


def invoker_functions(statements: list[sql.Composed]) -> list[str]:
    texts = [statement.as_string(None) for statement in statements]
    found = [
        text
        for text in texts
        if "CREATE FUNCTION" in text and not re.search(r"^SET search_path", text, re.MULTILINE)
    ]
    assert found, "no query function without a SET search_path"
    return found


@pytest.mark.parametrize("max_distance", [0, 3, 6])
def test_simhash_query_functions_name_only_pg_catalogs_operators(max_distance: int) -> None:
    spec = resolve(SimHash(max_distance=max_distance, expected_rows=1_000_000))
    assert isinstance(spec.design, MankuDesign)
    store = SimHashStore("simindex", "docs", "bigint", spec.design)
    functions = invoker_functions(store.function_statements())
    assert len(functions) == 2  # near_v1 and near_key_v1
    for text in functions:
        assert unqualified_operators(text) == [], text


def test_minhash_similar_key_names_only_pg_catalogs_operators() -> None:
    spec = resolve(MinHash(0.8))
    assert isinstance(spec.design, LshDesign)
    store = MinHashStore("simindex", "docs", "bigint", spec.design, 128, 0.8, 1792)
    functions = invoker_functions(store.function_statements())
    assert len(functions) == 1  # similar_key_v1
    assert unqualified_operators(functions[0]) == [], functions[0]


def test_an_operator_without_its_schema_is_found() -> None:
    assert unqualified_operators("WHERE t.p1 = q.p1 AND a OPERATOR(pg_catalog.<>) b") == ["="]
    assert unqualified_operators("SELECT x::bigint -- a - b\nFROM t WHERE y <> 'a=b'") == ["<>"]
