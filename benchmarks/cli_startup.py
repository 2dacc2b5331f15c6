"""How long the ``simindex`` command takes before and while it does a small thing.

    python benchmarks/cli_startup.py [--quick] [--embedded|--local] [--output PATH]

Each command runs as a new process, as a user types it: ``simindex --version``,
``simindex --help``, and ``simindex stats`` against a throwaway PostgreSQL (embedded by
default, ``--local`` for this machine's binaries) that is migrated and holds one small built
index. The wall time of each run is measured from the parent; the best and the median of
several runs are recorded, after one warm-up run (which fills the OS file cache). The targets
(issue 19): ``--version`` and ``--help`` at most 0.2 s, ``stats`` at most 0.6 s. Not a test:
nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from pgserver import add_server_options
from report import log, new_result, summary, write_result

from simindex.embedded import embedded_postgres, local_postgres

DEFAULT_OUTPUT = Path(__file__).parent / "results" / "cli_startup.json"
TARGETS = {"version": 0.2, "help": 0.2, "stats": 0.6}


def command() -> list[str]:
    """The installed ``simindex`` script beside this Python, else ``python -m simindex``."""
    script = Path(sys.executable).with_name("simindex")
    if script.exists():
        return [str(script)]
    found = shutil.which("simindex")
    return [found] if found else [sys.executable, "-m", "simindex"]


def timed(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` runs of ``argv`` (after one warm-up run); each must succeed."""
    seconds: list[float] = []
    for run in range(runs + 1):
        started = time.perf_counter()
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {result.stderr.strip()[-500:]}")
        if run:
            seconds.append(elapsed)
    return seconds


def prepare(dsn: str, env: dict[str, str]) -> None:
    """A migrated database with one small built SimHash index, ``docs_body``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, body text)")
        conn.execute(
            "INSERT INTO docs SELECT i, 'document number ' || i || ' about a thing' "
            "FROM generate_series(1, 1000) AS i"
        )
    for argv in (
        ["migrate"],
        ["create", "docs_body", "--table", "docs", "--column", "body"],
        ["build", "docs_body"],
    ):
        subprocess.run([*command(), *argv], env=env, capture_output=True, check=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 runs per command, not 10")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the JSON result")
    add_server_options(parser)
    args = parser.parse_args(argv)
    runs = 3 if args.quick else 10
    result = new_result("cli_startup", argv)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SIMINDEX_")}
    measured: dict[str, Any] = {}
    for name in ("version", "help"):
        log(f"simindex --{name}, {runs} runs")
        measured[name] = timed([*command(), f"--{name}"], env, runs)
    with embedded_postgres() if args.server == "embedded" else local_postgres() as dsn:
        env["SIMINDEX_DSN"] = dsn
        log("migrating and building a small index")
        prepare(dsn, env)
        log(f"simindex stats, {runs} runs")
        measured["stats"] = timed([*command(), "stats"], env, runs)
    result["server"] = args.server
    result["commands"] = {
        name: {
            **summary(seconds, ("n", "min", "median", "max"), suffix="_seconds"),
            "target_seconds": TARGETS[name],
        }
        for name, seconds in measured.items()
    }
    print(f"{'command':<20} {'best':>8} {'median':>8} {'target':>8}")
    for name, seconds in measured.items():
        shown = f"simindex {'stats' if name == 'stats' else '--' + name}"
        middle = sorted(seconds)[len(seconds) // 2]
        print(f"{shown:<20} {min(seconds):8.3f} {middle:8.3f} {TARGETS[name]:8.1f}")
    write_result(args.output, result)
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
