"""Build rate of short texts, this checkout beside a baseline commit, interleaved in one run.

    python benchmarks/build.py [--rows N] [--rounds R] [--baseline REF] [--embedded|--local]
                               [--output PATH]

Starts a throwaway PostgreSQL tuned as ``benchmarks/query.py`` tunes it, loads N short texts
(``dataset.make_dataset``: texts of at most ``SHORT_WORDS_LIMIT`` words) and creates a SimHash
and a MinHash index over them. Then, R rounds: each round rebuilds both indexes once with this
checkout's ``simindex`` and once with the baseline's (``git archive REF``), in alternating
order, each build in a fresh Python process (``Index.build()`` with its defaults: every core).
The machine is shared: the two run side by side under the same load, and the ratio of their
median times is the figure to read; absolute rates are the load's. Each build's CPU seconds
are kept too (the build's process from its start, imports included; its worker processes; the
server's processes, from /proc):
on a machine whose cores are all busy, wall time follows CPU time, and on an idle one a
pipeline that overlaps its parts finishes sooner than its CPU time says. Writes
``benchmarks/results/build-<rows>.json``. Not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from dataset import make_dataset
from pgserver import add_server_options, benchmark_server, load_table, scalar
from query_plan import MAX_DISTANCE, MINHASH_THRESHOLD, NUM_PERM, SERVER_SETTINGS, SHORT_WORDS_LIMIT
from report import RESULTS, log, new_result, print_table, server_version, write_result

import simindex
from simindex.core.spec import MinHash, SimHash

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_ROWS = 100_000
TARGET_SECONDS_1M = {"simhash": 12.0, "minhash": 60.0}
# One build in a fresh process: the checkout on PYTHONPATH decides which simindex it is.
RUNNER = """
import json, resource, sys
import simindex
index = simindex.get_index(sys.argv[1], sys.argv[2])
report = index.build()
own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({
    "rows": report.rows,
    "seconds": report.seconds,
    "python_cpu_seconds": own.ru_utime + own.ru_stime,
    "worker_cpu_seconds": children.ru_utime + children.ru_stime,
}))
"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="short texts loaded")
    parser.add_argument("--rounds", type=int, default=3, help="builds of each kind per side")
    parser.add_argument("--baseline", default="main", help="git commit to compare with")
    parser.add_argument("--baseline-note", default="", help="what the baseline commit is")
    add_server_options(parser, default="local", embedded="PostgreSQL 18")
    parser.add_argument("--output", type=Path, help="JSON path (default under results/)")
    return parser.parse_args(argv)


def export(ref: str, into: Path) -> str:
    """``simindex/`` of ``ref`` under ``into``; returns the commit's id."""
    commit = subprocess.run(
        ["git", "-C", str(REPOSITORY), "rev-parse", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = into / "baseline.tar"
    subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", "-o", str(archive), commit, "simindex"],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return commit


def server_processes(dsn: str) -> int:
    """The postmaster's process id (its children are the server's processes)."""
    with psycopg.connect(dsn) as conn:  # the backend's /proc entry read while it lives
        backend = int(scalar(conn, "SELECT pg_backend_pid()"))
        return int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])


class ServerCpu:
    """CPU seconds of the server's processes so far (Linux /proc): the postmaster's own and
    its ended children's (which it waited for), and its live children's: the backend a build
    runs in, parallel index builds, background processes."""

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster

    def __call__(self) -> float:
        ticks = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry.name) == self.postmaster:
                ticks += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
            elif int(fields[1]) == self.postmaster:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")


def timed_build(dsn: str, name: str, checkout: Path, server_cpu: ServerCpu) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    before = server_cpu()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, dsn, name],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["server_cpu_seconds"] = round(server_cpu() - before, 2)
    return result


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    output = args.output or RESULTS / f"build-{args.rows}.json"
    report = new_result("build", argv)
    with (
        tempfile.TemporaryDirectory() as scratch,
        benchmark_server(args.server, SERVER_SETTINGS) as server,
    ):
        baseline_dir = Path(scratch)
        report["baseline"] = {
            "ref": args.baseline,
            "commit": export(args.baseline, baseline_dir),
            "note": args.baseline_note,
        }
        report["server"] = {"kind": server.kind, "settings": server.settings}
        log(f"{server_version(server.version)} ({server.kind}); migrating")
        simindex.migrate(server.dsn)
        dataset = make_dataset(round(args.rows * 1.15), None)
        short = [text for text in dataset.texts if len(text.split()) <= SHORT_WORDS_LIMIT]
        short = short[: args.rows]
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            load = load_table(conn, "short_texts", enumerate(short, start=1))
        report["data"] = {
            "rows": load["rows"],
            "utf8_bytes": sum(len(text.encode()) for text in short),
            "mean_words": round(sum(len(text.split()) for text in short) / len(short), 1),
            "what": f"texts of at most {SHORT_WORDS_LIMIT} words of benchmarks/dataset.py",
        }
        simindex.create_index(
            server.dsn,
            "short_simhash",
            "short_texts",
            "body",
            method=SimHash(max_distance=MAX_DISTANCE, expected_rows=len(short)),
        )
        simindex.create_index(
            server.dsn,
            "short_minhash",
            "short_texts",
            "body",
            method=MinHash(MINHASH_THRESHOLD, NUM_PERM),
        )
        sides = {"baseline": baseline_dir, "this": REPOSITORY}
        server_cpu = ServerCpu(server_processes(server.dsn))
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            kind: {side: [] for side in sides} for kind in ("simhash", "minhash")
        }
        for round_number in range(args.rounds):
            order = list(sides) if round_number % 2 == 0 else list(reversed(sides))
            for kind in ("simhash", "minhash"):
                for side in order:
                    run = timed_build(server.dsn, f"short_{kind}", sides[side], server_cpu)
                    runs[kind][side].append(run)
                    log(f"round {round_number + 1} {kind} {side}: {run['seconds']:.2f} s")
    report["runs"] = runs
    report["summary"] = summarise(runs)
    write_result(output, report, server.version)
    rows = [
        [
            kind,
            f"{figures['baseline']['median_seconds']:.2f}",
            f"{figures['this']['median_seconds']:.2f}",
            f"{figures['ratio_this_to_baseline']:.2f}",
            f"{figures['baseline']['median_cpu_seconds']['total']:.1f}",
            f"{figures['this']['median_cpu_seconds']['total']:.1f}",
            f"{figures['this']['rows_per_second']:,.0f}",
            f"{figures['this']['extrapolated_1m_seconds']:.1f}",
            f"{TARGET_SECONDS_1M[kind]:.0f}",
        ]
        for kind, figures in report["summary"].items()
    ]
    print_table(
        f"Build of {report['data']['rows']:,} short texts, median of {args.rounds}",
        [
            "index",
            "baseline s",
            "this s",
            "ratio",
            "baseline CPU s",
            "this CPU s",
            "this rows/s",
            "1M s (extrap.)",
            "target",
        ],
        rows,
    )
    print(f"\nwritten: {output}")


def summarise(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for kind, sides in runs.items():
        figures: dict[str, Any] = {}
        for side, results in sides.items():
            seconds = statistics.median(r["seconds"] for r in results)
            rows = results[0]["rows"]
            cpu = {
                part: round(statistics.median(r[f"{part}_cpu_seconds"] for r in results), 2)
                for part in ("python", "worker", "server")
            }
            figures[side] = {
                "median_seconds": round(seconds, 3),
                "median_cpu_seconds": {**cpu, "total": round(sum(cpu.values()), 2)},
                "rows_per_second": round(rows / seconds),
                "extrapolated_1m_seconds": round(seconds * 1_000_000 / rows, 1),
            }
        figures["ratio_this_to_baseline"] = round(
            figures["this"]["median_seconds"] / figures["baseline"]["median_seconds"], 3
        )
        figures["cpu_ratio_this_to_baseline"] = round(
            figures["this"]["median_cpu_seconds"]["total"]
            / figures["baseline"]["median_cpu_seconds"]["total"],
            3,
        )
        figures["extrapolation"] = (
            "linear from this row count to 1M; an estimate, not a measurement (sorts and "
            "index builds grow slightly faster than linearly)"
        )
        summary[kind] = figures
    return summary


if __name__ == "__main__":
    main()
