"""The build cut into its steps, a binary COPY beside it, and the long-text build rate."""

from __future__ import annotations

import functools
import multiprocessing
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import psycopg
from dataset import Dataset
from numpy.typing import NDArray
from pgserver import Conn, load_table, scalar
from psycopg import sql
from query_plan import MAX_DISTANCE
from report import per_second, since

from simindex.core.bits import to_signed_array
from simindex.core.fingerprints import fingerprint_batch
from simindex.core.spec import MinHash, SimHash
from simindex.db.catalog import store_for
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.index import create_index, drop_index
from simindex.ops.build import BuildReport


def build_phases(
    dsn: str,
    table: str,
    method: SimHash | MinHash,
    workers: int,
    limit_rows: int | None = None,
) -> dict[str, Any]:
    """The build's work done step by step (not pipelined), each step timed: read with a
    server-side cursor, fingerprint in ``workers`` processes, side-table rows and COPY, index
    creation, VACUUM ANALYZE; beside it, the proposed binary COPY of the same rows. A scratch
    index over ``table`` (or its first ``limit_rows`` ids), dropped afterwards."""
    name = "phases"
    drop_index(dsn, name, missing_ok=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS phases_source")
        source = sql.Identifier(table)
        total = int(scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(source)))
        if limit_rows is not None and total > limit_rows:
            conn.execute(
                sql.SQL(
                    "CREATE TABLE phases_source AS SELECT * FROM {} ORDER BY id LIMIT {}"
                ).format(source, sql.Literal(limit_rows))
            )
            conn.execute("ALTER TABLE phases_source ADD PRIMARY KEY (id)")
            conn.execute("VACUUM ANALYZE phases_source")
            table = "phases_source"
    index = create_index(dsn, name, table, "body", method=method)
    info = index.info()
    store = store_for("simindex", name, info.source, info.spec)
    spec_json = info.spec.to_json()
    phases: dict[str, Any] = {"table": table}
    with psycopg.connect(dsn) as conn:
        started = time.perf_counter()
        reader = conn.cursor(name="phases_read")
        reader.execute(sql.SQL("SELECT id, body FROM {}").format(sql.Identifier(table)))
        batches: list[tuple[list[Any], list[str | None]]] = []
        while rows := reader.fetchmany(2000):
            batches.append(([row[0] for row in rows], [row[1] for row in rows]))
        reader.close()
        count = sum(len(keys) for keys, _ in batches)
        phases["rows"] = count
        phases["read"] = since(started, count)

        sample = [text for _, texts in batches[:10] for text in texts]
        fingerprint_batch(spec_json, sample[:100])
        started = time.perf_counter()
        fingerprint_batch(spec_json, sample)
        phases["fingerprint_one_process_sample"] = since(started, len(sample))
        started = time.perf_counter()
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            computed = list(
                pool.map(
                    functools.partial(fingerprint_batch, spec_json),
                    [texts for _, texts in batches],
                )
            )
        phases[f"fingerprint_{workers}_processes"] = since(started, count)

        store.create(conn, staging=True)
        prepare_seconds = copy_seconds = 0.0
        kept_batches: list[tuple[NDArray[np.int64], NDArray[np.uint64]]] = []
        for (keys, _), (values, present) in zip(batches, computed, strict=True):
            kept = np.flatnonzero(present)
            kept_keys = [keys[i] for i in kept.tolist()]
            kept_batches.append((np.array(kept_keys, np.int64), values[kept]))
            begin = time.perf_counter()
            if isinstance(store, SimHashStore):
                rows_out = list(store.rows(kept_keys, values[kept]))
                prepared = time.perf_counter()
                store.copy(conn, rows_out, staging=True)
            else:
                store.stored(values[kept])
                prepared = time.perf_counter()
                store.copy(conn, kept_keys, values[kept], staging=True)
            done = time.perf_counter()
            prepare_seconds += prepared - begin
            copy_seconds += done - prepared
        if isinstance(store, MinHashStore):
            phases["band_hashes_and_signature_conversion"] = per_second(prepare_seconds, count)
            phases["copy_write_row_with_its_own_band_hashes"] = per_second(copy_seconds, count)
        else:
            phases["side_table_rows_numpy_permute_tolist"] = per_second(prepare_seconds, count)
            phases["copy_write_row"] = per_second(copy_seconds, count)
        phases["proposed_binary_copy_from_numpy"] = binary_copy_trial(conn, store, kept_batches)
        started = time.perf_counter()
        store.finish(conn, staging=True)
        phases["create_indexes_and_analyze"] = since(started, count)
        store.swap_in_staging(conn)
        conn.execute(
            statement("catalog_built", catalog=sql.Identifier("simindex", "indexes")),
            {"name": name, "row_count": count, "skipped_count": 0},
        )
        conn.commit()
        started = time.perf_counter()
        conn.autocommit = True
        tables = [store.table()] if isinstance(store, SimHashStore) else store.side_tables()
        for relation in tables:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(relation))
        phases["vacuum_analyze"] = since(started, count)
        conn.execute("DROP TABLE IF EXISTS phases_source")
    drop_index(dsn, name)
    phases["sum_seconds_of_the_build_steps"] = round(
        sum(
            float(value["seconds"])
            for key, value in phases.items()
            if isinstance(value, dict) and "one_process" not in key and "proposed" not in key
        ),
        2,
    )
    return phases


PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
PGCOPY_TRAILER = b"\xff\xff"
INT8_OID = 20


def binary_int8_rows(columns: Sequence[NDArray[np.int64]]) -> bytes:
    """COPY BINARY tuples of bigint columns, built with numpy (no Python loop per row)."""
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i in range(len(columns)):
        fields += [(f"length{i}", ">i4"), (f"value{i}", ">i8")]
    rows = np.empty(len(columns[0]), np.dtype(fields))
    rows["count"] = len(columns)
    for i, column in enumerate(columns):
        rows[f"length{i}"] = 8
        rows[f"value{i}"] = column
    return rows.tobytes()


def _copy_binary(conn: Conn, table: sql.Identifier, chunks: Iterable[bytes]) -> None:
    query = sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(table)
    with conn.cursor().copy(query) as copy:
        copy.write(PGCOPY_HEADER)
        for chunk in chunks:
            copy.write(chunk)
        copy.write(PGCOPY_TRAILER)


def binary_copy_trial(
    conn: Conn,
    store: SimHashStore | MinHashStore,
    batches: Sequence[tuple[NDArray[np.int64], NDArray[np.uint64]]],
) -> dict[str, Any]:
    """The rows the store just wrote, written again into scratch tables as COPY BINARY
    buffers made by numpy; timed, and checked equal to what the store wrote."""
    if isinstance(store, MinHashStore):
        return {"skipped": "a study of the SimHash side table"}
    count = sum(len(keys) for keys, _ in batches)
    pairs: list[tuple[sql.Identifier, sql.Identifier]] = []
    started = time.perf_counter()
    if isinstance(store, SimHashStore):
        trial = sql.Identifier("trial_simhash")
        pairs.append((trial, store.table(staging=True)))
        conn.execute(sql.SQL("CREATE TEMP TABLE {} (LIKE {})").format(trial, pairs[0][1]))
        _copy_binary(
            conn,
            trial,
            (
                binary_int8_rows(
                    [keys, to_signed_array(values)]
                    + [to_signed_array(t.permute_array(values)) for t in store.design.tables]
                )
                for keys, values in batches
            ),
        )
    seconds = time.perf_counter() - started
    differing = 0
    for trial, staging in pairs:
        differing += int(
            scalar(
                conn,
                sql.SQL(
                    "SELECT (SELECT count(*) FROM (TABLE {0} EXCEPT ALL TABLE {1}) AS a) "
                    "+ (SELECT count(*) FROM (TABLE {1} EXCEPT ALL TABLE {0}) AS b)"
                ).format(trial, staging),
            )
        )
        conn.execute(sql.SQL("DROP TABLE {}").format(trial))
    return {
        **per_second(seconds, count),
        "includes": "band hashes / permutations, numpy record arrays, COPY (FORMAT BINARY)",
        "rows_differing_from_the_store_copy": differing,
    }


def long_build(dsn: str, dataset: Dataset) -> dict[str, Any]:
    """Build rate for the long texts alone (``long_documents``): the default worker choice
    (one process below 50,000 rows) and every core."""
    long_ids = [i + 1 for i, text in enumerate(dataset.texts) if len(text.split()) > 500]
    if not long_ids:
        return {"skipped": "no long texts"}
    with psycopg.connect(dsn, autocommit=True) as conn:
        load = load_table(conn, "long_documents", ((k, dataset.texts[k - 1]) for k in long_ids))
    words = sum(dataset.words(key) for key in long_ids)
    index = create_index(
        dsn,
        "longdocs",
        "long_documents",
        "body",
        method=SimHash(max_distance=MAX_DISTANCE, expected_rows=len(long_ids)),
    )
    result: dict[str, Any] = {"rows": len(long_ids), "mean_words": round(words / len(long_ids))}
    result["load"] = load
    for label, workers in (("default_workers", None), ("all_cores", os.cpu_count() or 1)):
        report: BuildReport = index.build(workers=workers)
        result[label] = {
            "workers": workers if workers is not None else 1,
            "seconds": round(report.seconds, 2),
            "docs_per_second": round(report.rows / report.seconds),
        }
    index.drop()
    return result
