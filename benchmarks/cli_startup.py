"""How long the ``simindex`` command takes before and while it does a small thing.

    python benchmarks/cli_startup.py [--quick] [--embedded|--local] [--output PATH]
                                     [--baseline TREE]

Each command runs as a new process, as a user types it: ``simindex --version``,
``simindex --help``, and ``simindex stats`` against a throwaway PostgreSQL (embedded by
default, ``--local`` for this machine's binaries) that is migrated and holds one small built
index. The wall time of each run is measured from the parent; the best and the median of
several runs are recorded, after one warm-up run (which fills the OS file cache), with the CPU
seconds (user + system) of each run: on a busy machine the wall time mostly measures the
others' work, the CPU time much less so. ``python -c pass`` is measured too, the floor no
command can go below. With ``--baseline TREE`` (another checkout of simindex, e.g. main's from
``git archive main simindex | tar -x -C TREE``) each command of that tree is run too, in turn
with this tree's, run by run: both meet the same load, so "before" and "after" come from one
run. The targets (issue 19): ``--version`` and ``--help`` at most 0.2 s, ``stats`` at most
0.6 s. Not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import psycopg
from pgserver import add_server_options
from report import log, new_result, summary, write_result

from simindex.embedded import embedded_postgres, local_postgres

DEFAULT_OUTPUT = Path(__file__).parent / "results" / "cli_startup.json"
SHOWN = {"python": "python -c pass", "version": "simindex --version", "help": "simindex --help"}
TARGETS = {"python": 0.0, "version": 0.2, "help": 0.2, "stats": 0.6}


def command() -> list[str]:
    """The installed ``simindex`` script beside this Python, else ``python -m simindex``."""
    script = Path(sys.executable).with_name("simindex")
    if script.exists():
        return [str(script)]
    found = shutil.which("simindex")
    return [found] if found else [sys.executable, "-m", "simindex"]


def cpu_seconds() -> float:
    """User and system seconds of this process's children that have ended."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


class Tree(NamedTuple):
    """How to run the ``simindex`` of one tree: the command, and where and with what path."""

    command: list[str]
    cwd: str | None = None
    path: str | None = None


def timed(
    args: list[str], env: dict[str, str], runs: int, trees: list[Tree]
) -> list[tuple[list[float], list[float]]]:
    """Wall and CPU seconds of ``runs`` runs of ``simindex args`` per tree, the trees in turn
    run by run (after a warm-up run of each); each must succeed."""
    measured: list[tuple[list[float], list[float]]] = [([], []) for _ in trees]
    for run in range(runs + 1):
        for tree, (wall, cpu) in zip(trees, measured, strict=True):
            argv = [*tree.command, *args]
            tree_env = env if tree.path is None else env | {"PYTHONPATH": tree.path}
            started, used = time.perf_counter(), cpu_seconds()
            result = subprocess.run(
                argv, env=tree_env, cwd=tree.cwd, capture_output=True, text=True, check=False
            )
            elapsed, spent = time.perf_counter() - started, cpu_seconds() - used
            if result.returncode != 0:
                raise SystemExit(f"{' '.join(argv)} failed: {result.stderr.strip()[-500:]}")
            if run:
                wall.append(elapsed)
                cpu.append(spent)
    return measured


def labelled(
    name: str, labels: list[str], found: list[tuple[list[float], list[float]]]
) -> dict[str, tuple[list[float], list[float]]]:
    """Timings by ``name`` and tree label (``stats before``); ``name`` alone for one tree."""
    return {f"{name} {label}".strip(): times for label, times in zip(labels, found, strict=True)}


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
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="TREE",
        help="also time the simindex of TREE (a directory holding its simindex/), in turn",
    )
    add_server_options(parser)
    args = parser.parse_args(argv)
    runs = 3 if args.quick else 10
    started_load = [round(x, 2) for x in os.getloadavg()]
    result = new_result("cli_startup", argv)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SIMINDEX_")}
    python = Tree([sys.executable, "-c", "pass"])
    trees = [Tree(command())]
    if args.baseline:
        # Both as `python -m simindex`, the baseline's found first (its directory is the
        # current one), this tree's from a directory holding no simindex.
        tree = str(args.baseline.resolve())
        trees = [
            Tree([sys.executable, "-m", "simindex"], cwd=tree, path=tree),
            Tree([sys.executable, "-m", "simindex"], cwd=tempfile.gettempdir()),
        ]
    labels = ["before", "after"] if args.baseline else [""]
    measured: dict[str, tuple[list[float], list[float]]] = {}
    log(f"python -c pass, {runs} runs")
    [measured["python"]] = timed([], env, runs, [python])
    for name in ("version", "help"):
        log(f"simindex --{name}, {runs} runs")
        measured |= labelled(name, labels, timed([f"--{name}"], env, runs, trees))
    with embedded_postgres() if args.server == "embedded" else local_postgres() as dsn:
        env["SIMINDEX_DSN"] = dsn
        log("migrating and building a small index")
        prepare(dsn, env)
        log(f"simindex stats, {runs} runs")
        measured |= labelled("stats", labels, timed(["stats"], env, runs, trees))
    result["server"] = args.server
    result["baseline"] = str(args.baseline) if args.baseline else None
    result["load_average_at_start"] = started_load
    result["commands"] = {
        name: {
            "wall": summary(wall, ("n", "min", "median", "max"), suffix="_seconds"),
            "cpu": summary(cpu, ("n", "min", "median", "max"), suffix="_seconds"),
            "target_wall_seconds": TARGETS[name.split()[0]] or None,
        }
        for name, (wall, cpu) in measured.items()
    }
    print(f"{'command':<27} {'wall best':>10} {'median':>8} {'cpu best':>9} {'target':>7}")
    for name, (wall, cpu) in measured.items():
        kind, _, label = name.partition(" ")
        shown = SHOWN.get(kind, f"simindex {kind}") + (f" ({label})" if label else "")
        middle = sorted(wall)[len(wall) // 2]
        target = f"{TARGETS[kind]:7.1f}" if TARGETS[kind] else "      -"
        print(f"{shown:<27} {min(wall):10.3f} {middle:8.3f} {min(cpu):9.3f} {target}")
    write_result(args.output, result)
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
