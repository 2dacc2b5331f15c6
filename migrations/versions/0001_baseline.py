"""simindex's schema: the catalog of indexes, its functions, the owner role and event triggers.

Revision ID: 0001
Revises:

* The role ``simindex_owner`` (NOLOGIN, no attributes) is created if missing and owns the
  schema and everything in it; nothing simindex installs belongs to the user who ran it.
* The catalog ``indexes``: one row per index, its source recorded by ``regclass`` and its key
  and text columns by number and type, so renames change nothing and a changed type is seen.
* The dispatchers ``near_key_v1`` and ``similar_key_v1`` (a query by index name), the
  helpers of the per-index trigger functions (which the code creates with each index), and
  ``record_health_v1``, through which a worker records an index broken (or recovered) without
  any right on the catalog.
* When a superuser migrates, two event triggers that record drift at once and make a changed
  table's trigger function check its columns again.

Downgrading to base removes every index (its tables, functions and triggers), then all of the
above but the role (roles belong to the whole cluster) and the schema (Alembic records the
downgrade in its version table there).

The SQL is in ``0001_baseline.sql`` beside this file.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

OWNER = "simindex_owner"
LIVE_STATES = "'created', 'building', 'ready', 'failed'"
STATES = LIVE_STATES + ", 'needs_rebuild', 'source_dropped'"
# The functions this revision installs, in the order it creates them (after the catalog, whose
# row type drift_v1 takes), their argument types, and whether EXECUTE is revoked from PUBLIC
# (the dispatchers, drift_v1 and source_usable_v1 serve the readers' queries).
FUNCTIONS = (
    ("near_key_v1", "text, anyelement, integer, integer", False),
    ("similar_key_v1", "text, anyelement, double precision, integer", False),
    ("drift_v1", "{schema}.indexes", False),
    ("source_changed_v1", "text, oid", True),
    ("record_health_v1", "text, text, text", True),
    ("source_usable_v1", "text", False),
    ("share_index_v1", "text", True),
    ("within_distance_v1", "bigint, bigint, integer", False),
    ("simhash_distance_v1", "bigint, bigint", False),
    ("distance_allowed_v1", "integer, integer", False),
    ("query_ready_v1", "text, boolean, boolean", False),
    ("minhash_similarity_v1", "bit varying, bit varying", False),
    ("minhash_pairs_of_table_v1", "regclass, anyelement, integer, double precision", False),
    ("follow_source_v1", "oid", True),
    ("distrust_v1", "text", True),
    ("on_sql_drop_v1", "", True),
    ("on_alter_table_v1", "", True),
)
_BLOCK = re.compile(r"^-- name: (\S+)\n(.*?)(?=^-- name: |\Z)", re.MULTILINE | re.DOTALL)


def schema() -> str:
    """The schema being migrated: the one holding the version table."""
    name = op.get_context().version_table_schema
    if not isinstance(name, str):
        raise RuntimeError("simindex's migrations run through simindex.migrate")
    return name


def _blocks() -> dict[str, str]:
    text = Path(__file__).with_suffix(".sql").read_text(encoding="utf-8")
    return {name: body.strip() for name, body in _BLOCK.findall(text)}


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    # E'' reads the same whatever standard_conforming_strings says.
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _dollar(body: str) -> str:
    """``body`` between dollar quotes whose tag provably does not occur in it (a schema named
    ``a$body$b`` would otherwise end it early)."""
    number = 0
    while True:
        tag = "$body$" if number == 0 else f"$body{number}$"
        if (body + tag).find(tag) == len(body):
            return tag + body + tag
        number += 1


def _sql(text: str, **more: str) -> str:
    """``text`` with the schema's name and literal, the owner role's and ``more`` filled in."""
    values = {
        "schema": _ident(schema()),
        "schema_literal": _literal(schema()),
        "owner": _ident(OWNER),
        "owner_literal": _literal(OWNER),
        "live_states": LIVE_STATES,
        "states": STATES,
        **more,
    }
    return re.sub(r"\{(\w+)\}", lambda match: values[match.group(1)], text)


def _quoted(block: str, **more: str) -> str:
    """A block whose part between ``$body$`` quotes (or all of it, for a DO body) is quoted
    again, once filled in, with a tag it cannot contain."""
    head, body, tail = block.split("$body$") if "$body$" in block else ("", block, "")
    return _sql(head, **more) + _dollar(_sql(body, **more)) + _sql(tail, **more)


def event_trigger_names() -> tuple[str, str]:
    """Event trigger names are per database: one pair per simindex schema."""
    if schema() == "simindex":
        return "simindex_sql_drop_v1", "simindex_alter_table_v1"
    tag = hashlib.blake2b(schema().encode(), digest_size=6).hexdigest()
    return f"simindex_{tag}_sql_drop_v1", f"simindex_{tag}_alter_table_v1"


def upgrade() -> None:
    blocks = _blocks()
    op.execute("DO " + _quoted(blocks["role"]))
    op.execute(_sql(blocks["catalog"]))
    for name, arguments, revoke in FUNCTIONS:
        op.execute(_quoted(blocks[name]))
        if revoke:
            op.execute(_sql(f"REVOKE ALL ON FUNCTION {{schema}}.{name}({arguments}) FROM PUBLIC"))
    op.execute("DO " + _quoted(blocks["ownership"]))
    op.execute("DO " + _quoted(blocks["leakproof_within"]))
    sql_drop, alter_table = event_trigger_names()
    op.execute(
        "DO "
        + _quoted(
            blocks["event_triggers"],
            sql_drop=_literal(sql_drop),
            alter_table=_literal(alter_table),
        )
    )


def downgrade() -> None:
    for name in event_trigger_names():
        op.execute(f"DROP EVENT TRIGGER IF EXISTS {_ident(name)}")
    own = ", ".join(_literal(name) for name, _, _ in FUNCTIONS)
    op.execute("DO " + _quoted(_blocks()["drop_indexes"], functions=own))
    for name, arguments, _ in reversed(FUNCTIONS):
        op.execute(_sql(f"DROP FUNCTION {{schema}}.{name}({arguments})"))
    op.execute(_sql("DROP TABLE {schema}.indexes"))
