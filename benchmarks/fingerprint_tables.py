"""The fingerprint benchmark's tables, printed from its JSON result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from report import fmt, print_table

PROFILE_PATHS = ("simhash", "classic", "one_permutation")
SHARED_STAGES = ("normalize", "tokenize", "unit_hashing", "ngram_combining")


def rate_rows(timings: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per implementation: docs/s of the best pass, µs per document, median pass."""
    rows = []
    for timing in timings:
        rate = timing["documents"] / timing["best_seconds"]
        median = 1e6 * timing["median_seconds"] / timing["documents"]
        rows.append(
            [
                timing["name"].split(" [")[0],
                fmt(rate),
                fmt(1e6 / rate, ".1f"),
                fmt(median, ".1f"),
            ]
        )
    return rows


def print_rates(title: str, timings: Sequence[Mapping[str, Any]]) -> None:
    print_table(title, ["implementation", "docs/s", "us/doc", "median us"], rate_rows(timings))


def print_comparisons(found: Sequence[Mapping[str, Any]]) -> None:
    rows = []
    for item in found:
        target = "" if item["target"] is None else f">= {item['target']:g}x"
        met = "" if item["met"] is None else ("yes" if item["met"] else "NO")
        rows.append(
            [item["ours"], item["peer"].split(" [")[0], f"{item['ratio']:.2f}x", target, met]
        )
    print_table(
        "simindex against the fastest of the named peers (ratio of docs/s)",
        ["simindex", "vs peer", "ratio", "target", "met"],
        rows,
        "llrrl",
    )


def print_targets(targets: Sequence[Mapping[str, Any]]) -> None:
    print_table(
        "End-to-end targets, long texts, one core",
        ["corpus", "measure", "target docs/s", "measured docs/s", "met"],
        [
            [
                row["corpus"],
                row["measure"],
                f">= {row['target']:,.0f}",
                fmt(row["docs_per_second"]),
                "yes" if row["met"] else "NO",
            ]
            for row in targets
        ],
        "llrrl",
    )


def print_speed_targets(rows: Sequence[Mapping[str, Any]]) -> None:
    def times(value: float | None, target: float | None) -> str:
        if value is None:
            return ""
        return f"{value:.2f}x" + ("" if target is None else f" (>= {target:g}x)")

    print_table(
        "Through the spec as build and sync, long texts, one core: before and after measured in "
        "turn (--baseline), and beside the peers",
        [
            "measure",
            "before",
            "after",
            "x before",
            "beside peers",
            "x rensa",
            "x datasketch",
            "met",
        ],
        [
            [
                row["measure"].removeprefix("simindex ").removesuffix(" through the spec"),
                fmt(row["before_docs_per_second"]),
                fmt(row.get("after_docs_per_second")),
                times(row["times_before"], row.get("target_times_before")),
                fmt(row["docs_per_second"]),
                times(row["times_rensa"], row.get("target_times_rensa")),
                times(row["times_datasketch"], None),
                "" if "met" not in row else ("yes" if row["met"] else "NO"),
            ]
            for row in rows
        ],
        "lrrrrrrl",
    )


def print_profile(profile: Mapping[str, Any]) -> None:
    micro = {
        name: record["microseconds_per_document"] for name, record in profile["stages"].items()
    }
    for path in PROFILE_PATHS:
        micro[f"total:{path}"] = sum(micro[name] for name in [*SHARED_STAGES, path])
    rows = []
    for name in [*SHARED_STAGES, *PROFILE_PATHS, "bottom_k"]:
        shares = []
        for path in PROFILE_PATHS:
            part = name in SHARED_STAGES or name == path
            shares.append(f"{100 * micro[name] / micro[f'total:{path}']:.0f}%" if part else "")
        rows.append([name, f"{micro[name]:.1f}", *shares])
    rows += [
        [f"sum of stages, {path}", f"{micro[f'total:{path}']:.1f}", "", "", ""]
        for path in PROFILE_PATHS
    ]
    rows += [
        [f"measured {name}", f"{record['microseconds_per_document']:.1f}", "", "", ""]
        for name, record in profile["measured"].items()
    ]
    print_table(
        f"Profile of the end-to-end path, long texts ({profile['documents']} documents, "
        f"{profile['ascii_documents']} pure ASCII, median {profile['tokens_per_document']} "
        "tokens), each stage timed alone",
        ["stage", "us/doc", "% SimHash", "% classic", "% one-perm"],
        rows,
    )
    print(
        f"non-ASCII documents take {profile['non_ascii_share_of_tokenize_time']:.0%} of the "
        "tokenize time"
    )
    for path, functions in profile["cprofile"].items():
        print_table(
            f"cProfile, end-to-end {path}: top functions by own time",
            ["own time", "calls", "function"],
            [
                [f"{row['own_share']:.1%}", str(row["calls"]), row["function"]]
                for row in functions[:8]
            ],
            "rrl",
        )


def print_sanity(sanity: Mapping[str, Any]) -> None:
    first, errors = sanity["first_document"], sanity["mean_absolute_error"]
    bits = sanity["mean_simhash_bits_differing"]
    print(f"\nSanity: Jaccard of a document and a lightly edited copy ({sanity['edit']})")
    print(
        "  first document: "
        + ", ".join(f"{k} {v:.3f}" for k, v in first.items() if "bits" not in k)
    )
    print(
        f"  mean |estimate - exact| over {sanity['documents']} documents: "
        + ", ".join(f"{k} {v:.3f}" for k, v in errors.items())
    )
    print("  SimHash bits differing (mean): " + ", ".join(f"{k} {v:.1f}" for k, v in bits.items()))


def print_report(results: Mapping[str, Any]) -> None:
    """Every table of a fingerprint result, in the order the parts ran."""
    identical = results["identical_shingles"]
    timings = identical["timings"]
    median = results["corpus"]["long_shingles_per_document"]["median"]
    print_rates(
        f"Fingerprint only, identical shingle lists: {timings[0]['documents']} long documents, "
        f"median {median:g} word-3-gram shingles each (one core)",
        timings,
    )
    print_comparisons(identical["comparisons"])
    for part in results["end_to_end"].values():
        timings = part["timings"]
        title = timings[0]["name"].split(" [")[1].rstrip("]")
        print_rates(f"End to end, {title} texts ({timings[0]['documents']} documents)", timings)
        if part["comparisons"]:
            print_comparisons(part["comparisons"])
    print_targets(results["end_to_end_targets_long"])
    if "speed_targets_long" in results:
        print_speed_targets(results["speed_targets_long"])
    print_profile(results["profile_long"])
    print_sanity(results["jaccard_sanity"])
