"""``simindex sync, check, repair``: keeping an index equal to its table, and proving it."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING

from simindex import _terminal as terminal
from simindex.cli._common import (
    FAILED,
    INTERRUPTED,
    OK,
    PROG,
    UsageError,
    add_max_text_bytes_option,
    database,
    emit,
    later,
    number,
    positive_int,
    progress,
    seconds,
)
from simindex.errors import SimindexError

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers

# The worker's own notices go through the log, so that --log-format json keeps stderr all JSON.
_notice = logging.getLogger("simindex.cli")


def add_sync(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "sync",
        parents=[common],
        help="bring indexes up to date with their tables",
        description="Drain the change queues of the named indexes (default: all) into the "
        "indexes, then print what was done. An index whose batches fail as a whole (its table, "
        "a column or a right gone) is marked broken (see `simindex stats`) and the others go "
        "on. Exit 0 when all went well, 1 when rows failed or an index is broken. With "
        "--follow keep running, retrying broken indexes with backoff, until SIGTERM or SIGINT, "
        "which finish the current batch and exit 0.",
    )
    parser.add_argument("indexes", nargs="*", metavar="INDEX", help="index names (default: all)")
    parser.add_argument(
        "--follow",
        action="store_true",
        help="keep running: process changes as they come (looking for them every "
        "--poll-interval), reconnecting when needed",
    )
    parser.add_argument(
        "--retry-failed", action="store_true", help="queue every failed item again first"
    )
    later(parser, _add_worker_options)
    add_log_options(parser)
    parser.add_argument(
        "--metrics-port",
        type=positive_int,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics while running",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address --metrics-port listens on (default: %(default)s)",
    )
    parser.set_defaults(run=run_sync)


def _add_worker_options(parser: argparse.ArgumentParser) -> None:
    """The options whose defaults are the worker's (its modules load the driver)."""
    from simindex.ops.sync import DEFAULT_CONNECTIONS, DEFAULT_POLL_INTERVAL, DEFAULT_SWEEP_DELAY

    _add_batch_size(parser)
    parser.add_argument(
        "--connections",
        type=positive_int,
        default=DEFAULT_CONNECTIONS,
        metavar="N",
        help="batches in flight at once while there is a backlog, one connection each: the "
        "server writes one while the next is fingerprinted (default: %(default)s)",
    )
    parser.add_argument(
        "--heartbeat",
        type=seconds,
        default=30.0,
        metavar="S",
        help="with --follow, go over every index at least every S seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--poll-interval",
        type=seconds,
        default=DEFAULT_POLL_INTERVAL,
        metavar="S",
        help="with --follow, look for changes waiting every S seconds: the longest a change "
        "waits before the worker sees it (default: %(default)s)",
    )
    parser.add_argument(
        "--sweep-delay",
        type=seconds,
        default=DEFAULT_SWEEP_DELAY,
        metavar="S",
        help="with --follow, sweep the index rows of deleted rows once the oldest delete not "
        "swept yet is S seconds old: one sweep (a full anti-join) per index every S seconds at "
        "most; without --follow, sync sweeps before it ends (default: %(default)s)",
    )
    add_max_text_bytes_option(parser)


def add_log_options(parser: argparse.ArgumentParser) -> None:
    from simindex.cli._logs import FORMATS

    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log a line per batch (failures and broken indexes are always logged)",
    )

    def log_format(value: str) -> str:
        if value not in FORMATS:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(FORMATS)}, got {value!r}")
        return value

    parser.add_argument(
        "--log-format",
        type=log_format,  # applied to a default from the environment too
        metavar="{" + ",".join(FORMATS) + "}",
        default=os.environ.get("SIMINDEX_LOG_FORMAT", "text"),
        help="log lines on stderr as `event key=value ...` text or as JSON objects "
        "(default: $SIMINDEX_LOG_FORMAT, else %(default)s)",
    )


def _add_batch_size(parser: argparse.ArgumentParser) -> None:
    from simindex.ops.sync import DEFAULT_BATCH_SIZE

    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help="queue entries per transaction (default: %(default)s)",
    )


def run_sync(args: argparse.Namespace) -> int:
    from simindex.db.schema import current_revision
    from simindex.ops.sync import stop_on_signals, sync
    from simindex.ops.sync_report import SyncReport

    dsn, schema = database(args)
    # --follow retries a lost server forever; a server never reached is a mistake to report.
    if current_revision(dsn, schema=schema) is None:
        raise SimindexError(
            f"no simindex schema {schema!r} in this database: run `simindex migrate`"
        )
    names = args.indexes or None
    report = SyncReport()
    with ExitStack() as stack:
        stop = stack.enter_context(stop_on_signals())
        if args.metrics_port is not None:
            from simindex._metrics import serving

            try:
                stack.enter_context(
                    serving(dsn, schema, report, port=args.metrics_port, host=args.metrics_host)
                )
            except OSError as exc:  # the port taken (another worker?), or no such address
                raise UsageError(
                    f"--metrics-port {args.metrics_port}: cannot listen on "
                    f"{args.metrics_host}:{args.metrics_port}: {exc.strerror or exc}"
                ) from exc
            _notice.info(f"metrics at http://{args.metrics_host}:{args.metrics_port}/metrics")
        if args.follow:
            which = ", ".join(names) if names else "all indexes"
            _notice.info(f"following {which}; SIGTERM or Ctrl-C stops after the current batch")
        sync(
            dsn,
            names,
            batch_size=args.batch_size,
            follow=args.follow,
            stop=stop,
            retry_failed=args.retry_failed,
            max_text_bytes=args.max_text_bytes,
            heartbeat=args.heartbeat,
            poll_interval=args.poll_interval,
            connections=args.connections,
            sweep_delay=args.sweep_delay,
            index_schema=schema,
            report=report,
        )
    if report.busy:
        _notice.info(f"skipped while being built or dropped: {', '.join(sorted(report.busy))}")
    result = {
        "taken": report.taken,
        "indexed": report.indexed,
        "removed": report.removed,
        "failed": report.failed,
        "batches": report.batches,
        "busy": sorted(report.busy),
        "stuck": {name: round(seconds, 1) for name, seconds in sorted(report.stuck.items())},
        "broken": report.broken,
        "ok": report.ok,
        "reconnects": report.reconnects,
        "seconds": round(report.seconds, 3),
    }
    text = (
        f"synced {report.taken} queued keys in {report.batches} batches: "
        f"{report.indexed} indexed, {report.removed} removed, {report.failed} failed "
        f"({report.seconds:.2f} s)"
    )
    emit(args, result, text)
    if stop.is_set() and not args.follow:
        return _stopped_early(dsn, schema, names)
    if report.ok:
        return OK
    problems = []
    if report.failed:
        problems.append(
            f"{report.failed:,} {'row' if report.failed == 1 else 'rows'} failed (errors in "
            "`simindex stats`; "
            "`simindex sync --retry-failed` retries them)"
        )
    if report.broken:
        problems.append(
            f"{len(report.broken)} {'index' if len(report.broken) == 1 else 'indexes'} broken: "
            + "; ".join(f"{name}: {error}" for name, error in sorted(report.broken.items()))
        )
    _notice.warning("; ".join(problems))
    # A worker stopped by a signal is not a failure: what failed was logged as it happened.
    return OK if args.follow else FAILED


def _stopped_early(dsn: str, schema: str, names: list[str] | None) -> int:
    """A one-shot sync stopped by SIGINT or SIGTERM: say so and what is left, and exit 130
    (a cron job must not take it for a drained queue)."""
    from simindex.db.catalog import index_names
    from simindex.db.connection import transaction
    from simindex.ops.queue import queue_counts

    if names is None:
        with transaction(dsn) as conn:
            names = index_names(conn, schema)
    left = {name: queue_counts(dsn, name, index_schema=schema)[0] for name in names}
    waiting = ", ".join(f"{name}: {count:,}" for name, count in sorted(left.items()) if count)
    print(
        f"{PROG}: interrupted: sync stopped after its current batch; "
        + (f"keys still queued ({waiting})" if waiting else "nothing is left in the queues")
        + "; run `simindex sync` again to finish",
        file=sys.stderr,
    )
    return INTERRUPTED


def add_check(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "check",
        parents=[common],
        help="compare an index with its table (exit 1 if they differ)",
        description="Recompute the fingerprints of the table's rows (or of a random sample) "
        "and compare them with the index: rows missing from it, stale in it, and orphaned "
        "entries whose row is gone or has no text. Exit 0 when all match, 1 when some differ "
        "(or on an error). Rows changed since the last `simindex sync` count until synced.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    sampling = parser.add_mutually_exclusive_group()
    sampling.add_argument(
        "--sample",
        type=positive_int,
        metavar="N",
        help="compare about N rows, drawn at random (TABLESAMPLE BERNOULLI)",
    )
    sampling.add_argument(
        "--fraction",
        type=number,
        metavar="F",
        help="compare about this fraction of rows, in (0, 1]",
    )
    parser.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    from simindex.ops.check import check

    dsn, schema = database(args)
    fraction = args.fraction
    if fraction is not None and not 0 < fraction <= 1:
        raise UsageError(f"--fraction must be in (0, 1], a share of the rows, got {fraction:g}")
    if args.sample is not None:
        fraction = _fraction_of(dsn, schema, args.name, args.sample)
    report = check(dsn, args.name, sample=fraction, index_schema=schema)
    text = terminal.check_text(args.name, report)
    if args.sample is not None and fraction is not None:
        text += (
            f"\n  a random sample of about {args.sample:,} rows: each row is drawn with "
            f"probability {fraction:.3g} (TABLESAMPLE BERNOULLI), so the count varies"
        )
    emit(args, terminal.check_json(args.name, report), text)
    if report.broken is not None:
        progress(
            f"{args.name} is broken: {report.broken}; fix the cause, then `simindex sync "
            f"{args.name}` clears the mark"
        )
        return FAILED
    if report.ok:
        return OK
    hint = f"`simindex repair {args.name}` fixes them"
    if report.queued:
        hint = f"{report.queued:,} queued changes: `simindex sync {args.name}`, then check again"
    progress(f"{args.name} differs from its table: {hint}")
    return FAILED


def _fraction_of(dsn: str, schema: str, name: str, rows: int) -> float | None:
    """The share of the source that is about ``rows`` rows (the planner's count, else the last
    build's); None (everything) when that is all of it or the size is unknown."""
    from simindex.db.connection import transaction
    from simindex.db.source import describe, row_estimate
    from simindex.index import Index

    info = Index(dsn, name, index_schema=schema).info()
    with transaction(dsn) as conn:
        source = info.source
        described = describe(
            conn, source.table, source.text_column, schema=source.schema, key=source.key_column
        )
        total = row_estimate(conn, described) or info.row_count + info.skipped_count
    return rows / total if 0 < rows < total else None


def add_repair(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "repair",
        parents=[common],
        help="fix whatever `simindex check` finds",
        description="Check the index (see `simindex check`), queue every key found missing, "
        "stale or orphaned, and process the queue, as a sync does: safe beside running writers "
        "and workers. Prints what the check found; keys that fail become failed items.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    later(parser, _add_batch_size)
    add_log_options(parser)
    parser.set_defaults(run=run_repair)


def run_repair(args: argparse.Namespace) -> int:
    from simindex.ops.check import repair
    from simindex.ops.queue import queue_counts

    dsn, schema = database(args)
    report = repair(dsn, args.name, batch_size=args.batch_size, index_schema=schema)
    _, failed = queue_counts(dsn, args.name, index_schema=schema)
    fixed = len(report.missing) + len(report.stale) + len(report.orphaned)
    result = terminal.check_json(args.name, report) | {"repaired": fixed, "failed_items": failed}
    text = f"{terminal.check_text(args.name, report)}\nrepaired {fixed:,} keys"
    if failed:
        text += f"; {failed:,} failed items (see `simindex sync --retry-failed`)"
    emit(args, result, text)
    return OK
