"""``simindex migrate`` and ``simindex grant``: simindex's own schema, and who may use it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from simindex.cli._common import OK, database, emit

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers


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
    from simindex.db.schema import current_revision, migrate

    dsn, schema = database(args)
    migrate(dsn, schema=schema)
    revision = current_revision(dsn, schema=schema)
    emit(args, {"revision": revision, "schema": schema}, f"{schema} at revision {revision}")
    return OK


def add_grant(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "grant",
        parents=[common],
        help="give a database role a right on simindex",
        description="Give ROLE one right on simindex, for every index, now and later (or, "
        "with --index, for those indexes alone). "
        "Each right includes the ones above it. Plain writes of an indexed table need no "
        "right: the triggers run as simindex's owner role.",
    )
    parser.add_argument("role", metavar="ROLE", help="an existing database role")
    rights = parser.add_mutually_exclusive_group(required=True)
    for right, what in (
        ("reader", "query the indexes"),
        ("writer", "also index its own writes in its transaction (simindex.sqlalchemy.track)"),
        ("worker", "also sync, check and repair; SELECT on the indexed tables where you may"),
        ("admin", "create, build, drop and cluster indexes (member of simindex_owner)"),
    ):
        rights.add_argument(
            f"--{right}", dest="right", action="store_const", const=right, help=what
        )
    parser.add_argument(
        "--index",
        dest="indexes",
        metavar="NAME",
        action="append",
        help="only this index (repeat for more); not with --admin",
    )
    parser.set_defaults(run=run_grant)


def run_grant(args: argparse.Namespace) -> int:
    from simindex.grants import grant

    dsn, schema = database(args)
    report = grant(dsn, args.role, args.right, indexes=args.indexes, index_schema=schema)
    missing = report.tables_not_granted
    text = f"granted {args.right} to {args.role}"
    if args.indexes:
        text += f" on {', '.join(args.indexes)}"
    if missing:
        text += (
            f"; SELECT on {', '.join(missing)} must come from their owner "
            "(GRANT SELECT ON ... TO ...)"
        )
    emit(
        args,
        {
            "role": args.role,
            "right": args.right,
            "indexes": args.indexes,
            "tables_not_granted": missing,
        },
        text,
    )
    return OK
