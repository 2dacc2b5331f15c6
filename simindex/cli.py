"""The ``simindex`` command line: ``simindex <command> [options]`` or ``python -m simindex``.

Results go to stdout (``--json`` for machines), progress and errors to stderr. Exit codes:
0 done; 1 simindex could not do it (one line: ``simindex: error: <message>``); 2 the command
line was wrong, including no database at all (neither ``--dsn`` nor ``SIMINDEX_DSN`` nor
``DATABASE_URL``). Each command is a pair of small functions: ``add_<name>`` registers its
subparser, ``run_<name>`` does the work and returns the exit code; a new command is one more
entry in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import psycopg
import sqlalchemy.exc

from simindex.errors import SimindexError

PROG = "simindex"
OK, FAILED, USAGE = 0, 1, 2

if TYPE_CHECKING:  # generic only in typeshed, not at run time
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
Runner = Callable[[argparse.Namespace], int]


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
    print(json.dumps(result, sort_keys=True) if getattr(args, "json", False) else text)


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


# -- the program

COMMANDS: Sequence[Callable[[Subparsers, argparse.ArgumentParser], None]] = (
    add_migrate,
    add_sync,
)


def parser() -> argparse.ArgumentParser:
    main_parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[_common_options()],
        description="Near-duplicate search inside PostgreSQL.",
        epilog="Environment: SIMINDEX_DSN (else DATABASE_URL) is the database, SIMINDEX_SCHEMA "
        "the schema. Exit codes: 0 done, 1 error, 2 bad command line or no database given.",
    )
    commands = main_parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
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
