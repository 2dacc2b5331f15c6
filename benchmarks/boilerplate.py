"""What ignoring common shingles and IDF weights do to the demo corpus's clusters.

    python benchmarks/boilerplate.py [--quick] [--embedded|--local] [--output PATH]

The demo ships 3,000 Debian package descriptions, whole families of binary packages built from
one source package. Rows of one family are near-duplicates by intent; rows of two families
are not, but many Rust crates share the packaging template's sentences, and at J >= 0.7 one
cluster joined dozens of unrelated crates. Each index is built through PostgreSQL on that
corpus and read by ``clusters()`` and ``pairs()``; each pair is then called *one family* or
*two families* by the source package of its rows, read from this machine's apt index (the
Packages file ``demo_corpus.py`` reads; without it the family columns stay empty). Reports,
per index: pairs, pairs across families, clusters, the largest cluster and how many families
it holds, and clusters holding more than one family. Writes ``results/boilerplate.json``.
``--quick`` builds three of the indexes only (it checks the script works).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import psycopg
from demo_corpus import APT_LISTS, PACKAGES, binaries, read_index_file
from pgserver import add_server_options
from report import RESULTS, log, new_result, print_table, write_result

import simindex
from simindex.core.spec import Method, MinHash, SimHash
from simindex.demo import documents, near_duplicate_groups
from simindex.embedded import embedded_postgres, local_postgres
from simindex.index import create_index

METHODS: dict[str, Method] = {
    "MinHash 0.7": MinHash(0.7),
    "MinHash 0.7, ignore common 0.5%": MinHash(0.7, ignore_common=0.005),
    "MinHash 0.7, ignore common 1% (the demo's)": MinHash(0.7, ignore_common=0.01),
    "MinHash 0.7, ignore common 2%": MinHash(0.7, ignore_common=0.02),
    "MinHash 0.7, ignore common 5%": MinHash(0.7, ignore_common=0.05),
    "MinHash 0.8": MinHash(0.8),
    "MinHash 0.8, ignore common 1%": MinHash(0.8, ignore_common=0.01),
    "SimHash k=3 (the demo's)": SimHash(),
    "SimHash k=3, idf": SimHash(idf=True),
    "SimHash k=3, ignore common 1%": SimHash(ignore_common=0.01),
    "SimHash k=3, idf, ignore common 1%": SimHash(idf=True, ignore_common=0.01),
}


def families() -> dict[str, str]:
    """Binary package -> its source package, from the apt index (empty if there is none)."""
    found = sorted(APT_LISTS.glob(PACKAGES))
    if not found:
        log(f"no {PACKAGES} under {APT_LISTS}: pairs are not sorted into families")
        return {}
    return {b.package: b.source for b in binaries(read_index_file(found[0]))}


def measure(
    dsn: str, number: int, label: str, method: Method, family: dict[int, str]
) -> dict[str, Any]:
    name = f"boilerplate_{number}"
    index = create_index(dsn, name, "documents", "body", method=method)
    build = index.build()
    pairs = [(p.left, p.right) for p in index.pairs()]
    ordered = near_duplicate_groups(index)  # as the demo reports them, largest first
    index.drop()
    largest = ordered[0] if ordered else []
    known = bool(family)
    return {
        "index": label,
        "build_seconds": round(build.seconds, 3),
        "pairs": len(pairs),
        "pairs_across_families": sum(family.get(a) != family.get(b) for a, b in pairs)
        if known
        else None,
        "clusters": len(ordered),
        "rows_in_clusters": sum(map(len, ordered)),
        "largest_cluster": len(largest),
        "families_in_largest": len({family.get(k) for k in largest}) if known else None,
        "clusters_of_several_families": sum(len({family.get(k) for k in c}) > 1 for c in ordered)
        if known
        else None,
        "largest_sizes": [len(c) for c in ordered[:5]],
    }


QUICK = ("MinHash 0.7", "MinHash 0.7, ignore common 1% (the demo's)", "SimHash k=3, idf")


def run(server: str, quick: bool) -> dict[str, Any]:
    corpus = documents()
    sources = families()
    family = {d.id: sources.get(d.package, d.package) for d in corpus} if sources else {}
    methods = {label: m for label, m in METHODS.items() if not quick or label in QUICK}
    rows = []
    with (embedded_postgres if server == "embedded" else local_postgres)() as dsn:
        simindex.migrate(dsn)
        with psycopg.connect(dsn) as conn:
            conn.execute("CREATE TABLE documents (id integer PRIMARY KEY, body text)")
            with conn.cursor().copy("COPY documents (id, body) FROM STDIN") as copy:
                for d in corpus:
                    copy.write_row((d.id, d.body))
        for number, (label, method) in enumerate(methods.items()):
            log(f"{label}")
            rows.append(measure(dsn, number, label, method, family))
    return {"documents": len(corpus), "families": len(set(family.values())) or None, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three indexes only")
    add_server_options(parser, default="local")
    parser.add_argument("--output", type=Path, default=RESULTS / "boilerplate.json")
    args = parser.parse_args(argv)
    result = new_result("boilerplate", argv)
    result |= run(args.server, args.quick)
    header = [
        "index",
        "pairs",
        "across families",
        "clusters",
        "largest",
        "its families",
        "clusters of 2+ families",
    ]
    print_table(
        f"The demo corpus ({result['documents']:,} Debian descriptions), through PostgreSQL",
        header,
        [
            [
                r["index"],
                r["pairs"],
                r["pairs_across_families"],
                r["clusters"],
                r["largest_cluster"],
                r["families_in_largest"],
                r["clusters_of_several_families"],
            ]
            for r in result["rows"]
        ],
        "lrrrrrr",
    )
    write_result(args.output, result)


if __name__ == "__main__":
    main()
