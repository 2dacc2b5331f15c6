"""No password of a DSN is printed (finding 18): not in a parse error of a malformed DSN, not in
a connection error, not in a log line, with or without ``--json``. Run through the CLI in a
subprocess, as an operator would, with the DSN on the command line and in the environment."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.commands import run_simindex
from tests.security.conftest import MakeRole

SECRET = "Zq7pw0rdXy"
SECOND = "Kv4pw0rdWm"
TIMEOUT = 60


def cli(*args: str, dsn: str, via_environment: bool = False) -> subprocess.CompletedProcess[str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"SIMINDEX_DSN", "DATABASE_URL", "PGPASSWORD"}
    }
    given = list(args)
    if via_environment:
        env["SIMINDEX_DSN"] = dsn
    else:
        given[1:1] = ["--dsn", dsn]
    return run_simindex(given, env=env, timeout=TIMEOUT)


def assert_no_secret(result: subprocess.CompletedProcess[str], *secrets: str) -> None:
    printed = result.stdout + result.stderr
    assert result.returncode != 0, printed
    assert "error" in printed, printed
    for secret in secrets or (SECRET,):
        assert secret not in printed, printed
    assert "Traceback" not in printed, printed


MALFORMED = [
    # libpq's parse error quotes where it stopped: a password with a space in it.
    (f"host=localhost dbname=app password={SECRET} {SECOND}", (SECRET, SECOND)),
    (f"host=localhost password={SECRET} port", (SECRET,)),
    (f"host=localhost password='{SECRET}", (SECRET,)),
    (f"postgresql://app:{SECRET}@localhost:notaport/app", (SECRET,)),
    (f"postgresql+psycopg://app:{SECRET}@localhost:notaport/app", (SECRET,)),
    (f"postgresql://app@localhost/app?password={SECRET}&sslmode=bogus", (SECRET,)),
]


@pytest.mark.parametrize(("dsn", "secrets"), MALFORMED)
@pytest.mark.parametrize("json", [False, True])
@pytest.mark.parametrize("via_environment", [False, True])
def test_a_malformed_dsn_is_reported_without_its_password(
    dsn: str, secrets: tuple[str, ...], json: bool, via_environment: bool
) -> None:
    args = ["stats", "--json"] if json else ["stats"]
    assert_no_secret(cli(*args, dsn=dsn, via_environment=via_environment), *secrets)


def test_a_connection_error_carries_no_password(database_dsn: str, make_role: MakeRole) -> None:
    role = make_role("operator")
    wrong = make_conninfo(role.dsn, password=SECRET)
    for json in ([], ["--json"]):
        assert_no_secret(cli("stats", *json, dsn=wrong))
    # A server's message that quotes what it was given (here, a database named like the
    # password) is not printed with it either.
    named = make_conninfo(role.dsn, password=SECRET, dbname=SECRET)
    assert_no_secret(cli("stats", "--json", dsn=named))
    password = conninfo_to_dict(role.dsn)["password"]
    assert isinstance(password, str)
    missing = make_conninfo(role.dsn, dbname=f"no_{password}")
    assert_no_secret(cli("check", "--json", dsn=missing), password)


def test_the_workers_log_lines_carry_no_password(database_dsn: str, make_role: MakeRole) -> None:
    """``sync --follow`` logs each failed attempt to reach the database and retries: the log
    line quotes the server's message, in text and in JSON lines."""
    role = make_role("worker")
    password = conninfo_to_dict(role.dsn)["password"]
    assert isinstance(password, str)
    unreachable = make_conninfo(role.dsn, dbname=f"gone_{password}")
    for log_format in ("text", "json"):
        printed = _first_log_lines(
            [sys.executable, "-m", "simindex", "sync", "--follow", "-v",
             "--log-format", log_format, "--dsn", unreachable],
        )  # fmt: skip
        assert f"gone_{password}" not in printed
        assert password not in printed
        assert "gone_***" in printed, printed


def _first_log_lines(command: list[str]) -> str:
    """What the worker prints until its first retry line (it retries for ever: stopped then),
    however long a loaded machine takes to start it."""
    printed: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as worker:
        assert worker.stdout is not None
        stop = threading.Timer(TIMEOUT, worker.kill)  # a worker that prints nothing is stopped
        stop.start()
        try:
            for line in worker.stdout:
                printed.append(line)
                if "gone_" in line:
                    break
        finally:
            stop.cancel()
            worker.kill()
    return "".join(printed)
