"""What creating and dropping an index runs, as statements without values.

:func:`simindex.index.create_index` executes them; :mod:`simindex.alembic` renders them as text
for an ``alembic upgrade --sql`` script; ``simindex sql NAME`` prints them (:func:`index_sql`).
simindex's own objects are made as its owner role (:func:`simindex.db.privileges.as_owner`);
only the triggers on the app's table are made as the caller, who needs the TRIGGER right there.
"""

from __future__ import annotations

from collections.abc import Iterable

from psycopg import sql

from simindex.core.spec import SPEC_VERSION, IndexSpec
from simindex.db import answers
from simindex.db.catalog import catalog, check_name, read_index, side_statement, store_for
from simindex.db.cluster_store import ClusterStore
from simindex.db.connection import PgConnection
from simindex.db.privileges import as_owner, type_usage
from simindex.db.source import Source, describe
from simindex.db.statements import statement
from simindex.db.triggers import Triggers, event_triggers_on


def create_statements(
    index_schema: str, name: str, source: Source, spec: IndexSpec, *, trusted: bool = False
) -> list[sql.Composed]:
    """The catalog row, the empty side tables with their indexes, the query functions, the
    queue and the trigger function (as the owner role), then the triggers, in order.

    ``trusted``: simindex's event triggers watch the database (see
    :meth:`~simindex.db.triggers.Triggers.function_statements`)."""
    check_name(name)
    insert = statement(
        "catalog_insert",
        catalog=catalog(index_schema),
        name=sql.Literal(name),
        key_column=sql.Literal(source.key_column),
        key_type=sql.Literal(source.key_type),
        text_column=sql.Literal(source.text_column),
        method=sql.Literal(spec.kind),
        spec=sql.Literal(spec.to_json()),
        spec_version=sql.Literal(SPEC_VERSION),
    )
    store = store_for(index_schema, name, source, spec)
    triggers = Triggers(index_schema, name, source, store)
    owned = [
        insert,
        *answers.visible_statements(index_schema, name, source),
        *store.create_statements(),
        side_statement(index_schema, name, store),
        *store.finish_statements(),
        *store.function_statements(),
        *triggers.table_statements(),
        *triggers.function_statements(trusted=trusted),
    ]
    # Resolved when the statements run (an offline script knows only the names).
    found = statement("catalog_source_oid", table=sql.Literal(source.identifier.as_string()))
    return [found, type_usage(source.key_type), *as_owner(owned), *triggers.trigger_statements()]


def drop_statements(
    index_schema: str, name: str, source: Source, spec: IndexSpec
) -> list[sql.Composed]:
    """What dropping an index runs, in order (see :func:`create_statements`). It needs nothing
    of the source: the triggers go with their function, wherever the table is now."""
    literal_name = sql.Literal(check_name(name))
    store = store_for(index_schema, name, source, spec)
    return as_owner(
        [
            # Waits for a sync batch in flight; later batches skip the index.
            statement("catalog_lock", catalog=catalog(index_schema), name=literal_name),
            *Triggers(index_schema, name, source, store).remove_statements(),
            *store.drop_statements(),
            *ClusterStore(index_schema, name).drop_statements(),
            *answers.drop_statements(index_schema, name),
            statement("catalog_delete", catalog=catalog(index_schema), name=literal_name),
        ]
    )


def index_statements(conn: PgConnection, index_schema: str, name: str) -> list[sql.Composed]:
    """What creating index ``name`` runs, as a build that makes it again would: for its source
    as it is now (:func:`~simindex.db.source.describe`) and the spec its catalog entry holds
    (the design and learned shingle counts of its last build)."""
    info = read_index(conn, index_schema, name)
    source = describe(
        conn,
        info.source.table,
        info.source.text_column,
        schema=info.source.schema,
        key=info.source.key_column,
    )
    trusted = event_triggers_on(conn, index_schema)
    return create_statements(index_schema, name, source, info.spec, trusted=trusted)


def render(conn: PgConnection, statements: Iterable[sql.Composable]) -> str:
    """Statements as text a person reads, rendered by ``conn`` byte for byte as they run: each
    ended by ``;`` (on a line of its own after a trailing comment), a blank line between."""
    texts = []
    for composed in statements:
        text = composed.as_string(conn).strip()
        if not text.endswith(";"):
            last = text.rsplit("\n", 1)[-1]
            text += "\n;" if last.lstrip().startswith("--") else ";"
        texts.append(text)
    return "\n\n".join(texts) + "\n"


def index_sql(conn: PgConnection, index_schema: str, name: str) -> str:
    """:func:`index_statements` as text (``simindex sql NAME``, :meth:`simindex.Index.sql`)."""
    return render(conn, index_statements(conn, index_schema, name))
