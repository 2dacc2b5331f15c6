"""What creating and dropping an index runs, as statements without values.

:func:`simindex.index.create_index` executes them; :mod:`simindex.alembic` renders them as text
for an ``alembic upgrade --sql`` script.
"""

from __future__ import annotations

from psycopg import sql

from simindex.core.spec import IndexSpec
from simindex.db.catalog import catalog, check_name, store_for
from simindex.db.cluster_store import ClusterStore
from simindex.db.source import Source
from simindex.db.statements import statement
from simindex.db.triggers import Triggers


def create_statements(
    index_schema: str, name: str, source: Source, spec: IndexSpec
) -> list[sql.Composed]:
    """The catalog row, the empty side tables with their indexes, the query functions, the
    queue and triggers, in order."""
    check_name(name)
    if source.schema:
        source_schema: sql.Composable = sql.Literal(source.schema)
    else:
        # Not resolved yet (an offline migration): the schema the search_path finds the table
        # in when the statement runs; the regclass cast fails, naming the table, if there is none.
        source_schema = statement(
            "source_schema_of", table=sql.Literal(source.identifier.as_string())
        )
    insert = statement(
        "catalog_insert",
        catalog=catalog(index_schema),
        name=sql.Literal(name),
        source_schema=source_schema,
        source_table=sql.Literal(source.table),
        key_column=sql.Literal(source.key_column),
        key_type=sql.Literal(source.key_type),
        text_column=sql.Literal(source.text_column),
        method=sql.Literal(spec.kind),
        spec=sql.Literal(spec.to_json()),
        spec_version=sql.Literal(spec.version),
    )
    store = store_for(index_schema, name, source, spec)
    return [
        insert,
        *store.create_statements(),
        *store.finish_statements(),
        *store.function_statements(),
        *Triggers(index_schema, name, source, store).install_statements(),
    ]


def drop_statements(
    index_schema: str, name: str, source: Source, spec: IndexSpec
) -> list[sql.Composed]:
    """What dropping an index runs, in order (see :func:`create_statements`)."""
    literal_name = sql.Literal(check_name(name))
    store = store_for(index_schema, name, source, spec)
    return [
        # Waits for a sync batch in flight; later batches skip the index.
        statement("catalog_lock", catalog=catalog(index_schema), name=literal_name),
        *Triggers(index_schema, name, source, store).remove_statements(),
        *store.drop_statements(),
        *ClusterStore(index_schema, name).drop_statements(),
        statement("catalog_delete", catalog=catalog(index_schema), name=literal_name),
    ]
