"""The query benchmark's tables, printed from its JSON result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from query_plan import MINHASH_THRESHOLD, NUM_PERM, TARGETS, TRGM_THRESHOLD
from report import fmt, print_table


def _ms(stats: dict[str, Any], key: str) -> str:
    value = stats.get(key)
    return "-" if value is None else f"{value:.3f}"


def _recall(block: dict[str, Any] | None, timeouts: int = 0) -> str:
    late = f"; {timeouts} timed out (10 s)" if timeouts else ""
    if not block or block.get("recall") is None:
        return "-" + late
    return f"{block['recall']:.4f} ({block.get('found', 0):,}/{block['results_compared']:,}){late}"


def _line(
    label: str,
    rows: Any,
    timing: dict[str, Any],
    recall: str = "-",
    build: Any = None,
    size: Any = None,
    per_row: Any = None,
) -> list[str]:
    return [
        label,
        fmt(rows),
        fmt(build, ".1f"),
        fmt(None if size is None else size / 1e6),
        fmt(per_row, ".1f"),
        fmt(timing.get("n")),
        _ms(timing, "p50_ms"),
        _ms(timing, "p95_ms"),
        _ms(timing, "p99_ms"),
        recall,
    ]


LATENCY_HEADER = (
    "method",
    "rows",
    "build s",
    "size MB",
    "B/row",
    "queries",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "recall (found/truth)",
)


def print_synthetic(report: dict[str, Any]) -> None:
    part = report["synthetic"]
    rows = part["rows"]
    build = sum(float(v["seconds"]) for k, v in part["load"].items() if k != "prewarm")
    brute = part["brute_force_sql"]
    table = [
        _line(
            "simindex near_v1, SQL prepared",
            rows,
            part["sql"]["latency"],
            _recall(part["sql"]["recall"]),
            build,
            part["total_bytes"],
            part["bytes_per_row"],
        ),
        _line(
            "  session plan_cache_mode=generic",
            rows,
            part["sql_session_generic_plan"]["latency"],
            _recall(part["sql_session_generic_plan"]["recall"]),
        ),
        _line(
            "  session generic + enable_hashagg=off",
            rows,
            part.get("sql_session_generic_plan_no_hashagg", {}).get("latency", {}),
            _recall(part.get("sql_session_generic_plan_no_hashagg", {}).get("recall")),
        ),
        _line(
            "simindex Index.near(fingerprint)",
            rows,
            part["python"]["latency"],
            _recall(part["python"]["recall"]),
        ),
        _line("brute force SQL", rows, brute["latency"], _recall(brute["checked_against_numpy"])),
    ]
    version = report["server"]["version"].split(" on ")[0]
    print_table(f"Synthetic SimHash k=3, {rows:,} fingerprints ({version})", LATENCY_HEADER, table)
    target = TARGETS["simhash_10m"]
    print_targets(
        [
            ("SQL p50 ms", part["sql"]["latency"]["p50_ms"], target["p50_ms"], rows, target),
            ("SQL p99 ms", part["sql"]["latency"]["p99_ms"], target["p99_ms"], rows, target),
            ("recall", part["sql"]["recall"]["recall"], target["recall"], rows, target),
        ]
    )


def print_report(report: dict[str, Any]) -> None:
    if "synthetic" in report:
        print_synthetic(report)
        return
    simhash = report["simhash"]
    build = simhash["build"]
    rows = build["rows"]
    direct = simhash["sql_candidates_query_direct"]
    python = simhash["python"]
    table = [
        _line(
            "simindex near_v1, SQL prepared",
            rows,
            simhash["sql"]["latency"],
            _recall(simhash["sql"]["recall"]),
            build["seconds"],
            build["total_bytes"],
            build["bytes_per_row"],
        ),
        _line(
            "  session plan_cache_mode=generic",
            rows,
            simhash["sql_session_generic_plan"]["latency"],
            _recall(simhash["sql_session_generic_plan"]["recall"]),
        ),
        _line(
            "  session generic + enable_hashagg=off",
            rows,
            simhash.get("sql_session_generic_plan_no_hashagg", {}).get("latency", {}),
            _recall(simhash.get("sql_session_generic_plan_no_hashagg", {}).get("recall")),
        ),
        _line(
            "  function SET plan_cache_mode=generic",
            rows,
            simhash["sql_function_generic_plan"]["latency"],
            _recall(simhash["sql_function_generic_plan"]["recall"]),
        ),
        _line("  its query alone, no function", rows, direct["latency"], _recall(direct["recall"])),
        _line(
            "simindex Index.near(fingerprint)", rows, python["latency"], _recall(python["recall"])
        ),
        _line("simindex Index.near(text)", rows, python["by_text_latency"]),
        _line(
            "brute force SQL",
            rows,
            simhash["brute_force_sql"]["latency"],
            _recall(simhash["truth"]["checked_against_sql_brute_force"]),
        ),
    ]
    table = [row for row in table if row[5] != "-"]  # series an older run did not measure
    trgm = report.get("pg_trgm", {})
    for label, part in trgm.items():
        if not isinstance(part, dict):
            continue
        if "latency" not in part:
            table.append(_line(f"pg_trgm, {label}", None, {}, str(part.get("skipped"))))
            continue
        table.append(
            _line(
                f"pg_trgm % {TRGM_THRESHOLD}, {part['table']}",
                part["rows"],
                part["latency"],
                _recall(part["recall_vs_simhash_k3"], part["short_text_queries"]["timeouts_10s"]),
                part["build_seconds"],
                part["index_bytes"],
                part["index_bytes_per_row"],
            )
        )
        if "long_text_queries" in part:
            long = part["long_text_queries"]
            table.append(
                _line(
                    "  long query texts",
                    part["rows"],
                    long["latency"],
                    _recall(long["recall_vs_simhash_k3"], long["timeouts_10s"]),
                )
            )
    if "skipped" in trgm:
        table.append(_line("pg_trgm", None, {}, str(trgm["skipped"])))
    vector = report.get("pgvector", {})
    if "latency" in vector:
        table.append(
            _line(
                "pgvector HNSW bit(64), LIMIT 10",
                vector["rows"],
                vector["latency"],
                _recall(vector["recall_vs_brute_force"])
                + f"; top-10 recall {fmt(vector['recall_at_10'], '.3f')}",
                vector["build_seconds"],
                vector["index_bytes"],
                vector["index_bytes_per_row"],
            )
        )
    else:
        table.append(_line("pgvector HNSW", None, {}, str(vector.get("skipped", "not run"))))
    version = report["server"]["version"].split(" on ")[0]
    title = f"SimHash k=3 near-duplicate queries, {rows:,} rows ({version}, "
    print_table(title + f"{report['server']['kind']})", LATENCY_HEADER, table)
    print(
        "recall: simindex and pgvector against an exact scan of every fingerprint; pg_trgm "
        "against the rows SimHash puts within 3 bits (the query row itself excluded)"
    )
    minhash = report.get("minhash")
    if minhash:
        mb = minhash["build"]
        print_table(
            f"MinHash threshold {MINHASH_THRESHOLD}, {NUM_PERM} values, "
            f"{mb['design']['num_bands']} bands x {mb['design']['rows_per_band']} rows",
            LATENCY_HEADER[:-1],
            [
                _line(
                    "similar_key_v1, SQL prepared",
                    mb["rows"],
                    minhash["sql"]["latency"],
                    "",
                    mb["seconds"],
                    mb["total_bytes"],
                    mb["bytes_per_row"],
                )[:-1],
                _line(
                    "  functions SET plan_cache_mode=generic",
                    mb["rows"],
                    minhash["sql_function_generic_plan"]["latency"],
                )[:-1],
                _line("Index.similar(key=...)", mb["rows"], minhash["python"]["latency"])[:-1],
                _line("Index.similar(text)", mb["rows"], minhash["python"]["by_text_latency"])[:-1],
            ],
        )
        beside = minhash.get("pk_lookup_beside_similar_key")
        if beside:
            ratio = beside["similar_key_v1_over_pk_lookup"]
            print(
                f"similar_key_v1 beside a primary-key lookup of the side table, in turn: "
                f"p50 x{ratio['p50_ms']}, p99 x{ratio['p99_ms']}"
            )
    print_builds(report)
    target = TARGETS["simhash_1m"]
    measured = [
        ("SimHash SQL p50 ms", simhash["sql"]["latency"]["p50_ms"], target["p50_ms"], rows, target),
        ("SimHash SQL p99 ms", simhash["sql"]["latency"]["p99_ms"], target["p99_ms"], rows, target),
        ("SimHash recall", simhash["sql"]["recall"]["recall"], target["recall"], rows, target),
    ]
    if minhash:
        target = TARGETS["minhash_1m_short"]
        p50 = minhash["sql"]["latency"]["p50_ms"]
        measured.append(
            ("MinHash SQL p50 ms", p50, target["p50_ms"], minhash["build"]["rows"], target)
        )
    target = TARGETS["build_1m_short"]
    measured.append(("SimHash build s", build["seconds"], target["seconds"], rows, target))
    if minhash:
        seconds = minhash["build"]["seconds"]
        measured.append(
            ("MinHash build s", seconds, target["seconds"], minhash["build"]["rows"], target)
        )
    print_targets(measured)


def print_builds(report: dict[str, Any]) -> None:
    build = report["simhash"]["build"]
    builds = [
        [
            "SimHash, documents",
            fmt(build["rows"]),
            fmt(build["seconds"], ".1f"),
            fmt(build["docs_per_second"]),
        ]
    ]
    long = report.get("long_build", {})
    for label in ("default_workers", "all_cores"):
        if label in long:
            builds.append(
                [
                    f"SimHash, long texts only, {long[label]['workers']} process(es)",
                    fmt(long["rows"]),
                    fmt(long[label]["seconds"], ".1f"),
                    fmt(long[label]["docs_per_second"]),
                ]
            )
    minhash = report.get("minhash")
    if minhash:
        mb = minhash["build"]
        builds.append(
            [
                "MinHash, short_documents",
                fmt(mb["rows"]),
                fmt(mb["seconds"], ".1f"),
                fmt(mb["docs_per_second"]),
            ]
        )
    print_table(
        "Builds: Index.build() end to end, with VACUUM ANALYZE",
        ["index", "rows", "seconds", "docs/s"],
        builds,
    )
    for label, phases in report.get("build_phases", {}).items():
        print_table(
            f"Build phases, {label} ({phases.get('rows', 0):,} rows of {phases.get('table')}): "
            "the same work step by step (build() pipelines them)",
            ["phase", "seconds", "docs/s"],
            [
                [name, fmt(value["seconds"], ".2f"), fmt(value["docs_per_second"])]
                for name, value in phases.items()
                if isinstance(value, dict)
            ],
        )


def print_targets(measured: Sequence[tuple[str, Any, float, int, dict[str, float]]]) -> None:
    lines = []
    for label, value, goal, at_rows, target in measured:
        at_least = "recall" in label
        met = value is not None and (value >= goal if at_least else value <= goal)
        same_scale = abs(at_rows - target["rows"]) <= 0.02 * target["rows"]
        scale = "" if same_scale else f", measured at {at_rows:,} rows"
        lines.append(
            [
                label,
                fmt(value, ".3f"),
                f"{'>=' if at_least else '<='} {goal:g} at {int(target['rows']):,} rows",
                ("met" if met else "MISSED") + scale,
            ]
        )
    print_table("Targets of the issue", ["figure", "measured", "target", ""], lines)
