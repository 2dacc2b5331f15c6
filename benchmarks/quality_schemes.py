"""One-permutation MinHash (with densification) against classic MinHash, through PostgreSQL.

    python benchmarks/quality_schemes.py [--corpora licences,docs,code,short] [--output PATH]

The measurement of ``quality.py`` (same corpora, truth, builds, queries and scoring), with two
indexes per threshold: the default design with ``scheme="classic"`` (the default) and with
``scheme="one_permutation"``. Prints recall and precision of both at each threshold, by
``pairs()`` and by ``similar(key=...)``, verified by the estimate and exactly. Not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import quality
from quality import THRESHOLDS, Config
from report import RESULTS, log, new_result, print_table, read_result, write_result

from simindex.core.minhash import SchemeName
from simindex.core.spec import MinHash

SCHEMES: tuple[SchemeName, ...] = ("classic", "one_permutation")


def configs(quick: bool) -> list[Config]:
    """Both schemes at each threshold, with the default (recall-first) design."""
    return [
        Config(scheme, MinHash(t, scheme=scheme), (t,), design="default")
        for t in THRESHOLDS
        for scheme in SCHEMES
    ]


def print_report(result: dict[str, Any]) -> None:
    rows = [
        [
            row["corpus"],
            row["threshold"],
            row["protocol"],
            row["verify"],
            row["index"],
            row["recall"],
            row["precision"],
            row["found"],
        ]
        for row in result["rows"]
        if row["method"] == "simindex" and row["tokens"] == "own"
    ]
    print_table(
        "Classic against one-permutation MinHash, own tokens, through PostgreSQL",
        ["corpus", "J >=", "protocol", "verify", "scheme", "recall", "precision", "found"],
        rows,
        "lrlllrrr",
    )
    designs = [
        [d["corpus"], d["label"], d["threshold"], d["build_seconds"]] for d in result["designs"]
    ]
    print_table("Builds", ["corpus", "scheme", "threshold", "build s"], designs, "llrr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpora", default="licences,docs,code,short")
    parser.add_argument("--output", type=Path, default=RESULTS / "quality-schemes.json")
    parser.add_argument("--print", dest="print_only", type=Path, help="print a written JSON")
    args = parser.parse_args(argv)
    if args.print_only:
        print_report(read_result(args.print_only))
        return 0
    quality.configs = configs  # the same run as quality.py, with these indexes
    result = new_result("quality-schemes", argv, ("datasketch", "rensa", "scipy"))
    result |= quality.run(args.corpora.split(","), quick=True)
    write_result(args.output, result, result["server"])
    print_report(result)
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
