"""Texts over ``max_text_bytes`` (UTF-8 bytes) are never read by sync: not one block of them.

The texts are stored out of line, uncompressed (``STORAGE EXTERNAL``), so reading one means
fetching blocks of the table's TOAST relation. A backend counts those fetches
(``pg_stat_get_xact_blocks_fetched``: the counts it has not reported yet, which it reports
only between transactions), and sync runs inside the test's transaction, between two looks at
the count.
A text of exactly the limit is read (so the count does see a read); one byte more is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, text

from simindex import BuildReport, check, sync
from simindex.index import create_index, get_index
from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES
from simindex.ops.queue import failed_items, queue_counts

# Letters of two bytes, a separator of three and one of four (so characters are never bytes).
UNIT = "é" * 40 + "€" + "😀" + "a" * 30 + " "


def body_of(size: int) -> tuple[str, int, str]:
    """(unit, repeats, tail) whose text ``repeat(unit, repeats) || tail`` is ``size`` bytes and
    ends in a character of two bytes."""
    unit_bytes = len(UNIT.encode())
    repeats = max(0, (size - 200) // unit_bytes)
    rest = size - repeats * unit_bytes
    tail = "€" * ((rest - 2) // 3) + "a" * ((rest - 2) % 3) + "é"
    assert repeats * unit_bytes + len(tail.encode()) == size
    return UNIT, repeats, tail


@pytest.fixture
def engine(database_dsn: str) -> Iterator[Engine]:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE documents (id integer PRIMARY KEY, body text)")
        conn.execute("ALTER TABLE documents ALTER COLUMN body SET STORAGE EXTERNAL")
        conn.execute("INSERT INTO documents VALUES (1, 'a small text to start with')")
    create_index(database_dsn, "docs", "documents", "body").build()
    made = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(database_dsn))
    yield made
    made.dispose()


def write(dsn: str, key: int, size: int) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO documents VALUES (%s, repeat(%s, %s) || %s)", (key, *body_of(size))
        )
        stored = conn.execute(
            "SELECT octet_length(body), pg_column_size(body) FROM documents WHERE id = %s",
            (key,),
        ).fetchone()
    assert stored is not None and stored[0] == size
    assert stored[1] >= size  # stored as it is: not compressed


def synced(engine: Engine, limit: int | None) -> tuple[int, int, int]:
    """(indexed, failed, blocks of the texts fetched) of one sync in one transaction."""
    count = text(
        "SELECT pg_stat_get_xact_blocks_fetched(reltoastrelid) FROM pg_class "
        "WHERE oid = 'documents'::regclass"
    )
    with engine.connect() as connection:
        before = connection.execute(count).scalar_one()
        report = sync(connection) if limit is None else sync(connection, max_text_bytes=limit)
        after = connection.execute(count).scalar_one()
        connection.commit()
    return report.indexed, report.failed, int(after - before)


@pytest.mark.parametrize("limit", [100_000, None], ids=["100000", "default"])
def test_a_text_one_byte_over_the_limit_is_never_read(
    engine: Engine, database_dsn: str, limit: int | None
) -> None:
    bound = DEFAULT_MAX_TEXT_BYTES if limit is None else limit
    write(database_dsn, 2, bound)
    indexed, failed, fetched = synced(engine, limit)
    assert (indexed, failed) == (1, 0)
    assert fetched > 0  # a text that is read is seen being read

    write(database_dsn, 3, bound + 1)
    indexed, failed, fetched = synced(engine, limit)
    assert (indexed, failed) == (0, 1)
    assert fetched == 0
    [(key, error, _, _)] = failed_items(database_dsn, "docs")
    assert key == 3
    assert f"text is {bound + 1} bytes, over max_text_bytes={bound}" in error
    assert queue_counts(database_dsn, "docs") == (0, 1)


def test_a_batch_reads_its_texts_a_bounded_number_of_bytes_at_a_time(
    database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts past the batch's byte budget are read afterwards in groups within it (a longer one
    alone); the index comes out the same."""
    import simindex.ops.batch as batch

    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE budget (id integer PRIMARY KEY, body text)")
    index = create_index(database_dsn, "budget", "budget", "body")
    index.build()
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "INSERT INTO budget SELECT i, repeat('word' || i || ' and more words ', 20) "
            "FROM generate_series(1, 30) AS i"
        )
        conn.execute(
            "INSERT INTO budget VALUES (100, repeat('a long text of many words ', 400)), "
            "(101, NULL), (102, '')"
        )
    reads: list[int] = []
    real_read = batch._read

    def counted(*args: Any) -> Any:
        rows, failures = real_read(*args)
        reads.append(sum(len(text) for _, text, _ in rows if text is not None))
        return rows, failures

    monkeypatch.setattr(batch, "BATCH_BYTES", 2000)
    monkeypatch.setattr(batch, "_read", counted)
    report = sync(database_dsn, ["budget"])
    assert report.ok and report.taken == 33 and report.indexed == 31
    assert len(reads) > 5
    assert max(reads) == len("a long text of many words ") * 400  # alone; the others within
    assert sorted(reads)[-2] <= 2000
    assert check(database_dsn, "budget").ok
    assert [m.key for m in index.near(text="a long text of many words " * 400)] == [100]


def built(engine: Engine, limit: int | None) -> tuple[BuildReport, int]:
    """(report, blocks of the texts fetched) of one build in one transaction."""
    count = text(
        "SELECT pg_stat_get_xact_blocks_fetched(reltoastrelid) FROM pg_class "
        "WHERE oid = 'documents'::regclass"
    )
    with engine.connect() as connection:
        before = connection.execute(count).scalar_one()
        index = get_index(connection, "docs")
        report = index.build() if limit is None else index.build(max_text_bytes=limit)
        after = connection.execute(count).scalar_one()
        connection.commit()
    return report, int(after - before)


@pytest.mark.parametrize("limit", [100_000, None], ids=["100000", "default"])
def test_build_leaves_a_text_over_the_limit_unread_and_a_failed_item_as_sync_does(
    engine: Engine, database_dsn: str, limit: int | None
) -> None:
    """Issue 19, item 12: a text sync refuses is refused by build too: not read (no block of
    it fetched) and recorded as a failed item with sync's error; one at the limit is built."""
    bound = DEFAULT_MAX_TEXT_BYTES if limit is None else limit
    write(database_dsn, 2, bound)
    report, at_the_limit = built(engine, limit)
    assert (report.rows, report.failed) == (2, 0)
    assert at_the_limit > 0  # a text that is read is seen being read

    write(database_dsn, 3, bound + 1)
    report, fetched = built(engine, limit)
    assert (report.rows, report.skipped, report.failed) == (2, 0, 1)
    assert fetched == at_the_limit  # not one block of the longer text
    [(key, error, _, _)] = failed_items(database_dsn, "docs")
    assert key == 3
    assert f"text is {bound + 1} bytes, over max_text_bytes={bound}" in error
    index = get_index(database_dsn, "docs")
    stats = index.stats()
    assert (stats.rows, stats.failed) == (2, 1)
    assert f"key 3: text is {bound + 1} bytes" in str(stats.info.last_error)
    # A larger limit builds it, as sync's retry with one does.
    assert index.build(max_text_bytes=bound + 1).failed == 0
    assert index.stats().rows == 3


def test_build_refuses_a_limit_that_is_not_a_byte_count(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE small (id integer PRIMARY KEY, body text)")
    index = create_index(database_dsn, "small", "small", "body")
    for wrong in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_text_bytes must be a non-negative int"):
            index.build(max_text_bytes=wrong)  # type: ignore[arg-type]  # refused: the test
