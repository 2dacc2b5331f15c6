"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def schema() -> str:
    """The schema being migrated (the one holding the version table).

    Pass it to every operation: autogenerate writes the name it compared as a literal, and a
    literal would migrate one schema whatever simindex.migrate was asked for.
    """
    name = op.get_context().version_table_schema
    if not isinstance(name, str):
        raise RuntimeError("simindex's migrations run through simindex.migrate")
    return name


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
