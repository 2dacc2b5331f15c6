"""Each index remembers how its clusters were last made, so sync can keep leader clusters.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
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
        f"ALTER TABLE {_table()} ADD COLUMN clustering text, "
        "ADD CONSTRAINT indexes_clustering_check "
        "CHECK (clustering IN ('pairs', 'bottom_k', 'leader'))"
    )


def downgrade() -> None:
    op.execute(
        f"ALTER TABLE {_table()} DROP CONSTRAINT indexes_clustering_check, DROP COLUMN clustering"
    )
