from __future__ import annotations

import subprocess
import sys

import simindex


def test_fingerprinting_imports_no_database_driver() -> None:
    code = (
        "import sys, simindex, simindex.text, simindex.simhash, simindex.minhash, "
        "simindex.design, simindex.spec\n"
        "loaded = sorted(m for m in ('psycopg', 'sqlalchemy', 'alembic') if m in sys.modules)\n"
        "print(','.join(loaded))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_public_names_resolve() -> None:
    for name in simindex.__all__:
        assert getattr(simindex, name) is not None
    assert simindex.create_index.__module__ == "simindex.index"
