"""Common shingles and IDF weights, learned by build from the table and kept by sync and queries.

The corpus is a templated one, like the demo's Rust crates: many rows share a packaging
sentence and differ only in a short phrase of their own, beside a few real near-duplicates.
"""

from __future__ import annotations

import logging
import random

import psycopg
import pytest

from simindex import check, sync
from simindex.core.frequency import KEPT_SHINGLES
from simindex.core.spec import MinHash, SimHash
from simindex.index import Index, create_index

TEMPLATE = (
    "This package contains the source for the Rust {name} crate, packaged by debcargo for use "
    "with cargo and dh-cargo: {what}. It is meant for building other Debian packages that "
    "depend on it, and for reading the code of the crate while writing software of your own. "
    "The packaging follows the Rust team's policy and is updated with each upstream release."
)
WORDS = [f"w{i}" for i in range(500)]


def corpus(seed: int = 3, count: int = 120) -> dict[int, str]:
    """Template rows with phrases of their own (1..count), two near-duplicate pairs of long
    texts (1001/1002, 1003/1004), and two rows that are the bare template (2001, 2002)."""
    rng = random.Random(seed)
    rows = {
        i: TEMPLATE.format(name=f"crate{i}", what=" ".join(rng.sample(WORDS, 2)))
        for i in range(1, count + 1)
    }
    for first in (1001, 1003):
        words = [rng.choice(WORDS) for _ in range(400)]
        rows[first] = " ".join(words)
        words[-1] = "changed"  # one shingle of 398 differs
        rows[first + 1] = " ".join(words)
    rows[2001] = rows[2002] = TEMPLATE.format(name="crate", what="a crate")
    return rows


def load(dsn: str, rows: dict[int, str]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE crates (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY crates (id, body) FROM STDIN") as copy:
            for key, text in rows.items():
                copy.write_row((key, text))


def groups(index: Index) -> list[set[int]]:
    index.clusters()
    found: dict[int, set[int]] = {}
    for member in index.cluster_members(min_size=2):
        found.setdefault(member.cluster_id, set()).add(member.key)
    return sorted(found.values(), key=lambda g: (-len(g), min(g)))


def test_template_rows_cluster_together_unless_common_shingles_are_ignored(
    database_dsn: str,
) -> None:
    load(database_dsn, corpus())
    plain = create_index(database_dsn, "plain", "crates", "body", method=MinHash(0.7))
    plain.build()
    chained = groups(plain)
    assert len(chained[0]) > 100  # the template chains unrelated rows

    index = create_index(
        database_dsn, "common", "crates", "body", method=MinHash(0.7, ignore_common=0.05)
    )
    index.build()
    assert index.info().spec.counts is not None
    assert groups(index) == [{1001, 1002}, {1003, 1004}, {2001, 2002}]
    assert {p.right for p in index.pairs() if p.left == 1001} == {1002}
    # A query by text drops the same shingles: the plain index finds the template's rows.
    rows = corpus()
    assert [m.key for m in index.similar(rows[7])] == [7]
    assert len(plain.similar(rows[7])) > 100


def test_sync_and_check_use_the_counts_the_build_learned(database_dsn: str) -> None:
    rows = corpus()
    load(database_dsn, rows)
    index = create_index(
        database_dsn, "common", "crates", "body", method=MinHash(0.7, ignore_common=0.05)
    )
    index.build()
    learned = index.info().spec.counts
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "INSERT INTO crates VALUES (3001, %s), (3002, %s)",
            [
                rows[7].upper(),
                TEMPLATE.format(name="newcomer", what="w1 w2 w3 w4"),
            ],
        )
        conn.execute("UPDATE crates SET body = %s WHERE id = 1002", [rows[1001]])
    sync(database_dsn, ["common"])
    assert index.info().spec.counts == learned  # sync learns nothing: it uses the build's
    report = check(database_dsn, "common")
    assert report.ok, report
    assert report.checked == len(rows) + 2
    assert {p.right for p in index.pairs() if p.left == 7} == {3001}
    assert [(m.key, m.similarity) for m in index.similar(key=1001)] == [(1002, 1.0)]


def test_a_rebuild_learns_the_counts_again(database_dsn: str) -> None:
    load(database_dsn, corpus(count=20))
    index = create_index(
        database_dsn, "common", "crates", "body", method=MinHash(0.7, ignore_common=0.2)
    )
    index.build()
    before = index.info().spec.counts
    with psycopg.connect(database_dsn) as conn:
        conn.execute("DELETE FROM crates WHERE id <= 20")
    index.build()
    after = index.info().spec.counts
    assert before is not None and after is not None
    assert after.rows == before.rows - 20
    assert check(database_dsn, "common").ok


def test_idf_simhash_is_kept_exact_by_sync(database_dsn: str) -> None:
    rows = corpus()
    load(database_dsn, rows)
    index = create_index(
        database_dsn,
        "idf",
        "crates",
        "body",
        method=SimHash(idf=True, max_distance=3),
    )
    index.build()
    assert index.info().spec.counts is not None
    assert 1002 in {m.key for m in index.near_key(1001)}
    with psycopg.connect(database_dsn) as conn:
        # Template shingles weigh little, the row's own much: IDF changes its SimHash.
        conn.execute("INSERT INTO crates VALUES (3001, %s)", [rows[5].upper()])
    sync(database_dsn, ["idf"])
    assert check(database_dsn, "idf").ok
    assert {m.key for m in index.near_key(3001, max_distance=0)} == {5}


@pytest.mark.parametrize("share", [0.0, 1.0, "0.1"])
def test_create_refuses_a_share_that_is_not_one(database_dsn: str, share: object) -> None:
    load(database_dsn, corpus(count=3))
    with pytest.raises((ValueError, TypeError), match="ignore_common"):
        create_index(
            database_dsn,
            "common",
            "crates",
            "body",
            method=MinHash(0.7, ignore_common=share),  # type: ignore[arg-type]
        )


def test_a_build_says_when_more_shingles_are_common_than_it_keeps(
    database_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    text = " ".join(f"word{i}" for i in range(KEPT_SHINGLES + 1000))
    load(database_dsn, {key: text for key in range(12)})
    index = create_index(
        database_dsn, "common", "crates", "body", method=MinHash(0.7, ignore_common=0.5)
    )
    with caplog.at_level(logging.WARNING, logger="simindex"):
        index.build()
    assert any("only the 8,192 most common are ignored" in r.getMessage() for r in caplog.records)
    counts = index.info().spec.counts
    assert counts is not None and len(counts.hashes) == KEPT_SHINGLES
    assert {p.right for p in index.pairs() if p.left == 0} == set(range(1, 12))
