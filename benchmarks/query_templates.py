"""MinHash 0.8 over short texts with template clusters: build rate, bytes a row and the latency
of a query by key, beside a primary-key lookup on the side table, in one run.

    python benchmarks/query_templates.py [--rows N] [--queries N] [--embedded|--local]
                                         [--baseline TREE] [--output PATH]
                                         [--sample templates|uniform]

The corpus is ``dedup_templates.template_texts``: the short texts of ``dataset.make_dataset``
with template clusters planted (4,910, 2,000, 1,000, 4 x 500 and 20 x 100 identical copies,
and one near copy per ten), scattered over the ids. On a throwaway PostgreSQL tuned as
``query.py`` tunes it: ``create_index`` + ``build`` (MinHash 0.8, the default design), then
for a sample of keys (by default half members of template clusters, whose answers are their
whole cluster: the tail; half any row; with ``--sample uniform`` any row's, as an app's queries
would be), taking turns key by key on one connection each:

* ``pk_lookup``: ``SELECT sketch FROM simindex.<name>_minhash WHERE key = $1`` (prepared);
* ``similar_key_v1``: ``SELECT key, similarity FROM simindex.<name>_similar_key_v1($1)``
  (prepared; the estimate, every identical copy scored 1 by its set hash);
* ``similar exact``: ``Index.similar(key=...)`` with its default exact verification, on an
  Engine (the identical copies are not read: their set hash says they score 1);
* ``similar estimate``: ``Index.similar(key=..., verify="estimate")`` on the same Engine;
* with ``--baseline TREE`` (another checkout of simindex, e.g. main's from ``git worktree
  add``), ``similar exact BEFORE`` and ``similar estimate BEFORE``: the same calls by a child
  process with that tree first on ``sys.path``, on the same server, in the same turns, timed
  in the child (the pipe to it is not counted), on an index of the same table that tree
  created and built (its own SQL functions); and ``similar_key_v1 BEFORE``: that index's
  ``similar_key_v1``, called as ``similar_key_v1`` is.

Writes ``benchmarks/results/query-templates-<rows>.json`` (``-<rows>-uniform.json`` for a
uniform sample). Not a test: nothing here asserts a timing. The machine is shared: compare
figures of one run (ratios), not across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from dedup_templates import TEMPLATE_CLUSTERS, template_texts
from pgserver import (
    BuildProgress,
    add_server_options,
    benchmark_server,
    load_table,
    prewarm,
    relation_sizes,
)
from psycopg import sql
from query_facade import sqlalchemy_engine
from query_plan import SEED, SERVER_SETTINGS
from report import (
    RESULTS,
    baseline_label,
    latency_ms,
    log,
    new_result,
    print_table,
    write_result,
)

import simindex
from simindex.core.spec import MinHash
from simindex.db.catalog import store_for
from simindex.db.minhash_store import MinHashStore
from simindex.index import Index, create_index

DEFAULT_ROWS = 200_000
DEFAULT_QUERIES = 2_000
WARM = 200
NAME = "tmpl"


SAMPLES = ("templates", "uniform")


def sample_keys(
    texts: Sequence[str], count: int, sample: str = "templates"
) -> tuple[list[int], int]:
    """The keys queried and how many are template members (rows whose text has at least 100
    identical copies). ``templates``: half template members, half any key (ids from 1),
    shuffled together (the tail on purpose); ``uniform``: every key any row's, as an app's
    queries would be."""
    rng = random.Random(SEED + 7)
    copies: dict[str, int] = {}
    for text in texts:
        copies[text] = copies.get(text, 0) + 1
    members = {i for i, text in enumerate(texts, 1) if copies[text] >= 100}
    if sample == "uniform":
        keys = rng.sample(range(1, len(texts) + 1), count)
        return keys, sum(key in members for key in keys)
    keys = rng.sample(sorted(members), min(len(members), count // 2))
    keys += rng.sample(range(1, len(texts) + 1), count - len(keys))
    rng.shuffle(keys)
    return keys, min(len(members), count // 2)


Call = Callable[[int], int | tuple[int, float]]
"""A timed call by key: its number of answers, or that and the seconds it measured itself."""


def interleaved(calls: dict[str, Call], keys: Sequence[int]) -> dict[str, Any]:
    """Each call for each key in turn (after ``WARM`` warm-up keys): latency and answers."""
    seconds: dict[str, list[float]] = {label: [] for label in calls}
    answers: dict[str, list[int]] = {label: [] for label in calls}
    for turn, key in enumerate(keys):
        for label, call in calls.items():
            begin = time.perf_counter()
            found = call(key)
            took = time.perf_counter() - begin
            if isinstance(found, tuple):
                found, took = found
            if turn >= WARM:
                seconds[label].append(took)
                answers[label].append(found)
    return {
        label: {
            "latency": latency_ms(seconds[label]),
            "answers_p50": sorted(answers[label])[len(answers[label]) // 2],
            "answers_max": max(answers[label]),
        }
        for label in calls
    }


BEFORE_NAME = f"{NAME}_before"


def build_before(tree: Path, dsn: str) -> None:
    """The baseline's own index of the table: created and built by a child process whose
    simindex is ``tree``'s (``--build``)."""
    path = os.pathsep.join([str(tree), str(Path(__file__).parent)])
    subprocess.run(
        [sys.executable, str(Path(__file__)), "--build", dsn],
        env=os.environ | {"PYTHONPATH": path},
        check=True,
    )


def build(dsn: str) -> None:
    """The child of :func:`build_before`."""
    create_index(dsn, BEFORE_NAME, "documents", "body", method=MinHash(0.8)).build()
    info = Index(dsn, BEFORE_NAME).info()
    store = store_for("simindex", BEFORE_NAME, info.source, info.spec)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(store.table()))
        prewarm(conn, store.side_tables())


class Baseline:
    """``Index.similar`` by key in a child process whose simindex is another tree's, on the
    index that tree built."""

    def __init__(self, tree: Path, dsn: str) -> None:
        self.path = os.pathsep.join([str(tree), str(Path(__file__).parent)])
        self.child = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--serve", dsn],
            env=os.environ | {"PYTHONPATH": self.path},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def call(self, verify: str) -> Call:
        def timed(key: int) -> tuple[int, float]:
            assert self.child.stdin is not None and self.child.stdout is not None
            self.child.stdin.write(f"{verify} {key}\n")
            self.child.stdin.flush()
            found, seconds = json.loads(self.child.stdout.readline())
            return int(found), float(seconds)

        return timed

    def close(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait()


def serve(dsn: str) -> None:
    """The child of :class:`Baseline`: reads ``verify key`` lines, answers ``[answers,
    seconds]``."""
    engine = sqlalchemy_engine(dsn)
    facade = Index(engine, BEFORE_NAME)
    for line in sys.stdin:
        verify, key = line.split()
        begin = time.perf_counter()
        found = facade.similar(key=int(key), verify=verify)  # type: ignore[arg-type]
        print(json.dumps([len(found), time.perf_counter() - begin]), flush=True)
    engine.dispose()


def run(
    dsn: str, rows: int, queries: int, baseline: Path | None = None, sample: str = "templates"
) -> dict[str, Any]:
    log(f"{rows:,} short texts with template clusters")
    texts, planted = template_texts(rows)
    with psycopg.connect(dsn, autocommit=True) as conn:
        loaded = load_table(conn, "documents", enumerate(texts, 1))
    simindex.migrate(dsn)
    log("MinHash 0.8: create_index + build")
    index = create_index(dsn, NAME, "documents", "body", method=MinHash(0.8))
    report = index.build(progress=BuildProgress("minhash build"))
    info = index.info()
    store = store_for("simindex", NAME, info.source, info.spec)
    assert isinstance(store, MinHashStore)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(store.table()))
        sizes = relation_sizes(conn, store.side_tables())
        prewarm(conn, [*store.side_tables(), sql.Identifier("documents")])
    if baseline is not None:
        log("MinHash 0.8 of the baseline tree: create_index + build")
        build_before(baseline, dsn)
    keys, members = sample_keys(texts, queries, sample)
    log(f"{len(keys):,} keys ({members:,} template members), each call in turn")
    engine = sqlalchemy_engine(dsn)
    before = None if baseline is None else Baseline(baseline, dsn)
    try:
        facade = Index(engine, NAME)
        with psycopg.connect(dsn, autocommit=True) as conn:
            pk = sql.SQL("SELECT sketch FROM {} WHERE key = %s").format(store.table())
            by_key = sql.SQL("SELECT key, similarity FROM {}(%s)").format(
                store.similar_key_function
            )
            pk_text, by_key_text = pk.as_bytes(conn), by_key.as_bytes(conn)
            calls: dict[str, Call] = {
                "pk_lookup": lambda k: len(conn.execute(pk_text, (k,), prepare=True).fetchall()),
                "similar_key_v1": lambda k: len(
                    conn.execute(by_key_text, (k,), prepare=True).fetchall()
                ),
                "similar exact": lambda k: len(facade.similar(key=k)),
                "similar estimate": lambda k: len(facade.similar(key=k, verify="estimate")),
            }
            if before is not None:
                old = sql.SQL("SELECT key, similarity FROM {}(%s)").format(
                    sql.Identifier("simindex", f"{BEFORE_NAME}_similar_key_v1")
                )
                old_text = old.as_bytes(conn)
                calls["similar_key_v1 BEFORE"] = lambda k: len(
                    conn.execute(old_text, (k,), prepare=True).fetchall()
                )
                calls["similar exact BEFORE"] = before.call("exact")
                calls["similar estimate BEFORE"] = before.call("estimate")
            measured = interleaved(calls, keys)
    finally:
        engine.dispose()
        if before is not None:
            before.close()
    base = measured["pk_lookup"]["latency"]
    return {
        "rows": rows,
        "load": loaded,
        "template_clusters": list(TEMPLATE_CLUSTERS),
        "planted": planted,
        "build": {
            "rows": report.rows,
            "skipped": report.skipped,
            "seconds": round(report.seconds, 2),
            "rows_per_second": round((report.rows + report.skipped) / report.seconds),
            **sizes,
            "bytes_per_row": round(sizes["total_bytes"] / max(report.rows, 1), 1),
            "design": {
                "num_bands": store.design.num_bands,
                "rows_per_band": store.design.rows_per_band,
                "sketch_bits": info.spec.method.sketch_bits,  # type: ignore[union-attr]
            },
        },
        "sample": {
            "kind": sample,
            "queries": len(keys),
            "timed": len(keys) - WARM,
            "template_members": members,
        },
        "calls": measured,
        "over_pk_lookup": {
            label: {
                q: round(value["latency"][q] / base[q], 2) if base[q] else None
                for q in ("p50_ms", "p99_ms")
            }
            for label, value in measured.items()
            if label != "pk_lookup"
        },
    }


def print_report(result: dict[str, Any]) -> None:
    calls = result["calls"]
    print_table(
        f"MinHash 0.8 by key, {result['rows']:,} short texts with template clusters",
        ["call", "p50 ms", "p99 ms", "max ms", "answers p50", "answers max", "p50 / pk"],
        [
            [
                label,
                value["latency"]["p50_ms"],
                value["latency"]["p99_ms"],
                value["latency"]["max_ms"],
                value["answers_p50"],
                value["answers_max"],
                result["over_pk_lookup"].get(label, {}).get("p50_ms", 1.0),
            ]
            for label, value in calls.items()
        ],
        "lrrrrrr",
    )
    build = result["build"]
    print(
        f"build: {build['rows_per_second']:,} rows/s ({build['seconds']} s), "
        f"{build['bytes_per_row']} bytes a row"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES)
    parser.add_argument("--output", type=Path)
    parser.add_argument(
        "--sample",
        choices=SAMPLES,
        default="templates",
        help="keys queried: half template members (templates, the default) or uniform over "
        "all rows",
    )
    parser.add_argument(
        "--baseline", type=Path, help="another simindex tree, measured beside (as BEFORE)"
    )
    parser.add_argument("--serve", metavar="DSN", help=argparse.SUPPRESS)  # Baseline's child
    parser.add_argument("--build", metavar="DSN", help=argparse.SUPPRESS)  # build_before's
    add_server_options(parser)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return
    if args.build:
        build(args.build)
        return
    result = new_result("query_templates", argv)
    if args.baseline:  # no machine path in a result
        result["command"] = result["command"].replace(str(args.baseline), "BEFORE")
        result["baseline"] = baseline_label(args.baseline)
    with benchmark_server(args.server, SERVER_SETTINGS) as server:
        result["server_settings"] = server.settings
        result |= run(server.dsn, args.rows, args.queries, args.baseline, args.sample)
        version = server.version
    suffix = "" if args.sample == "templates" else f"-{args.sample}"
    output = args.output or RESULTS / f"query-templates-{args.rows}{suffix}.json"
    write_result(output, result, version)
    print_report(result)
    log(f"wrote {output}")


if __name__ == "__main__":
    main()
