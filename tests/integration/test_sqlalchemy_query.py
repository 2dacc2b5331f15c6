"""The query selectables joined to mapped models answer as Index does, and as brute force."""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from numpy.typing import NDArray
from sqlalchemy import (
    Engine,
    Integer,
    Select,
    String,
    Uuid,
    func,
    select,
    true,
)
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.orm import DeclarativeBase, InstrumentedAttribute, Mapped, Session, mapped_column
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.types import TypeEngine

import simindex
from simindex import errors
from simindex.core.bits import hamming_distance, to_signed
from simindex.core.design import LshDesign
from simindex.core.spec import IndexSpec, Method, MinHash, SimHash
from simindex.index import Index, create_index
from simindex.sqlalchemy import near, near_key, similar, similar_key

WORDS = [f"w{i}" for i in range(3000)]
INDEX = "docs"
MAX_DISTANCE = 3
THRESHOLD = 0.7


class Base(DeclarativeBase):
    pass


class Document(Base):
    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None]


class Page(Base):
    __tablename__ = "pages"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    body: Mapped[str | None]


class Note(Base):
    __tablename__ = "notes"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    body: Mapped[str | None]


@dataclass(frozen=True)
class Case:
    """A mapped model, its key attribute, the SQLAlchemy type it has, and keys by position."""

    model: type[Base]
    id: InstrumentedAttribute[Any]
    body: InstrumentedAttribute[str | None]
    key_type: type[TypeEngine[Any]]
    key: Callable[[int], Any]


CASES = {
    "integer": Case(Document, Document.id, Document.body, Integer, lambda i: i * 7 + 1),
    "uuid": Case(Page, Page.id, Page.body, Uuid, lambda i: uuid.UUID(int=i * 7919 + 13)),
    "text": Case(Note, Note.id, Note.body, String, lambda i: f"note 'n{i}'/{i}"),
}


@dataclass(frozen=True)
class Corpus:
    """A built index over one model's table, with its texts and keys by position."""

    engine: Engine
    index: Index
    case: Case
    texts: list[str | None]
    keys: list[Any]

    def queries(self) -> list[int]:
        """Positions to query: each original with planted copies, a copy, and loners."""
        return [*range(0, 60, 10), 121, 5, 17]

    @functools.cached_property
    def spec(self) -> IndexSpec:
        return self.index.info().spec

    @functools.cached_property
    def simhashes(self) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
        return self.spec.simhash_values(self.texts)

    @functools.cached_property
    def signatures(self) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
        return self.spec.minhash_values(self.texts)

    def with_neighbours(self) -> int:
        """The first queried position with a neighbour within the index's distance."""
        return next(
            position
            for position in self.queries()
            if without(brute_near(self, self.texts[position], MAX_DISTANCE), self.keys[position])
        )


def make_texts(seed: int) -> list[str | None]:
    """Random texts, copies of every tenth one with one or two words changed, and texts
    without features."""
    rng = random.Random(seed)
    # Long texts: one changed word moves a SimHash by a few bits at most, usually.
    texts: list[str | None] = [" ".join(rng.choice(WORDS) for _ in range(800)) for _ in range(120)]
    for original in range(0, 120, 10):
        words = str(texts[original]).split()
        for changes in (1, 2):
            edited = list(words)
            for position in rng.sample(range(len(edited)), changes):
                edited[position] = "edited"
            texts.append(" ".join(edited))
    return [*texts, None, "", "  !!! "]


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]


def build(database_dsn: str, engine: Engine, case: Case, method: Method) -> Corpus:
    Base.metadata.create_all(engine)
    texts = make_texts(11)
    keys = [case.key(position) for position in range(len(texts))]
    with Session(engine) as session, session.begin():
        session.add_all(
            case.model(id=key, body=text) for key, text in zip(keys, texts, strict=True)
        )
    table = case.model.__tablename__
    index = create_index(database_dsn, INDEX, table, "body", method=method)
    index.build()
    return Corpus(engine, index, case, texts, keys)


@pytest.fixture
def simhashed(database_dsn: str, engine: Engine, case: Case) -> Corpus:
    return build(database_dsn, engine, case, SimHash(max_distance=MAX_DISTANCE))


@pytest.fixture
def integer_simhashed(database_dsn: str, engine: Engine) -> Corpus:
    """For tests the key's type does not matter to."""
    return build(database_dsn, engine, CASES["integer"], SimHash(max_distance=MAX_DISTANCE))


@pytest.fixture
def integer_minhashed(database_dsn: str, engine: Engine) -> Corpus:
    return build(database_dsn, engine, CASES["integer"], MinHash(THRESHOLD))


@pytest.fixture
def minhashed(database_dsn: str, engine: Engine, case: Case) -> Corpus:
    return build(database_dsn, engine, case, MinHash(THRESHOLD))


def rows(engine: Engine, statement: Select[Any]) -> list[tuple[Any, ...]]:
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(statement)]


def joined(corpus: Corpus, found: TableValuedAlias, measure: str) -> dict[Any, Any]:
    """The selectable joined to the model: key -> distance or similarity."""
    case = corpus.case
    statement = select(case.id, found.c[measure]).join(found, case.id == found.c.key)
    return dict(rows(corpus.engine, statement))


def brute_near(corpus: Corpus, query: str | None, max_distance: int) -> dict[Any, int]:
    """Every indexed row within ``max_distance`` bits of ``query``'s SimHash, by a full scan."""
    spec = corpus.spec
    values, present = corpus.simhashes
    (value,), (has_features,) = spec.simhash_values([query])
    if not has_features:
        return {}
    distances = [hamming_distance(int(other), int(value)) for other in values]
    return {
        key: distance
        for key, distance, indexed in zip(corpus.keys, distances, present, strict=True)
        if indexed and distance <= max_distance
    }


def brute_similar(corpus: Corpus, query: str | None, threshold: float) -> dict[Any, float]:
    """Every indexed row sharing an LSH band with ``query`` whose estimated Jaccard reaches
    ``threshold``, by a full scan (what the index promises: LSH candidates, verified)."""
    spec = corpus.spec
    assert isinstance(spec.design, LshDesign)
    values, lengths = corpus.signatures
    assert isinstance(spec.method, MinHash)
    num_perm, bits = spec.method.num_perm, spec.method.sketch_bits
    bands = spec.design.band_hashes(values[:, : spec.design.num_perm])
    rows, (length,) = spec.minhash_values([query])
    if not length:
        return {}
    (query_bands,) = spec.design.band_hashes(rows[:, : spec.design.num_perm])
    found = {}
    for position, key in enumerate(corpus.keys):
        if lengths[position] and (bands[position] == query_bands).any():
            # The stored sketch's estimate (simindex.core.packing); 1 for the same set.
            sketch, other = values[position, num_perm:-1], rows[0, num_perm:-1]
            differ = int(np.bitwise_count(sketch ^ other).sum())
            same = values[position, -1] == rows[0, -1]
            similarity = 1.0 if same else max(0.0, 1.0 - 2.0 * differ / bits)
            if similarity >= threshold:
                found[key] = similarity
    return found


def without(found: dict[Any, Any], key: Any) -> dict[Any, Any]:
    return {other: value for other, value in found.items() if other != key}


# -- same answers as Index and as brute force


def test_near_key_joined_to_the_model(engine: Engine, simhashed: Corpus) -> None:
    index, answered = simhashed.index, 0
    for position in simhashed.queries():
        key, text = simhashed.keys[position], simhashed.texts[position]
        for max_distance in (None, 1):
            limit = MAX_DISTANCE if max_distance is None else max_distance
            found = joined(
                simhashed, near_key(engine, INDEX, key, max_distance=max_distance), "distance"
            )
            expected = {m.key: m.distance for m in index.near_key(key, max_distance=limit)}
            assert found == expected == without(brute_near(simhashed, text, limit), key)
            answered += bool(found)
    assert answered >= 6  # the planted copies were found


def test_near_by_text_and_fingerprint(engine: Engine, simhashed: Corpus) -> None:
    index, case = simhashed.index, simhashed.case
    for position in simhashed.queries():
        text = simhashed.texts[position]
        assert text is not None
        for max_distance in (None, 0, 2):
            limit = MAX_DISTANCE if max_distance is None else max_distance
            by_text = near(engine, INDEX, text, max_distance=max_distance, key_type=case.id)
            expected = {m.key: m.distance for m in index.near(text, max_distance=limit)}
            assert joined(simhashed, by_text, "distance") == expected
            assert expected == brute_near(simhashed, text, limit)
        fingerprint = to_signed(int(simhashed.simhashes[0][position]))
        by_fingerprint = near(engine, INDEX, fingerprint=fingerprint)
        assert joined(simhashed, by_fingerprint, "distance") == brute_near(
            simhashed, text, MAX_DISTANCE
        )


# 0.5 is below the index's threshold on purpose: the SQL side takes it as asked.
@pytest.mark.filterwarnings("ignore::simindex.errors.LowRecallWarning")
def test_similar_and_similar_key_joined_to_the_model(engine: Engine, minhashed: Corpus) -> None:
    index, case, answered = minhashed.index, minhashed.case, 0
    for position in minhashed.queries():
        key, text = minhashed.keys[position], minhashed.texts[position]
        assert text is not None
        for threshold in (None, 0.5, 0.9):
            limit = THRESHOLD if threshold is None else threshold
            by_text = similar(engine, INDEX, text, threshold=threshold, key_type=case.id.type)
            expected = {
                m.key: m.similarity for m in index.similar(text, threshold=limit, verify="estimate")
            }
            assert joined(minhashed, by_text, "similarity") == expected
            assert expected == brute_similar(minhashed, text, limit)
            by_key = similar_key(engine, INDEX, key, threshold=threshold)
            expected = {
                m.key: m.similarity
                for m in index.similar(key=key, threshold=limit, verify="estimate")
            }
            assert joined(minhashed, by_key, "similarity") == expected
            assert expected == without(brute_similar(minhashed, text, limit), key)
            answered += bool(expected)
    assert answered >= 12


def test_keys_come_back_in_the_source_key_type(engine: Engine, simhashed: Corpus) -> None:
    found = near(engine, INDEX, simhashed.texts[0])
    assert isinstance(found.c.key.type, simhashed.case.key_type)
    keys = [key for (key,) in rows(engine, select(found.c.key))]
    assert keys and all(type(key) is type(simhashed.keys[0]) for key in keys)


def test_texts_without_features_find_nothing(engine: Engine, integer_simhashed: Corpus) -> None:
    for text in ("", "  !!! "):
        assert rows(engine, select(near(engine, INDEX, text))) == []
        assert integer_simhashed.index.near(text) == []


def test_a_minhash_text_without_features_finds_nothing(
    engine: Engine, integer_minhashed: Corpus
) -> None:
    assert rows(engine, select(similar(engine, INDEX, ""))) == []
    assert rows(engine, select(similar(engine, INDEX, "", threshold=0.0))) == []


def test_a_key_not_in_the_index_finds_nothing(engine: Engine, simhashed: Corpus) -> None:
    no_features = simhashed.keys[simhashed.texts.index(None)]
    assert rows(engine, select(near_key(engine, INDEX, no_features))) == []
    assert rows(engine, select(near_key(engine, INDEX, simhashed.case.key(10_000)))) == []


# -- composition


def test_where_order_by_and_limit(engine: Engine, simhashed: Corpus) -> None:
    case, key = simhashed.case, simhashed.keys[0]
    text = simhashed.texts[0]
    query = near(engine, INDEX, text)
    statement = (
        select(case.id, query.c.distance)
        .join(query, case.id == query.c.key)
        .where(query.c.distance > 0, case.body.is_not(None))
        .order_by(query.c.distance, case.id)
        .limit(1)
    )
    everything = sorted(brute_near(simhashed, text, MAX_DISTANCE).items(), key=lambda kv: kv[::-1])
    assert rows(engine, statement) == [kv for kv in everything if kv[1] > 0][:1]
    assert everything[0] == (key, 0)


def test_in_a_subquery_and_with_orm_entities(engine: Engine, simhashed: Corpus) -> None:
    case, position = simhashed.case, simhashed.with_neighbours()
    key = simhashed.keys[position]
    expected = set(without(brute_near(simhashed, simhashed.texts[position], MAX_DISTANCE), key))
    assert expected
    found = near_key(engine, INDEX, key, key_type=case.id)
    in_subquery = select(case.id).where(case.id.in_(select(found.c.key)))
    assert {row[0] for row in rows(engine, in_subquery)} == expected
    counted = select(func.count()).select_from(select(found.c.key).subquery())
    assert rows(engine, counted) == [(len(expected),)]
    with Session(engine) as session:
        found = near_key(session, INDEX, key)
        statement = (
            select(case.model, found.c.distance)
            .join(found, case.id == found.c.key)
            .order_by(found.c.distance)
        )
        entities = session.execute(statement).all()
        assert {entity.id for entity, _ in entities} == expected
        assert all(isinstance(entity, case.model) for entity, _ in entities)


def test_a_lateral_join_finds_every_pair(engine: Engine, simhashed: Corpus) -> None:
    case = simhashed.case
    found = near_key(None, INDEX, case.id, max_distance=2).lateral()
    statement = select(case.id, found.c.key, found.c.distance).join(found, true())
    pairs = set(rows(engine, statement))
    expected = {
        (key, other, distance)
        for key, text in zip(simhashed.keys, simhashed.texts, strict=True)
        for other, distance in without(brute_near(simhashed, text, 2), key).items()
    }
    assert pairs == expected
    assert len(expected) >= 12


def test_every_bind_builds_the_same_statement(
    database_dsn: str, engine: Engine, simhashed: Corpus
) -> None:
    case, key = simhashed.case, simhashed.keys[simhashed.with_neighbours()]
    expected = joined(simhashed, near_key(None, INDEX, key, key_type=case.id), "distance")
    assert expected
    with engine.connect() as connection, Session(engine) as session:
        for bind in (engine, connection, session, database_dsn):
            found = near_key(bind, INDEX, key, key_type=case.id)
            assert joined(simhashed, found, "distance") == expected
            unbound = near_key(None, INDEX, key, key_type=case.id, max_distance=MAX_DISTANCE)
            assert str(select(found).compile(engine)) == str(select(unbound).compile(engine))


def test_an_index_in_a_schema_that_needs_quoting(database_dsn: str, engine: Engine) -> None:
    schema = "NearDups"  # unquoted, it would fold to neardups
    simindex.migrate(database_dsn, schema=schema)
    Base.metadata.create_all(engine)
    texts = make_texts(5)
    with Session(engine) as session, session.begin():
        session.add_all(Document(id=key, body=text) for key, text in enumerate(texts))
    index = create_index(database_dsn, INDEX, "documents", "body", index_schema=schema)
    index.build()
    corpus = Corpus(engine, index, CASES["integer"], texts, list(range(len(texts))))
    for found in (
        near_key(engine, INDEX, 0, index_schema=schema),
        near_key(None, INDEX, 0, key_type=Integer, index_schema=schema),
    ):
        assert joined(corpus, found, "distance") == {m.key: m.distance for m in index.near_key(0)}
    by_text = near(engine, INDEX, texts[0], index_schema=schema)
    assert joined(corpus, by_text, "distance") == brute_near(corpus, texts[0], MAX_DISTANCE)


# -- errors


def test_unknown_and_unbuilt_indexes(database_dsn: str, engine: Engine) -> None:
    with pytest.raises(errors.IndexNotFoundError, match="nope"):
        near_key(engine, "nope", 1)
    with pytest.raises(errors.IndexNotFoundError, match="nope"):
        similar(engine, "nope", "some text")
    Base.metadata.create_all(engine)
    create_index(database_dsn, INDEX, "documents", "body")
    with pytest.raises(errors.IndexNotReadyError, match="run build"):
        near(engine, INDEX, "some text")
    with pytest.raises(errors.IndexNotReadyError, match="run build"):
        near_key(engine, INDEX, 1)


def test_the_wrong_method_is_refused(engine: Engine, integer_minhashed: Corpus) -> None:
    key = integer_minhashed.keys[0]
    with pytest.raises(TypeError, match="MinHash index: use similar"):
        near(engine, INDEX, "some text")
    with pytest.raises(TypeError, match="MinHash index: use similar_key"):
        near_key(engine, INDEX, key)
    unbound = near_key(None, INDEX, key)
    with pytest.raises(ProgrammingError, match="near_key_v1"):
        rows(engine, select(unbound))


def test_similar_on_a_simhash_index_is_refused(engine: Engine, integer_simhashed: Corpus) -> None:
    with pytest.raises(TypeError, match="SimHash index: use near"):
        similar(engine, INDEX, "some text")
    with pytest.raises(TypeError, match="SimHash index: use near_key"):
        similar_key(engine, INDEX, integer_simhashed.keys[0])


def test_max_distance_beyond_the_index(engine: Engine, integer_simhashed: Corpus) -> None:
    key = integer_simhashed.keys[0]
    with pytest.raises(ValueError, match="from 0 to the index's 3, got 4"):
        near_key(engine, INDEX, key, max_distance=4)
    with pytest.raises(ValueError, match="from 0 to the index's 3, got -1"):
        near(engine, INDEX, "some text", max_distance=-1)
    with pytest.raises(TypeError, match="max_distance must be an int"):
        near(engine, INDEX, "some text", max_distance=2.0)  # type: ignore[arg-type]
    # Without a bind, the index's own function refuses it when the statement runs.
    with pytest.raises(DBAPIError, match="max_distance must be from 0 to 3, got 4") as raised:
        rows(engine, select(near_key(None, INDEX, key, max_distance=4)))
    assert isinstance(raised.value.orig, psycopg.Error)
    assert raised.value.orig.sqlstate == "22023"


def test_a_selectable_with_a_bind_checks_its_kept_entry_in_one_statement(
    engine: Engine, integer_simhashed: Corpus, database_dsn: str, tmp_path: Path
) -> None:
    """With a bind, ``near``/``near_key`` read the catalog entry once per Engine and index and
    then check it by one statement (a build, a drop, a create again is seen at once)."""
    text = integer_simhashed.texts[0]
    expected = rows(engine, select(near(engine, INDEX, text).c.key))
    assert expected
    pooled = engine.raw_connection()
    traced = pooled.driver_connection
    pooled.close()
    assert isinstance(traced, psycopg.Connection)
    path = tmp_path / "trace"
    with open(path, "w") as trace:
        traced.pgconn.trace(trace.fileno())
        traced.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            near(engine, INDEX, text)
            near_key(engine, INDEX, integer_simhashed.keys[0])
        finally:
            traced.pgconn.untrace()
    # Statements run (a first use on this connection also sends a Parse of its own).
    sent = [
        line
        for line in path.read_text().splitlines()
        if line.split("\t")[0] == "F" and line.split("\t")[2].split(" ")[0] in ("Query", "Execute")
    ]
    assert len(sent) == 2, sent
    simindex.drop_index(database_dsn, INDEX)
    with pytest.raises(errors.IndexNotFoundError):
        near(engine, INDEX, text)
    create_index(database_dsn, INDEX, "documents", "body", method=MinHash(THRESHOLD)).build()
    with pytest.raises(TypeError, match="MinHash index"):
        near(engine, INDEX, text)
    assert rows(engine, select(similar(engine, INDEX, str(text)).c.key))
