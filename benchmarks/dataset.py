"""The query and dedup benchmarks' documents: real texts of this machine, generated ones
and planted near-duplicates."""

from __future__ import annotations

import glob
import random
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import corpus
import numpy as np
from numpy.typing import NDArray
from query_plan import PLANT_KINDS, PLANTED_SHARE, SEED, SHORT_WORDS_LIMIT

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Planted:
    """A planted near-duplicate: document ``copy`` is ``source`` edited as ``kind`` says."""

    copy: int
    source: int
    kind: str


@dataclass(slots=True)
class Dataset:
    """Documents: the text of id ``i`` is ``texts[i - 1]``."""

    texts: list[str]
    families: list[str]
    planted: list[Planted]
    summary: dict[str, Any] = field(default_factory=dict)

    def words(self, key: int) -> int:
        return len(self.texts[key - 1].split())


def package_list_copies(directory: Path) -> list[str]:
    """Plain-text copies of apt's package lists; compressed ones are decompressed locally by
    ``apt-helper cat-file`` (nothing is downloaded)."""
    paths = []
    for path in sorted(glob.glob(corpus.APT_PACKAGES + "*")):
        if path.endswith("_Packages"):
            paths.append(path)
            continue
        target = directory / Path(path).name.rsplit(".", 1)[0]
        with target.open("wb") as out:
            done = subprocess.run(
                ["/usr/lib/apt/apt-helper", "cat-file", path], stdout=out, check=False
            )
        if done.returncode == 0:
            paths.append(str(target))
    return paths


def machine_documents() -> tuple[list[list[tuple[str, str]]], dict[str, Any]]:
    """Real documents of this machine, one list of (family, text) per family."""
    with tempfile.TemporaryDirectory(prefix="simindex-bench-") as directory:
        lists = package_list_copies(Path(directory))
        synopses = [
            ("package-synopsis", text)
            for _, text in corpus.package_descriptions([corpus.DPKG_STATUS, *lists])
            if text.strip()
        ]
    long = [("long", text) for text in corpus.long_texts(10**6)]
    short = [("short", text) for text in corpus.short_texts(10**6)]
    sources = {
        **corpus.sources(),
        "package_synopses": f"{corpus.DPKG_STATUS} and {len(lists)} apt package lists "
        "(decompressed locally)",
    }
    return [long, synopses, short], sources


def file_documents(path: Path) -> list[list[tuple[str, str]]]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [[("corpus-file", line) for line in lines if line.strip()]]


def round_robin(streams: list[list[T]], limit: int) -> list[T]:
    mixed: list[T] = []
    positions = [0] * len(streams)
    while len(mixed) < limit and any(p < len(s) for p, s in zip(positions, streams, strict=True)):
        for i, stream in enumerate(streams):
            if positions[i] < len(stream) and len(mixed) < limit:
                mixed.append(stream[positions[i]])
                positions[i] += 1
    return mixed


def generated_texts(
    count: int, vocabulary: list[str], weights: NDArray[np.float64], rng: np.random.Generator
) -> list[str]:
    """Texts of 10 to 40 words drawn from the real texts' word frequencies (unigram)."""
    if count == 0:
        return []
    lengths = rng.integers(corpus.SHORT_MIN_WORDS, corpus.SHORT_MAX_WORDS + 1, size=count)
    words = np.array(vocabulary, dtype=object)[
        rng.choice(len(vocabulary), size=int(lengths.sum()), p=weights)
    ]
    ends = np.cumsum(lengths)
    return [
        " ".join(words[end - length : end])
        for end, length in zip(ends.tolist(), lengths.tolist(), strict=True)
    ]


def planted_copy(text: str, kind: str, vocabulary: list[str], rng: random.Random) -> str:
    """A near-duplicate: ``reformat`` changes case and spacing only (the same after
    normalisation); ``edit-n`` replaces n words."""
    words = text.split()
    if kind == "reformat":
        return "  ".join(word.upper() if i % 2 == 0 else word for i, word in enumerate(words))
    changes = int(kind.split("-")[1])
    for position in rng.sample(range(len(words)), min(changes, len(words))):
        words[position] = rng.choice(vocabulary)
    return " ".join(words)


def make_dataset(rows: int, corpus_file: Path | None) -> Dataset:
    started = time.perf_counter()
    if corpus_file is not None:
        streams, sources = file_documents(corpus_file), {"corpus_file": str(corpus_file)}
    else:
        streams, sources = machine_documents()
    planted_count = max(1, round(rows * PLANTED_SHARE))
    base_count = rows - planted_count
    real = round_robin(streams, base_count)
    counts = Counter(word for _, text in real for word in text.split())
    vocabulary = list(counts) or [f"w{i}" for i in range(10_000)]
    frequency = np.array([counts[word] for word in vocabulary] or [1] * 10_000, np.float64)
    rng = np.random.default_rng(SEED)
    generated = generated_texts(
        base_count - len(real), vocabulary, frequency / frequency.sum(), rng
    )
    texts = [text for _, text in real] + generated
    families = [family for family, _ in real] + ["generated"] * len(generated)
    long_ids = [i + 1 for i, family in enumerate(families) if family == "long"]
    chooser = random.Random(SEED)
    planted = []
    for i in range(planted_count):
        kind = PLANT_KINDS[i % len(PLANT_KINDS)]
        if long_ids and i % 10 == 0:
            source = chooser.choice(long_ids)
        else:
            source = chooser.randrange(1, base_count + 1)
        texts.append(planted_copy(texts[source - 1], kind, vocabulary, chooser))
        families.append(f"planted-{kind}")
        planted.append(Planted(len(texts), source, kind))
    # Shuffle, so any id range (--peer-rows) is a uniform sample and families interleave.
    order = rng.permutation(len(texts))
    new_id = (order + 1).tolist()
    shuffled = [""] * len(texts)
    shuffled_families = [""] * len(texts)
    for old, new in enumerate(new_id):
        shuffled[new - 1] = texts[old]
        shuffled_families[new - 1] = families[old]
    planted = [Planted(new_id[p.copy - 1], new_id[p.source - 1], p.kind) for p in planted]
    dataset = Dataset(shuffled, shuffled_families, planted)
    words = np.array([len(text.split()) for text in shuffled])
    dataset.summary = {
        "rows": len(shuffled),
        "real_rows": len(real),
        "generated_rows": len(generated),
        "planted_rows": len(planted),
        "planted_kinds": dict(Counter(p.kind for p in planted)),
        "rows_by_family": dict(Counter(shuffled_families)),
        "short_rows": int((words <= SHORT_WORDS_LIMIT).sum()),
        "words": {
            "median": float(np.median(words)),
            "mean": round(float(words.mean()), 1),
            "max": int(words.max()),
        },
        "utf8_bytes": sum(len(text.encode("utf-8")) for text in shuffled),
        "vocabulary_words": len(vocabulary),
        "sources": sources,
        "generation": (
            "generated texts: 10 to 40 words drawn independently from the real texts' word "
            "frequencies; planted copies: 'reformat' changes case and spacing only, 'edit-n' "
            "replaces n random words; one planted copy in ten copies a long text"
        ),
        "seconds": round(time.perf_counter() - started, 1),
    }
    dataset.summary["planted_from_long_texts"] = sum(
        dataset.families[p.source - 1] == "long" for p in planted
    )
    return dataset
