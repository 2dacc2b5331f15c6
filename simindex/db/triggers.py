"""What keeps an index in step with its source table: triggers, a queue and failed items.

Each index gets, in simindex's schema, an inbox ``<name>_inbox`` (the keys the app's
statements changed, appended without an index), a queue ``<name>_queue`` (one entry per key to
recompute, which the workers fill from the inbox and take their batches from),
``<name>_failed`` (keys a worker could not process, with the error) and ``<name>_deletes``
(that deletes happened, without keys), and on the source table four statement-level triggers,
all calling the index's one function ``<name>_trigger_v1``:

=========  ===============================================================
event      effect
=========  ===============================================================
INSERT     append the new keys to the inbox
UPDATE     append the keys whose text changed (and both keys of a changed key)
DELETE     record that a delete happened (no transition table); the worker
           removes the index rows whose source row is gone (a sweep)
TRUNCATE   truncate the index's side tables
=========  ===============================================================

In replica mode (``session_replication_role = replica``: a logical replication subscription's
apply, which fires row triggers only, or a session set so) three row triggers enabled REPLICA
append each row's key instead (see ``db/sql/sync.sql``); the statement triggers are enabled
ALWAYS and, in that mode, leave INSERT, UPDATE and DELETE to them.

Statement-level otherwise: one INSERT per statement, however many rows, and no
trigger depends on a column, so the app may rename, retype or drop any column (see the
function's own comment in ``db/sql/sync.sql`` for how it follows the source by column number).

The function belongs to simindex's owner role and runs as it (SECURITY DEFINER); EXECUTE is
revoked from PUBLIC. :mod:`simindex.ops.sync` moves the inbox into the queue and drains it.
No trigger sends a NOTIFY: PostgreSQL serializes the commits of notifying transactions
through a lock of the whole cluster held until each commit is flushed, which would make every
app transaction writing an indexed table wait for the others. A following worker looks at the
inboxes every fraction of a second instead (``sync_pending``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from simindex.db.answers import protect_statements
from simindex.db.connection import PgConnection
from simindex.db.minhash_store import MinHashStore
from simindex.db.privileges import OWNER
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import Source
from simindex.db.statements import run, statement

EVENTS = ("insert", "update", "delete", "truncate")
_TRANSITION_TABLES = {
    "insert": "REFERENCING NEW TABLE AS new_rows",
    "update": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "delete": "",
    "truncate": "",
}
ROW_EVENTS = ("insert", "update", "delete")
"""The events of the row triggers, which fire in replica mode only (see ``db/sql/sync.sql``)."""
# The blocks of an event that may use a deleted key again: queue its keys, wait for the batches
# holding their entries, then remove the index rows of its new keys (see db/sql/sync.sql).
_KEY_USED_AGAIN = {
    "insert": ("sync_trigger_insert", "sync_trigger_insert_wait", "sync_trigger_insert_replaced"),
    "update": ("sync_trigger_update", "sync_trigger_update_wait", "sync_trigger_update_replaced"),
}
# Where the aliases go in a statement run with EXECUTE format(statement, aliases).
_ALIASES_MARK = "\0aliases\0"
BUILD_LOCK_CLASS = 0x53494D58
"""The first half of the two-key advisory lock a build holds (``'SIMX'``)."""
BATCH_LOCK_CLASS = 0x53494D42
"""The first half of the two-key advisory lock every batch holds shared and a sweep exclusively
(``'SIMB'``)."""


def event_triggers_on(conn: PgConnection, schema: str) -> bool:
    """Whether simindex's event triggers watch this database: a superuser migrated it, and
    nobody disabled them since."""
    row = conn.execute(statement("sync_event_triggers_on"), {"schema": schema}).fetchone()
    return bool(row and row[0])


class _FormatString(sql.Composable):
    """A statement as the literal first argument of ``format(..., aliases)``: rendered, its
    percent signs doubled, the aliases' place made ``%1$s``."""

    placeholder = "%1$s"

    def as_bytes(self, context: Any = None) -> bytes:
        text = self._obj.as_string(context)
        text = text.replace("%", "%%").replace(_ALIASES_MARK, self.placeholder)
        return sql.Literal(text).as_bytes(context)


class _FormatIdentifier(_FormatString):
    """As :class:`_FormatString`, the mark made ``%1$I`` (a name format() quotes)."""

    placeholder = "%1$I"


def inbox_and_queue(schema: str, name: str) -> tuple[sql.Identifier, sql.Identifier]:
    """An index's inbox and queue, by its name alone (a worker's move needs no more)."""
    return sql.Identifier(schema, f"{name}_inbox"), sql.Identifier(schema, f"{name}_queue")


def deletes_table(schema: str, name: str) -> sql.Identifier:
    """An index's record of deletes, by its name alone (a worker's look needs no more)."""
    return sql.Identifier(schema, f"{name}_deletes")


@dataclass(frozen=True, slots=True)
class Triggers:
    """Names and statements of one index's queue, failed items and triggers."""

    schema: str
    name: str
    source: Source
    store: SimHashStore | MinHashStore

    @property
    def queue(self) -> sql.Identifier:
        return inbox_and_queue(self.schema, self.name)[1]

    @property
    def inbox(self) -> sql.Identifier:
        return inbox_and_queue(self.schema, self.name)[0]

    @property
    def failed(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_failed")

    @property
    def deletes(self) -> sql.Identifier:
        return deletes_table(self.schema, self.name)

    def tables(self) -> list[sql.Identifier]:
        """The inbox, the queue, the failed items and the record of deletes (what the worker
        right writes besides the side tables)."""
        return [self.inbox, self.queue, self.failed, self.deletes]

    @property
    def function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_trigger_v1")

    def trigger(self, event: str) -> sql.Identifier:
        return sql.Identifier(f"simindex_{self.name}_{event}")

    def row_trigger(self, event: str) -> sql.Identifier:
        return sql.Identifier(f"simindex_{self.name}_{event}_row")

    @property
    def key_type(self) -> sql.Composable:
        # format_type output from the catalog: a type name PostgreSQL itself quoted.
        return sql.SQL(self.source.key_type)

    @property
    def equals(self) -> sql.Composable:
        """pg_catalog's ``=``: never one a table's owner could define (``describe`` made sure
        it compares the key)."""
        return sql.SQL("pg_catalog.=")

    def install(self, conn: PgConnection) -> None:
        """Create the inbox, the queue, the failed items table, the function and the
        triggers."""
        run(conn, self.install_statements())

    def table_statements(self) -> list[sql.Composed]:
        """The inbox, the queue, the failed items table and the record of deletes."""
        return [
            statement("sync_create_inbox", inbox=self.inbox, key_type=self.key_type),
            statement("sync_create_queue", queue=self.queue, key_type=self.key_type),
            statement("sync_create_failed", failed=self.failed, key_type=self.key_type),
            statement("sync_create_deletes", deletes=self.deletes),
            *protect_statements(self.schema, self.name, f"{self.name}_inbox"),
            *protect_statements(self.schema, self.name, f"{self.name}_queue"),
            *protect_statements(self.schema, self.name, f"{self.name}_failed"),
        ]

    def function_statements(self, *, trusted: bool = False) -> list[sql.Composed]:
        """The trigger function (again: ``CREATE OR REPLACE``), for the source as it is now.

        ``trusted``: simindex's event triggers watch the database (:func:`event_triggers_on`),
        so the function checks no column before reading it (see ``db/sql/sync.sql``)."""
        return [
            statement("sync_check_equality", queue=self.queue, equals=self.equals),
            self._function_statement(trusted),
            statement("sync_revoke_function", function=self.function),
            *self.own_function_statements(),
        ]

    @property
    def own_function(self) -> sql.Identifier:
        """``<name>_index_own_v1``: the writer right's way to index its own transaction's
        keys (see ``db/sql/session.sql``)."""
        return sql.Identifier(self.schema, f"{self.name}_index_own_v1")

    def own_function_statements(self) -> list[sql.Composed]:
        """The writer's function (again: ``CREATE OR REPLACE`` keeps its grants)."""
        return [
            statement(
                "session_index_own_function",
                function=self.own_function,
                key_type=self.key_type,
                table=self.store.table(),
                inbox=self.inbox,
                queue=self.queue,
                failed=self.failed,
            ),
            statement(
                "session_grant_own_function",
                owner=sql.Literal(OWNER),
                schema=sql.Literal(self.schema),
                share=sql.Literal(
                    sql.Identifier(self.schema, "share_index_v1").as_string() + "(text)"
                ),
                function=sql.Literal(
                    self.own_function.as_string() + "(" + self.source.key_type + "[], jsonb, jsonb)"
                ),
            ),
        ]

    def trigger_statements(self) -> list[sql.Composed]:
        """The triggers on the source table, enabled ALWAYS (its owner's or a superuser's to
        create): they fire in replica mode too (a logical replication subscription, a session
        with ``session_replication_role = replica``)."""
        created = [
            statement(
                "sync_create_trigger",
                trigger=self.trigger(event),
                event=sql.SQL(event.upper()),
                source=self.source.identifier,
                transition_tables=sql.SQL(_TRANSITION_TABLES[event]),
                function=self.function,
            )
            for event in EVENTS
        ]
        rows = [
            statement(
                "sync_create_row_trigger",
                trigger=self.row_trigger(event),
                event=sql.SQL(event.upper()),
                source=self.source.identifier,
                function=self.function,
            )
            for event in ROW_EVENTS
        ]
        enable = sql.SQL(", ").join(
            [
                *(sql.SQL("ENABLE ALWAYS TRIGGER {}").format(self.trigger(e)) for e in EVENTS),
                *(
                    sql.SQL("ENABLE REPLICA TRIGGER {}").format(self.row_trigger(e))
                    for e in ROW_EVENTS
                ),
            ]
        )
        return [
            *created,
            *rows,
            statement("sync_enable_always", source=self.source.identifier, enable=enable),
        ]

    def install_statements(self, *, trusted: bool = False) -> list[sql.Composed]:
        return [
            *self.table_statements(),
            *self.function_statements(trusted=trusted),
            *self.trigger_statements(),
        ]

    def _function_statement(self, trusted: bool) -> sql.Composed:
        source = self.source
        known = source.key_attnum > 0 and source.text_attnum > 0 and source.oid > 0
        by_name = {
            event: self._event_statements(
                event, sql.Identifier(source.key_column), sql.Identifier(source.text_column)
            )
            for event in EVENTS
        }
        by_position = {
            event: self._event_statements(event, sql.SQL("k"), sql.SQL("t"), by_position=True)
            for event in EVENTS
        }
        fast = {event: self._fast_statements(event) for event in ("insert", "update")}
        return statement(
            "sync_trigger_function",
            function=self.function,
            catalog=sql.Identifier(self.schema, "indexes"),
            index_name=sql.Literal(self.name),
            source_changed=sql.Identifier(self.schema, "source_changed_v1"),
            # Not known (an offline script): 0, no table's OID, so the checked path runs until
            # the first build writes the function again.
            relid=sql.Literal(source.oid if known else 0),
            fast_insert=fast["insert"],
            fast_update=fast["update"],
            fast_delete=statement(
                "sync_trigger_fast_delete",
                deletes=self.deletes,
            ),
            trusted=sql.Literal(trusted and known),
            key_attnum=sql.Literal(source.key_attnum),
            key_name=sql.Literal(source.key_column),
            key_type_id=sql.Literal(source.key_type_id),
            key_typmod=sql.Literal(source.key_typmod),
            text_attnum=sql.Literal(source.text_attnum),
            text_name=sql.Literal(source.text_column),
            text_type_id=sql.Literal(source.text_type_id),
            insert=by_name["insert"],
            update=by_name["update"],
            delete=by_name["delete"],
            dynamic_insert=by_position["insert"],
            dynamic_update=by_position["update"],
            dynamic_delete=by_position["delete"],
            truncate=statement(
                "sync_trigger_truncate", tables=sql.SQL(", ").join(self.store.side_tables())
            ),
            queue_row=_FormatIdentifier(
                statement("sync_trigger_queue_row", inbox=self.inbox, column=sql.SQL(_ALIASES_MARK))
            ),
        )

    def _fast_statements(self, event: str) -> sql.Composable:
        """The statements of ``event`` on the way every write of a trusted source takes: the
        keys queued and whether deletes are recorded in one statement,
        then what a key used again needs (see ``sync_trigger_fast_queue``)."""
        parts = {
            "queue": self.queue,
            "inbox": self.inbox,
            "perform": sql.SQL("PERFORM"),
            "aliases": sql.SQL(""),
            "key": sql.Identifier(self.source.key_column),
            "text": sql.Identifier(self.source.text_column),
            "equals": self.equals,
            "deletes": self.deletes,
        }
        queue_block, wait_block, replaced_block = _KEY_USED_AGAIN[event]
        return sql.SQL(";\n").join(
            [
                statement(
                    "sync_trigger_fast_queue",
                    queue=statement(queue_block, **parts),
                    deletes=self.deletes,
                ),
                statement(
                    "sync_trigger_fast_replace",
                    wait=statement(wait_block, **parts),
                    statement=sql.SQL(";\n").join(
                        statement(replaced_block, **parts, table=table)
                        for table in self.store.side_tables()
                    ),
                ),
            ]
        )

    def _event_statements(
        self,
        event: str,
        key: sql.Composable,
        text: sql.Composable,
        *,
        by_position: bool = False,
    ) -> sql.Composable:
        """The statements of ``event``, the columns named ``key`` and ``text``; ``by_position``:
        each as ``EXECUTE format(...)`` with the alias list found when it runs."""
        marked = sql.SQL(" ({})").format(sql.SQL(_ALIASES_MARK))
        parts = {
            "queue": self.queue,
            "inbox": self.inbox,
            "perform": sql.SQL("SELECT" if by_position else "PERFORM"),
            "aliases": marked if by_position else sql.SQL(""),
            "key": key,
            "text": text,
            "equals": self.equals,
            "deletes": self.deletes,
        }

        def run(block: str, **more: sql.Composable) -> sql.Composable:
            one = statement(block, **parts, **more)
            if not by_position:
                return one
            return statement("sync_trigger_dynamic", statement=_FormatString(one))

        if event in ("insert", "update"):
            # The wait first: a writer of a key a batch holds waits for that batch, so the
            # index rows the batch wrote from the key's deleted row are there to remove.
            queue_block, wait_block, replaced_block = _KEY_USED_AGAIN[event]
            replaced = [run(replaced_block, table=table) for table in self.store.side_tables()]
            checked: sql.Composable = statement(
                "sync_trigger_queue_checked",
                queue=statement(queue_block, **parts),
                deletes=self.deletes,
                into=sql.SQL("" if by_position else " INTO deleted"),
            )
            if by_position:
                checked = statement("sync_trigger_dynamic_into", statement=_FormatString(checked))
            return statement(
                "sync_trigger_if_deleted",
                queue=run(queue_block),
                queue_checked=checked,
                wait=run(wait_block),
                statement=sql.SQL(";\n").join(replaced),
            )
        if event == "truncate":
            return sql.SQL("NULL")
        return statement("sync_trigger_delete", deletes=self.deletes)

    @property
    def build_lock_key(self) -> int:
        """The second half of the advisory lock a build of this index holds (see
        :data:`BUILD_LOCK_CLASS`): a fixed hash of schema and name, the same in every release."""
        digest = hashlib.blake2b(f"{self.schema}\0{self.name}".encode(), digest_size=4).digest()
        return int.from_bytes(digest, "big", signed=True)

    def build_lock(self, conn: PgConnection) -> None:
        """Take the lock that keeps sweeps away while a build reads the source (for this
        transaction; it waits for a sweep in flight)."""
        conn.execute(
            statement("sync_build_lock"), {"class": BUILD_LOCK_CLASS, "key": self.build_lock_key}
        )

    def remove(self, conn: PgConnection) -> None:
        """Drop what :meth:`install` created (whatever of it exists)."""
        run(conn, self.remove_statements())

    def remove_statements(self) -> list[sql.Composed]:
        """The function with its triggers, wherever the source is now; the inbox, the queue,
        the failed items. Dropping the function as its owner drops the triggers (CASCADE): no
        right on the source table is needed."""
        return [
            statement("sync_drop_trigger_function", function=self.function),
            statement("session_drop_own_function", function=self.own_function),
            statement("drop_table", table=self.inbox),
            statement("drop_table", table=self.queue),
            statement("drop_table", table=self.failed),
            statement("drop_table", table=self.deletes),
        ]
