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
