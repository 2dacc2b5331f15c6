"""The Alembic operations' arguments, reverse() and registration (no database)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic.operations import MigrateOperation, Operations

from simindex.alembic import CreateSimindexOp, DropSimindexOp, method_from
from simindex.core.minhash import Scheme
from simindex.core.spec import MinHash, SimHash
from simindex.core.text import Shingling


def test_each_is_the_others_reverse() -> None:
    create = CreateSimindexOp(
        "docs_body", "documents", "body", max_distance=2, key="id", key_type="bigint", schema="app"
    )
    drop = create.reverse()
    assert isinstance(drop, DropSimindexOp)
    assert isinstance(drop, MigrateOperation)
    assert (drop.name, drop.table, drop.column, drop.method) == (
        "docs_body",
        "documents",
        "body",
        SimHash(max_distance=2),
    )
    assert (drop.key, drop.key_type, drop.schema, drop.index_schema) == (
        "id",
        "bigint",
        "app",
        "simindex",
    )
    again = drop.reverse()
    assert isinstance(again, CreateSimindexOp)
    assert again == create
    assert again != drop


def test_keyword_options_map_onto_the_methods() -> None:
    shingling = Shingling(unit="char", size=5)
    create = CreateSimindexOp(
        "notes",
        "notes",
        "body",
        method="minhash",
        threshold=0.6,
        num_perm=64,
        scheme="one_permutation",
        seed=3,
        shingling=shingling,
    )
    assert create.method == MinHash(
        threshold=0.6, num_perm=64, scheme=Scheme.ONE_PERMUTATION, seed=3, shingling=shingling
    )
    assert CreateSimindexOp("d", "t", "c").method == SimHash()
    learning = CreateSimindexOp("d", "t", "c", idf=True, ignore_common=0.01)
    assert learning.method == SimHash(idf=True, ignore_common=0.01)
    given = MinHash(threshold=0.7)
    assert CreateSimindexOp("d", "t", "c", method=given).method is given


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"method": "lsh"}, ValueError, "method must be 'simhash', 'minhash'"),
        ({"threshold": 0.5}, TypeError, "threshold is not an option of method='simhash'"),
        (
            {"method": "minhash", "max_distance": 3, "top_n": 8},
            TypeError,
            "max_distance, top_n are not options of method='minhash'",
        ),
        ({"method": SimHash(), "max_distance": 2}, TypeError, "not both"),
        ({"method": "minhash", "threshold": 1.5}, ValueError, "threshold"),
        ({"method": "minhash", "idf": True}, TypeError, "idf is not an option"),
        ({"ignore_common": 2}, ValueError, "ignore_common must be a share"),
        ({"max_distance": -1}, ValueError, "max_distance must be from 0 to 63"),
        ({"key_type": "bigint; DROP TABLE x"}, ValueError, "key_type must name a SQL type"),
        ({"key": ""}, TypeError, "key must be a non-empty str"),
        ({"index_schema": ""}, ValueError, "schema must be a name"),
    ],
)
def test_bad_arguments_are_refused_when_the_operation_is_made(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        CreateSimindexOp("docs", "documents", "body", **arguments)  # type: ignore[arg-type]


def test_bad_names() -> None:
    with pytest.raises(ValueError, match="index name"):
        CreateSimindexOp("Docs Body", "documents", "body")
    with pytest.raises(TypeError, match="table must be a non-empty str"):
        CreateSimindexOp("docs", "", "body")


def test_a_drop_by_name_alone_cannot_be_reversed() -> None:
    drop = DropSimindexOp("docs")
    assert drop.method is None
    with pytest.raises(ValueError, match="cannot be reversed without table, column, method"):
        drop.reverse()
    with pytest.raises(TypeError, match="need method="):
        DropSimindexOp("docs", max_distance=3)


def test_method_from_takes_a_spec_or_a_name() -> None:
    assert method_from("simhash", {"max_distance": 5}) == SimHash(max_distance=5)
    assert method_from(MinHash(), {}) == MinHash()


def test_importing_registers_the_operations_and_is_safe_again() -> None:
    assert callable(getattr(Operations, "create_simindex", None))
    assert callable(getattr(Operations, "drop_simindex", None))
    # A second import does nothing; even a reload (new classes) does not register twice.
    code = (
        "import importlib, simindex.alembic, simindex.alembic as again\n"
        "importlib.reload(simindex.alembic)\n"
        "from alembic.operations import Operations\n"
        "assert Operations.create_simindex and Operations.drop_simindex\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
