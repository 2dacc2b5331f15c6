"""A query by key through SQL beside a primary-key lookup on its side table, as the superuser
and as a reader role, optionally beside another simindex tree, in one run.

    python benchmarks/query_by_key.py [--method simhash|minhash] [--rows N] [--queries N]
                                      [--embedded|--local] [--baseline TREE] [--output PATH]

On a throwaway PostgreSQL tuned as ``query.py`` tunes it, the documents of ``dataset.py``
(``--rows``, 5 % planted near-duplicates) get a SimHash k=3 index (``create_index`` +
``build``, the side table prewarmed). A sample of keys, half planted copies (which have
neighbours), half any row, is asked in turns, the calls of a turn in a shuffled order (a call
right after another of the same key finds its pages hot), each prepared on a connection of its
own:

* ``pk_lookup``: ``SELECT fingerprint FROM simindex.docs_simhash WHERE key = $1``;
* ``near_v1``: ``SELECT key, distance FROM simindex.docs_near_v1($1, 3)`` (the key's
  fingerprint);
* ``near_key_v1``: ``SELECT key, distance FROM simindex.docs_near_key_v1($1)``;

or, with ``--method minhash`` (MinHash 0.8, the default design), ``pk_lookup`` (``SELECT
sketch FROM simindex.docs_minhash WHERE key = $1``) and ``similar_key_v1`` (``SELECT key,
similarity FROM simindex.docs_similar_key_v1($1)``);

each as the superuser and as a login role with the reader right and SELECT on the table (its
answers go through the row-level security probe of the source, the superuser's do not). With
``--baseline TREE`` (e.g. ``git archive main | tar -x -C TREE``), a second database of the same
server holds the same documents indexed by that tree's simindex (a child process with TREE
first on ``sys.path`` migrates and builds it), and its calls take the same turns (labelled
``BEFORE``). Every answer of a call is compared with the other tree's.

Each call's mean rows answered is in ``rows_a_call`` (a ratio is read with the answer's size
in view). Writes ``benchmarks/results/query-by-key-<rows>.json`` (MinHash:
``query-by-key-minhash-<rows>.json``). Not a test: nothing here asserts a timing. The machine
is shared: compare figures of one run (ratios), not across runs.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from dataset import make_dataset
from pgserver import BuildProgress, add_server_options, benchmark_server, load_table, prewarm
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from query_plan import MAX_DISTANCE, MINHASH_THRESHOLD, SEED, SERVER_SETTINGS
from report import RESULTS, baseline_label, latency_ms, log, new_result, print_table, write_result

DEFAULT_ROWS = 200_000
DEFAULT_QUERIES = 3_000
WARM = 200
NAME = "docs"
READER = "simindex_bench_reader"
CALLS = {
    "simhash": {
        "pk_lookup": "SELECT fingerprint FROM simindex.docs_simhash WHERE key = %s",
        "near_v1": "SELECT key, distance FROM simindex.docs_near_v1(%s, %s)",
        "near_key_v1": "SELECT key, distance FROM simindex.docs_near_key_v1(%s)",
    },
    "minhash": {
        "pk_lookup": "SELECT sketch FROM simindex.docs_minhash WHERE key = %s",
        "similar_key_v1": "SELECT key, similarity FROM simindex.docs_similar_key_v1(%s)",
    },
}


def index_documents(dsn: str, rows: int, method: str) -> dict[str, Any]:
    """This process's simindex: migrate, create and build the index, grant the reader (run
    by the parent for its own tree, by a child for the baseline's)."""
    import simindex
    from simindex.core.spec import MinHash, SimHash
    from simindex.index import create_index

    log(f"indexing with the simindex of {Path(simindex.__file__).parent.parent}")
    simindex.migrate(dsn)
    index = create_index(
        dsn,
        NAME,
        "documents",
        "body",
        method=MinHash(MINHASH_THRESHOLD)
        if method == "minhash"
        else SimHash(max_distance=MAX_DISTANCE, expected_rows=rows),
    )
    report = index.build(progress=BuildProgress(f"{method} build"))
    simindex.grant(dsn, READER, "reader")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("GRANT SELECT ON documents TO " + READER)
        prewarm(conn, [sql.Identifier("simindex", f"{NAME}_{method}"), sql.Identifier("documents")])
    return {"rows": report.rows, "seconds": round(report.seconds, 2)}


def database(dsn: str, name: str) -> str:
    return make_conninfo(dsn, dbname=name)


def sample_keys(dsn: str, planted: Sequence[int], count: int, method: str) -> list[tuple[int, int]]:
    """(key, stored fingerprint, or 0 for MinHash): half planted copies, half any indexed row,
    shuffled."""
    value = "fingerprint" if method == "simhash" else "0"
    with psycopg.connect(dsn) as conn:
        found = conn.execute(f"SELECT key, {value} FROM simindex.{NAME}_{method}")
        rows: dict[int, int] = {int(key): int(value) for key, value in found}
    rng = random.Random(SEED + 3)
    copies = [key for key in planted if key in rows]
    keys = rng.sample(copies, min(len(copies), count // 2))
    keys += rng.sample(sorted(rows), count - len(keys))
    rng.shuffle(keys)
    return [(key, rows[key]) for key in keys]


def measure(
    trees: dict[str, tuple[str, str]], keys: Sequence[tuple[int, int]], method: str
) -> dict[str, Any]:
    """Every call of ``method`` of every tree and role (``trees``: label -> (superuser DSN,
    reader DSN)), key by key, the calls of a turn shuffled."""
    order = random.Random(SEED + 4)
    connections = []
    calls = []
    for tree, (owner, reader) in trees.items():
        for role, dsn in (("superuser", owner), ("reader", reader)):
            conn = psycopg.connect(dsn, autocommit=True)
            connections.append(conn)
            for label, text in CALLS[method].items():
                calls.append((tree, role, label, conn, text))
    seconds: dict[tuple[str, str, str], list[float]] = {c[:3]: [] for c in calls}
    answered: dict[tuple[str, str, str], int] = {c[:3]: 0 for c in calls}
    differ: dict[tuple[str, str], int] = {}
    try:
        for turn, (key, fingerprint) in enumerate(keys):
            order.shuffle(calls)
            answers: dict[tuple[str, str, str], list[Any]] = {}
            for tree, role, label, conn, text in calls:
                params = (fingerprint, MAX_DISTANCE) if label == "near_v1" else (key,)
                begin = time.perf_counter()
                rows = conn.execute(text, params, prepare=True).fetchall()
                took = time.perf_counter() - begin
                if turn >= WARM:
                    seconds[(tree, role, label)].append(took)
                    answered[(tree, role, label)] += len(rows)
                answers[(tree, role, label)] = rows
            for (tree, role, label), rows in answers.items():
                other = next((t for t in trees if t != tree), tree)
                if answers[(other, role, label)] != rows:
                    differ[(role, label)] = differ.get((role, label), 0) + 1
    finally:
        for conn in connections:
            conn.close()
    latency = {"/".join(k): latency_ms(v) for k, v in seconds.items()}
    ratios: dict[str, Any] = {}
    for tree in trees:
        for role in ("superuser", "reader"):
            base = latency[f"{tree}/{role}/pk_lookup"]["p50_ms"]
            own = latency[f"{tree}/superuser/pk_lookup"]["p50_ms"]
            for label in CALLS[method]:
                if label == "pk_lookup":
                    continue
                p50 = latency[f"{tree}/{role}/{label}"]["p50_ms"]
                ratios[f"{tree}/{role}/{label}"] = {
                    "over_own_pk_lookup": round(p50 / base, 2),
                    "over_superuser_pk_lookup": round(p50 / own, 2),
                }
    timed = max(1, len(keys) - WARM)
    return {
        "latency": latency,
        "p50_ratios": ratios,
        "rows_a_call": {"/".join(k): round(v / timed, 2) for k, v in answered.items()},
        "answers_differing_between_trees": {"/".join(k): v for k, v in differ.items()},
    }


def run(
    dsn: str, rows: int, queries: int, baseline: Path | None, method: str = "simhash"
) -> dict[str, Any]:
    log(f"data: {rows:,} documents")
    dataset = make_dataset(rows, None)
    with psycopg.connect(dsn, autocommit=True) as conn:
        loaded = load_table(conn, "documents", enumerate(dataset.texts, start=1))
        password = secrets.token_hex(12)
        conn.execute(f"DROP ROLE IF EXISTS {READER}")
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(READER), sql.Literal(password)
            )
        )
        if baseline is not None:  # the same documents, for the other tree
            conn.execute("CHECKPOINT")
            source = conninfo_to_dict(dsn).get("dbname") or "postgres"
            conn.execute(
                sql.SQL("CREATE DATABASE before TEMPLATE {}").format(sql.Identifier(str(source)))
            )
    trees = {"AFTER": dsn}
    builds = {"AFTER": index_documents(dsn, rows, method)}
    if baseline is not None:
        trees["BEFORE"] = database(dsn, "before")
        log("the baseline tree indexes its copy")
        path = os.pathsep.join([str(baseline), str(Path(__file__).parent)])
        subprocess.run(
            [
                *(sys.executable, str(Path(__file__)), "--index", trees["BEFORE"]),
                *("--rows", str(rows), "--method", method),
            ],
            env=os.environ | {"PYTHONPATH": path},
            check=True,
        )
    keys = sample_keys(dsn, [p.copy for p in dataset.planted], queries, method)
    log(f"{len(keys):,} keys, every call in turn")
    logins = {
        tree: (url, make_conninfo(url, user=READER, password=password))
        for tree, url in trees.items()
    }
    return {
        "method": method,
        "rows": rows,
        "load": loaded,
        "builds": builds,
        "sample": {"queries": len(keys), "timed": len(keys) - WARM, "planted_share": 0.5},
        **measure(logins, keys, method),
        "load_average_after_measuring": [round(x, 2) for x in os.getloadavg()],
    }


def print_report(result: dict[str, Any]) -> None:
    rows = []
    for name, value in result["latency"].items():
        ratio = result["p50_ratios"].get(name, {})
        rows.append(
            [
                name,
                value["p50_ms"],
                value["p99_ms"],
                ratio.get("over_own_pk_lookup", 1.0),
                ratio.get("over_superuser_pk_lookup", ""),
            ]
        )
    print_table(
        f"{'MinHash' if result.get('method') == 'minhash' else 'SimHash'} by key beside a "
        f"primary-key lookup, {result['rows']:,} rows",
        ["tree/role/call", "p50 ms", "p99 ms", "p50 / own pk", "p50 / superuser pk"],
        rows,
        "lrrrr",
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--method", choices=sorted(CALLS), default="simhash")
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES)
    parser.add_argument("--output", type=Path)
    parser.add_argument(
        "--baseline", type=Path, help="another simindex tree, measured beside (as BEFORE)"
    )
    parser.add_argument("--index", metavar="DSN", help=argparse.SUPPRESS)  # the baseline's child
    add_server_options(parser)
    args = parser.parse_args(argv)
    if args.index:
        index_documents(args.index, args.rows, args.method)
        return
    result = new_result("query_by_key", argv)
    if args.baseline:  # no machine path in a result
        result["command"] = result["command"].replace(str(args.baseline), "BEFORE")
        result["baseline"] = baseline_label(args.baseline)
    if args.output:
        result["command"] = result["command"].replace(str(args.output), args.output.name)
    with benchmark_server(args.server, SERVER_SETTINGS) as server:
        result["server_settings"] = server.settings
        result |= run(server.dsn, args.rows, args.queries, args.baseline, args.method)
        version = server.version
    kind = "" if args.method == "simhash" else "minhash-"
    output = args.output or RESULTS / f"query-by-key-{kind}{args.rows}.json"
    write_result(output, result, version)
    print_report(result)
    log(f"wrote {output}")


if __name__ == "__main__":
    main()
