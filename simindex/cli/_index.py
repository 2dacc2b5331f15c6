"""``simindex create, drop, build, stats``: an index's life, from its spec to its disk use."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from simindex import _terminal as terminal
from simindex.cli._common import (
    OK,
    UsageError,
    database,
    emit,
    flag,
    later,
    non_negative_int,
    number,
    positive_int,
)
from simindex.errors import IndexNotFoundError

if TYPE_CHECKING:
    from simindex.cli._common import Subparsers
    from simindex.core.spec import Method


# Method options: (method, flag, argparse keywords, help). Each flag's dest is the field of
# SimHash, MinHash or (shingle_*) Shingling it sets; the default shown is the field's default.
# fmt: off
_METHOD_OPTIONS: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("simhash", "--max-distance", {"type": non_negative_int, "metavar": "K"},
     "the largest Hamming distance queries may ask for"),
    ("simhash", "--num-blocks", {"type": positive_int},
     "Manku blocks (default: chosen for --expected-rows)"),
    ("simhash", "--top-n", {"type": positive_int}, "sparse SimHash: set exactly N bits"),
    ("simhash", "--expected-rows", {"type": positive_int},
     "the table size the blocks are chosen for"),
    ("simhash", "--idf", {"action": "store_true"},
     "weigh each shingle by its rarity in the table (IDF), learned by each build"),
    ("minhash", "--threshold", {"type": number, "metavar": "J"},
     "the Jaccard similarity the LSH bands are tuned for, in (0, 1)"),
    ("minhash", "--num-perm", {"type": positive_int}, "values per signature"),
    ("minhash", "--scheme", {"choices": ("classic", "one_permutation")},
     "how signatures are computed"),
    ("minhash", "--seed", {"type": non_negative_int}, "selects the hash functions"),
    ("minhash", "--num-bands", {"type": positive_int},
     "LSH bands (default: chosen for --threshold)"),
    ("minhash", "--rows-per-band", {"type": positive_int},
     "signature values per band (with --num-bands)"),
    ("either method", "--ignore-common", {"type": number, "metavar": "SHARE"},
     "ignore shingles held by more than SHARE of the rows (boilerplate), learned by each "
     "build; 0.01 splits clusters that only a template joins"),
    ("shingling", "--shingle-unit", {"choices": ("word", "char")},
     "word n-grams or character n-grams"),
    ("shingling", "--shingle-size", {"type": positive_int}, "units per shingle"),
    ("shingling", "--with-characters", {"action": "store_true"},
     "word shingles: also add every character of every word as a feature"),
    ("shingling", "--shingle-seed", {"type": non_negative_int}, "seed of the unit hashes"),
    ("shingling", "--punctuation", {"choices": ("split", "delete")},
     "split: punctuation separates words; delete: it is removed (e-mail = email)"),
    ("shingling", "--identifiers", {"action": "store_true"},
     "keep words joined by underscores whole (row_id), for code"),
    ("shingling", "--numbers", {"choices": ("keep", "drop")}, "keep or drop words of digits"),
    ("shingling", "--strip-markup", {"action": "store_true"},
     "index the visible text of HTML or XML: tags, comments, scripts and entities removed"),
    ("shingling", "--tokenizer", {"metavar": "NAME"},
     "your own tokenizer, by the name an installed package registers in the "
     "'simindex.tokenizers' entry-point group (found wherever build and sync run)"),
)
# fmt: on


def add_create(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "create",
        parents=[common],
        help="create an index of a table's text column",
        description="Create an empty near-duplicate index of TABLE.COLUMN, and the triggers "
        "that queue the table's changes for `simindex sync`; fill it with `simindex build "
        "NAME`. Options of the other method are refused.",
    )
    parser.add_argument("name", metavar="NAME", help="the index's name: [a-z][a-z0-9_]*")
    parser.add_argument("--table", required=True, help="the table to index")
    parser.add_argument("--column", required=True, help="its text column")
    parser.add_argument("--key", help="a unique column identifying rows (default: primary key)")
    parser.add_argument("--table-schema", metavar="SCHEMA", help="default: the search_path")
    parser.add_argument(
        "--method",
        choices=("simhash", "minhash"),
        default="simhash",
        help="simhash: Hamming distance of 64-bit SimHashes, exact; minhash: Jaccard "
        "similarity of shingle sets, by LSH bands (default: %(default)s)",
    )
    later(parser, _add_method_options)
    parser.set_defaults(run=run_create)


def _add_method_options(parser: argparse.ArgumentParser) -> None:
    """The options of each method, with the defaults of its dataclass (the maths: numpy)."""
    from simindex.core.spec import MinHash, SimHash
    from simindex.core.text import Shingling

    defaults = {
        "simhash": SimHash(),
        "minhash": MinHash(),
        "either method": MinHash(),
        "shingling": Shingling(),
    }
    groups = {method: parser.add_argument_group(f"{method} options") for method in defaults}
    for method, option, keywords, help_text in _METHOD_OPTIONS:
        default = getattr(defaults[method], _field(option))
        if isinstance(default, int) and default >= 10_000:
            default = f"{default:,}"
        shown = "" if default is None or default is False else f" (default: {default})"
        if "type" in keywords:
            keywords = {"metavar": "N"} | keywords
        groups[method].add_argument(option, **keywords, default=None, help=help_text + shown)


def run_create(args: argparse.Namespace) -> int:
    from simindex.index import create_index

    dsn, schema = database(args)
    method = _method(args)
    index = create_index(
        dsn,
        args.name,
        args.table,
        args.column,
        key=args.key,
        schema=args.table_schema,
        method=method,
        index_schema=schema,
    )
    info = index.info()
    rows = info.spec.sized_rows or getattr(info.spec.method, "expected_rows", None) or 0
    text = (
        f"created {info.spec.kind} index {info.name} of {terminal.source(info)}\n"
        f"  {terminal.spec(info.spec)}\n"
        f"  {terminal.cost(info.spec, rows)}\n"
        f"next: simindex build {info.name}"
    )
    emit(args, terminal.info_json(info), text)
    return OK


def _method(args: argparse.Namespace) -> Method:
    """The SimHash or MinHash the options describe; options of the other method are an error."""
    from simindex.core.spec import MinHash, SimHash, resolve
    from simindex.core.text import Shingling

    given: dict[str, dict[str, Any]] = {
        "simhash": {},
        "minhash": {},
        "either method": {},
        "shingling": {},
    }
    for method, option, _, _ in _METHOD_OPTIONS:
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None:
            given[method][_field(option)] = value
    other = "minhash" if args.method == "simhash" else "simhash"
    if given[other]:
        refused = ", ".join(flag(field) for field in given[other])
        raise UsageError(f"{refused}: an option of --method {other}, not {args.method}")
    shingling = Shingling(**given["shingling"])
    kind = SimHash if args.method == "simhash" else MinHash
    chosen = kind(shingling=shingling, **given[args.method], **given["either method"])
    try:
        resolve(chosen)
    except (TypeError, ValueError) as exc:  # say it with the option the user typed
        field, _, rest = str(exc).partition(" ")
        if field in given[args.method] or field in given["either method"]:
            raise UsageError(f"{flag(field)} {rest}") from exc
        raise
    return chosen


def _field(option: str) -> str:
    """The dataclass field a method option sets: ``--shingle-seed`` sets Shingling's ``seed``."""
    return option[2:].removeprefix("shingle-").replace("-", "_")


def add_drop(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "drop",
        parents=[common],
        help="remove indexes",
        description="Remove indexes: their side tables, queues, functions and triggers. The "
        "indexed tables are not touched. Every NAME is looked up first: one that does not "
        "exist stops the command before anything is dropped (unless --missing-ok).",
    )
    parser.add_argument("names", nargs="+", metavar="NAME", help="the indexes")
    parser.add_argument(
        "--missing-ok", action="store_true", help="a name with no index is not an error"
    )
    parser.set_defaults(run=run_drop)


def run_drop(args: argparse.Namespace) -> int:
    from simindex.index import drop_index, list_indexes

    dsn, schema = database(args)
    names = list(dict.fromkeys(args.names))
    existing = set(list_indexes(dsn, index_schema=schema))
    missing = [name for name in names if name not in existing]
    if missing and not args.missing_ok:
        raise IndexNotFoundError(f"no index named {', '.join(map(repr, missing))}: nothing dropped")
    lines = []
    for name in names:
        if name in missing:
            lines.append(f"no index {name}: nothing to drop")
            continue
        drop_index(dsn, name, index_schema=schema, missing_ok=args.missing_ok)
        lines.append(f"dropped index {name}")
    results = [{"name": name, "dropped": name not in missing} for name in names]
    emit(args, {"indexes": results}, "\n".join(lines))
    return OK


def add_build(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "build",
        parents=[common],
        help="fill an index from its table",
        description="Read the whole table and fill the index (again, when it was built "
        "before: queries keep answering from the old contents until the new ones are swapped "
        "in). Progress goes to stderr: a bar on a terminal, a line every 10 s otherwise.",
    )
    parser.add_argument("name", metavar="NAME", help="the index")
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=2000,
        metavar="N",
        help="rows per fetch, fingerprint task and COPY (default: %(default)s)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="processes computing fingerprints (default: every core for large tables)",
    )
    parser.set_defaults(run=run_build)


def run_build(args: argparse.Namespace) -> int:
    from simindex.index import get_index

    dsn, schema = database(args)
    index = get_index(dsn, args.name, index_schema=schema)
    bar = terminal.ProgressBar(f"building {args.name}", sys.stderr)
    try:
        report = index.build(batch_size=args.batch_size, workers=args.workers, progress=bar)
    finally:
        bar.close()
    result = {
        "name": args.name,
        "rows": report.rows,
        "skipped": report.skipped,
        "seconds": round(report.seconds, 3),
    }
    text = (
        f"built {args.name}: {report.rows:,} rows indexed, {report.skipped:,} skipped (no text) "
        f"in {terminal.duration(report.seconds)}"
    )
    emit(args, result, text)
    return OK


def add_stats(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "stats",
        parents=[common],
        help="show indexes: state, rows, disk use, queue",
        description="For each index: its method, table and column, state (BROKEN while the "
        "sync worker's batches of it fail), the keys it holds now, its queued keys and the age "
        "of the oldest (the lag), its failed items, the disk use of its tables "
        "(pg_total_relation_size), when it was built, and the worker's last error on it.",
    )
    parser.add_argument("indexes", nargs="*", metavar="NAME", help="index names (default: all)")
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="print the Prometheus text exposition instead (for a textfile collector or a "
        "scrape script; `simindex sync --follow --metrics-port` serves it)",
    )
    parser.set_defaults(run=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    from simindex.ops.stats import index_stats

    dsn, schema = database(args)
    found = index_stats(dsn, args.indexes or None, index_schema=schema)
    if args.prometheus:
        from simindex._metrics import exposition

        print(exposition(found), end="")
        return OK
    result = {"indexes": [terminal.stats_json(stats) for stats in found]}
    emit(args, result, terminal.stats_text(found) if found else f"no indexes in schema {schema}")
    return OK
