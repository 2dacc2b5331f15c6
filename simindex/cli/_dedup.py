"""``simindex pairs`` and ``simindex clusters``: the near-duplicates of a whole table at once.

Both can produce millions of rows: they are streamed to stdout or ``--output`` (see
:mod:`simindex.cli._rows`) while progress goes to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from simindex import _terminal as terminal
from simindex.cli._common import (
    OK,
    UsageError,
    add_verify_option,
    database,
    flag,
    json_value,
    non_negative_int,
    number,
    positive_int,
    progress,
)
from simindex.cli._rows import FORMATS, output, write_rows
from simindex.cli._show import Shown, add_show_option, for_people

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers
    from simindex.index import Index, IndexInfo
    from simindex.ops.clusters import ClusterMethod, ClusterReport

SURVIVOR_RULES = ("smallest_key", "largest_key", "longest_text", "shortest_text")
_COUNT_EVERY = 4096  # rows between looks at the clock


def _limit_options(parser: argparse.ArgumentParser, what: str) -> None:
    limits = parser.add_mutually_exclusive_group()
    limits.add_argument(
        "--max-distance",
        type=non_negative_int,
        metavar="K",
        help=f"SimHash: {what} with at most K differing bits (default and upper limit: the "
        "index's)",
    )
    limits.add_argument(
        "--threshold",
        type=number,
        metavar="J",
        help=f"MinHash: {what} with at least this Jaccard similarity (default: the "
        "index's; not below the one its LSH bands are tuned for)",
    )
    add_verify_option(parser, what)


def _check_limits(args: argparse.Namespace, info: IndexInfo) -> bool:
    """Whether the index is a SimHash one; the other method's limit is a usage error."""
    simhash = info.spec.kind == "simhash"
    for wrong in ("threshold", "verify") if simhash else ("max_distance",):
        if getattr(args, wrong) is not None:
            raise UsageError(f"{flag(wrong)}: {info.name} is a {info.spec.kind} index")
    return simhash


def _rows_in_place(to_stdout: bool) -> bool | None:
    """Progress redrawn in place, unless the rows go to the same terminal."""
    return False if to_stdout and sys.stdout.isatty() else None


# -- pairs


def add_pairs(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "pairs",
        parents=[common],
        help="write every near-duplicate pair of an index",
        description="Write every pair of rows of the index (left, right, and their distance "
        "or similarity), each pair once with left < right, as it is found: memory stays flat "
        "for millions of pairs. Default: CSV with a header on stdout; --json is the same as "
        "--format jsonl (one JSON object per line). Progress (Manku tables or bands done, "
        "pairs so far) and a closing summary go to stderr.",
    )
    parser.add_argument("name", metavar="NAME", help="the index (built)")
    _limit_options(parser, "pairs")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="csv (default), jsonl, or an aligned table (widths from the first 1,000 pairs)",
    )
    parser.add_argument(
        "--groups",
        action="store_true",
        help="write a group of m identical rows as m-1 lines (its first key beside each other "
        "member, marked identical) instead of its m(m-1)/2 pairs, and the pairs between groups "
        "by their first keys: for template-heavy tables (MinHash: verified by the estimate "
        "unless --verify says otherwise)",
    )
    parser.add_argument("--output", metavar="PATH", help="write to PATH instead of stdout")
    add_show_option(parser, "both keys of a pair (as left_COLUMN and right_COLUMN)")
    parser.set_defaults(run=run_pairs)


def run_pairs(args: argparse.Namespace) -> int:
    from simindex.index import Index
    from simindex.ops.pairs import IdenticalGroup, NearPair

    form = args.format or "csv"
    if getattr(args, "json", False):
        if args.format not in (None, "jsonl"):
            raise UsageError(f"--json writes JSON Lines: it cannot go with --format {form}")
        form = "jsonl"
    dsn, schema = database(args)
    index = Index(dsn, args.name, index_schema=schema)
    info = index.info()
    simhash = _check_limits(args, info)
    design: Any = info.spec.design
    parts, total = ("Manku tables", design.table_count) if simhash else ("bands", design.num_bands)
    shown = terminal.StepProgress(
        f"pairs of {args.name}", sys.stderr, in_place=_rows_in_place(args.output is None)
    )
    found = done = 0
    started = time.perf_counter()

    def show(parts_done: int = 0, parts_total: int = 0, *, now: bool = False) -> None:
        nonlocal done, total
        done = max(done, parts_done)
        total = parts_total or total
        shown(f"{done}/{total} {parts}, {found:,} pairs", done, total, now=now)

    same: int | float = 0 if simhash else 1.0

    def rows() -> Iterator[tuple[Any, ...]]:
        nonlocal found
        for pair in index.pairs(
            max_distance=args.max_distance,
            threshold=args.threshold,
            verify=args.verify,
            progress=show,
            groups=args.groups,
        ):
            found += 1
            if found % _COUNT_EVERY == 0:
                show()
            if isinstance(pair, IdenticalGroup):
                first = pair.keys[0]
                yield from ((first, member, same, True) for member in pair.keys[1:])
                continue
            score = pair.distance if isinstance(pair, NearPair) else pair.similarity
            row = (pair.left, pair.right, score)
            yield (*row, False) if args.groups else row

    headers = ["left", "right", "distance" if simhash else "similarity"]
    headers += ["identical"] if args.groups else []
    headers += [f"{side}_{column}" for side in ("left", "right") for column in args.show]
    columns = Shown(dsn, info, args.show)
    written: Iterable[Sequence[Any]] = columns.extended(rows(), (0, 1)) if args.show else rows()
    if form == "table":
        written = ([for_people(value) for value in row] for row in written)
    try:
        with output(args.output) as stream:
            write_rows(form, stream, headers, written)
    finally:
        shown.close()
    where = f" to {args.output}" if args.output else ""
    seconds = terminal.duration(time.perf_counter() - started)
    counted = f"{found:,} groups and pairs" if args.groups else _count(found, "pair")
    progress(f"{counted} of {args.name}{where} in {seconds}")
    return OK


# -- clusters


def add_clusters(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "clusters",
        parents=[common],
        help="group an index's rows into clusters of near-duplicates",
        description="Cluster the rows of the index (written to the table <NAME>_clusters in "
        "simindex's schema, replacing the last run's; a cluster's id is its smallest key) and "
        "print a report with the largest clusters (--json: as JSON). With --format, --output "
        "or --survivors, also write the members of the clusters (cluster_id, key, size and "
        "maybe survivor), biggest clusters first: to --output (CSV unless --format says "
        "otherwise), or to stdout, the table after the report, CSV or JSON Lines alone (the "
        "report then goes to stderr). Progress goes to stderr.",
    )
    parser.add_argument("name", metavar="NAME", help="the index (built)")
    parser.add_argument(
        "--method",
        choices=("pairs", "leader", "bottom_k"),
        default="pairs",
        help="pairs: connected components of all pairs; leader: each row joins its nearest "
        "earlier neighbour's cluster, at the index's own limit (the clustering sync keeps up "
        "to date); bottom_k: rows with the same k smallest feature hashes, no comparisons "
        "(default: %(default)s)",
    )
    _limit_options(parser, "with --method pairs, join rows")
    parser.add_argument(
        "--bottom-k",
        type=positive_int,
        metavar="N",
        help="--method bottom_k: feature hashes making a row's cluster key (default: 4)",
    )
    parser.add_argument(
        "--min-size",
        type=positive_int,
        default=2,
        metavar="N",
        help="show and write only clusters of at least N rows (default: %(default)s)",
    )
    parser.add_argument(
        "--largest",
        type=non_negative_int,
        default=10,
        metavar="N",
        help="list the N largest clusters in the report, 0 for none (default: %(default)s)",
    )
    add_show_option(parser, "each key (in the report's largest clusters and the members)")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="write the members as a table, CSV (with a header) or JSON Lines",
    )
    parser.add_argument(
        "--output", metavar="PATH", help="write the members to PATH (CSV unless --format)"
    )
    parser.add_argument(
        "--survivors",
        metavar="PREFER",
        help="write the members with a survivor column, true for the row to keep in each "
        "cluster: the one with the smallest_key, largest_key, longest_text, shortest_text, "
        "newest:<column> or oldest:<column> (a column of the table; ties: the smallest key)",
    )
    parser.set_defaults(run=run_clusters)


def run_clusters(args: argparse.Namespace) -> int:
    from simindex.index import Index

    form = args.format or ("csv" if args.output else "table" if args.survivors else None)
    if form == "table" and args.output is None and getattr(args, "json", False):
        raise UsageError("--json and members as a table on stdout: use --format jsonl or --output")
    if args.survivors is not None:
        _check_prefer(args.survivors, args.min_size)
    dsn, schema = database(args)
    index = Index(dsn, args.name, index_schema=schema)
    info = index.info()
    if args.method == "pairs":
        _check_limits(args, info)
    elif args.max_distance is not None or args.threshold is not None:
        given = "--max-distance" if args.max_distance is not None else "--threshold"
        own = " (it uses the index's own, as sync does)" if args.method == "leader" else ""
        raise UsageError(f"{given}: --method {args.method} takes no limit{own}")
    elif args.verify is not None:
        raise UsageError(f"--verify: only for --method pairs, not {args.method}")
    if args.bottom_k is not None and args.method != "bottom_k":
        raise UsageError(f"--bottom-k: only for --method bottom_k, not {args.method}")

    members_to_stdout = form is not None and args.output is None
    shown = terminal.StepProgress(
        f"clusters of {args.name}", sys.stderr, in_place=_rows_in_place(members_to_stdout)
    )
    parts = "Manku tables" if info.spec.kind == "simhash" else "bands"

    def step(name: str, done: int, total: int | None) -> None:
        status = {
            "pairs": f"pairs from {done}/{total} {parts}",
            "components": f"components, round {done}",
            "rows": f"{done:,} rows",
        }[name]
        shown(status, done, total)

    try:
        report = index.clusters(
            method=args.method,
            max_distance=args.max_distance,
            threshold=args.threshold,
            verify=args.verify,
            bottom_k=4 if args.bottom_k is None else args.bottom_k,
            progress=step,
        )
    finally:
        shown.close()
    columns = Shown(dsn, info, args.show)
    largest = _largest(index, args.largest, args.min_size)
    members = _members(index, args.method, args.survivors, args.min_size) if form else None
    result = _report_json(args.name, report, largest)
    text = _report_text(args.name, info.spec.kind, report, largest, args.min_size, columns)
    report_stream = sys.stderr if members_to_stdout and form != "table" else sys.stdout
    if getattr(args, "json", False):
        text = json.dumps(result, sort_keys=True, default=json_value)
    print(text, file=report_stream, flush=True)
    if members is None or form is None:
        return OK
    headers = ["cluster_id", "key", "size"] + (["survivor"] if args.survivors else [])
    headers += args.show
    if args.show:
        members = columns.extended(members, (1,))
    if form == "table":
        members = ([for_people(value) for value in row] for row in members)
    written = _Counted(members)
    with output(args.output) as stream:
        if form == "table":
            stream.write("\n")
        write_rows(form, stream, headers, written)
    where = f" to {args.output}" if args.output else ""
    progress(f"wrote {written.rows:,} rows of {_count(written.clusters, 'cluster')}{where}")
    return OK


def _check_prefer(prefer: str, min_size: int) -> None:
    rule, _, column = prefer.partition(":")
    if prefer not in SURVIVOR_RULES and not (rule in ("newest", "oldest") and column):
        raise UsageError(
            f"--survivors: expected {', '.join(SURVIVOR_RULES)}, newest:<column> or "
            f"oldest:<column>, got {prefer!r}"
        )
    if min_size < 2:
        raise UsageError("--survivors: a row alone keeps itself; give --min-size 2 or more")


def _largest(index: Index, count: int, min_size: int) -> list[tuple[Any, int, list[Any]]]:
    """The ``count`` largest clusters: (id, rows, keys up to what the JSON report shows)."""
    if count == 0:
        return []
    found: list[tuple[Any, int, list[Any]]] = []
    rows = index.cluster_members(min_size=min_size)
    try:
        for member in rows:
            if not found or found[-1][0] != member.cluster_id:
                if len(found) == count:
                    break
                found.append((member.cluster_id, member.size, []))
            if len(found[-1][2]) < terminal.KEYS_SHOWN["json"]:
                found[-1][2].append(member.key)
    finally:
        rows.close()  # type: ignore[attr-defined]  # a generator: ends its transaction
    return found


def _members(
    index: Index, method: ClusterMethod, prefer: str | None, min_size: int
) -> Iterable[Sequence[Any]]:
    """The rows to write; with ``prefer``, the first is read here, so that a rule naming no
    column of the table is an error before anything is printed."""
    if prefer is None:
        return ((m.cluster_id, m.key, m.size) for m in index.cluster_members(min_size=min_size))
    rows = (
        (s.cluster_id, s.key, s.cluster_size, s.survivor)
        for s in index.survivors(method, prefer=prefer)
        if s.cluster_size >= min_size
    )
    first = next(rows, None)
    return [] if first is None else itertools.chain([first], rows)


class _Counted:
    """Rows passed through, counted, with the number of clusters they belong to."""

    def __init__(self, rows: Iterable[Sequence[Any]]) -> None:
        self.source = rows
        self.rows = self.clusters = 0

    def __iter__(self) -> Iterator[Sequence[Any]]:
        last: Any = object()
        for row in self.source:
            self.rows += 1
            if row[0] != last:
                self.clusters, last = self.clusters + 1, row[0]
            yield row


def _report_json(
    name: str, report: ClusterReport, largest: list[tuple[Any, int, list[Any]]]
) -> dict[str, Any]:
    return {
        "index": name,
        "method": report.method,
        "rows": report.rows,
        "clusters": report.clusters,
        "duplicate_rows": report.duplicate_rows,
        "largest": report.largest,
        "pairs": report.pairs,
        "rounds": report.rounds,
        "seconds": report.seconds,
        "largest_clusters": [
            {"cluster_id": cluster_id, "size": size, "keys": keys}
            for cluster_id, size, keys in largest
        ],
    }


def _report_text(
    name: str,
    kind: str,
    report: ClusterReport,
    largest: list[tuple[Any, int, list[Any]]],
    min_size: int,
    columns: Shown,
) -> str:
    shared = report.clusters - (report.rows - report.duplicate_rows)
    text = (
        f"clustered {name} ({report.method}): {report.rows:,} rows in {report.clusters:,} "
        f"clusters; {shared:,} of them have more than one row ({report.duplicate_rows:,} rows, "
        f"the largest {report.largest:,})"
    )
    if report.method != "bottom_k":
        # Identical rows are one node: `pairs` counts the pairs among them too, so it finds
        # more than the clustering needed.
        text += f"; {_count(report.pairs, 'pair')} of distinct rows joined them"
        text += f" in {_count(report.rounds, 'round')}"
    text += f"; {terminal.duration(report.seconds)}"
    if not largest:
        return text
    limit = terminal.KEYS_SHOWN["text"]
    caption = f"the largest clusters of at least {min_size} rows:"
    if columns.columns:  # a line per key shown, with its columns
        found = columns.of(key for _, _, keys in largest for key in keys[:limit])
        lines = [
            [cluster_id, size, key, *map(for_people, columns.values(found, key))]
            for cluster_id, size, keys in largest
            for key in keys[:limit]
        ]
        headers = ["cluster_id", "rows", "key", *columns.columns]
        return f"{text}\n\n{caption}\n{terminal.table(headers, lines)}"
    rows = [
        [cluster_id, size, ", ".join(map(str, keys[:limit])) + (", ..." if size > limit else "")]
        for cluster_id, size, keys in largest
    ]
    return f"{text}\n\n{caption}\n{terminal.table(['cluster_id', 'rows', 'keys'], rows)}"


def _count(how_many: int, thing: str) -> str:
    return f"{how_many:,} {thing}" + ("" if how_many == 1 else "s")
