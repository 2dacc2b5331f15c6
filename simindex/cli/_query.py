"""``simindex query``: the near-duplicates of a text, a file, stdin or a row."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from simindex import _terminal as terminal
from simindex.cli._common import (
    OK,
    UsageError,
    add_verify_option,
    database,
    emit,
    flag,
    non_negative_int,
    number,
    positive_int,
)
from simindex.cli._show import Shown, add_show_option, for_people
from simindex.errors import SimindexError

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers


def add_query(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "query",
        parents=[common],
        help="find the near-duplicates of a text or of a row",
        description="Print the rows of the indexed table near a text (TEXT, --file, or stdin "
        "with '-') or near the row with --key: their key and Hamming distance (SimHash), or "
        "their key and Jaccard similarity (MinHash), closest first.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.add_argument(
        "text", nargs="?", metavar="TEXT", help="the text to look for ('-': read it from stdin)"
    )
    parser.add_argument("--file", metavar="PATH", help="read the text from a UTF-8 file")
    parser.add_argument(
        "--key",
        metavar="KEY",
        help="look for the row with this key instead (it is left out of the answer)",
    )
    parser.add_argument(
        "--max-distance",
        type=non_negative_int,
        metavar="K",
        help="SimHash: at most K differing bits (default and upper limit: the index's)",
    )
    parser.add_argument(
        "--threshold",
        type=number,
        metavar="J",
        help="MinHash: at least this Jaccard similarity (default: the index's)",
    )
    add_verify_option(parser, "the rows")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="at most N matches")
    add_show_option(parser, "each match")
    parser.set_defaults(run=run_query)


def run_query(args: argparse.Namespace) -> int:
    from simindex.core.spec import SimHash
    from simindex.db.connection import connect, transaction
    from simindex.db.source import key_from_text
    from simindex.index import Index
    from simindex.ops.verify import DEFAULT_VERIFY

    if [args.text, args.file, args.key].count(None) != 2:
        raise UsageError("give exactly one of TEXT, --file PATH or --key KEY ('-' reads stdin)")
    dsn, schema = database(args)
    text = None if args.key is not None else _query_text(args.text, args.file)
    with connect(dsn) as connection:  # one connection for the lookups and the query
        index = Index(connection, args.name, index_schema=schema)
        info = index.info()
        method = info.spec.method
        wrong = ("threshold", "verify") if isinstance(method, SimHash) else ("max_distance",)
        for dest in wrong:
            if getattr(args, dest) not in (None, False):
                raise UsageError(f"{flag(dest)}: {args.name} is a {info.spec.kind} index")
        key = None
        if args.key is not None:
            with transaction(connection) as conn:
                key = key_from_text(conn, info.source, args.key)
        rows: list[tuple[Any, int | float]]
        if isinstance(method, SimHash):
            setting, measure = "max_distance", "distance"
            limit: float = method.max_distance if args.max_distance is None else args.max_distance
            matches = (
                index.near(text, max_distance=args.max_distance)
                if key is None
                else index.near_key(key, max_distance=args.max_distance)
            )
            rows = [(match.key, match.distance) for match in matches]
        else:
            setting, measure = "threshold", "similarity"
            limit = method.threshold if args.threshold is None else args.threshold
            verify = args.verify or DEFAULT_VERIFY
            similar = index.similar(text, key=key, threshold=args.threshold, verify=verify)
            rows = [(match.key, match.similarity) for match in similar]
        rows = rows[: args.limit]
        columns = Shown(connection, info, args.show)
        found_columns = columns.of(found for found, _ in rows)
    result: dict[str, Any] = {
        "index": args.name,
        "method": info.spec.kind,
        setting: limit,
        "matches": [{"key": found, measure: value} for found, value in rows],
    }
    if args.show:
        for match, (found, _) in zip(result["matches"], rows, strict=True):
            match["columns"] = dict(
                zip(args.show, columns.values(found_columns, found), strict=True)
            )
    if measure == "similarity":
        result["verify"] = verify
    if rows:
        shown = terminal.table(
            ["key", measure, *args.show],
            [
                [found, value, *map(for_people, columns.values(found_columns, found))]
                for found, value in rows
            ],
        )
    else:
        shown = f"no matches ({setting.replace('_', ' ')} {limit})"
    emit(args, result, shown)
    return OK


def add_fingerprint(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "fingerprint",
        parents=[common],
        help="print a text's fingerprint as the index's SQL functions take it",
        description="Compute the fingerprint of a text (TEXT, --file, or stdin with '-') as "
        "index NAME computes it, in the form its SQL functions take: SimHash as a signed "
        "bigint (the unsigned 64-bit value minus 2**63) for <NAME>_near_v1(fingerprint => ...); "
        "MinHash as the sketch, band_keys and set_hash arguments of <NAME>_similar_v1.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.add_argument(
        "text", nargs="?", metavar="TEXT", help="the text ('-': read it from stdin)"
    )
    parser.add_argument("--file", metavar="PATH", help="read the text from a UTF-8 file")
    parser.set_defaults(run=run_fingerprint)


def run_fingerprint(args: argparse.Namespace) -> int:
    from simindex.index import Index

    if args.text is not None and args.file is not None:
        raise UsageError("give one of TEXT or --file PATH ('-' reads stdin)")
    dsn, schema = database(args)
    value = Index(dsn, args.name, index_schema=schema).fingerprint(
        _query_text(args.text, args.file)
    )
    if value is None:
        raise SimindexError("the text has no features (only punctuation?): no fingerprint")
    if isinstance(value, int):
        emit(args, {"index": args.name, "fingerprint": value}, str(value))
        return OK
    result = {
        "index": args.name,
        "sketch": value.sketch,
        "band_keys": list(value.band_keys),
        "set_hash": value.set_hash,
    }
    text = (
        f"sketch {value.sketch}\nband_keys {{{','.join(map(str, value.band_keys))}}}\n"
        f"set_hash {value.set_hash}"
    )
    emit(args, result, text)
    return OK


def _query_text(text: str | None, path: str | None) -> str:
    """The text to look for: TEXT itself, or read from --file or stdin ('-'); never empty."""
    if text is not None and text != "-":
        where, value = "TEXT", text
    elif path is None or path == "-":
        where, value = "stdin", _decode(sys.stdin.buffer.read(), "stdin")
    else:
        where = path
        try:
            with open(path, "rb") as file:
                value = _decode(file.read(), path)
        except OSError as exc:
            raise SimindexError(f"cannot read {path}: {exc.strerror}") from exc
    if not value.strip():
        raise SimindexError(f"nothing to look for: {where} is empty")
    return value


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SimindexError(f"{where} is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
