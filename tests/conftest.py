"""Suite-wide hooks: the integration marker, where the PostgreSQL fixtures come from, and
temporary files in memory."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytest_plugins = ("tests.postgres",)

_TESTS = Path(__file__).parent
_INTEGRATION = _TESTS / "integration"
_SECURITY = _TESTS / "security"
_UNIT = _TESTS / "unit"

# Every throwaway server (the fixtures', the demo's, the benchmarks') keeps its cluster in the
# temporary directory. Each test's database is a copy of the template, some 300 files and 8 MB
# made and removed: on a disk that takes several times what it takes in memory. So when TMPDIR
# is not set and /dev/shm has room, the suite and every process it starts keep their temporary
# files there.
_MEMORY = Path("/dev/shm")
_MEMORY_NEEDED = 2 * 1024**3


def _temporary_files_in_memory() -> None:
    if os.environ.get("TMPDIR") or not _MEMORY.is_dir() or not os.access(_MEMORY, os.W_OK):
        return
    if shutil.disk_usage(_MEMORY).free < _MEMORY_NEEDED:
        return  # a container's 64 MB /dev/shm would fill up
    os.environ["TMPDIR"] = str(_MEMORY)  # for the subprocesses and xdist's workers
    tempfile.tempdir = None  # this process asks again


_temporary_files_in_memory()


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
