"""SimHash queries: every fingerprint within ``max_distance`` bits of a text's, a
fingerprint or an indexed row's, from the index's typed SQL functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simindex.core.bits import check_fingerprint, to_signed
from simindex.db.catalog import IndexInfo
from simindex.db.connection import PgConnection
from simindex.db.keys import key_cursor
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import check_key, key_errors
from simindex.db.statements import statement
from simindex.errors import KeyNotIndexedError


@dataclass(frozen=True, slots=True)
class Match:
    """A SimHash neighbour: its key (in the source key's type) and Hamming distance."""

    key: Any
    distance: int


def check_distance(store: SimHashStore, max_distance: int | None) -> int:
    """``max_distance``, or the index's when None; never more than the index's."""
    limit = store.design.max_distance
    if max_distance is None:
        return limit
    if isinstance(max_distance, bool) or not isinstance(max_distance, int):
        raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
    if not 0 <= max_distance <= limit:
        raise ValueError(f"max_distance must be from 0 to the index's {limit}, got {max_distance}")
    return max_distance


def check_limit(limit: int | None) -> int | None:
    """``limit`` if it is None (every row) or a positive int; TypeError or ValueError otherwise."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int or None, got {type(limit).__name__}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    return limit


def near(
    conn: PgConnection,
    info: IndexInfo,
    store: SimHashStore,
    *,
    text: str | None,
    fingerprint: int | None,
    max_distance: int | None,
    limit: int | None = None,
) -> list[Match]:
    """Rows within ``max_distance`` bits of a text's SimHash (or of a fingerprint, in the
    signed form of :mod:`simindex.core.bits`). A text with no features (None, empty) has
    no neighbours."""
    if text is not None and fingerprint is not None:
        raise TypeError("give exactly one of text= or fingerprint=")
    check_limit(limit)
    if fingerprint is None:
        if text is not None and not isinstance(text, str):
            raise TypeError(f"text must be a str or None, got {type(text).__name__}")
        values, present = info.spec.simhash_values([text])
        if not present[0]:
            return []
        stored = to_signed(int(values[0]))
    else:
        stored = check_fingerprint(fingerprint)
    rows = (
        key_cursor(conn)
        .execute(
            statement("simhash_near", function=store.near_function),
            {
                "fingerprint": stored,
                "max_distance": check_distance(store, max_distance),
                "limit": limit,
            },
        )
        .fetchall()
    )
    return [Match(key, distance) for key, distance in rows]


def near_key(
    conn: PgConnection,
    info: IndexInfo,
    store: SimHashStore,
    key: Any,
    max_distance: int | None,
    limit: int | None = None,
    *,
    indexed: bool | None = None,
) -> list[Match]:
    """Rows within ``max_distance`` bits of the row with ``key`` (itself excluded).

    ``indexed``: whether the key is in the index, when the caller has asked already (the
    facade does, in the round trip that checks its catalog entry); None: ask on an empty answer.
    """
    check_key(key)
    if indexed is False:
        raise KeyNotIndexedError.of(info.name, key)
    distance = check_distance(store, max_distance)
    checked_limit = check_limit(limit)
    with key_errors(info.source, key):
        rows = (
            key_cursor(conn)
            .execute(
                statement("simhash_near_key", function=store.near_key_function),
                {"key": key, "max_distance": distance, "limit": checked_limit},
            )
            .fetchall()
        )
        # An empty answer is common; only then is it worth asking whether the key exists.
        if (
            not rows
            and indexed is None
            and not conn.execute(
                statement("simhash_fingerprint_of_key", table=store.table()), {"key": key}
            ).fetchone()
        ):
            raise KeyNotIndexedError.of(info.name, key)
    return [Match(found_key, found_distance) for found_key, found_distance in rows]
