"""What keeps an index in step with its source table: triggers, a queue and failed items.

Each index gets, in simindex's schema, a queue ``<name>_queue`` (one entry per key to recompute)
and ``<name>_failed`` (keys a worker could not process, with the error), and on the source
table four triggers calling ``_v1`` functions of its own:

=========  ===============================================================  ===============
event      effect                                                           trigger level
=========  ===============================================================  ===============
INSERT     queue the new keys, NOTIFY                                       statement
UPDATE     of the text or key (compared as text): queue new and old key     row, with WHEN
DELETE     delete the index rows at once; queue the keys too, NOTIFY        statement
TRUNCATE   truncate the index's side tables                                 statement
=========  ===============================================================  ===============

The levels were chosen by measurement (see ``tests/integration/test_sync.py``): a statement
trigger with a transition table makes a bulk DELETE a few times cheaper than a row trigger, and
costs about the same on INSERT; for UPDATE the row trigger's WHEN clause is evaluated without
calling any function, so updates of other columns cost nearly nothing, while a statement
trigger would capture and join both transition tables on every UPDATE.

:mod:`simindex.ops.sync` drains the queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from simindex.db.connection import PgConnection
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import Source
from simindex.db.statements import run, statement

EVENTS = ("insert", "update", "delete", "truncate")


def channel(name: str) -> str:
    """The NOTIFY channel of an index: its name after ``simindex_`` (payloads are empty)."""
    return f"simindex_{name}"


@dataclass(frozen=True, slots=True)
class Triggers:
    """Names and statements of one index's queue, failed items and triggers."""

    schema: str
    name: str
    source: Source
    store: SimHashStore | MinHashStore

    @property
    def queue(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_queue")

    @property
    def failed(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_failed")

    def function(self, event: str) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_{event}_v1")

    def trigger(self, event: str) -> sql.Identifier:
        return sql.Identifier(f"simindex_{self.name}_{event}")

    @property
    def key_type(self) -> sql.Composable:
        # format_type output from the catalog: a type name PostgreSQL itself quoted.
        return sql.SQL(self.source.key_type)

    def install(self, conn: PgConnection) -> None:
        """Create the queue, the failed items table, the functions and the triggers."""
        run(conn, self.install_statements())

    def install_statements(self) -> list[sql.Composed]:
        return [
            statement("sync_create_queue", queue=self.queue, key_type=self.key_type),
            statement("sync_create_failed", failed=self.failed, key_type=self.key_type),
            *self._function_statements(EVENTS),
            *self._trigger_statements(EVENTS),
        ]

    def side_table_statements(self) -> list[sql.Composed]:
        """Replacing the delete and truncate trigger functions, which name the side tables (a
        build that changed them runs these). ``CREATE OR REPLACE`` keeps each function, so the
        triggers stay and the app's table is not locked."""
        return self._function_statements(("delete", "truncate"), replace=True)

    def _function_statements(
        self, events: tuple[str, ...], replace: bool = False
    ) -> list[sql.Composed]:
        create = sql.SQL("CREATE OR REPLACE FUNCTION" if replace else "CREATE FUNCTION")
        key = sql.Identifier(self.source.key_column)
        common = {"queue": self.queue, "key": key, "channel": sql.Literal(channel(self.name))}
        delete_side_rows = sql.SQL(";\n    ").join(
            statement("sync_delete_side_rows", table=table, key=key)
            for table in self.store.side_tables()
        )
        made = {
            "insert": lambda: statement(
                "sync_insert_function", function=self.function("insert"), **common
            ),
            "update": lambda: statement(
                "sync_update_function", function=self.function("update"), **common
            ),
            "delete": lambda: statement(
                "sync_delete_function",
                create=create,
                function=self.function("delete"),
                delete_side_rows=delete_side_rows,
                **common,
            ),
            "truncate": lambda: statement(
                "sync_truncate_function",
                create=create,
                function=self.function("truncate"),
                tables=sql.SQL(", ").join(self.store.side_tables()),
            ),
        }
        return [made[event]() for event in events]

    def _trigger_statements(self, events: tuple[str, ...]) -> list[sql.Composed]:
        return [
            statement(
                f"sync_{event}_trigger",
                trigger=self.trigger(event),
                source=self.source.identifier,
                function=self.function(event),
                key=sql.Identifier(self.source.key_column),
                text=sql.Identifier(self.source.text_column),
            )
            for event in events
        ]

    def remove(self, conn: PgConnection) -> None:
        """Drop what :meth:`install` created (whatever of it exists)."""
        run(conn, self.remove_statements())

    def remove_statements(self) -> list[sql.Composed]:
        statements: list[sql.Composed] = []
        for event in EVENTS:
            statements.append(
                statement(
                    "sync_drop_trigger", trigger=self.trigger(event), source=self.source.identifier
                )
            )
            statements.append(statement("drop_function", function=self.function(event)))
        statements.append(statement("drop_table", table=self.queue))
        statements.append(statement("drop_table", table=self.failed))
        return statements
