"""The query selectables as SQL: quoting, bound arguments, cache keys, early argument checks."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import BigInteger, Integer, Text, Uuid, create_engine, select, true
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql import Select

from simindex.sqlalchemy import near, near_key, similar, similar_key

ENGINE = create_engine("postgresql+psycopg://")  # never connects: it only compiles


class Base(DeclarativeBase):
    pass


class Document(Base):
    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    body: Mapped[str | None]


def sql(statement: Select[tuple[object, ...]] | Select[tuple[object]]) -> str:
    return str(statement.compile(ENGINE))


def test_the_function_is_called_by_its_quoted_name_with_bound_arguments() -> None:
    found = near_key(None, "docs_body", 42, key_type=Document.id, index_schema='Near "Dups"')
    text = sql(select(Document.id, found.c.distance).join(found, Document.id == found.c.key))
    assert (
        '"Near ""Dups"""."docs_body_near_key_v1"(%(param_1)s::BIGINT, '
        '"max_rows" => CAST(NULL AS INTEGER))'
    ) in text
    assert "42" not in text
    found = similar_key(None, "docs_body", "k", threshold=0.5)
    assert '"simindex"."docs_body_similar_key_v1"(%(param_1)s::VARCHAR, %(param_2)s' in sql(
        select(found)
    )


def test_the_key_column_takes_the_given_type() -> None:
    assert isinstance(near_key(None, "docs", 1, key_type=Document.id).c.key.type, BigInteger)
    assert isinstance(near_key(None, "docs", 1, key_type=Text).c.key.type, Text)
    assert isinstance(near_key(None, "docs", 1, key_type=Uuid()).c.key.type, Uuid)
    assert isinstance(near_key(None, "docs", uuid.uuid4()).c.key.type, Uuid)
    assert isinstance(near_key(None, "docs", Document.id).c.key.type, BigInteger)
    assert similar_key(None, "docs", 1).c.similarity.type.python_type is float
    with pytest.raises(TypeError, match="cannot tell the type"):
        near_key(None, "docs", None)
    with pytest.raises(TypeError, match="key_type must be"):
        near_key(None, "docs", 1, key_type="integer")  # type: ignore[arg-type]


def test_cache_keys_tell_indexes_and_schemas_apart() -> None:
    def key_of(name: str, schema: str = "simindex", key: int = 1) -> object:
        found = near_key(None, name, key, key_type=Integer, index_schema=schema)
        return select(found)._generate_cache_key()

    assert key_of("docs") == key_of("docs", key=2)  # same statement, other parameter
    assert key_of("docs") != key_of("pages")
    assert key_of("docs") != key_of("docs", schema="other")


def test_a_column_key_makes_a_lateral_join() -> None:
    found = near_key(None, "docs", Document.id).lateral()
    text = sql(select(Document.id, found.c.key).join(found, true()))
    assert 'JOIN LATERAL "simindex"."docs_near_key_v1"(documents.id, "max_rows"' in text


def test_arguments_are_checked_before_any_sql() -> None:
    with pytest.raises(ValueError, match="index name"):
        near_key(None, "Docs; DROP", 1, key_type=Integer)
    with pytest.raises(ValueError, match="schema"):
        near_key(None, "docs", 1, key_type=Integer, index_schema="")
    with pytest.raises(ValueError, match="at least 0"):
        near_key(None, "docs", 1, key_type=Integer, max_distance=-1)
    with pytest.raises(TypeError, match="max_distance must be an int"):
        near_key(None, "docs", 1, key_type=Integer, max_distance=True)
    with pytest.raises(ValueError, match="threshold must be from 0 to 1"):
        similar_key(None, "docs", 1, key_type=Integer, threshold=1.5)
    with pytest.raises(TypeError, match="threshold must be a number"):
        similar_key(None, "docs", 1, key_type=Integer, threshold="0.5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a bind"):
        near(None, "docs", "some text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a bind"):
        similar(None, "docs", "some text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exactly one"):
        near(None, "docs")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"pass simindex\.fingerprint\.to_signed\(9223372036854775808\)"
    ):
        near(None, "docs", fingerprint=1 << 63)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="signed 64-bit"):
        near(None, "docs", fingerprint=1 << 64)  # type: ignore[arg-type]
