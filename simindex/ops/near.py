"""SimHash queries: every fingerprint within ``max_distance`` bits of a text's, a
fingerprint or an indexed row's, from the index's typed SQL functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from simindex.core import validators
from simindex.core.bits import check_fingerprint, to_signed
from simindex.db.catalog import IndexInfo
from simindex.db.connection import PgConnection
from simindex.db.entry import Query
from simindex.db.keys import key_cursor
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement


@dataclass(frozen=True, slots=True)
class Match:
    """A SimHash neighbour: its key (in the source key's type) and Hamming distance."""

    key: Any
    distance: int


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
    made = query(
        info, store, text=text, fingerprint=fingerprint, max_distance=max_distance, limit=limit
    )
    if made is None:
        return []
    compose, _, params = made
    return [Match(key, distance) for key, distance in key_cursor(conn).execute(compose(), params)]


def query(
    info: IndexInfo,
    store: SimHashStore,
    *,
    text: str | None,
    fingerprint: int | None,
    max_distance: int | None,
    limit: int | None,
) -> Query | None:
    """The statement of :func:`near`, its order and its parameters, checked; None for a text
    with no features (no statement: no neighbours)."""
    if text is not None and fingerprint is not None:
        raise TypeError("give exactly one of text= or fingerprint=")
    validators.limit(limit)
    if fingerprint is None:
        if text is not None and not isinstance(text, str):
            raise TypeError(f"text must be a str or None, got {type(text).__name__}")
        values, present = info.spec.simhash_values([text])
        if not present[0]:
            return None
        stored = to_signed(int(values[0]))
    else:
        stored = check_fingerprint(fingerprint)
    return (
        lambda: statement("simhash_near", function=store.near_function),
        _ORDER,
        {
            "fingerprint": stored,
            "max_distance": validators.distance(max_distance, store.design.max_distance),
            "limit": limit,
        },
    )


_ORDER = sql.SQL("q.distance, q.key")
