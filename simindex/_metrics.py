"""Prometheus text exposition of simindex: per index, rows, queue length and lag, failed items,
broken state and disk use; with a running worker also its counters. ``simindex stats
--prometheus`` prints it; ``simindex sync --follow --metrics-port N`` serves it at ``/metrics``
from a thread, read afresh from the database at each scrape (one short transaction).

Format: https://prometheus.io/docs/instrumenting/exposition_formats/ (version 0.0.4).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from simindex.db.catalog import DRIFT_STATES
from simindex.ops.stats import IndexStats, index_stats
from simindex.ops.sync_report import SyncReport

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (name, type, help, value of one index's stats)
_INDEX_GAUGES: tuple[tuple[str, str, Callable[[IndexStats], float]], ...] = (
    ("simindex_index_rows", "keys the index holds now", lambda s: s.rows),
    ("simindex_queue_length", "changed keys waiting for the sync worker", lambda s: s.queued),
    (
        "simindex_queue_lag_seconds",
        "age of the oldest queued change (0 when the queue is empty)",
        lambda s: s.lag_seconds,
    ),
    ("simindex_failed_items", "rows the sync worker could not process", lambda s: s.failed),
    (
        "simindex_deletes_waiting",
        "DELETE statements whose index rows the sync worker has not swept yet "
        "(simindex_index_rows counts those rows until then)",
        lambda s: s.deletes_waiting,
    ),
    (
        "simindex_index_broken",
        "1 while the sync worker's batches of the index fail as a whole",
        lambda s: float(s.info.broken),
    ),
    (
        "simindex_index_needs_rebuild",
        "1 while the index does not follow its table (state needs_rebuild or source_dropped; "
        "simindex stats says why)",
        lambda s: float(s.info.state in DRIFT_STATES),
    ),
    ("simindex_index_bytes", "disk use of the index's tables", lambda s: s.total_bytes),
)
_WORKER_COUNTERS = (
    ("simindex_sync_batches_total", "batches committed", "batches"),
    ("simindex_sync_rows_taken_total", "queue entries taken", "taken"),
    ("simindex_sync_rows_indexed_total", "rows written to the index", "indexed"),
    ("simindex_sync_rows_removed_total", "keys removed from the index", "removed"),
    ("simindex_sync_rows_failed_total", "rows recorded as failed", "failed"),
)


def label(value: str) -> str:
    """A label value, escaped as the exposition format wants."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def exposition(stats: Sequence[IndexStats], report: SyncReport | None = None) -> str:
    """The metrics of ``stats`` (and of a running worker's ``report``) as exposition text."""
    lines: list[str] = []
    lines += [
        "# HELP simindex_index_info an index: its method and build state",
        "# TYPE simindex_index_info gauge",
    ]
    for one in stats:
        lines.append(
            f'simindex_index_info{{index="{label(one.info.name)}",'
            f'method="{one.info.spec.kind}",state="{label(one.info.state)}"}} 1'
        )
    for name, help_text, value in _INDEX_GAUGES:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [
            f'{name}{{index="{label(one.info.name)}"}} {_number(value(one))}' for one in stats
        ]
    if report is not None:
        by_index = list(report.by_index.items())  # one call: the worker may add an index
        for name, help_text, attribute in _WORKER_COUNTERS:
            lines += [f"# HELP {name} {help_text} by this worker", f"# TYPE {name} counter"]
            lines += [
                f'{name}{{index="{label(index)}"}} {getattr(totals, attribute)}'
                for index, totals in by_index
            ]
        lines += [
            "# HELP simindex_sync_reconnects_total reconnections after the server went away",
            "# TYPE simindex_sync_reconnects_total counter",
            f"simindex_sync_reconnects_total {report.reconnects}",
        ]
    return "\n".join(lines) + "\n"


@contextmanager
def serving(
    dsn: str, schema: str, report: SyncReport, *, port: int, host: str = "127.0.0.1"
) -> Iterator[http.server.ThreadingHTTPServer]:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread while the block runs."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is here")
                return
            try:
                body = exposition(index_stats(dsn, index_schema=schema), report)
                status = 200
            except Exception as exc:  # a scrape must answer, whatever the database says
                body = f"# simindex: cannot read the stats: {' '.join(str(exc).split())}\n"
                status = 503
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every few seconds would drown the worker's own log

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="simindex-metrics", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
