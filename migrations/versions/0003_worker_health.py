"""Each index records the last error the sync worker met on it, and whether that error left it
broken (its batches failing as a whole: a dropped table or column, a revoked right), so an
operator sees it in ``stats`` and ``check`` while the worker goes on with the other indexes.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def schema() -> str:
    name = op.get_context().version_table_schema
    if not isinstance(name, str):
        raise RuntimeError("simindex's migrations run through simindex.migrate")
    return name


def _table() -> str:
    # Raw SQL with our own quoting: Alembic's ALTER TABLE splits a schema name at its dots.
    return '"' + schema().replace('"', '""') + '".indexes'


def upgrade() -> None:
    op.execute(
        f"ALTER TABLE {_table()} ADD COLUMN broken boolean NOT NULL DEFAULT false, "
        "ADD COLUMN last_error text, ADD COLUMN last_error_at timestamptz"
    )


def downgrade() -> None:
    op.execute(
        f"ALTER TABLE {_table()} DROP COLUMN last_error_at, DROP COLUMN last_error, "
        "DROP COLUMN broken"
    )
