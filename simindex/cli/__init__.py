"""The ``simindex`` command line: ``simindex <command> [options]`` or ``python -m simindex``.

Results go to stdout (tables for people, one JSON document with ``--json``), progress and
errors to stderr. Exit codes: 0 done; 1 simindex could not do it (one line: ``simindex: error:
<message>``), or ``check`` found the index differing from its table; 2 the command line was
wrong, including no database at all (neither ``--dsn`` nor ``SIMINDEX_DSN`` nor
``DATABASE_URL``). Each command is a pair of small functions in the module of its concept:
``add_<name>`` registers its subparser, ``run_<name>`` does the work and returns the exit code;
a new command is one more entry in :data:`COMMANDS`. The plumbing they share is in
:mod:`simindex.cli._common`; what people see (tables, progress) is drawn by
:mod:`simindex._terminal`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, TextIO, cast

import simindex
from simindex.cli._common import (
    FAILED,
    INTERRUPTED,
    OK,
    PROG,
    USAGE,
    CommandParser,
    Runner,
    UsageError,
    common_options,
    database,
    emit,
)
from simindex.cli._dedup import add_clusters, add_pairs
from simindex.cli._demo import add_demo
from simindex.cli._index import add_build, add_create, add_drop, add_stats
from simindex.cli._logs import formatter
from simindex.cli._query import add_fingerprint, add_query
from simindex.cli._schema import add_grant, add_migrate
from simindex.cli._sql import add_sql
from simindex.cli._sync import add_check, add_repair, add_sync
from simindex.db.redaction import redact
from simindex.errors import SimindexError

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers

__all__ = ["COMMANDS", "FAILED", "OK", "USAGE", "UsageError", "database", "emit", "main", "parser"]

COMMANDS: Sequence[Callable[[Subparsers, argparse.ArgumentParser], None]] = (
    add_migrate,
    add_create,
    add_build,
    add_query,
    add_fingerprint,
    add_stats,
    add_sql,
    add_check,
    add_repair,
    add_sync,
    add_drop,
    add_grant,
    add_pairs,
    add_clusters,
    add_demo,
)

# What Ctrl-C leaves behind, by command (each writes in one transaction, rolled back).
_INTERRUPTED = {
    "build": "the build was rolled back; the index is as it was before it",
    "create": "nothing was created",
    "repair": "the repair of the current batch was rolled back",
    "sync": "the current batch was rolled back; its keys are still queued",
}

# Killed by SIGPIPE, as the shell reports it: `simindex pairs docs | head` is not an error.
_BROKEN_PIPE = 141


def parser() -> argparse.ArgumentParser:
    main_parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[common_options()],
        description="Near-duplicate search inside PostgreSQL.",
        epilog="Environment: SIMINDEX_DSN (else DATABASE_URL) is the database, SIMINDEX_SCHEMA "
        "the schema. Exit codes: 0 done, 1 error (or `check` found differences), 2 bad command "
        "line or no database given.",
    )
    main_parser.add_argument(
        "--version", action="version", version=f"{PROG} {simindex.__version__}"
    )
    # Typed by its parser class, which takes the same arguments (parents) as any ArgumentParser.
    commands = cast(
        "Subparsers",
        main_parser.add_subparsers(
            title="commands",
            dest="command",
            metavar="COMMAND",
            required=True,
            parser_class=CommandParser,
        ),
    )
    common = common_options()
    for add in COMMANDS:
        add(commands, common)
    return main_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); the exit code."""
    # Exits 2 on a usage error, 0 for --help. An option no command knows is one line, not a
    # usage dump (parse_args would print the main parser's usage for a command's option).
    args, unknown = parser().parse_known_args(argv)
    if unknown:
        # A mistyped --dsn=... keeps its password.
        typed = " ".join(redact(arg, arg.partition("=")[2] or arg) for arg in unknown)
        return _fail(
            f"unrecognized arguments: {typed} (see `{PROG} {args.command} --help` for its options)",
            USAGE,
        )
    # No password of the DSN is ever printed: not in an error, not in a log line.
    dsn = (
        getattr(args, "dsn", None)
        or os.environ.get("SIMINDEX_DSN")
        or os.environ.get("DATABASE_URL")
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Redacting(formatter(getattr(args, "log_format", "text")), dsn))
    logging.getLogger("simindex").addHandler(handler)
    verbose = getattr(args, "verbose", False)
    logging.getLogger("simindex").setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("simindex.cli").setLevel(logging.INFO)  # a command's notices, always
    run: Runner = args.run
    try:
        with warnings.catch_warnings(), _connections(args):
            warnings.showwarning = _warning_line
            return run(args)
    except UsageError as exc:
        return _fail(redact(str(exc), dsn), USAGE)
    except (SimindexError, ValueError) as exc:
        return _fail(redact(str(exc), dsn))
    except BrokenPipeError:
        # The reader of stdout is gone; Python would complain again flushing it at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _BROKEN_PIPE
    except KeyboardInterrupt:  # before or after sync's own handlers were in place
        print(f"{PROG}: interrupted: {_INTERRUPTED.get(args.command, 'stopped')}", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:
        message = _driver_message(exc)
        if message is None:
            raise
        return _fail(redact(message, dsn))
    finally:
        logging.getLogger("simindex").removeHandler(handler)


def _connections(args: argparse.Namespace) -> AbstractContextManager[None]:
    """A command makes a call or two and exits: each transaction on its DSN gets a connection
    of its own, with no pool (nor SQLAlchemy) loaded for it; a worker that follows the queues
    keeps its pool."""
    if getattr(args, "follow", False):
        return nullcontext()
    from simindex.db.connection import single_use_dsns

    return single_use_dsns()


class _Redacting(logging.Formatter):
    """A log format whose lines carry no password of the DSN (a driver's message may)."""

    def __init__(self, inner: logging.Formatter, dsn: str | None) -> None:
        super().__init__()
        self.inner = inner
        self.dsn = dsn

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record), self.dsn)


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning (a threshold below the index's, workers that could not start) as one line."""
    print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def _driver_message(exc: Exception) -> str | None:
    """The one line for a database driver's error; None for any other exception. The drivers
    are imported only if a command loaded them (``--help`` and ``--version`` load neither)."""
    alchemy = sys.modules.get("sqlalchemy.exc")
    if alchemy is not None and isinstance(exc, alchemy.DBAPIError):
        return _database_message(exc.orig if exc.orig is not None else exc)
    if "psycopg" in sys.modules:
        import psycopg

        if isinstance(exc, psycopg.Error):
            return _database_message(exc)
    return None


def _database_message(exc: BaseException) -> str:
    import psycopg

    if isinstance(exc, psycopg.OperationalError):
        return f"cannot reach the database: {exc}"
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
        return f"{exc} (has `simindex migrate` been run for this schema?)"
    return f"database error: {exc}"


def _fail(message: str, code: int = FAILED) -> int:
    # libpq messages span lines (hints, "Is the server running...?"): keep to one.
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return code
