"""What the command line shows: aligned tables, sizes, a progress bar, and each report both
as text for people and as a JSON-ready dict for machines.

Plain text only, no third-party library: results go to stdout, the progress bar to stderr, and
the bar redraws itself in place only on a terminal (a log file gets an occasional line).
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from simindex.core.spec import IndexSpec
    from simindex.db.catalog import IndexInfo
    from simindex.ops.check import CheckReport
    from simindex.ops.stats import IndexStats

# pg_size_pretty's units, so sizes read the same as in psql.
_SIZE_UNITS = ("bytes", "kB", "MB", "GB", "TB", "PB")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell; numbers aligned right, everything else left."""
    return "\n".join(table_lines(headers, rows, sample=len(rows)))


def table_lines(
    headers: Sequence[str], rows: Iterable[Sequence[object]], *, sample: int = 1000
) -> Iterator[str]:
    """:func:`table`'s lines for a stream of rows: widths and alignment come from the first
    ``sample`` rows, so memory stays flat; a longer cell further down pushes its line out."""
    rows = iter(rows)
    first = list(itertools.islice(rows, sample))
    cells = [[_cell(value) for value in row] for row in first]
    widths = [
        max([len(header)] + [len(row[column]) for row in cells])
        for column, header in enumerate(headers)
    ]
    numeric = [
        bool(first) and all(_is_number(row[column]) for row in first)
        for column in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        padded = [
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(padded).rstrip()

    yield line(headers)
    yield line(["-" * width for width in widths])
    for row_cells in cells:
        yield line(row_cells)
    for row in rows:
        yield line([_cell(value) for value in row])


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def size(count: int) -> str:
    """A byte count the way pg_size_pretty prints it (1024-based, rounded)."""
    value = float(count)
    for unit in _SIZE_UNITS:
        if abs(value) < 10 * 1024 or unit == _SIZE_UNITS[-1]:
            return f"{round(value):d} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float) -> str:
    """``0.42 s``, ``12 s``, ``3m05s``, ``2h07m``."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class StatusLine:
    """One line of progress on ``stream``, drawn at most so often.

    On a terminal it is redrawn in place with a carriage return (at most ``redraw`` times a
    second); elsewhere a plain line is written every ``every`` seconds, so a log shows the work
    is alive without filling up. ``in_place=False`` forces plain lines on a terminal too: when
    results go to the same terminal, a redrawn line would land in the middle of them.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        every: float = 10.0,
        redraw: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        columns: int | None = None,
        in_place: bool | None = None,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty() if in_place is None else in_place
        self.interval = 1.0 / redraw if self.tty else every
        self.clock = clock
        self.started = clock()
        self.shown_at = self.started
        self.drawn = False
        self.columns = columns

    @property
    def width(self) -> int:
        """Characters a redrawn line may take: one less than the terminal's (no wrapping)."""
        return (self.columns or shutil.get_terminal_size().columns) - 1

    def due(self) -> bool:
        """Whether it is time to draw again (and if so, the clock starts over)."""
        now = self.clock()
        if now - self.shown_at < self.interval:
            return False
        self.shown_at = now
        return True

    def draw(self, status: str, redrawn: str | None = None) -> None:
        """Show ``status`` (``redrawn``, e.g. with a bar, when redrawing in place)."""
        if self.tty:
            width = self.width
            self.stream.write("\r" + (redrawn or status)[:width].ljust(width))
            self.drawn = True
        else:
            self.stream.write(status + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear the line from a terminal, so what follows stands alone."""
        if self.drawn:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.drawn = False


class ProgressBar(StatusLine):
    """A build's progress callback: rows done of the estimate, rate and time left.

    The estimate is the planner's: the count may pass it, and then only the count and rate are
    shown.
    """

    def __init__(self, label: str, stream: TextIO, **options: Any) -> None:
        super().__init__(stream, **options)
        self.label = label

    def __call__(self, done: int, estimate: int | None) -> None:
        if not self.due():
            return
        status = self.status(done, estimate, self.shown_at - self.started)
        redrawn = self._with_bar(status, done, estimate, self.width) if self.tty else None
        self.draw(status, redrawn)

    def status(self, done: int, estimate: int | None, elapsed: float) -> str:
        """``docs: 1,200 / ~5,000 rows (24%), 3,000 rows/s, 1.27 s left``."""
        rate = done / elapsed if elapsed > 0 else 0.0
        text = f"{self.label}: {done:,}"
        if estimate and done <= estimate:
            text += f" / ~{estimate:,} rows ({100 * done // estimate}%)"
        else:
            text += " rows"
        text += f", {rate:,.0f} rows/s"
        if estimate and done <= estimate and rate > 0:
            text += f", {duration((estimate - done) / rate)} left"
        return text

    @staticmethod
    def _with_bar(status: str, done: int, estimate: int | None, width: int) -> str:
        room = width - len(status) - 3
        if not estimate or done > estimate or room < 10:
            return status[:width]
        bar = min(room, 40)
        filled = bar * done // estimate
        return f"[{'#' * filled}{'.' * (bar - filled)}] {status}"


class StepProgress(StatusLine):
    """Progress of work done in steps of known number (Manku tables, bands) or not (rounds):
    ``label: <status>, <elapsed>``, with a bar on a terminal when the total is known."""

    def __init__(self, label: str, stream: TextIO, **options: Any) -> None:
        super().__init__(stream, **options)
        self.label = label

    def __call__(
        self, status: str, done: int = 0, total: int | None = None, *, now: bool = False
    ) -> None:
        """Show ``status``; ``now`` shows it even when one was shown a moment ago."""
        if not self.due() and not now:
            return
        text = f"{self.label}: {status}, {duration(self.clock() - self.started)}"
        redrawn = None
        if self.tty and total:
            bar = 20
            filled = bar * min(done, total) // total
            redrawn = f"[{'#' * filled}{'.' * (bar - filled)}] {text}"
        self.draw(text, redrawn)


# -- reports

# Keys listed per kind of difference: a check of a broken index may find millions.
KEYS_SHOWN = {"text": 10, "json": 100}


def source(info: IndexInfo) -> str:
    """``public.docs.body (key id, integer)``."""
    found = info.source
    return (
        f"{found.schema}.{found.table}.{found.text_column} "
        f"(key {found.key_column}, {found.key_type})"
    )


def spec(index_spec: IndexSpec) -> str:
    """The choices an index was made with, in a line."""
    from simindex.core.design import LshDesign, MankuDesign
    from simindex.core.spec import SimHash

    method, design = index_spec.method, index_spec.design
    shingling = method.shingling
    shingles = f"{shingling.unit} {shingling.size}-shingles"
    if shingling.with_characters:
        shingles += " and characters"
    options = [
        f"{name} {value}"
        for name, value, default in (
            ("punctuation", shingling.punctuation, "split"),
            ("numbers", shingling.numbers, "keep"),
            ("tokenizer", shingling.tokenizer, None),
        )
        if value != default
    ]
    options += [name for name in ("identifiers", "strip_markup") if getattr(shingling, name)]
    if options:
        shingles += f" ({', '.join(options)})"
    if method.ignore_common is not None:
        shingles += f", ignoring shingles in more than {method.ignore_common:.2%} of rows"
    if isinstance(method, SimHash) and method.idf:
        shingles += ", IDF weights"
    if isinstance(method, SimHash):
        assert isinstance(design, MankuDesign)
        text = (
            f"max distance {method.max_distance}, {design.num_blocks} blocks "
            f"({design.table_count} permutation tables)"
        )
        if method.top_n is not None:
            text += f", top {method.top_n} bits"
    else:
        assert isinstance(design, LshDesign)
        text = (
            f"threshold {method.threshold}, {method.num_perm} values ({method.scheme}), "
            f"{design.num_bands} bands of {design.rows_per_band}"
        )
    return f"{text}; {shingles}"


def cost(index_spec: IndexSpec, rows: int) -> str:
    """What building the design will take, in a line: side tables and bytes a row."""
    estimate = index_spec.cost
    kind = "permutation tables" if index_spec.kind == "simhash" else "band indexes"
    text = f"cost: {estimate.tables} {kind}, about {size(round(estimate.bytes_per_row))} a row"
    if rows:
        text += f" ({size(round(estimate.bytes_for(rows)))} for {rows:,} rows)"
    return text


def _spec_json(index_spec: IndexSpec) -> dict[str, Any]:
    """The stored spec, with its learned shingle counts summed up rather than spelled out."""
    data: dict[str, Any] = json.loads(index_spec.to_json())
    counts = index_spec.counts
    if counts is not None:
        data["shingle_counts"] = {"rows": counts.rows, "shingles": len(counts.hashes)}
        if index_spec.common is not None:
            data["shingle_counts"]["common"] = len(index_spec.common)
    return data


def info_json(info: IndexInfo) -> dict[str, Any]:
    found = info.source
    return {
        "name": info.name,
        "method": info.spec.kind,
        "source": {
            "schema": found.schema,
            "table": found.table,
            "column": found.text_column,
            "key": found.key_column,
            "key_type": found.key_type,
        },
        "spec": _spec_json(info.spec),
        "cost": {
            "tables": info.spec.cost.tables,
            "bytes_per_row": round(info.spec.cost.bytes_per_row),
        },
        "state": info.state,
        "state_reason": info.state_reason,
        "rows": info.row_count,
        "skipped": info.skipped_count,
        "created_at": info.created_at,
        "built_at": info.built_at,
    }


def stats_json(stats: IndexStats) -> dict[str, Any]:
    info = stats.info
    return info_json(info) | {
        "rows": stats.rows,
        "rows_at_build": info.row_count,
        "tables": stats.table_bytes,
        "total_bytes": stats.total_bytes,
        "queued": stats.queued,
        "lag_seconds": round(stats.lag_seconds, 3),
        "failed": stats.failed,
        "deletes_waiting": stats.deletes_waiting,
        "broken": info.broken,
        "last_error": info.last_error,
        "last_error_at": info.last_error_at,
    }


def stats_text(found: Sequence[IndexStats]) -> str:
    """One line per index, one per table with its size, then the worker's last errors."""
    summary = table(
        ["index", "method", "source", "state", "rows", "queued", "lag", "failed", "size", "built"],
        [
            [
                stats.info.name,
                stats.info.spec.kind,
                f"{stats.info.source.schema}.{stats.info.source.table}."
                f"{stats.info.source.text_column}",
                stats.info.state + (", BROKEN" if stats.info.broken else ""),
                stats.rows,
                stats.queued,
                duration(stats.lag_seconds) if stats.queued else "-",
                stats.failed,
                size(stats.total_bytes),
                stats.info.built_at.isoformat(" ", "seconds") if stats.info.built_at else "never",
            ]
            for stats in found
        ],
    )
    sizes = table(
        ["index", "table", "size"],
        [
            [stats.info.name, name, size(count)]
            for stats in found
            for name, count in stats.table_bytes.items()
        ],
    )
    errors = [last_error_line(stats.info) for stats in found if stats.info.last_error]
    # Why an index needs a rebuild or lost its table: one line each.
    errors += [
        f"{stats.info.name} is {stats.info.state}: {stats.info.state_reason}"
        for stats in found
        if stats.info.state_reason
    ]
    return "\n\n".join([summary, sizes] + (["\n".join(errors)] if errors else []))


def last_error_line(info: IndexInfo) -> str:
    """``docs: BROKEN, last error at 2026-01-02 10:00:00+00:00: UndefinedColumn ...``."""
    when = info.last_error_at.isoformat(" ", "seconds") if info.last_error_at else "?"
    what = "BROKEN, last error at" if info.broken else "last error at"
    return f"{info.name}: {what} {when}: {info.last_error}"


def check_json(name: str, report: CheckReport) -> dict[str, Any]:
    shown = KEYS_SHOWN["json"]
    return {
        "index": name,
        "ok": report.ok,
        "checked": report.checked,
        "missing": len(report.missing),
        "stale": len(report.stale),
        "orphaned": len(report.orphaned),
        "missing_keys": report.missing[:shown],
        "stale_keys": report.stale[:shown],
        "orphaned_keys": report.orphaned[:shown],
        "queued": report.queued,
        "failed": report.failed,
        "broken": report.broken is not None,
        "last_error": report.broken,
    }


def check_text(name: str, report: CheckReport) -> str:
    lines = [
        f"checked {report.checked:,} rows of {name}: {len(report.missing):,} missing, "
        f"{len(report.stale):,} stale, {len(report.orphaned):,} orphaned "
        f"({report.queued:,} queued, {report.failed:,} failed)"
    ]
    shown = KEYS_SHOWN["text"]
    for kind, keys in (
        ("missing", report.missing),
        ("stale", report.stale),
        ("orphaned", report.orphaned),
    ):
        if keys:
            more = f" and {len(keys) - shown:,} more" if len(keys) > shown else ""
            lines.append(f"  {kind}: {', '.join(map(str, keys[:shown]))}{more}")
    if report.broken is not None:
        lines.append(f"  BROKEN: the sync worker's batches fail: {report.broken}")
    return "\n".join(lines)
