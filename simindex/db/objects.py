"""What creating and dropping an index runs, as statements without values.

:func:`simindex.index.create_index` executes them; :mod:`simindex.alembic` renders them as text
for an ``alembic upgrade --sql`` script. simindex's own objects are made as its owner role
(:func:`simindex.db.privileges.as_owner`); only the triggers on the app's table are made as the
caller, who needs the TRIGGER right there.
"""

from __future__ import annotations

from psycopg import sql

from simindex.core.spec import SPEC_VERSION, IndexSpec
from simindex.db import answers
from simindex.db.catalog import catalog, check_name, store_for
from simindex.db.cluster_store import ClusterStore
from simindex.db.privileges import as_owner, type_usage
from simindex.db.source import Source
from simindex.db.statements import statement
from simindex.db.triggers import Triggers


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
