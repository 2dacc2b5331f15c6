"""The chart of benchmarks/quality.py: recall and precision against the threshold per corpus,
and the S-curves of the designs (results/quality.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def pick(rows: list[dict[str, Any]], **where: Any) -> list[dict[str, Any]]:
    """The result rows whose fields equal ``where``."""
    return [row for row in rows if all(row.get(k) == v for k, v in where.items())]


def plot(result: dict[str, Any], path: Path) -> None:
    """Recall and precision against the threshold per corpus; the S-curves of the designs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["corpora"])
    figure, axes = plt.subplots(3, len(names), figsize=(4.2 * len(names), 11), squeeze=False)
    lines = [
        ("simindex", "default", "exact", "-"),
        ("simindex", "default", "estimate", "--"),
        ("simindex", "v1", "estimate", ":"),
        ("datasketch", "peer", "estimate", "-."),
        ("rensa", "peer", "estimate", "-."),
    ]
    for column, corpus in enumerate(names):
        for row_number, measure in ((1, "recall"), (2, "precision")):
            axis = axes[row_number][column]
            for method, index, verify, style in lines:
                found = [
                    r
                    for r in pick(
                        result["rows"],
                        corpus=corpus,
                        method=method,
                        verify=verify,
                        protocol="pairs",
                        tokens="own",
                    )
                    if r.get("design", "peer") == index
                ]
                found.sort(key=lambda r: r["threshold"])
                axis.plot(
                    [r["threshold"] for r in found],
                    [r[measure] for r in found],
                    style,
                    marker="o",
                    label=f"{method} {'' if index == 'peer' else index} {verify}",
                )
            axis.set_title(f"{corpus}: {measure} (pairs)")
            axis.set_xlabel("threshold (Jaccard)")
            axis.set_ylim(0.4, 1.01)
            axis.grid(alpha=0.3)
        axes[0][column].axis("off")
    axes[1][0].legend(fontsize=7, loc="lower left")
    curve = figure.add_subplot(3, 1, 1)
    similarity = np.linspace(0, 1, 201)
    shown: dict[tuple[int, int], set[str]] = {}
    for d in result["designs"]:
        if "bands" in d:
            shown.setdefault((d["bands"], d["rows_per_band"]), set()).add(
                f"{d['label']} at {d['threshold']}" if d["label"] == "default" else d["label"]
            )
    for (b, r), labels in sorted(shown.items()):
        label = f"{b}x{r}: {', '.join(sorted(labels))}"
        (line,) = curve.plot(similarity, 1 - (1 - similarity**r) ** b, label=label, lw=1)
        pooled: dict[str, list[int]] = {}
        for d in result["designs"]:
            if d.get("bands") == b and d.get("rows_per_band") == r:
                for low, (total, hits) in d["candidates"].items():
                    counts = pooled.setdefault(low, [0, 0])
                    counts[0] += total
                    counts[1] += hits
        points = [
            (float(low) + 0.025, hits / total)
            for low, (total, hits) in pooled.items()
            if total >= 5
        ]
        curve.plot(*zip(*points, strict=True), "o", color=line.get_color(), ms=3)
    for b, r, label in ((16, 8, "rensa 16x8"),):
        curve.plot(similarity, 1 - (1 - similarity**r) ** b, "k:", label=label)
    curve.set_title("chance of being a candidate (lines: 1-(1-s^r)^b; dots: measured, all corpora)")
    curve.set_xlabel("Jaccard similarity of the pair")
    curve.legend(fontsize=6, ncol=4)
    curve.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
