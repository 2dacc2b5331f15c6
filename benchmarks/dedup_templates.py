"""The template corpus of ``dedup.py --templates``: short texts with template clusters planted.

Real package summaries hold template clusters (the largest had 4,910 identical copies among
1.04M): a corpus where identical rows dominate the pairs, the case that collapsing identical
rows to one node before the self-joins is for.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from dataset import make_dataset, planted_copy
from dedup_children import child_clusters, child_pairs
from query_plan import MAX_DISTANCE, MINHASH_THRESHOLD, NUM_PERM, SEED
from report import log

from simindex.core.spec import MinHash, SimHash

# Exact copies per template cluster, and one near copy (one word changed) per ten exact ones.
TEMPLATE_CLUSTERS = (4910, 2000, 1000, 500, 500, 500, 500, *([100] * 20))
NEAR_COPIES_PER_EXACT = 0.1

Measured = Callable[..., dict[str, Any]]
BuildIndex = Callable[[str, str, str, SimHash | MinHash], dict[str, Any]]


def template_texts(rows: int) -> tuple[list[str], dict[str, Any]]:
    """``rows`` texts: the short texts of ``make_dataset`` with template clusters planted."""
    exact = sum(TEMPLATE_CLUSTERS)
    near = sum(round(size * NEAR_COPIES_PER_EXACT) for size in TEMPLATE_CLUSTERS)
    if rows < 4 * (exact + near):
        raise SystemExit(f"--templates needs at least {4 * (exact + near):,} rows")
    dataset = make_dataset(rows - exact - near, None)
    texts = list(dataset.texts)
    rng = random.Random(SEED)
    vocabulary = sorted({word for text in texts[:20_000] for word in text.split()})
    short = [i for i, text in enumerate(texts) if 10 <= len(text.split()) <= 40]
    planted: list[str] = []
    for size, source in zip(
        TEMPLATE_CLUSTERS, rng.sample(short, len(TEMPLATE_CLUSTERS)), strict=True
    ):
        planted += [texts[source]] * (size - 1)
        planted += [
            planted_copy(texts[source], "edit-1", vocabulary, rng)
            for _ in range(round(size * NEAR_COPIES_PER_EXACT))
        ]
    for text in planted:  # scattered over the ids, as real copies are
        texts.insert(rng.randrange(len(texts) + 1), text)
    summary = {
        **dataset.summary,
        "rows": len(texts),
        "template_clusters": list(TEMPLATE_CLUSTERS),
        "template_exact_copies": exact,
        "template_near_copies": near,
        "how": "the short texts of make_dataset; per cluster a real 10-40 word text, copied "
        "exactly (cluster size in all) and with one word changed (a tenth as many times)",
    }
    return texts, summary


def template_phases(
    report: dict[str, Any], dsn: str, measured: Measured, build_index: BuildIndex
) -> None:
    """Pairs, pairs(groups=True) and clusters of SimHash k=3 and MinHash 0.8."""
    report["indexes"] = {
        "docs": build_index(dsn, "docs", "documents", SimHash(max_distance=MAX_DISTANCE)),
        "docs_minhash": build_index(
            dsn, "docs_minhash", "documents", MinHash(MINHASH_THRESHOLD, NUM_PERM)
        ),
    }
    phases: dict[str, Any] = report.setdefault("phases", {})
    for label, name, distance, threshold in (
        ("simhash", "docs", MAX_DISTANCE, None),
        ("minhash", "docs_minhash", None, MINHASH_THRESHOLD),
    ):
        for phase, task, args in (
            ("pairs", child_pairs, (name, distance, threshold)),
            ("pairs, groups=True", child_pairs, (name, distance, threshold, True)),
            ("clusters", child_clusters, (name, "pairs")),
        ):
            title = f"{label} text {phase}"
            log(f"phase: {title}")
            phases[title] = measured(dsn, task, *args)
            log(f"phase: {title}: {phases[title]['seconds']:.1f} s")
