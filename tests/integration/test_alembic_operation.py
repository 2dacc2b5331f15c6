"""op.create_simindex / op.drop_simindex in an app's own Alembic project, online and offline."""

from __future__ import annotations

import io
import random
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from alembic import command, op
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext

from simindex import sync
from simindex.alembic import CreateSimindexOp, DropSimindexOp
from simindex.core.bits import hamming_distance
from simindex.core.spec import MinHash, SimHash, resolve
from simindex.db.connection import connect
from simindex.errors import IndexExistsError, IndexNotFoundError, SimindexError, SourceError
from simindex.index import get_index, list_indexes
from tests.integration.test_migrations import sqlalchemy_url, tables, version_rows

# Alembic's generic template, less its logging set-up (which would silence other tests'
# loggers), plus the import simindex asks for. Offline, the template uses the "named"
# paramstyle; without it SQLAlchemy doubles every % of text() in the script.
APP_ENV = """
from alembic import context
from sqlalchemy import engine_from_config, pool

import simindex.alembic  # noqa: F401  (op.create_simindex, op.drop_simindex)

config = context.config


def run_migrations_offline() -> None:
    paramstyle = config.get_main_option("offline_paramstyle")
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=None,
        literal_binds=True,
        dialect_opts={"paramstyle": paramstyle} if paramstyle else {},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with connectable.connect() as connection:
        context.configure(connection=connection, target_metadata=None)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
"""

REVISIONS = {
    "a1_documents.py": '''
        """The app's documents."""
        import sqlalchemy as sa
        from alembic import op

        revision = "a1"
        down_revision = None


        def upgrade() -> None:
            op.create_table(
                "documents",
                sa.Column("id", sa.BigInteger(), primary_key=True),
                sa.Column("body", sa.Text()),
            )


        def downgrade() -> None:
            op.drop_table("documents")
    ''',
    "a2_docs_body.py": '''
        """Near-duplicate bodies (SimHash); key and key_type make --sql possible."""
        from alembic import op

        revision = "a2"
        down_revision = "a1"


        def upgrade() -> None:
            op.create_simindex(
                "docs_body", "documents", "body", method="simhash", max_distance=3,
                key="id", key_type="bigint",
            )


        def downgrade() -> None:
            op.drop_simindex("docs_body", "documents", "body", method="simhash", max_distance=3)
    ''',
    "a3_docs_jaccard.py": '''
        """Similar bodies (MinHash), in the typed spelling."""
        from alembic import op

        from simindex import MinHash
        from simindex.alembic import CreateSimindexOp

        revision = "a3"
        down_revision = "a2"

        create = CreateSimindexOp(
            "docs_jaccard", "documents", "body", method=MinHash(threshold=0.5, num_perm=64),
            key="id", key_type="bigint",
        )


        def upgrade() -> None:
            op.invoke(create)


        def downgrade() -> None:
            op.invoke(create.reverse())
    ''',
}

WORDS = [f"w{i}" for i in range(400)]


@pytest.fixture
def app_project(tmp_path: Path) -> Path:
    """An Alembic project of an app: alembic.ini, env.py, three revisions."""
    (tmp_path / "alembic.ini").write_text("[alembic]\nscript_location = %(here)s/migrations\n")
    versions = tmp_path / "migrations" / "versions"
    versions.mkdir(parents=True)
    (tmp_path / "migrations" / "env.py").write_text(APP_ENV)
    for name, source in REVISIONS.items():
        (versions / name).write_text(textwrap.dedent(source))
    return tmp_path


def app_config(
    project: Path,
    dsn: str | None = None,
    *,
    output: io.StringIO | None = None,
    offline_paramstyle: str | None = None,
) -> Config:
    config = Config(str(project / "alembic.ini"), output_buffer=output)
    url = "postgresql+psycopg://" if dsn is None else sqlalchemy_url(dsn).render_as_string(False)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if offline_paramstyle:
        config.set_main_option("offline_paramstyle", offline_paramstyle)
    return config


def offline_script(project: Path, revisions: str, *, paramstyle: str | None = None) -> str:
    output = io.StringIO()
    config = app_config(project, output=output, offline_paramstyle=paramstyle)
    if revisions.endswith(":base"):
        command.downgrade(config, revisions, sql=True)
    else:
        command.upgrade(config, revisions, sql=True)
    return output.getvalue()


def run_script(dsn: str, script: str) -> None:
    """Run a --sql script as psql would: the whole text as one simple query."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(script.encode())


def fill_documents(dsn: str) -> dict[int, str]:
    """Random texts with an exact copy and a near copy of the first; returns them by key."""
    rng = random.Random(11)
    texts = {key: " ".join(rng.choice(WORDS) for _ in range(40)) for key in range(1, 81)}
    texts[81] = texts[1]
    texts[82] = texts[1] + " and one more"
    with psycopg.connect(dsn) as conn, conn.cursor().copy("COPY documents FROM STDIN") as copy:
        for row in texts.items():
            copy.write_row(row)
    return texts


def check_indexes_work(dsn: str, texts: dict[int, str]) -> None:
    """Both indexes, built, answer as a brute-force comparison says they should."""
    simhash = get_index(dsn, "docs_body")
    assert simhash.build().rows == len(texts)
    spec = simhash.info().spec
    values, _ = spec.simhash_values(list(texts.values()))
    query = int(values[0])
    expected = {
        key: hamming_distance(int(value), query)
        for key, value in zip(texts, values, strict=True)
        if hamming_distance(int(value), query) <= 3
    }
    assert {match.key: match.distance for match in simhash.near(texts[1])} == expected
    assert {1, 81} <= set(expected)

    minhash = get_index(dsn, "docs_jaccard")
    minhash.build()
    assert 81 in {found.key for found in minhash.similar(key=1)}


def simindex_triggers(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'documents'::regclass "
            "AND NOT tgisinternal ORDER BY tgname"
        ).fetchall()
    return [name for (name,) in rows]


def test_upgrade_creates_the_indexes_and_downgrade_removes_them(
    database_dsn: str, app_project: Path
) -> None:
    config = app_config(app_project, database_dsn)
    simindex_versions = version_rows(database_dsn, "simindex")

    command.upgrade(config, "head")
    assert version_rows(database_dsn, "public") == ["a3"]  # the app's history, in its schema
    assert version_rows(database_dsn, "simindex") == simindex_versions  # simindex's, untouched
    assert list_indexes(database_dsn) == ["docs_body", "docs_jaccard"]
    info = get_index(database_dsn, "docs_body").info()
    assert (info.source.schema, info.source.key_type, info.state) == ("public", "bigint", "created")
    assert info.spec.to_json() == resolve(SimHash(max_distance=3)).to_json()
    jaccard = get_index(database_dsn, "docs_jaccard").info().spec
    assert jaccard.to_json() == resolve(MinHash(threshold=0.5, num_perm=64)).to_json()

    texts = fill_documents(database_dsn)
    check_indexes_work(database_dsn, texts)
    # The triggers the operation installed keep the index in step after the build.
    with psycopg.connect(database_dsn) as conn:
        conn.execute("INSERT INTO documents VALUES (500, %s)", (texts[1],))
    sync(database_dsn)
    assert 500 in {match.key for match in get_index(database_dsn, "docs_body").near_key(1)}

    command.downgrade(config, "a1")
    assert version_rows(database_dsn, "public") == ["a1"]
    assert list_indexes(database_dsn) == []
    assert tables(database_dsn, "simindex") == {"alembic_version", "indexes"}
    assert simindex_triggers(database_dsn) == []
    with psycopg.connect(database_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM documents").fetchone() == (len(texts) + 1,)

    command.downgrade(config, "base")
    assert version_rows(database_dsn, "public") == []
    assert version_rows(database_dsn, "simindex") == simindex_versions


@pytest.mark.parametrize("paramstyle", [None, "named"])
def test_offline_script_writes_every_statement_once_and_verbatim(
    app_project: Path, paramstyle: str | None
) -> None:
    script = offline_script(app_project, "head", paramstyle=paramstyle)
    assert "%%" not in script
    # plpgsql's placeholders survive as written.
    assert "RAISE EXCEPTION 'max_distance must be from % to %, got %'" in script
    # One check of the table and one catalog row per index.
    assert script.count("DO $check$") == script.count('INSERT INTO "simindex"."indexes"') == 2
    for expected in (
        'CREATE TABLE "simindex"."docs_body_simhash"',
        'CREATE FUNCTION "simindex"."docs_body_near_v1"',
        'CREATE TRIGGER "simindex_docs_body_insert" AFTER INSERT ON "documents"',
        'CREATE TABLE "simindex"."docs_jaccard_minhash"',
        'CREATE TRIGGER "simindex_docs_jaccard_delete" AFTER DELETE ON "documents"',
    ):
        assert script.count(expected) == 1, expected
    down = offline_script(app_project, "a3:base", paramstyle=paramstyle)
    assert "%%" not in down
    assert down.count('DROP TABLE IF EXISTS "simindex"."docs_body_simhash"') == 1
    assert down.count('DELETE FROM "simindex"."indexes" WHERE name = \'docs_jaccard\'') == 1


def test_offline_scripts_run_against_a_migrated_database(
    database_dsn: str, app_project: Path
) -> None:
    run_script(database_dsn, offline_script(app_project, "head"))
    assert version_rows(database_dsn, "public") == ["a3"]
    info = get_index(database_dsn, "docs_body").info()
    assert (info.source.schema, info.source.table, info.source.key_column) == (
        "public",
        "documents",
        "id",
    )
    check_indexes_work(database_dsn, fill_documents(database_dsn))

    run_script(database_dsn, offline_script(app_project, "a3:base"))
    assert list_indexes(database_dsn) == []
    assert tables(database_dsn, "simindex") == {"alembic_version", "indexes"}
    assert "documents" not in tables(database_dsn, "public")


# -- operations run directly, for their errors


@contextmanager
def online(dsn: str) -> Iterator[Operations]:
    """Operations on a connection to ``dsn``, in a transaction committed at the end."""
    with connect(dsn) as connection, connection.begin():
        yield Operations(MigrationContext.configure(connection))


@contextmanager
def offline(output: io.StringIO) -> Iterator[Operations]:
    context = MigrationContext.configure(
        dialect_name="postgresql", opts={"as_sql": True, "output_buffer": output}
    )
    with Operations.context(context) as operations:
        yield operations


def create_documents(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "CREATE TABLE documents (id bigint PRIMARY KEY, body text, n integer, other bigint, "
            "code text UNIQUE)"
        )


def test_online_errors_name_what_is_wrong(database_dsn: str) -> None:
    create_documents(database_dsn)
    with online(database_dsn) as operations:
        with pytest.raises(SourceError, match=r"key_type 'integer' was given.* is bigint"):
            operations.invoke(CreateSimindexOp("docs", "documents", "body", key_type="integer"))
        with pytest.raises(SourceError, match="'nowhere' does not exist"):
            operations.invoke(CreateSimindexOp("docs", "nowhere", "body"))
        with pytest.raises(SourceError, match="column 'n' is integer"):
            operations.invoke(CreateSimindexOp("docs", "documents", "n"))
        with pytest.raises(IndexNotFoundError, match="'docs'"):
            operations.invoke(DropSimindexOp("docs"))
        # Other spellings of the key's type are the same type.
        operations.invoke(CreateSimindexOp("docs", "documents", "body", key_type="int8"))
        with pytest.raises(IndexExistsError, match="'docs' exists already"):
            operations.invoke(CreateSimindexOp("docs", "documents", "body"))
    assert list_indexes(database_dsn) == ["docs"]
    with online(database_dsn) as operations:
        operations.invoke(DropSimindexOp("docs"))  # online, the catalog knows the rest
    assert list_indexes(database_dsn) == []
    assert simindex_triggers(database_dsn) == []


def test_online_needs_simindex_migrated_first(empty_database_dsn: str) -> None:
    create_documents(empty_database_dsn)
    with online(empty_database_dsn) as operations:
        with pytest.raises(SimindexError, match=r"not migrated.*simindex\.migrate"):
            operations.invoke(CreateSimindexOp("docs", "documents", "body"))
        with pytest.raises(SimindexError, match="not migrated"):
            operations.invoke(DropSimindexOp("docs"))


def test_offline_needs_key_and_key_type_and_drop_needs_table() -> None:
    with offline(io.StringIO()) as operations:
        with pytest.raises(ValueError, match="needs key= and key_type="):
            operations.invoke(CreateSimindexOp("docs", "documents", "body", key="id"))
        with pytest.raises(ValueError, match="needs table= and method="):
            operations.invoke(DropSimindexOp("docs", method="simhash"))
        with pytest.raises(ValueError, match="needs table= and method="):
            operations.invoke(DropSimindexOp("docs", "documents"))


@pytest.mark.parametrize(
    ("key", "key_type", "error"),
    [
        (
            "id",
            "integer",
            "key column id of documents is bigint, stored as bigint, but key_type integer",
        ),
        ("other", "bigint", "key column other has no unique index on documents"),
        ("missing", "bigint", "key column missing does not exist"),
        ("code", "text", "key column code of documents allows NULL"),
    ],
)
def test_the_offline_script_checks_the_table_before_creating_anything(
    database_dsn: str, key: str, key_type: str, error: str
) -> None:
    create_documents(database_dsn)
    output = io.StringIO()
    with offline(output):
        op.invoke(CreateSimindexOp("docs", "documents", "body", key=key, key_type=key_type))
    with pytest.raises(psycopg.errors.DatabaseError, match=error):
        run_script(database_dsn, output.getvalue())
    assert list_indexes(database_dsn) == []


def test_offline_drop_by_table_and_method_removes_an_online_index(database_dsn: str) -> None:
    create_documents(database_dsn)
    with online(database_dsn) as operations:
        operations.invoke(
            CreateSimindexOp("docs", "documents", "body", method="minhash", threshold=0.6)
        )
    output = io.StringIO()
    with offline(output) as operations:
        operations.invoke(DropSimindexOp("docs", "documents", method="minhash"))
    run_script(database_dsn, output.getvalue())
    assert list_indexes(database_dsn) == []
    assert simindex_triggers(database_dsn) == []
    with psycopg.connect(database_dsn) as conn:
        leftovers = conn.execute(
            "SELECT relname FROM pg_class WHERE starts_with(relname, 'docs_') "
            "UNION ALL SELECT proname FROM pg_proc WHERE starts_with(proname, 'docs_')"
        ).fetchall()
    assert leftovers == []
