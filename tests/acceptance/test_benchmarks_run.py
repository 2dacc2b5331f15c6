"""The benchmarks still run: each script's quick mode, end to end, writing its JSON.

They are scripts, not the library, so nothing else would notice when a change of the library
breaks one (a query function's arguments, the catalog's columns, who owns a table). Quick
mode still takes about a minute each: marked ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RUNS = {
    "query": ["query.py", "--quick", "--no-peers", "--no-phases"],
    # Beside datasketch and simhash (the bench extra); on 2,000 rows, not quick's 20,000: the
    # same steps, in two thirds of the time.
    "dedup": ["dedup.py", "--quick", "--rows", "2000"],
    "sync": ["sync.py", "--quick"],
    "boilerplate": ["boilerplate.py", "--quick"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_quick_benchmark_runs(name: str, tmp_path: Path) -> None:
    if name == "dedup":
        pytest.importorskip("datasketch", reason="the bench extra: pip install -e '.[bench]'")
        pytest.importorskip("simhash", reason="the bench extra: pip install -e '.[bench]'")
    server = "--local" if os.environ.get("SIMINDEX_TEST_POSTGRES") == "local" else "--embedded"
    output = tmp_path / f"{name}.json"
    result = subprocess.run(
        [sys.executable, *RUNS[name], server, "--output", str(output)],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    written = json.loads(output.read_text("utf-8"))
    assert written["elapsed_seconds"] > 0
