"""Exact and estimated verification of MinHash candidates, against oracles built from the
stored signatures (which rows are candidates) and the texts (their exact Jaccard)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from simindex import sync
from simindex.core.spec import MinHash, SimHash
from simindex.core.text import Shingling
from simindex.db.catalog import ready_index, store_for
from simindex.db.minhash_store import MinHashStore
from simindex.errors import (
    IndexNotFoundError,
    SchemaNotMigratedError,
    SourceChangedError,
    TokenizerError,
)
from simindex.index import Index, create_index, get_index
from simindex.ops.pairs import SimilarPair, exact_candidates
from simindex.ops.verify import Verify, exact_pairs, locked_texts
from tests.unit import tokenizers as _registers_tokenizers  # noqa: F401

WORDS = [f"w{i}" for i in range(3000)]
THRESHOLD = 0.7


def edited_corpus(seed: int, originals: int) -> list[str]:
    """Random texts, each followed by copies at edit rates that put their Jaccard similarity
    on both sides of THRESHOLD."""
    rng = random.Random(seed)
    texts = []
    for _ in range(originals):
        words = [rng.choice(WORDS) for _ in range(150)]
        texts.append(" ".join(words))
        for rate in (0.02, 0.04, 0.05, 0.06, 0.08):
            copy = list(words)
            for position in rng.sample(range(len(copy)), round(rate * len(copy))):
                copy[position] = rng.choice(WORDS)
            texts.append(" ".join(copy))
    return texts


@pytest.fixture
def notes(database_dsn: str) -> tuple[Index, list[str]]:
    texts = edited_corpus(5, 40)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(texts):
                copy.write_row((key, text))
    index = create_index(
        database_dsn, "notes", "notes", "body", method=MinHash(threshold=THRESHOLD, num_perm=64)
    )
    index.build()
    return index, texts


def exact_jaccard(a: str, b: str) -> float:
    first, second = (set(Shingling().hashes(text).tolist()) for text in (a, b))
    return len(first & second) / len(first | second)


def oracle(index: Index, dsn: str, texts: list[str]) -> dict[str, dict[tuple[int, int], float]]:
    """Every pair each verification must report: band candidates (from the stored
    signatures) whose estimate, or whose exact similarity above the estimate floor, reaches
    the threshold."""
    info = index.info()
    store = store_for("simindex", "notes", info.source, info.spec)
    assert isinstance(store, MinHashStore)
    columns = ", ".join(f"b{band}" for band in range(store.design.num_bands))
    with psycopg.connect(dsn) as conn:
        stored = {
            key: (set_hash, bands, np.array([bit == "1" for bit in sketch]))
            for key, set_hash, bands, sketch in conn.execute(
                sql.SQL("SELECT key, set_hash, ARRAY[{}], sketch::text FROM {}").format(
                    sql.SQL(columns), store.table()
                )
            )
        }
    # Four standard errors of 128 values' estimate below the threshold.
    floor = THRESHOLD - 4 * (THRESHOLD * (1 - THRESHOLD) / 128) ** 0.5
    found: dict[str, dict[tuple[int, int], float]] = {"estimate": {}, "exact": {}, "rescued": {}}
    for a, b in itertools.combinations(sorted(stored), 2):
        (x_hash, x_bands, x), (y_hash, y_bands, y) = stored[a], stored[b]
        if not any(p == q for p, q in zip(x_bands, y_bands, strict=True)):
            continue
        differ = int(np.count_nonzero(x != y))
        estimate = 1.0 if x_hash == y_hash else max(0.0, 1.0 - 2.0 * differ / len(x))
        if estimate >= THRESHOLD:
            found["estimate"][(a, b)] = estimate
        if estimate >= floor and (exact := exact_jaccard(texts[a], texts[b])) >= THRESHOLD:
            found["exact"][(a, b)] = exact
            if estimate < THRESHOLD:
                found["rescued"][(a, b)] = exact
    return found


def test_pairs_of_each_verification_are_their_oracles(
    notes: tuple[Index, list[str]], database_dsn: str
) -> None:
    index, texts = notes
    expected = oracle(index, database_dsn, texts)
    verify: Verify
    for verify in ("estimate", "exact"):
        everything = list(index.pairs(verify=verify))
        found = {(p.left, p.right): p.similarity for p in everything if isinstance(p, SimilarPair)}
        assert len(found) == len(everything)
        assert found == pytest.approx(expected[verify]), verify
    default = {(p.left, p.right) for p in index.pairs()}
    assert default == set(expected["exact"])
    # Near the threshold the two disagree: exact finds pairs the estimate put below it.
    assert expected["rescued"] and set(expected["exact"]) != set(expected["estimate"])
    assert len(expected["exact"]) > 40


def test_similar_by_text_and_key_are_their_oracles(
    notes: tuple[Index, list[str]], database_dsn: str
) -> None:
    index, texts = notes
    expected = oracle(index, database_dsn, texts)
    verify: Verify
    for verify in ("estimate", "exact"):
        for key in range(0, len(texts), 7):
            want = {
                (b if a == key else a): score
                for (a, b), score in expected[verify].items()
                if key in (a, b)
            }
            by_key = index.similar(key=key, verify=verify)
            assert {m.key: m.similarity for m in by_key} == pytest.approx(want)
            scores = [m.similarity for m in by_key]
            assert scores == sorted(scores, reverse=True)
            by_text = index.similar(texts[key], verify=verify)
            assert {m.key: m.similarity for m in by_text} == pytest.approx(want | {key: 1.0})
    assert index.similar(key=0) == index.similar(key=0, verify="exact")  # the default


def test_exact_reads_each_text_once(notes: tuple[Index, list[str]]) -> None:
    index, texts = notes
    # Small chunks, so most rows are needed by many chunks: still each is read once.
    with psycopg.connect(index.bind) as conn:  # type: ignore[arg-type]  # a DSN here
        info, store = ready_index(conn, index.index_schema, index.name)
        assert isinstance(store, MinHashStore)
        sets, candidates, limit = exact_candidates(conn, info, store, None)
        found = list(exact_pairs(conn, sets, candidates, limit, chunk=7))
    assert found and sets.texts_read <= len(texts)


def test_verify_is_refused_where_it_means_nothing(
    notes: tuple[Index, list[str]], database_dsn: str
) -> None:
    index, _ = notes
    with pytest.raises(ValueError, match="verify must be 'estimate' or 'exact'"):
        index.similar(key=0, verify="roughly")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exact"):
        index.similar(key=0, exact=True)  # type: ignore[call-arg]  # one spelling: verify=
    with pytest.raises(TypeError, match="leader clusters take no verify"):
        index.clusters(method="leader", verify="exact")
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
        conn.execute("INSERT INTO docs VALUES (1, 'a b c d'), (2, 'a b c d')")
    simhash = create_index(database_dsn, "docs", "docs", "body", method=SimHash())
    simhash.build()
    with pytest.raises(TypeError, match="SimHash index: it has no verify"):
        list(simhash.pairs(verify="exact"))
    with pytest.raises(TypeError, match="SimHash index: it has no verify"):
        simhash.clusters(verify="estimate")


def test_an_index_with_its_own_tokenizer(database_dsn: str) -> None:
    texts = ["Fish, chips & peas.", "fish, chips & peas.", "FISH CHIPS AND PEAS", "other words"]
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        conn.cursor().executemany("INSERT INTO notes VALUES (%s, %s)", list(enumerate(texts)))
    shingling = Shingling(size=1, tokenizer="test-words")
    method = MinHash(threshold=0.5, num_perm=64, shingling=shingling)
    index = create_index(database_dsn, "notes", "notes", "body", method=method)
    index.build(workers=2)  # the build's worker processes have it registered too
    # Tokens keep their punctuation: rows 0 and 1 are the same, row 2 shares nothing with them.
    assert [(m.key, m.similarity) for m in index.similar(key=0)] == [(1, 1.0)]
    stored: Any = get_index(database_dsn, "notes").info().spec.method
    assert stored.shingling == replace(shingling, tokenizer_version="1")  # the registered one
    with psycopg.connect(database_dsn) as conn:
        conn.execute("INSERT INTO notes VALUES (9, 'FISH, CHIPS & PEAS.')")
    sync(database_dsn, ["notes"])
    assert {m.key for m in index.similar(key=0)} == {1, 9}


def test_a_tokenizer_not_registered_stops_create(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
    method = MinHash(shingling=Shingling(tokenizer="myapp-missing"))
    with pytest.raises(TokenizerError, match="no tokenizer named 'myapp-missing' is registered"):
        create_index(database_dsn, "notes", "notes", "body", method=method)
    with pytest.raises(IndexNotFoundError):
        get_index(database_dsn, "notes")


def built_copies(dsn: str, texts: Sequence[str | None]) -> Index:
    """A built MinHash index of table ``copies``, whose row ``n`` holds ``texts[n]``."""
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE copies (id integer PRIMARY KEY, body text)")
        conn.cursor().executemany("INSERT INTO copies VALUES (%s, %s)", list(enumerate(texts)))
    index = create_index(dsn, "copies", "copies", "body", method=MinHash(threshold=THRESHOLD))
    index.build()
    return index


def test_exact_verification_reads_no_text_of_an_identical_row(database_dsn: str) -> None:
    """Rows whose stored set hash equals the query's score 1 without their texts being read;
    every other candidate's text is read and scored. The texts are changed under the index
    (its queue entries lost, so nothing is pending): an identical row whose text is now NULL
    still scores 1, a near copy whose text is now unrelated is read and dropped."""
    original = edited_corpus(11, 1)[0]
    words = original.split()
    near = " ".join([*words[:-3], "x1", "x2", "x3"])
    texts = [original, original, original, original, near, near + " x4"]
    index = built_copies(database_dsn, texts)
    before = {m.key: m.similarity for m in index.similar(key=0)}
    assert before == pytest.approx(
        {1: 1.0, 2: 1.0, 3: 1.0} | {k: exact_jaccard(original, texts[k]) for k in (4, 5)}
    )
    with psycopg.connect(database_dsn) as conn:
        conn.execute("SET session_replication_role = replica")  # queued in the inbox
        conn.execute("UPDATE copies SET body = NULL WHERE id IN (1, 2, 3)")
        conn.execute("UPDATE copies SET body = 'an unrelated text of other words' WHERE id = 4")
        conn.execute("DELETE FROM simindex.copies_inbox")  # and lost: nothing is pending
    # The estimate is the stored rows' alone: all five still there.
    assert {m.key for m in index.similar(key=0, verify="estimate")} == {1, 2, 3, 4, 5}
    after = {m.key: m.similarity for m in index.similar(key=0)}  # exact, the default
    assert after == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0, 5: before[5]})
    by_text = {m.key: m.similarity for m in index.similar(original)}
    assert by_text == pytest.approx({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 5: before[5]})


def test_exact_verification_reads_one_text_of_each_other_set(database_dsn: str) -> None:
    """Candidates sharing a stored set hash other than the query's are scored by one text of
    theirs, checked against that hash: a set whose first row's text changed under the index
    (its queue entries lost) has each of its texts read, so the changed row gets its own score
    and the others theirs; a set whose later row changed is scored by its first row, as
    identical rows are."""
    original = edited_corpus(12, 1)[0]
    words = original.split()
    near = " ".join([*words[:-3], "x1", "x2", "x3"])
    nearer = " ".join([*words[:-1], "y1"])
    texts = [original, near, near, near, nearer, nearer, nearer]
    index = built_copies(database_dsn, texts)
    scores = {k: exact_jaccard(original, texts[k]) for k in range(1, 7)}
    assert scores[1] != scores[4]
    assert {m.key: m.similarity for m in index.similar(key=0)} == pytest.approx(scores)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("SET session_replication_role = replica")  # queued in the inbox
        conn.execute("UPDATE copies SET body = %s WHERE id = 1", (nearer,))
        conn.execute("UPDATE copies SET body = 'an unrelated text of other words' WHERE id = 6")
        conn.execute("DELETE FROM simindex.copies_inbox")  # and lost: nothing is pending
    found = {m.key: m.similarity for m in index.similar(key=0)}
    # Row 1, the first of its set, now reads as a copy of `nearer`; row 6, not the first of
    # its set, still scores as its set (its stored hash says so, as an identical row's does).
    assert found == pytest.approx(scores | {1: scores[4]})


def test_exact_verification_reads_every_text_while_changes_are_pending(
    database_dsn: str,
) -> None:
    """While a change waits for the worker (here in the inbox: a replica-mode write, queued by
    the row triggers), a stored set hash may be older than its row's text: every candidate's
    text is read, those of the query's own set too, and each row gets its exact score."""
    original = edited_corpus(13, 1)[0]
    words = original.split()
    near = " ".join([*words[:-3], "x1", "x2", "x3"])
    texts = [original, original, original, near, near, near]
    index = built_copies(database_dsn, texts)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("SET session_replication_role = replica")  # queued by the row triggers
        conn.execute("UPDATE copies SET body = 'an unrelated text of other words' WHERE id = 2")
        conn.execute("UPDATE copies SET body = 'another text, of words unseen' WHERE id = 5")
        pending = conn.execute("SELECT EXISTS (SELECT FROM simindex.copies_inbox)").fetchone()
        assert pending == (True,)
    # The estimate is the stored rows' alone: all five still there.
    assert {m.key for m in index.similar(key=0, verify="estimate")} == {1, 2, 3, 4, 5}
    found = {m.key: m.similarity for m in index.similar(key=0)}
    assert found == pytest.approx({1: 1.0, 3: exact_jaccard(original, near), 4: found[4]})
    assert found[4] == pytest.approx(exact_jaccard(original, near))


def _lock_held(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = pg_backend_pid() "
        "AND relation = %s::regclass AND mode = 'AccessShareLock')",
        (table,),
    ).fetchone()
    return bool(row and row[0])


def test_texts_are_read_locked_in_a_transaction_of_their_own_in_autocommit(
    database_dsn: str,
) -> None:
    """In autocommit the lock, the check and the read are one transaction (BEGIN, LOCK and the
    catalog read in one pipeline, the texts and COMMIT in another) that is over when the texts
    come back; each step fails with its own error, and the transaction it began is rolled
    back, the connection left idle and usable."""
    texts = ["one two three four five", "six seven eight nine ten", None]
    built_copies(database_dsn, texts)
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        info, _ = ready_index(conn, "simindex", "copies")
        assert locked_texts(conn, info, [[0, 2, 7], [1]]) == {0: texts[0], 1: texts[1], 2: None}
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert not _lock_held(conn, "copies")
        renamed = replace(info, source=replace(info.source, text_column="other"))
        gone = replace(info, source=replace(info.source, table="gone"))
        for changed, error in (
            (renamed, SourceChangedError),  # the check, after the lock
            (gone, psycopg.errors.UndefinedTable),  # the lock: its own error, not the read's
            (replace(info, index_schema="nowhere"), SchemaNotMigratedError),  # the read
        ):
            with pytest.raises(error):
                locked_texts(conn, changed, [[0]])
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert locked_texts(conn, info, [[1]]) == {1: texts[1]}


def test_texts_are_read_locked_in_a_savepoint_of_the_callers_transaction(
    database_dsn: str,
) -> None:
    """In a caller's transaction the lock holds until that transaction ends."""
    texts = ["one two three four five", "six seven eight nine ten"]
    built_copies(database_dsn, texts)
    with psycopg.connect(database_dsn) as conn:
        info, _ = ready_index(conn, "simindex", "copies")
        assert not _lock_held(conn, "copies")
        assert locked_texts(conn, info, [[0, 1]]) == {0: texts[0], 1: texts[1]}
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert _lock_held(conn, "copies")
