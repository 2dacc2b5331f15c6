"""The dedup benchmark's tables, printed from its JSON result."""

from __future__ import annotations

from typing import Any

from report import fmt, print_table

Pair = tuple[int, int]


TARGETS: dict[str, dict[str, float]] = {
    "simhash_pairs_seconds": {"rows": 1_000_000, "at_most": 60.0, "cores": 2},
    "simhash_clusters_seconds_beyond_pairs": {"rows": 1_000_000, "at_most": 30.0, "cores": 2},
    "minhash_pairs_seconds": {"rows": 1_000_000, "at_most": 120.0, "cores": 2},
    "python_peak_rss_mb": {"rows": 1_000_000, "at_most": 500.0},
}


def target_lines(report: dict[str, Any]) -> list[list[str]]:
    phases = report.get("phases", {})
    rows = report["data"]["rows"]
    lines = []

    def add(label: str, value: float | None, target: dict[str, float]) -> None:
        met = value is not None and value <= target["at_most"]
        scale = "" if rows == target["rows"] else f" (measured at {rows:,} rows)"
        lines.append(
            [
                label,
                fmt(value, ",.1f"),
                f"<= {target['at_most']:g} at {int(target['rows']):,} rows",
                ("met" if met else "not met") + scale,
            ]
        )

    simhash = phases.get("simhash text pairs", {}).get("seconds")
    clusters = phases.get("simhash text clusters", {}).get("seconds")
    add("SimHash k=3 pairs, text (s)", simhash, TARGETS["simhash_pairs_seconds"])
    synthetic = phases.get("simhash synthetic pairs", {}).get("seconds")
    add("SimHash k=3 pairs, synthetic (s)", synthetic, TARGETS["simhash_pairs_seconds"])
    beyond = None if simhash is None or clusters is None else clusters - simhash
    add("clusters beyond pairs, text (s)", beyond, TARGETS["simhash_clusters_seconds_beyond_pairs"])
    synthetic_clusters = phases.get("simhash synthetic clusters", {}).get("seconds")
    beyond = (
        None if synthetic is None or synthetic_clusters is None else synthetic_clusters - synthetic
    )
    add(
        "clusters beyond pairs, synthetic (s)",
        beyond,
        TARGETS["simhash_clusters_seconds_beyond_pairs"],
    )
    minhash = phases.get("minhash text pairs", {}).get("seconds")
    add("MinHash 0.8 pairs, text (s)", minhash, TARGETS["minhash_pairs_seconds"])
    for label, phase in phases.items():
        if "pairs" in label or label.endswith(" clusters"):
            add(f"peak RSS, {label} (MB)", phase["peak_rss_mb"], TARGETS["python_peak_rss_mb"])
    return lines


PEER_HEADER = [
    "",
    "seconds",
    "peak RSS MB",
    "pairs",
    "ours found of theirs",
    "theirs found of ours",
]


def peer_row(
    label: str,
    run: dict[str, Any],
    pairs: str,
    agreement: dict[str, Any] | None = None,
    theirs: str = "",
) -> list[str]:
    """A row of a peers table: time, peak RSS and pairs of one tool, and how its pairs and ours
    overlap (``agreement`` as ``dedup.agreement`` wrote it, ``theirs`` its label)."""
    shares = ["", ""]
    if agreement is not None:
        shares = [
            str(agreement[f"ours_found_of_{theirs}"]),
            str(agreement[f"{theirs}_found_of_ours"]),
        ]
    return [label, fmt(run["seconds"], ",.1f"), fmt(run["peak_rss_mb"]), pairs, *shares]


def print_report(report: dict[str, Any]) -> None:
    rows = report["data"]["rows"]
    phases = report.get("phases", {})
    lines = []
    for label, phase in phases.items():
        count = phase.get("pairs") if "pairs" in label else phase.get("clusters")
        if "members" in label:
            count = phase.get("cluster_members_rows")
        lines.append(
            [
                label,
                f"{count:,}" if isinstance(count, int) else "-",
                fmt(phase["seconds"], ",.1f"),
                fmt(phase["rss_before_mb"]),
                fmt(phase["peak_rss_mb"]),
                f"{phase['server_temp_files']} / {fmt(phase['server_temp_mb'])}",
            ]
        )
    print_table(
        f"All pairs and clusters over {rows:,} rows (each phase in a fresh process; "
        "count = pairs, clusters or member rows)",
        ["phase", "count", "seconds", "RSS at start MB", "peak RSS MB", "server temp files / MB"],
        lines,
    )
    print_table(
        "Targets of the issue (2 cores shared with other work)",
        ["figure", "measured", "target", ""],
        target_lines(report),
    )
    peer = report.get("peers")
    if not peer:
        return
    simhash, minhash = peer["simhash"], peer["minhash"]
    package, ours = simhash["simhash_package"], simhash["ours"]
    brute = simhash["numpy_brute_force"]
    print_table(
        f"SimHash k=3 over the first {peer['rows']:,} rows, the same fingerprints",
        PEER_HEADER,
        [
            peer_row("simindex Index.pairs", ours, f"{ours['pairs']:,}"),
            peer_row(
                "simhash SimhashIndex (index + get_near_dups)",
                package,
                f"{package['pairs']:,}",
                simhash["ours_vs_simhash_package"],
                "simhash_package",
            ),
            peer_row(
                "numpy brute force",
                {"seconds": brute["seconds"], "peak_rss_mb": None},
                f"{brute['pairs']:,}",
                simhash["ours_vs_brute_force"],
                "brute_force",
            ),
        ],
    )
    lsh, ours = minhash["datasketch"], minhash["ours"]
    print_table(
        f"MinHash 0.8, 128 permutations, over the first {peer['rows']:,} rows, the same signatures",
        PEER_HEADER,
        [
            peer_row("simindex Index.pairs", ours, f"{ours['pairs']:,}"),
            peer_row(
                f"datasketch MinHashLSH b={lsh['design']['num_bands']} r="
                f"{lsh['design']['rows_per_band']} (insert + query)",
                lsh,
                f"{lsh['pairs']:,} ({lsh['candidate_pairs']:,} candidates)",
                minhash["ours_vs_datasketch_verified"],
                "datasketch",
            ),
        ],
    )
