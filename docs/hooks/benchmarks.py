"""MkDocs hook: the benchmark tables, read from ``benchmarks/results/*.json`` at build time.

A page asks for a table with ``<!-- results: NAME -->`` (NAME one of :data:`TABLES`); the hook
replaces the marker with a Markdown table, each row or table naming the results file it came
from, and ``<!-- results: machines -->`` with the machine, server and load of every file. No
figure is pasted into a page: a new run of a benchmark changes the site at its next build.
A marker naming no table, or a file or field that is missing, fails the build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
MARKER = re.compile(r"<!-- results: ([\w-]+) -->")

Row = list[str]


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / name).read_text(encoding="utf-8"))
    return data


def table(header: Row, rows: Iterable[Row]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def ms(latency: dict[str, float]) -> str:
    return f"{latency['p50_ms']:.2f} / {latency['p99_ms']:.2f} ms"


def source(name: str) -> str:
    return f"[`{name}`](benchmarks.md#machines)"


def machines() -> str:
    rows = []
    for path in sorted(RESULTS.glob("*.json")):
        data = load(path.name)
        machine = data.get("machine", {})
        server = data.get("server", {})
        if not isinstance(server, dict):  # an early run recorded only the server's name
            server = {"version": server}
        version = server.get("version") or machine.get("postgresql") or "–"
        load_start = machine.get("load_average_at_start")
        rows.append(
            [
                f"`{path.name}`",
                data.get("created", "–")[:10],
                f"`{data.get('command', 'python benchmarks/' + data['benchmark'] + '.py')}`",
                f"{machine.get('cpu_model', '?')}, {machine.get('cpu_count', '?')} cores, "
                f"{machine.get('memory_gib', '?')} GiB",
                " ".join(str(version).split()[:2])
                + (f" ({server['kind']})" if "kind" in server else ""),
                "–" if load_start is None else f"{load_start[0]:.2f}",
                machine.get("simindex_commit", "–")[:10],
            ]
        )
    return table(
        ["results", "date", "command", "machine", "PostgreSQL", "load at start", "commit"], rows
    )


def query() -> str:
    rows = []
    for name in sorted(p.name for p in RESULTS.glob("query*.json")):
        data = load(name)
        if data.get("benchmark") == "query_facade":  # the layers table's
            continue
        if "synthetic" in data:
            synthetic = data["synthetic"]
            rows.append(
                [
                    source(name),
                    f"{n(synthetic['rows'])} synthetic fingerprints",
                    f"{ms(synthetic['sql']['latency'])}, "
                    f"recall {synthetic['sql']['recall']['recall']}",
                    "–",
                    f"brute force {n(synthetic['brute_force_sql']['latency']['p50_ms'])} ms",
                ]
            )
            continue
        if "simhash" not in data:  # another query benchmark (templates): its own table
            continue
        simhash, minhash = data["simhash"], data.get("minhash", {})
        peers = [f"brute force {n(simhash['brute_force_sql']['latency']['p50_ms'])} ms"]
        pgvector = data.get("pgvector", {})
        if "latency" in pgvector:
            peers.append(
                f"pgvector {pgvector['version']} `bit(64)` HNSW {ms(pgvector['latency'])}, "
                f"recall {pgvector['recall_vs_brute_force']['recall']:.2f}"
            )
        for label, trgm in data.get("pg_trgm", {}).items():
            queries = trgm.get("short_text_queries", {})
            if "latency" in queries:
                peers.append(
                    f"pg_trgm `%` on {label}: p50 {n(queries['latency']['p50_ms'])} ms "
                    f"({queries['timeouts_10s']} of {queries['queries_run']} over 10 s)"
                )
        mh = "–"
        if "sql" in minhash:
            design = minhash["build"]["design"]
            mh = (
                f"{design['num_bands']} × {design['rows_per_band']}: "
                f"SQL {ms(minhash['sql']['latency'])}; "
                f"`similar(key=)` {ms(minhash['python']['latency'])}"
            )
        rows.append(
            [
                source(name),
                f"{n(simhash['build']['rows'])} texts",
                f"{ms(simhash['sql']['latency'])}, recall {simhash['sql']['recall']['recall']}",
                mh,
                "; ".join(peers),
            ]
        )
    return table(
        [
            "results",
            "rows",
            "SimHash k=3 through SQL, p50 / p99",
            "MinHash 0.8, p50 / p99",
            "peers",
        ],
        rows,
    )


def build() -> str:
    rows = []
    for name in sorted(p.name for p in RESULTS.glob("query*.json")):
        data = load(name)
        if "simhash" not in data:
            continue
        for method in ("simhash", "minhash"):
            built = data.get(method, {}).get("build")
            if built:
                design = ", ".join(f"{k}={v}" for k, v in built["design"].items())
                rows.append(
                    [
                        source(name),
                        f"{method} ({design})",
                        n(built["rows"]),
                        n(built["seconds"], 1),
                        n(built["bytes_per_row"], 1),
                    ]
                )
        pgvector = data.get("pgvector", {})
        if "build_seconds" in pgvector:
            rows.append(
                [
                    source(name),
                    "pgvector `bit(64)` HNSW",
                    n(pgvector["rows"]),
                    n(pgvector["build_seconds"], 1),
                    n(pgvector["index_bytes_per_row"], 1),
                ]
            )
        for label, trgm in data.get("pg_trgm", {}).items():
            if "build_seconds" not in trgm:
                continue
            rows.append(
                [
                    source(name),
                    f"pg_trgm GIN ({label})",
                    n(trgm["rows"]),
                    n(trgm["build_seconds"], 1),
                    n(trgm["index_bytes_per_row"], 1),
                ]
            )
    return table(["results", "index", "rows", "build seconds", "bytes a row"], rows)


def storage() -> str:
    data = load("storage.json")
    rows = [
        [
            label,
            n(method.get("build_seconds", method.get("index_seconds")), 1),
            n(method["bytes_per_row"], 1),
            n(method.get("estimate", {}).get("bytes_per_row"), 1),
        ]
        for label, method in data["methods"].items()
    ]
    return (
        table(["index (100k rows)", "build seconds", "bytes a row", "model's estimate"], rows)
        + f"\n\nFrom {source('storage.json')}."
    )


def sync() -> str:
    data = load("sync.json")
    rows = []
    for size, part in data["throughput"].items():
        default = [
            run for run in part["sync"] if run["batch_size"] == 2000 and run["connections"] == 2
        ]
        for run in default:
            rows.append(
                [
                    f"sync, {n(part['rows'])} {size} texts (~{n(part['mean_chars'])} chars)",
                    f"{run['workers']} worker process(es)",
                    n(run["rows_per_s"]),
                ]
            )
        for workers, built in part["build"].items():
            rows.append(
                ["build of the same rows", workers.replace("_", " "), n(built["rows_per_s"])]
            )
    # Commit to searchable from its own run (the worker looks for work; it was notified when
    # sync.json was measured).
    latency = load("sync-latency.json")["latency"]
    overhead = data["overhead"]
    ratios = ", ".join(
        f"{what} ×{overhead[what]['bulk_ratio']:.2f} "
        f"(one-row transactions ×{overhead[what]['single_ratio']:.2f})"
        for what in ("insert", "update", "delete")
    )
    return (
        table(["what", "how", "rows/s"], rows)
        + f"\n\nCommit to searchable at {n(latency['achieved_rate_per_s'])} writes/s: p50 "
        f"{latency['latency_ms']['p50']} ms, p99 {latency['latency_ms']['p99']} ms (from "
        f"{source('sync-latency.json')}). Trigger cost "
        f"on the app's writes ({n(overhead['bulk_rows'])}-row statements, median of "
        f"{overhead['rounds']} rounds): {ratios}. From {source('sync.json')}."
    )


def sync_concurrency() -> str:
    name = "sync-concurrency.json"
    data = load(name)
    found = data["concurrency"]
    labels = list(found["runs"][0]["tps"])
    note = data.get("baseline", {}).get("note", "")
    header = [
        "operation",
        "clients",
        *(
            f"tps {label}" + (f" ({note})" if label == "baseline" and note else "")
            for label in labels
        ),
        *(
            "slower than plain" if label == "plain" else "faster than baseline"
            for label in labels
            if label != "indexed"
        ),
    ]
    rows = [
        [
            run["operation"],
            str(run["clients"]),
            *(n(run["tps"][label]) for label in labels),
            *(
                f"×{run['over_indexed'][label]:.2f}"
                if label == "plain"
                else f"×{1 / run['over_indexed'][label]:.2f}"
                for label in labels
                if label != "indexed"
            ),
        ]
        for run in found["runs"]
    ]
    flushed = data["server"]["settings"]["fsync"] == "on"
    durable = "durable commits" if flushed else "commits not flushed"
    return (
        table(header, rows)
        + f"\n\nOne-row transactions by pgbench, {durable}, median of {found['rounds']} runs of "
        f"{found['seconds']} s each; the indexed twin's throughput against the others'. From "
        f"{source(name)}."
    )


def dedup() -> str:
    rows = []
    for name in sorted(p.name for p in RESULTS.glob("dedup*.json")):
        data = load(name)
        for phase, result in data["phases"].items():
            if "seconds" not in result:
                continue
            rows.append(
                [
                    source(name),
                    n(data["data"].get("rows")),
                    phase,
                    n(result.get("pairs")),
                    n(result["seconds"], 1),
                    n(result.get("peak_rss_mb"), 0),
                ]
            )
    return table(["results", "rows", "phase", "pairs", "seconds", "Python peak MB"], rows)


def fingerprint() -> str:
    data = load("fingerprint.json")
    part = data["end_to_end"]["long"]
    rows = [
        [timing["name"].replace(" [long]", ""), n(timing["docs_per_second"])]
        for timing in part["timings"]
    ]
    words = data["corpus"]["long"]["whitespace_words"]["median"]
    clock = data.get("settings", {}).get("clock", "wall")
    timed = " Rates by the process's CPU time (a shared machine)." if clock == "cpu" else ""
    return (
        table(["fingerprinter (one core, end to end)", "long texts/s"], rows)
        + f"\n\nLong texts: {n(data['corpus']['long']['documents'])} documents, median "
        f"{n(words)} words.{timed} From {source('fingerprint.json')}."
    )


def quality() -> str:
    data = load("quality.json")
    corpora = list(data["corpora"])
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for row in data["rows"]:
        if row["threshold"] != 0.8 or row["protocol"] != "pairs" or row["tokens"] != "own":
            continue
        label = (row["index"], row["verify"])
        cells.setdefault(label, {})[row["corpus"]] = f"{row['recall']:.3f} / {row['precision']:.3f}"
    rows = [
        [f"{index}, verify {verify}", *(found.get(corpus, "–") for corpus in corpora)]
        for (index, verify), found in cells.items()
    ]
    header = ["all pairs at J ≥ 0.8: recall / precision"] + [
        f"{corpus} ({n(data['corpora'][corpus]['texts'])})" for corpus in corpora
    ]
    return table(header, rows) + f"\n\nFrom {source('quality.json')}."


def boilerplate() -> str:
    data = load("boilerplate.json")
    rows = [
        [
            row["index"],
            n(row["pairs"]),
            n(row["pairs_across_families"]),
            f"{row['largest_cluster']} ({row['families_in_largest']})",
        ]
        for row in data["rows"]
    ]
    return (
        table(
            [
                "demo corpus, through PostgreSQL",
                "pairs",
                "pairs across families",
                "largest cluster (families in it)",
            ],
            rows,
        )
        + f"\n\n{n(data['documents'])} texts, {n(data['families'])} families. "
        f"From {source('boilerplate.json')}."
    )


def by_key() -> str:
    rows = []
    for name in sorted(p.name for p in RESULTS.glob("query*.json")):
        data = load(name)
        if data.get("benchmark") == "query_facade":  # the layers table's
            continue
        for method in ("simhash", "minhash"):
            paths = data.get(method, {}).get("by_key_paths")
            if not paths:
                continue
            for path, latency in paths["latency"].items():
                over = paths["p50_over_typed_ms"].get(path)
                rows.append(
                    [
                        source(name),
                        method,
                        path,
                        ms(latency),
                        "–" if over is None else f"+{over:.2f} ms",
                    ]
                )
    return table(["results", "method", "path", "p50 / p99", "p50 over the typed function"], rows)


def layers() -> str:
    name = "query-facade.json"
    if not (RESULTS / name).exists():
        return f"(no `{name}` yet: run `python benchmarks/query_facade.py`)"
    data = load(name)
    rows = []
    for method in ("simhash", "minhash"):
        for part, label in (("by_key", "by key"), ("by_text", "by text")):
            found = data[method][part]
            paired = found.get("paired_p50_over_floor_ms", {})
            cpu = found.get("client_cpu_over_floor_ms", {})
            for path, latency in found["latency"].items():
                rows.append(
                    [
                        source(name),
                        method,
                        label,
                        f"`{path}`",
                        ms(latency),
                        f"{found['p50_over_floor_ms'][path]:+.3f} ms",
                        f"{paired[path]:+.3f} ms" if path in paired else "–",
                        f"{cpu[path]:+.3f} ms" if path in cpu else "–",
                    ]
                )
    header = [
        "results",
        "method",
        "query",
        "layer",
        "p50 / p99",
        "p50 over the floor's",
        "median of each query's difference",
        "client CPU over the floor's",
    ]
    return str(data.get("scale_note", "")) + "\n\n" + table(header, rows)


def templates() -> str:
    rows = []
    for name in sorted(p.name for p in RESULTS.glob("query-templates-*.json")):
        data = load(name)
        for label, call in data["calls"].items():
            over = data["over_pk_lookup"].get(label)
            rows.append(
                [
                    source(name),
                    n(data["rows"]),
                    label,
                    ms(call["latency"]),
                    "1" if over is None else f"{over['p50_ms']} / {over['p99_ms']}",
                    n(call["answers_max"]),
                ]
            )
        build = data["build"]
        rows.append(
            [
                source(name),
                n(data["rows"]),
                "build",
                f"{n(build['rows_per_second'])} rows/s",
                f"{n(build['bytes_per_row'], 1)} bytes a row",
                "–",
            ]
        )
    return table(
        ["results", "rows", "MinHash 0.8 by key", "p50 / p99", "× pk lookup p50 / p99", "answers"],
        rows,
    )


def minhash_estimate() -> str:
    rows = []
    for name in sorted(p.name for p in RESULTS.glob("quality-long*.json")):
        data = load(name)
        for row in data["rows"]:
            if row["threshold"] != 0.8 or row["tokens"] != "own" or row["corpus"] == "short":
                continue
            if row["method"] == "simindex" and row["index"] != "default":
                continue
            if row["method"] == "simindex" and row["protocol"] == "queries":
                what = (
                    "`similar_key_v1` (SQL estimate)"
                    if row["verify"] == "estimate"
                    else "`similar(key=)` exact"
                )
            elif row["method"] == "simindex":
                what = f"`pairs()` {row['verify']}"
            else:
                what = f"{row['index']} {row['verify']} ({row['protocol']})"
            rows.append(
                [source(name), row["corpus"], what, f"{row['recall']} / {row['precision']}"]
            )
    return table(["results", "corpus", "at J ≥ 0.8", "recall / precision"], rows)


def build_runs() -> str:
    """``benchmarks/build.py``: builds of this checkout beside a baseline commit, interleaved."""
    rows = []
    for name in sorted(p.name for p in RESULTS.glob("build-*.json")):
        data = load(name)
        for kind, figures in data.get("summary", {}).items():
            base, this = figures["baseline"], figures["this"]
            rows.append(
                [
                    source(name),
                    kind,
                    n(data["data"]["rows"]),
                    f"{n(base['median_seconds'], 2)} / {n(this['median_seconds'], 2)} s",
                    f"{figures['ratio_this_to_baseline']:.2f}",
                    f"{n(base['median_cpu_seconds']['total'], 1)} / "
                    f"{n(this['median_cpu_seconds']['total'], 1)} s",
                    f"{figures['cpu_ratio_this_to_baseline']:.2f}",
                    n(this["extrapolated_1m_seconds"], 1),
                ]
            )
    return table(
        [
            "results",
            "index",
            "rows",
            "baseline / this, median",
            "ratio",
            "CPU baseline / this",
            "CPU ratio",
            "1M rows, extrapolated s",
        ],
        rows,
    )


TABLES: dict[str, Callable[[], str]] = {
    "build-runs": build_runs,
    "templates": templates,
    "minhash-estimate": minhash_estimate,
    "by-key": by_key,
    "layers": layers,
    "machines": machines,
    "query": query,
    "build": build,
    "storage": storage,
    "sync": sync,
    "sync-concurrency": sync_concurrency,
    "dedup": dedup,
    "fingerprint": fingerprint,
    "quality": quality,
    "boilerplate": boilerplate,
}


def render(markdown: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in TABLES:
            raise ValueError(f"<!-- results: {name} -->: no such table; one of {sorted(TABLES)}")
        return TABLES[name]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return render(markdown)
