"""Suite-wide hooks: the integration marker, and where the PostgreSQL fixtures come from."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("tests.postgres",)

_TESTS = Path(__file__).parent
_INTEGRATION = _TESTS / "integration"
_SECURITY = _TESTS / "security"
_UNIT = _TESTS / "unit"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs PostgreSQL (all of tests/integration and tests/security)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_INTEGRATION) or item.path.is_relative_to(_SECURITY):
            item.add_marker(pytest.mark.integration)
        elif item.path.is_relative_to(_UNIT) and "postgres_server" in getattr(
            item, "fixturenames", ()
        ):
            raise pytest.UsageError(
                f"{item.nodeid} is a unit test but asks for PostgreSQL: "
                "move it to tests/integration"
            )


LONG_MODULE = 500


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """A report, not a gate: the package's modules past LONG_MODULE lines, longest first. A
    long module is cut by concept when it holds more than one (ARCHITECTURE.md), never to
    get under a number."""
    package = _TESTS.parent / "simindex"
    lengths = {
        str(path.relative_to(package.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in package.rglob("*.py")
    }
    long = sorted(((n, path) for path, n in lengths.items() if n > LONG_MODULE), reverse=True)
    if long:
        terminalreporter.write_sep("-", f"modules over {LONG_MODULE} lines (a report)")
        for lines, path in long:
            terminalreporter.write_line(f"{lines:6d}  {path}")
