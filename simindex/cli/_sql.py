"""``simindex sql NAME``: the SQL an index is made of, as create and build run it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from simindex.cli._common import OK, database, emit

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers


def add_sql(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "sql",
        parents=[common],
        help="print the SQL an index is made of",
        description="Print the statements creating the index runs, as a build that makes it "
        "again would run them (for its table as it is now and the design of its last build): "
        "its catalog row, side tables and their indexes, row-level security policies, query "
        "functions, queue, trigger function and triggers, each ended by ';', a blank line "
        'between (with --json: {"name", "sql"}). Nothing is run.',
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.set_defaults(run=run_sql)


def run_sql(args: argparse.Namespace) -> int:
    from simindex.index import Index

    dsn, schema = database(args)
    text = Index(dsn, args.name, index_schema=schema).sql()
    emit(args, {"name": args.name, "sql": text}, text.removesuffix("\n"))
    return OK
