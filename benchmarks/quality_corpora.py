"""Corpora of the quality benchmark: real texts of this machine, with edited copies planted.

Four corpora, each a list of texts (id = position + 1) of which some are copies of others
edited at a known rate (:class:`Planted`), among the real texts as distractors:

* **licences** (long): licence files shipped inside installed Python packages (``LICENSE*``,
  ``LICENCE*``, ``COPYING*`` under every site-packages and dist-packages directory found),
  ``/usr/share/common-licenses/*`` and ``/usr/share/doc/*/copyright``: real templated texts,
  full of natural near-duplicates.
* **docs** (long): documentation under ``/usr/share/doc`` (text, Markdown, reStructuredText,
  HTML, and gzip-compressed READMEs, NEWS and changelogs).
* **code** (long): the Python standard library's ``*.py`` files.
* **short**: the package's own sample of Debian package descriptions (title and body).

Byte-identical files count once; texts are cut to at most ``MAX_WORDS`` words at a line end.
Everything is deterministic for a machine: files in sorted order, edits from a seeded RNG.
The truth of a corpus (:class:`Tokens`): every pair's exact Jaccard similarity under one
tokenisation, from sparse-matrix products. Run it for a summary:
``python benchmarks/quality_corpora.py``.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import os
import random
import re
import site
import sys
import sysconfig
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import scipy.sparse
import xxhash
from numpy.typing import NDArray

SEED = 20_260_711
MAX_WORDS = 4000
MIN_WORDS = {"licences": 150, "docs": 300, "code": 300, "short": 8}
MAX_TEXTS = {"licences": 1500, "docs": 1500, "code": 1500, "short": 3000}
# Share of a corpus's texts that get an edited copy, and the edit rates the copies cycle
# through: together they put pairs on both sides of 0.5, 0.8 and 0.9 (word 3-shingle Jaccard).
COPY_SHARE = 0.25
EDIT_RATES = (0.0, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.13, 0.17)
LICENCE_NAMES = ("LICENSE*", "LICENCE*", "COPYING*")
DOC_SUFFIXES = (".txt", ".md", ".rst", ".html", ".htm")
DOC_GZ_PREFIXES = ("README", "NEWS", "changelog", "CHANGES")
_SPACE_SPLIT = re.compile(r"(\s+)")
_PEER_PUNCTUATION = re.compile(r"[^\w\s]")
TRUTH_FLOOR = 0.3  # pairs below this are not kept as truth (they feed the S-curve only)
Pair = tuple[int, int]
Truth = dict[Pair, float]


@dataclass(frozen=True, slots=True)
class Planted:
    """Text ``copy`` is text ``source`` with about ``rate`` of its words edited (ids from 1)."""

    copy: int
    source: int
    rate: float


@dataclass(frozen=True, slots=True)
class Corpus:
    """A named corpus: texts (id i is ``texts[i - 1]``), where each came from, what was planted."""

    name: str
    texts: list[str]
    origins: list[str]
    planted: list[Planted]


def _decoded(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.strip() and "\0" not in text else None


def _read(path: str) -> str | None:
    try:
        data = Path(path).read_bytes()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    return _decoded(data)


def _cut(text: str, max_words: int = MAX_WORDS) -> str:
    """At most ``max_words`` words, cut at the end of a line."""
    kept: list[str] = []
    words = 0
    for line in text.splitlines():
        words += len(line.split())
        if words > max_words and kept:
            break
        kept.append(line)
    return "\n".join(kept)


def _distinct(paths: Iterable[str], name: str) -> Iterator[tuple[str, str]]:
    """(path, text) of each readable file long enough, byte-identical texts once."""
    seen: set[bytes] = set()
    for path in sorted(set(paths)):
        if not os.path.isfile(path):
            continue
        text = _read(path)
        if text is None:
            continue
        text = _cut(text)
        digest = hashlib.sha256(text.encode()).digest()
        if digest in seen or len(text.split()) < MIN_WORDS[name]:
            continue
        seen.add(digest)
        yield path, text


def _package_directories() -> list[str]:
    """Where installed Python packages live: this interpreter's site-packages, the system's,
    and those of interpreters installed beside this one (pyenv, /opt)."""
    found = [
        *site.getsitepackages(),
        *glob.glob("/usr/lib/python3*/*-packages"),
        *glob.glob("/usr/local/lib/python3*/*-packages"),
        *glob.glob(os.path.join(os.path.dirname(sys.base_prefix), "*/lib/python*/site-packages")),
    ]
    return sorted({os.path.realpath(d) for d in found if os.path.isdir(d)})


def licence_files() -> list[str]:
    paths = glob.glob("/usr/share/common-licenses/*") + glob.glob("/usr/share/doc/*/copyright")
    for directory in _package_directories():
        for root, _, files in os.walk(directory):
            paths += [
                os.path.join(root, name)
                for name in files
                if any(Path(name).match(pattern) for pattern in LICENCE_NAMES)
            ]
    return paths


def doc_files() -> list[str]:
    paths = []
    for root, _, files in os.walk("/usr/share/doc"):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(DOC_SUFFIXES) or (
                name.endswith(".gz") and name.startswith(DOC_GZ_PREFIXES)
            ):
                paths.append(path)
    return paths


def code_files() -> list[str]:
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if d not in ("site-packages", "__pycache__")]
        paths += [os.path.join(directory, name) for name in files if name.endswith(".py")]
    return paths


def short_texts() -> Iterator[tuple[str, str]]:
    data = resources.files("simindex").joinpath("data/debian_descriptions.jsonl.gz")
    for line in gzip.decompress(data.read_bytes()).decode("utf-8").splitlines():
        row = json.loads(line)
        yield f"debian:{row['package']}", f"{row['title']}\n\n{row['body']}"


def edited(text: str, rate: float, vocabulary: list[str], rng: random.Random) -> str:
    """``text`` with about ``rate`` of its words substituted, deleted, inserted or swapped
    (at least one edit unless ``rate`` is 0, which re-wraps the lines and changes case only)."""
    parts = _SPACE_SPLIT.split(text)
    words = parts[0::2]
    if rate == 0.0:
        return " ".join(word.upper() if i % 7 == 0 else word for i, word in enumerate(words))
    for _ in range(max(1, round(rate * len(words)))):
        position = rng.randrange(len(words))
        operation = rng.randrange(4)
        if operation == 0:
            words[position] = rng.choice(vocabulary)
        elif operation == 1 and len(words) > 2:
            words[position] = ""
        elif operation == 2:
            words[position] = f"{words[position]} {rng.choice(vocabulary)}"
        elif position + 1 < len(words):
            words[position], words[position + 1] = words[position + 1], words[position]
    parts[0::2] = words
    return "".join(parts)


def build(name: str, found: Iterable[tuple[str, str]]) -> Corpus:
    """The corpus of the first ``MAX_TEXTS[name]`` texts found, with edited copies appended."""
    origins, texts = [], []
    for origin, text in found:
        origins.append(origin)
        texts.append(text)
        if len(texts) == MAX_TEXTS[name]:
            break
    rng = random.Random(f"{SEED}:{name}")
    vocabulary = sorted({word for text in texts[:200] for word in text.split()})
    sources = sorted(rng.sample(range(len(texts)), round(COPY_SHARE * len(texts))))
    planted = []
    for number, source in enumerate(sources):
        rate = EDIT_RATES[number % len(EDIT_RATES)]
        texts.append(edited(texts[source], rate, vocabulary, rng))
        origins.append(f"copy of {source + 1} at {rate}")
        planted.append(Planted(len(texts), source + 1, rate))
    return Corpus(name, texts, origins, planted)


def corpora(names: Iterable[str] = ("licences", "docs", "code", "short")) -> list[Corpus]:
    """The corpora by name, built from this machine's files."""
    makers = {
        "licences": lambda: _distinct(licence_files(), "licences"),
        "docs": lambda: _distinct(doc_files(), "docs"),
        "code": lambda: _distinct(code_files(), "code"),
        "short": lambda: short_texts(),
    }
    return [build(name, makers[name]()) for name in names]


def peer_shingles(text: str) -> list[str]:
    """The peers' usual tokens (lowercase, punctuation deleted, whitespace split), 3-grams."""
    tokens = _PEER_PUNCTUATION.sub("", text.lower()).split()
    size = min(3, len(tokens))
    return [" ".join(tokens[i : i + size]) for i in range(len(tokens) - size + 1)]


@dataclass
class Tokens:
    """One tokenisation of a corpus: shingle strings (what peers are fed), sorted distinct
    hashes (what truth and exact verification use), and the truth."""

    name: str
    strings: list[list[str]]
    sets: list[NDArray[np.uint64]] = field(default_factory=list)
    truth: Truth = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sets = [
            np.unique(
                np.fromiter(
                    (xxhash.xxh3_64_intdigest(g.encode()) for g in grams), np.uint64, len(grams)
                )
            )
            for grams in self.strings
        ]
        self.truth = sparse_truth(self.sets, TRUTH_FLOOR)

    def jaccard(self, a: int, b: int) -> float:
        first, second = self.sets[a - 1], self.sets[b - 1]
        both = len(np.intersect1d(first, second, assume_unique=True))
        union = len(first) + len(second) - both
        return both / union if union else 0.0


def hash_set(grams: Sequence[str]) -> NDArray[np.uint64]:
    """The sorted distinct xxh3-64 hashes of shingle strings."""
    hashes = (xxhash.xxh3_64_intdigest(gram.encode("utf-8", "surrogatepass")) for gram in grams)
    return np.unique(np.fromiter(hashes, np.uint64, len(grams)))


def sparse_truth(sets: Sequence[NDArray[np.uint64]], floor: float, block: int = 1000) -> Truth:
    """Every pair (ids from 1) with exact Jaccard >= floor: intersections from ``A Aᵀ`` of the
    rows x shingle incidence matrix, a block of rows at a time; never a loop over pairs."""
    sizes = np.fromiter(map(len, sets), np.int64, len(sets))
    columns, inverse = np.unique(np.concatenate(sets), return_inverse=True)
    rows = np.repeat(np.arange(len(sets)), sizes)
    incidence = scipy.sparse.csr_matrix(
        (np.ones(len(rows), np.int32), (rows, inverse)), shape=(len(sets), len(columns))
    )
    transposed = incidence.T.tocsr()
    truth: Truth = {}
    for start in range(0, len(sets), block):
        product = (incidence[start : start + block] @ transposed).tocoo()
        left, right, both = product.row + start, product.col, product.data.astype(np.float64)
        keep = left < right
        left, right, both = left[keep], right[keep], both[keep]
        jaccard = both / (sizes[left] + sizes[right] - both)
        chosen = jaccard >= floor
        for a, b, j in zip(left[chosen], right[chosen], jaccard[chosen], strict=True):
            truth[(int(a) + 1, int(b) + 1)] = float(j)
    return truth


if __name__ == "__main__":
    for corpus in corpora():
        words = sorted(len(text.split()) for text in corpus.texts)
        print(
            f"{corpus.name}: {len(corpus.texts)} texts ({len(corpus.planted)} planted copies), "
            f"words median {words[len(words) // 2]}, max {words[-1]}"
        )
