"""``simindex migrate``: create or upgrade simindex's own schema."""

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
