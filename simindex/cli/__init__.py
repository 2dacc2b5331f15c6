"""The ``simindex`` command line: ``simindex <command> [options]`` or ``python -m simindex``.

Results go to stdout (tables for people, one JSON document with ``--json``), progress and
errors to stderr. Exit codes: 0 done; 1 simindex could not do it (one line: ``simindex: error:
<message>``), or ``check`` found the index differing from its table; 2 the command line was
wrong, including no database at all (neither ``--dsn`` nor ``SIMINDEX_DSN`` nor
``DATABASE_URL``). Each command is a pair of small functions: ``add_<name>`` registers its
subparser, ``run_<name>`` does the work and returns the exit code; a new command is one more
entry in :data:`COMMANDS`. What people see (tables, the progress bar) is drawn by
:mod:`simindex._terminal`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import psycopg
import sqlalchemy.exc

from simindex import _terminal as terminal
from simindex.errors import IndexNotFoundError, SimindexError

PROG = "simindex"
OK, FAILED, USAGE = 0, 1, 2

if TYPE_CHECKING:
    from simindex.spec import Method

    # generic only in typeshed, not at run time
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
Runner = Callable[[argparse.Namespace], int]


class _CommandParser(argparse.ArgumentParser):
    """A command's parser that also takes an optional positional after options.

    argparse fills a command's positionals at the first run of them, so in ``query NAME
    --limit 3 TEXT`` the optional TEXT is left empty and TEXT is "unrecognized". Here such a
    leftover goes to the first optional positional still empty.
    """

    def parse_known_args(  # type: ignore[override]  # one signature for typeshed's overloads
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        for action in self._get_positional_actions():
            if action.nargs != "?" or getattr(namespace, action.dest) is not None:
                continue
            leftover = next((arg for arg in extras if arg == "-" or arg[:1] != "-"), None)
            if leftover is not None:
                extras.remove(leftover)
                setattr(namespace, action.dest, leftover)
        return namespace, extras


class UsageError(Exception):
    """The command line asked for something impossible: exit 2."""


# -- options every command shares


def _common_options() -> argparse.ArgumentParser:
    """--dsn, --schema and --json; on the main parser and on every command, so they may come
    before or after the command name. Defaults are resolved after parsing (see
    :func:`database`), so that one given before the command is not overwritten."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("common options")
    group.add_argument(
        "--dsn",
        default=argparse.SUPPRESS,
        help="PostgreSQL to use: a libpq string (postgresql://... or 'host=... dbname=...') or "
        "a postgresql+psycopg:// URL (default: $SIMINDEX_DSN, else $DATABASE_URL)",
    )
    group.add_argument(
        "--schema",
        default=argparse.SUPPRESS,
        help="the schema simindex lives in (default: $SIMINDEX_SCHEMA, else 'simindex')",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the result as JSON on stdout",
    )
    return parser


def database(args: argparse.Namespace) -> tuple[str, str]:
    """(dsn, schema) from the options, then the environment."""
    dsn = (
        getattr(args, "dsn", None)
        or os.environ.get("SIMINDEX_DSN")
        or os.environ.get("DATABASE_URL")
    )
    if not dsn:
        raise UsageError("no database given: pass --dsn, or set SIMINDEX_DSN or DATABASE_URL")
    schema = getattr(args, "schema", None) or os.environ.get("SIMINDEX_SCHEMA") or "simindex"
    return dsn, schema


def emit(args: argparse.Namespace, result: dict[str, Any], text: str) -> None:
    """The result of a command on stdout: ``text``, or ``result`` as JSON with --json."""
    if getattr(args, "json", False):
        print(json.dumps(result, sort_keys=True, default=_json_value))
    else:
        print(text)


def _json_value(value: object) -> str:
    """Keys of any SQL type (uuid, numeric) as text; timestamps in ISO 8601."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def progress(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _positive_int(value: str) -> int:
    number = _int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def _non_negative_int(value: str) -> int:
    number = _int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {value!r}")
    return number


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return number


# -- migrate


def add_migrate(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "migrate",
        parents=[common],
        help="create or upgrade simindex's schema",
        description="Create simindex's schema, or upgrade it to this release's newest "
        "revision; safe to run again and from several processes at once. Prints the revision.",
    )
    parser.set_defaults(run=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    from simindex.schema import current_revision, migrate

    dsn, schema = database(args)
    migrate(dsn, schema=schema)
    revision = current_revision(dsn, schema=schema)
    emit(args, {"revision": revision, "schema": schema}, f"{schema} at revision {revision}")
    return OK


# -- sync


def add_sync(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    from simindex.sync import DEFAULT_MAX_TEXT_BYTES

    parser = commands.add_parser(
        "sync",
        parents=[common],
        help="bring indexes up to date with their tables",
        description="Drain the change queues of the named indexes (default: all) into the "
        "indexes, then print what was done. With --follow keep running until SIGTERM or "
        "SIGINT, which finish the current batch and exit 0.",
    )
    parser.add_argument("indexes", nargs="*", metavar="INDEX", help="index names (default: all)")
    parser.add_argument(
        "--follow",
        action="store_true",
        help="keep running: process changes as they are notified, reconnecting when needed",
    )
    parser.add_argument(
        "--retry-failed", action="store_true", help="queue every failed item again first"
    )
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=500,
        metavar="N",
        help="queue entries per transaction (default: %(default)s)",
    )
    parser.add_argument(
        "--heartbeat",
        type=_seconds,
        default=30.0,
        metavar="S",
        help="with --follow, look at the queues at least every S seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--max-text-bytes",
        type=_non_negative_int,
        default=DEFAULT_MAX_TEXT_BYTES,
        metavar="N",
        help="longer texts become failed items instead of being read (default: %(default)s)",
    )
    parser.set_defaults(run=run_sync)


def run_sync(args: argparse.Namespace) -> int:
    from simindex.schema import current_revision
    from simindex.sync import stop_on_signals, sync

    dsn, schema = database(args)
    # --follow retries a lost server forever; a server never reached is a mistake to report.
    if current_revision(dsn, schema=schema) is None:
        raise SimindexError(
            f"no simindex schema {schema!r} in this database: run `simindex migrate`"
        )
    names = args.indexes or None
    if args.follow:
        which = ", ".join(names) if names else "all indexes"
        progress(f"following {which}; SIGTERM or Ctrl-C stops after the current batch")
    with stop_on_signals() as stop:
        report = sync(
            dsn,
            names,
            batch_size=args.batch_size,
            follow=args.follow,
            stop=stop,
            retry_failed=args.retry_failed,
            max_text_bytes=args.max_text_bytes,
            heartbeat=args.heartbeat,
            index_schema=schema,
        )
    if report.busy:
        progress(f"skipped while being built or dropped: {', '.join(sorted(report.busy))}")
    result = {
        "taken": report.taken,
        "indexed": report.indexed,
        "removed": report.removed,
        "failed": report.failed,
        "batches": report.batches,
        "busy": sorted(report.busy),
        "reconnects": report.reconnects,
        "seconds": round(report.seconds, 3),
    }
    text = (
        f"synced {report.taken} queued keys in {report.batches} batches: "
        f"{report.indexed} indexed, {report.removed} removed, {report.failed} failed "
        f"({report.seconds:.2f} s)"
    )
    emit(args, result, text)
    return OK


# -- create and drop

# Method options: (method, flag, argparse keywords, help). Each flag's dest is the field of
# SimHash, MinHash or (shingle_*) Shingling it sets; the default shown is the field's default.
# fmt: off
_METHOD_OPTIONS: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("simhash", "--max-distance", {"type": _non_negative_int, "metavar": "K"},
     "the largest Hamming distance queries may ask for"),
    ("simhash", "--num-blocks", {"type": _positive_int},
     "Manku blocks (default: chosen for --expected-rows)"),
    ("simhash", "--top-n", {"type": _positive_int}, "sparse SimHash: set exactly N bits"),
    ("simhash", "--expected-rows", {"type": _positive_int},
     "the table size the blocks are chosen for"),
    ("minhash", "--threshold", {"type": _number, "metavar": "J"},
     "the Jaccard similarity the LSH bands are tuned for, in (0, 1)"),
    ("minhash", "--num-perm", {"type": _positive_int}, "values per signature"),
    ("minhash", "--scheme", {"choices": ("classic", "one_permutation")},
     "how signatures are computed"),
    ("minhash", "--seed", {"type": _non_negative_int}, "selects the hash functions"),
    ("minhash", "--num-bands", {"type": _positive_int},
     "LSH bands (default: chosen for --threshold)"),
    ("minhash", "--rows-per-band", {"type": _positive_int},
     "signature values per band (with --num-bands)"),
    ("shingling", "--shingle-unit", {"choices": ("word", "char")},
     "word n-grams or character n-grams"),
    ("shingling", "--shingle-size", {"type": _positive_int}, "units per shingle"),
    ("shingling", "--with-characters", {"action": "store_true"},
     "word shingles: also add every character of every word as a feature"),
    ("shingling", "--shingle-seed", {"type": _non_negative_int}, "seed of the unit hashes"),
)
# fmt: on


def add_create(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    from simindex.spec import MinHash, SimHash
    from simindex.text import Shingling

    parser = commands.add_parser(
        "create",
        parents=[common],
        help="create an index of a table's text column",
        description="Create an empty near-duplicate index of TABLE.COLUMN, and the triggers "
        "that queue the table's changes for `simindex sync`; fill it with `simindex build "
        "NAME`. Options of the other method are refused.",
    )
    parser.add_argument("name", metavar="NAME", help="the index's name: [a-z][a-z0-9_]*")
    parser.add_argument("--table", required=True, help="the table to index")
    parser.add_argument("--column", required=True, help="its text column")
    parser.add_argument("--key", help="a unique column identifying rows (default: primary key)")
    parser.add_argument("--table-schema", metavar="SCHEMA", help="default: the search_path")
    parser.add_argument(
        "--method",
        choices=("simhash", "minhash"),
        default="simhash",
        help="simhash: Hamming distance of 64-bit SimHashes, exact; minhash: Jaccard "
        "similarity of shingle sets, by LSH bands (default: %(default)s)",
    )
    defaults = {"simhash": SimHash(), "minhash": MinHash(), "shingling": Shingling()}
    groups = {method: parser.add_argument_group(f"{method} options") for method in defaults}
    for method, flag, keywords, help_text in _METHOD_OPTIONS:
        default = getattr(defaults[method], _field(flag))
        if isinstance(default, int) and default >= 10_000:
            default = f"{default:,}"
        shown = "" if default is None or default is False else f" (default: {default})"
        if "type" in keywords:
            keywords = {"metavar": "N"} | keywords
        groups[method].add_argument(flag, **keywords, default=None, help=help_text + shown)
    parser.set_defaults(run=run_create)


def run_create(args: argparse.Namespace) -> int:
    from simindex.index import create_index

    dsn, schema = database(args)
    method = _method(args)
    index = create_index(
        dsn,
        args.name,
        args.table,
        args.column,
        key=args.key,
        schema=args.table_schema,
        method=method,
        index_schema=schema,
    )
    info = index.info()
    text = (
        f"created {info.spec.kind} index {info.name} of {terminal.source(info)}\n"
        f"  {terminal.spec(info.spec)}\n"
        f"next: simindex build {info.name}"
    )
    emit(args, terminal.info_json(info), text)
    return OK


def _method(args: argparse.Namespace) -> Method:
    """The SimHash or MinHash the options describe; options of the other method are an error."""
    from simindex.spec import MinHash, SimHash
    from simindex.text import Shingling

    given: dict[str, dict[str, Any]] = {"simhash": {}, "minhash": {}, "shingling": {}}
    for method, flag, _, _ in _METHOD_OPTIONS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            given[method][_field(flag)] = value
    other = "minhash" if args.method == "simhash" else "simhash"
    if given[other]:
        refused = ", ".join(_flag(field) for field in given[other])
        raise UsageError(f"{refused}: an option of --method {other}, not {args.method}")
    shingling = Shingling(**given["shingling"])
    kind = SimHash if args.method == "simhash" else MinHash
    return kind(shingling=shingling, **given[args.method])


def _field(flag: str) -> str:
    """The dataclass field a method option sets: ``--shingle-seed`` sets Shingling's ``seed``."""
    return flag[2:].removeprefix("shingle-").replace("-", "_")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def add_drop(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "drop",
        parents=[common],
        help="remove an index",
        description="Remove an index: its side tables, queue, functions and triggers. The "
        "indexed table is not touched.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.add_argument(
        "--missing-ok", action="store_true", help="no index of that name is not an error"
    )
    parser.set_defaults(run=run_drop)


def run_drop(args: argparse.Namespace) -> int:
    from simindex.index import drop_index, get_index

    dsn, schema = database(args)
    try:
        get_index(dsn, args.name, index_schema=schema)
    except IndexNotFoundError:
        if not args.missing_ok:
            raise
        emit(args, {"name": args.name, "dropped": False}, f"no index {args.name}: nothing to drop")
        return OK
    drop_index(dsn, args.name, index_schema=schema, missing_ok=args.missing_ok)
    emit(args, {"name": args.name, "dropped": True}, f"dropped index {args.name}")
    return OK


# -- build


def add_build(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "build",
        parents=[common],
        help="fill an index from its table",
        description="Read the whole table and fill the index (again, when it was built "
        "before: queries keep answering from the old contents until the new ones are swapped "
        "in). Progress goes to stderr: a bar on a terminal, a line every 10 s otherwise.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=2000,
        metavar="N",
        help="rows per fetch, fingerprint task and COPY (default: %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="processes computing fingerprints (default: every core for large tables)",
    )
    parser.set_defaults(run=run_build)


def run_build(args: argparse.Namespace) -> int:
    from simindex.index import get_index

    dsn, schema = database(args)
    index = get_index(dsn, args.name, index_schema=schema)
    bar = terminal.ProgressBar(f"building {args.name}", sys.stderr)
    try:
        report = index.build(batch_size=args.batch_size, workers=args.workers, progress=bar)
    finally:
        bar.close()
    result = {
        "name": args.name,
        "rows": report.rows,
        "skipped": report.skipped,
        "seconds": round(report.seconds, 3),
    }
    text = (
        f"built {args.name}: {report.rows:,} rows indexed, {report.skipped:,} skipped (no text) "
        f"in {terminal.duration(report.seconds)}"
    )
    emit(args, result, text)
    return OK


# -- query


def add_query(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "query",
        parents=[common],
        help="find the near-duplicates of a text or of a row",
        description="Print the rows of the indexed table near a text (TEXT, --file, or stdin "
        "with '-') or near the row with --key: their key and Hamming distance (SimHash), or "
        "their key and Jaccard similarity (MinHash), closest first.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.add_argument(
        "text", nargs="?", metavar="TEXT", help="the text to look for ('-': read it from stdin)"
    )
    parser.add_argument("--file", metavar="PATH", help="read the text from a UTF-8 file")
    parser.add_argument(
        "--key",
        metavar="KEY",
        help="look for the row with this key instead (it is left out of the answer)",
    )
    parser.add_argument(
        "--max-distance",
        type=_non_negative_int,
        metavar="K",
        help="SimHash: at most K differing bits (default and upper limit: the index's)",
    )
    parser.add_argument(
        "--threshold",
        type=_number,
        metavar="J",
        help="MinHash: at least this Jaccard similarity (default: the index's)",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="MinHash: rank and filter by the exact Jaccard similarity, from the source texts",
    )
    parser.add_argument("--limit", type=_positive_int, metavar="N", help="at most N matches")
    parser.set_defaults(run=run_query)


def run_query(args: argparse.Namespace) -> int:
    from simindex.connection import connect
    from simindex.index import Index, transaction
    from simindex.source import key_from_text
    from simindex.spec import SimHash

    if [args.text, args.file, args.key].count(None) != 2:
        raise UsageError("give exactly one of TEXT, --file PATH or --key KEY ('-' reads stdin)")
    dsn, schema = database(args)
    text = None if args.key is not None else _query_text(args.text, args.file)
    with connect(dsn) as connection:  # one connection for the lookups and the query
        index = Index(connection, args.name, index_schema=schema)
        info = index.info()
        method = info.spec.method
        wrong = ("threshold", "exact") if isinstance(method, SimHash) else ("max_distance",)
        for dest in wrong:
            if getattr(args, dest) not in (None, False):
                raise UsageError(f"{_flag(dest)}: {args.name} is a {info.spec.kind} index")
        key = None
        if args.key is not None:
            with transaction(connection) as conn:
                key = key_from_text(conn, info.source, args.key)
        rows: list[tuple[Any, int | float]]
        if isinstance(method, SimHash):
            setting, measure = "max_distance", "distance"
            limit: float = method.max_distance if args.max_distance is None else args.max_distance
            matches = (
                index.near(text, max_distance=args.max_distance)
                if key is None
                else index.near_key(key, max_distance=args.max_distance)
            )
            rows = [(match.key, match.distance) for match in matches]
        else:
            setting, measure = "threshold", "similarity"
            limit = method.threshold if args.threshold is None else args.threshold
            similar = index.similar(text, key=key, threshold=args.threshold, exact=args.exact)
            rows = [(match.key, match.similarity) for match in similar]
    rows = rows[: args.limit]
    result: dict[str, Any] = {
        "index": args.name,
        "method": info.spec.kind,
        setting: limit,
        "matches": [{"key": found, measure: value} for found, value in rows],
    }
    if measure == "similarity":
        result["exact"] = args.exact
    if rows:
        shown = terminal.table(["key", measure], rows)
    else:
        shown = f"no matches ({setting.replace('_', ' ')} {limit})"
    emit(args, result, shown)
    return OK


def _query_text(text: str | None, path: str | None) -> str:
    """The text to look for: TEXT itself, or read from --file or stdin ('-'); never empty."""
    if text is not None and text != "-":
        where, value = "TEXT", text
    elif path is None or path == "-":
        where, value = "stdin", _decode(sys.stdin.buffer.read(), "stdin")
    else:
        where = path
        try:
            with open(path, "rb") as file:
                value = _decode(file.read(), path)
        except OSError as exc:
            raise SimindexError(f"cannot read {path}: {exc.strerror}") from exc
    if not value.strip():
        raise SimindexError(f"nothing to look for: {where} is empty")
    return value


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SimindexError(f"{where} is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc


# -- stats


def add_stats(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "stats",
        parents=[common],
        help="show indexes: state, rows, disk use, queue",
        description="For each index: its method, table and column, state, rows indexed and "
        "skipped at the last build, the disk use of its tables (pg_total_relation_size), its "
        "queued keys and failed items, and when it was built.",
    )
    parser.add_argument("indexes", nargs="*", metavar="NAME", help="index names (default: all)")
    parser.set_defaults(run=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    from simindex.stats import index_stats

    dsn, schema = database(args)
    found = index_stats(dsn, args.indexes or None, index_schema=schema)
    result = {"indexes": [terminal.stats_json(stats) for stats in found]}
    emit(args, result, terminal.stats_text(found) if found else f"no indexes in schema {schema}")
    return OK


# -- check and repair


def add_check(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "check",
        parents=[common],
        help="compare an index with its table (exit 1 if they differ)",
        description="Recompute the fingerprints of the table's rows (or of a random sample) "
        "and compare them with the index: rows missing from it, stale in it, and orphaned "
        "entries whose row is gone or has no text. Exit 0 when all match, 1 when some differ "
        "(or on an error). Rows changed since the last `simindex sync` count until synced.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    sampling = parser.add_mutually_exclusive_group()
    sampling.add_argument(
        "--sample",
        type=_positive_int,
        metavar="N",
        help="compare about N rows, drawn at random (TABLESAMPLE BERNOULLI)",
    )
    sampling.add_argument(
        "--fraction",
        type=_number,
        metavar="F",
        help="compare about this fraction of rows, in (0, 1]",
    )
    parser.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    from simindex.check import check

    dsn, schema = database(args)
    fraction = args.fraction
    if args.sample is not None:
        fraction = _fraction_of(dsn, schema, args.name, args.sample)
    report = check(dsn, args.name, sample=fraction, index_schema=schema)
    text = terminal.check_text(args.name, report)
    emit(args, terminal.check_json(args.name, report), text)
    if report.ok:
        return OK
    hint = f"`simindex repair {args.name}` fixes them"
    if report.queued:
        hint = f"{report.queued:,} queued changes: `simindex sync {args.name}`, then check again"
    progress(f"{args.name} differs from its table: {hint}")
    return FAILED


def _fraction_of(dsn: str, schema: str, name: str, rows: int) -> float | None:
    """The share of the source that is about ``rows`` rows (the planner's count, else the last
    build's); None (everything) when that is all of it or the size is unknown."""
    from simindex.index import Index, transaction
    from simindex.source import describe, row_estimate

    info = Index(dsn, name, index_schema=schema).info()
    with transaction(dsn) as conn:
        source = info.source
        described = describe(
            conn, source.table, source.text_column, schema=source.schema, key=source.key_column
        )
        total = row_estimate(conn, described) or info.row_count + info.skipped_count
    return rows / total if 0 < rows < total else None


def add_repair(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "repair",
        parents=[common],
        help="fix whatever `simindex check` finds",
        description="Check the index (see `simindex check`), queue every key found missing, "
        "stale or orphaned, and process the queue, as a sync does: safe beside running writers "
        "and workers. Prints what the check found; keys that fail become failed items.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=500,
        metavar="N",
        help="queue entries per transaction (default: %(default)s)",
    )
    parser.set_defaults(run=run_repair)


def run_repair(args: argparse.Namespace) -> int:
    from simindex.check import repair
    from simindex.sync import queue_counts

    dsn, schema = database(args)
    report = repair(dsn, args.name, batch_size=args.batch_size, index_schema=schema)
    _, failed = queue_counts(dsn, args.name, index_schema=schema)
    fixed = len(report.missing) + len(report.stale) + len(report.orphaned)
    result = terminal.check_json(args.name, report) | {"repaired": fixed, "failed_items": failed}
    text = f"{terminal.check_text(args.name, report)}\nrepaired {fixed:,} keys"
    if failed:
        text += f"; {failed:,} failed items (see `simindex sync --retry-failed`)"
    emit(args, result, text)
    return OK


# -- the program

COMMANDS: Sequence[Callable[[Subparsers, argparse.ArgumentParser], None]] = (
    add_migrate,
    add_create,
    add_build,
    add_query,
    add_stats,
    add_check,
    add_repair,
    add_sync,
    add_drop,
)


def parser() -> argparse.ArgumentParser:
    main_parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[_common_options()],
        description="Near-duplicate search inside PostgreSQL.",
        epilog="Environment: SIMINDEX_DSN (else DATABASE_URL) is the database, SIMINDEX_SCHEMA "
        "the schema. Exit codes: 0 done, 1 error (or `check` found differences), 2 bad command "
        "line or no database given.",
    )
    # Typed by its parser class, which takes the same arguments (parents) as any ArgumentParser.
    commands = cast(
        "Subparsers",
        main_parser.add_subparsers(
            title="commands", metavar="COMMAND", required=True, parser_class=_CommandParser
        ),
    )
    common = _common_options()
    for add in COMMANDS:
        add(commands, common)
    return main_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); the exit code."""
    args = parser().parse_args(argv)  # exits 2 on a usage error, 0 for --help
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine(f"{PROG}: %(message)s"))
    logging.getLogger("simindex").addHandler(handler)
    logging.getLogger("simindex").setLevel(logging.WARNING)
    run: Runner = args.run
    try:
        return run(args)
    except UsageError as exc:
        return _fail(str(exc), USAGE)
    except (SimindexError, ValueError) as exc:
        return _fail(str(exc))
    except sqlalchemy.exc.DBAPIError as exc:
        return _fail(_database_message(exc.orig if exc.orig is not None else exc))
    except psycopg.Error as exc:
        return _fail(_database_message(exc))
    except KeyboardInterrupt:  # before or after sync's own handlers were in place
        return 130
    finally:
        logging.getLogger("simindex").removeHandler(handler)


class _OneLine(logging.Formatter):
    """Log records (sync's reconnect warnings) as one line each."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(super().format(record).split())


def _database_message(exc: BaseException) -> str:
    if isinstance(exc, psycopg.OperationalError):
        return f"cannot reach the database: {exc}"
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
        return f"{exc} (has `simindex migrate` been run for this schema?)"
    return f"database error: {exc}"


def _fail(message: str, code: int = FAILED) -> int:
    # libpq messages span lines (hints, "Is the server running...?"): keep to one.
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return code
