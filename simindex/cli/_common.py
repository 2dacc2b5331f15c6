"""What every command shares: the common options, the database they name, how a result is
printed, and the argument types. Re-exported by :mod:`simindex.cli`; kept apart so that the
command modules can import it while :mod:`simindex.cli` imports them."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

PROG = "simindex"
OK, FAILED, USAGE = 0, 1, 2
INTERRUPTED = 130  # by Ctrl-C (SIGINT) or SIGTERM, as a shell reports SIGINT

if TYPE_CHECKING:
    # generic only in typeshed, not at run time
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
Runner = Callable[[argparse.Namespace], int]


class CommandParser(argparse.ArgumentParser):
    """A command's parser that also takes an optional positional after options.

    argparse fills a command's positionals at the first run of them, so in ``query NAME
    --limit 3 TEXT`` the optional TEXT is left empty and TEXT is "unrecognized". Here such a
    leftover goes to the first optional positional still empty.

    Options whose help shows a default from a heavy module (the maths, the worker) are added
    by :meth:`later`, when this command is the one parsed: ``simindex --help``, ``--version``
    and the other commands never import that module.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._later: list[Callable[[argparse.ArgumentParser], None]] = []

    def later(self, add: Callable[[argparse.ArgumentParser], None]) -> None:
        """Call ``add(self)`` when this command's arguments are parsed, before they are."""
        self._later.append(add)

    def parse_known_args(  # type: ignore[override]  # one signature for typeshed's overloads
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        while self._later:
            self._later.pop(0)(self)
        namespace, extras = super().parse_known_args(args, namespace)
        for action in self._get_positional_actions():
            if action.nargs != "?" or getattr(namespace, action.dest) is not None:
                continue
            leftover = next((arg for arg in extras if arg == "-" or arg[:1] != "-"), None)
            if leftover is not None:
                extras.remove(leftover)
                setattr(namespace, action.dest, leftover)
        return namespace, extras


def later(parser: argparse.ArgumentParser, add: Callable[[argparse.ArgumentParser], None]) -> None:
    """``add(parser)`` when ``parser``, a command's, is the one parsed (see
    :class:`CommandParser`); at once for any other parser."""
    if isinstance(parser, CommandParser):
        parser.later(add)
    else:
        add(parser)


class UsageError(Exception):
    """The command line asked for something impossible: exit 2."""


def common_options() -> argparse.ArgumentParser:
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
    add_schema_option(group)
    group.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the result as JSON on stdout",
    )
    return parser


def add_schema_option(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--schema",
        default=argparse.SUPPRESS,
        help="the schema simindex lives in (default: $SIMINDEX_SCHEMA, else 'simindex')",
    )


def database(args: argparse.Namespace) -> tuple[str, str]:
    """(dsn, schema) from the options, then the environment."""
    dsn = (
        getattr(args, "dsn", None)
        or os.environ.get("SIMINDEX_DSN")
        or os.environ.get("DATABASE_URL")
    )
    if not dsn:
        raise UsageError("no database given: pass --dsn, or set SIMINDEX_DSN or DATABASE_URL")
    return dsn, index_schema(args)


def index_schema(args: argparse.Namespace) -> str:
    return getattr(args, "schema", None) or os.environ.get("SIMINDEX_SCHEMA") or "simindex"


def emit(args: argparse.Namespace, result: dict[str, Any], text: str) -> None:
    """The result of a command on stdout: ``text``, or ``result`` as JSON with --json."""
    if getattr(args, "json", False):
        print(json.dumps(result, sort_keys=True, default=json_value))
    else:
        print(text)


def json_value(value: object) -> str:
    """Keys of any SQL type (uuid, numeric) as text; timestamps in ISO 8601."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def progress(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def flag(dest: str) -> str:
    """The option that sets ``dest``: ``max_distance`` -> ``--max-distance``."""
    return "--" + dest.replace("_", "-")


def positive_int(value: str) -> int:
    number = integer(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def non_negative_int(value: str) -> int:
    number = integer(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {value!r}")
    return number


def integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None


def number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None


def seconds(value: str) -> float:
    try:
        found = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not found > 0 or found == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return found


def add_max_text_bytes_option(parser: argparse.ArgumentParser) -> None:
    """``--max-text-bytes``: sync's and build's limit (its default is the worker's, whose
    module loads the driver: add it with :func:`later`)."""
    from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES

    parser.add_argument(
        "--max-text-bytes",
        type=non_negative_int,
        default=DEFAULT_MAX_TEXT_BYTES,
        metavar="N",
        help="longer texts become failed items instead of being read (default: %(default)s)",
    )


def add_verify_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--verify``: how MinHash candidates are checked (see :mod:`simindex.ops.verify`)."""
    parser.add_argument(
        "--verify",
        choices=("estimate", "exact"),
        help=f"MinHash: keep {what} whose exact Jaccard similarity, recomputed from the texts, "
        "reaches the threshold (exact, the default), or whose signatures estimate it does "
        "(estimate: no text is read, but pairs near the threshold fall either side by chance)",
    )
