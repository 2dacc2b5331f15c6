"""Random interleavings of app transactions (savepoints, rollbacks to savepoints, deletes and
re-inserts) with sync and build; then ``check`` and a brute force over a model of the table
agree that the index holds exactly the committed rows.

Two writers own disjoint keys (so no writer waits for another). A build runs in a thread; the
writers' steps drawn for it run while it reads (between two fetches, from its progress
callback), and every writer still in its transaction commits before its last fetch returns,
so that its swap never waits for the test's own writers.
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field

import psycopg
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg import sql

from simindex import check, sync
from simindex.index import Index, create_index
from simindex.ops.queue import queue_counts

WRITERS = 2
KEYS = range(1, 9)  # writer w owns the keys k with k % WRITERS == w
TEXTS = 6

_tables = itertools.count(1)


def text(number: int) -> str:
    return f"note {number} tells of the {number * 7} ships that sailed to port {number * 13}"


def writer_step(writer: int) -> st.SearchStrategy[tuple[object, ...]]:
    own = [k for k in KEYS if k % WRITERS == writer]
    return st.one_of(
        st.tuples(st.just("write"), st.just(writer), st.sampled_from(own), st.integers(0, TEXTS)),
        st.tuples(st.just("delete"), st.just(writer), st.sampled_from(own)),
        st.tuples(st.just("savepoint"), st.just(writer)),
        st.tuples(st.just("rollback_to"), st.just(writer)),
        st.tuples(st.just("release"), st.just(writer)),
        st.tuples(st.just("commit"), st.just(writer)),
        st.tuples(st.just("rollback"), st.just(writer)),
    )


writer_steps = st.one_of(*(writer_step(w) for w in range(WRITERS)))
steps = st.lists(
    st.one_of(
        writer_steps,
        writer_steps,
        st.tuples(st.just("sync")),
        st.tuples(st.just("build"), st.lists(writer_steps, max_size=6)),
    ),
    max_size=25,
)


@dataclass
class Writer:
    """One app connection and what the model knows of its open transaction."""

    conn: psycopg.Connection[tuple[object, ...]]
    overlay: dict[int, str | None] = field(default_factory=dict)
    savepoints: list[dict[int, str | None]] = field(default_factory=list)
    deleted: bool = False  # a DELETE in the open transaction (holds the build's lock shared)


class World:
    def __init__(self, dsn: str, table: str) -> None:
        self.dsn = dsn
        self.table = sql.Identifier(table)
        self.committed: dict[int, str] = {}
        self.writers = [
            Writer(psycopg.connect(dsn, options="-c lock_timeout=20s")) for _ in range(WRITERS)
        ]

    def close(self) -> None:
        for writer in self.writers:
            writer.conn.close()

    def do(self, step: tuple[object, ...]) -> None:
        kind = step[0]
        if kind == "sync":
            sync(self.dsn, [self.index_name])
            return
        writer = self.writers[int(step[1])]  # type: ignore[call-overload]
        conn = writer.conn
        if kind == "write":
            key, body = int(step[2]), text(int(step[3]))  # type: ignore[call-overload]
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET body = %s"
                ).format(self.table),
                (key, body, body),
            )
            writer.overlay[key] = body
        elif kind == "delete":
            key = int(step[2])  # type: ignore[call-overload]
            conn.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(self.table), (key,))
            writer.overlay[key] = None
            writer.deleted = True
        elif kind == "savepoint":
            conn.execute(f"SAVEPOINT s{len(writer.savepoints)}")
            writer.savepoints.append(dict(writer.overlay))
        elif kind == "rollback_to" and writer.savepoints:
            conn.execute(f"ROLLBACK TO SAVEPOINT s{len(writer.savepoints) - 1}")
            writer.overlay = dict(writer.savepoints[-1])
        elif kind == "release" and writer.savepoints:
            conn.execute(f"RELEASE SAVEPOINT s{len(writer.savepoints) - 1}")
            writer.savepoints.pop()
        elif kind == "commit":
            self.commit(writer)
        elif kind == "rollback":
            conn.rollback()
            self.forget(writer)

    def commit(self, writer: Writer) -> None:
        writer.conn.commit()
        for key, body in writer.overlay.items():
            if body is None:
                self.committed.pop(key, None)
            else:
                self.committed[key] = body
        self.forget(writer)

    @staticmethod
    def forget(writer: Writer) -> None:
        writer.overlay, writer.savepoints, writer.deleted = {}, [], False

    index_name = ""

    def build(self, during: list[tuple[object, ...]]) -> None:
        # A writer that deleted holds the build's lock shared until it ends: the build would
        # wait for the test's own next step.
        for writer in self.writers:
            if writer.deleted:
                self.commit(writer)
        to_test: queue.Queue[tuple[str, int, int | None]] = queue.Queue()
        to_build: queue.Queue[None] = queue.Queue()
        errors: list[BaseException] = []

        def progress(done: int, total: int | None) -> None:
            to_test.put(("progress", done, total))
            to_build.get(timeout=60)

        def run() -> None:
            try:
                Index(self.dsn, self.index_name).build(batch_size=1, workers=1, progress=progress)
            except BaseException as exc:
                errors.append(exc)
            finally:
                to_test.put(("done", 0, None))

        thread = threading.Thread(target=run)
        thread.start()
        calls = 0
        while True:
            kind, done, total = to_test.get(timeout=60)
            if kind == "done":
                break
            if calls == 0:
                for step in during:
                    self.do(step)
            calls += 1
            if total is not None and done >= total:
                for writer in self.writers:
                    self.commit(writer)
            to_build.put(None)
        thread.join(timeout=60)
        if errors:
            raise errors[0]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=steps)
# A row written under a savepoint by a transaction open at the build's snapshot (a later one
# committed first, so the subtransaction's xid is below the snapshot's xmax), committed while
# the build reads: the build read the old row and must leave its entry queued.
@example(
    program=[
        ("savepoint", 0),
        ("write", 0, 2, 5),
        ("write", 1, 1, 6),
        ("commit", 1),
        ("build", [("commit", 0)]),
    ]
)
def test_interleavings_leave_the_index_exact(
    database_dsn: str, program: list[tuple[object, ...]]
) -> None:
    name = f"notes_{next(_tables)}"
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, body text)").format(
                sql.Identifier(name)
            )
        )
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES (1, %s), (2, %s), (3, %s), (4, %s)").format(
                sql.Identifier(name)
            ),
            [text(1), text(2), text(3), text(4)],
        )
    index = create_index(database_dsn, name, name, "body")
    index.build()
    world = World(database_dsn, name)
    world.index_name = name
    world.committed = {1: text(1), 2: text(2), 3: text(3), 4: text(4)}
    try:
        for step in program:
            if step[0] == "build":
                world.build(list(step[1]))  # type: ignore[call-overload]
            else:
                world.do(step)
        for writer in world.writers:
            world.commit(writer)
    finally:
        world.close()
    sync(database_dsn, [name])
    assert queue_counts(database_dsn, name) == (0, 0)
    with psycopg.connect(database_dsn) as conn:
        rows: dict[object, object] = dict(
            conn.execute(sql.SQL("SELECT id, body FROM {}").format(sql.Identifier(name)))
        )
        indexed = {
            key
            for (key,) in conn.execute(
                sql.SQL("SELECT key FROM {}").format(sql.Identifier("simindex", f"{name}_simhash"))
            )
        }
    assert rows == world.committed  # the model is right about the table
    assert indexed == set(world.committed)
    for key, body in world.committed.items():
        assert key in [m.key for m in index.near(body, max_distance=0)]
    report = check(database_dsn, name)
    assert report.ok, report
