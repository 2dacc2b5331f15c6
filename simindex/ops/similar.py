"""MinHash queries: band candidates verified by estimated Jaccard, optionally re-ranked exactly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from simindex.core.spec import IndexSpec, MinHash
from simindex.db.catalog import IndexInfo
from simindex.db.connection import PgConnection
from simindex.db.minhash_store import MinHashStore
from simindex.db.statements import statement
from simindex.errors import KeyNotIndexedError
from simindex.ops.near import check_limit


@dataclass(frozen=True, slots=True)
class Similar:
    """A MinHash neighbour: its key and (estimated, or exact on request) Jaccard similarity."""

    key: Any
    similarity: float


def check_threshold(spec: IndexSpec, threshold: float | None) -> float:
    assert isinstance(spec.method, MinHash)
    if threshold is None:
        return spec.method.threshold
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f"threshold must be a number, got {type(threshold).__name__}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be from 0 to 1, got {threshold}")
    return float(threshold)


def exact_jaccard(spec: IndexSpec, a: str | None, b: str | None) -> float:
    """Jaccard similarity of the two texts' shingle-hash sets."""
    first = set(spec.method.shingling.hashes(a).tolist())
    second = set(spec.method.shingling.hashes(b).tolist())
    union = len(first | second)
    return len(first & second) / union if union else 0.0


def similar(
    conn: PgConnection,
    info: IndexInfo,
    store: MinHashStore,
    *,
    text: str | None,
    key: Any,
    threshold: float | None,
    exact: bool,
    limit: int | None = None,
    indexed: bool | None = None,
) -> list[Similar]:
    """See :meth:`simindex.index.Index.similar`."""
    by_key = key is not None
    if by_key == (text is not None):
        raise TypeError("give exactly one of text= or key=")
    check_limit(limit)
    # Exact re-ranking may reorder: it takes every candidate and cuts afterwards.
    fetch = None if exact else limit
    floor_exact = check_threshold(info.spec, threshold)
    # Exact re-ranking filters by the exact value, so it starts from every band candidate.
    floor = 0.0 if exact else floor_exact
    if by_key:
        if indexed is False:
            raise KeyNotIndexedError.of(info.name, key)
        rows = conn.execute(
            statement("minhash_similar_key", function=store.similar_key_function),
            {"key": key, "threshold": floor, "limit": fetch},
        ).fetchall()
        if (
            not rows
            and indexed is None
            and not conn.execute(
                statement("minhash_signature_of_key", table=store.signatures()), {"key": key}
            ).fetchone()
        ):
            raise KeyNotIndexedError.of(info.name, key)
    else:
        values, lengths = info.spec.minhash_values([text])
        if not lengths[0]:
            return []
        signature, band_keys = store.query_arguments(values[0])
        rows = conn.execute(
            statement(
                "minhash_similar",
                function=store.similar_function,
                array_type=sql.SQL(store.array_type),
            ),
            {"signature": signature, "band_hashes": band_keys, "threshold": floor, "limit": fetch},
        ).fetchall()
    if not exact:
        return [Similar(found_key, float(similarity)) for found_key, similarity in rows]
    source = info.source
    keys = [row[0] for row in rows] + ([key] if by_key else [])
    texts: dict[Any, str | None] = dict(
        conn.execute(
            statement(
                "source_texts_of_keys",
                key=sql.Identifier(source.key_column),
                text=sql.Identifier(source.text_column),
                table=sql.Identifier(source.schema, source.table),
            ),
            {"keys": keys},
        ).fetchall()
    )
    query_text = texts.get(key) if by_key else text
    scored = [
        Similar(found_key, exact_jaccard(info.spec, query_text, texts.get(found_key)))
        for found_key in (row[0] for row in rows)
        if found_key in texts
    ]
    kept = [match for match in scored if match.similarity >= floor_exact]
    return sorted(kept, key=lambda match: (-match.similarity, match.key))[:limit]
