"""What a newcomer had to guess (issue 19), said where they look first."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def one_line(path: str) -> str:
    return " ".join((ROOT / path).read_text(encoding="utf-8").split())


def test_the_readme_says_venv_suite_time_fast_loop_and_socket_dsn() -> None:
    readme = one_line("README.md")
    assert "python3 -m venv .venv" in readme and "PEP 668" in readme
    assert "about 13 minutes on 2 cores" in readme
    assert "python -m pytest tests/unit" in readme
    assert '--dsn "host=/var/run/postgresql dbname=app"' in readme


def test_the_rights_say_a_reader_needs_select_on_the_apps_table() -> None:
    security = one_line("docs/security.md")
    assert "A reader also needs SELECT on the app's table" in security
    assert "GRANT SELECT ON documents TO app_reader" in security
