"""Benchmark corpora collected from files a Debian machine with CPython already has.

Every function is deterministic for a given machine: files are read in sorted path order and
cut by word counts, never sampled at random. Three sets:

* **long** (:func:`long_documents`): 1,000 to 2,000 words each, cut from (or, for small files,
  combined out of) ``/usr/share/common-licenses/*``, ``/usr/share/doc/*/copyright`` and the
  Python standard library's ``*.py`` files, the three families interleaved round-robin.
* **short** (:func:`short_documents`): 10 to 40 words each: Debian package descriptions from
  ``/var/lib/dpkg/status`` (and any uncompressed ``/var/lib/apt/lists/*_Packages``), then
  sentences of the license and copyright texts, then plain windows of the long texts.
* **non-ASCII** (:func:`non_ascii_documents`): long documents transliterated deterministically,
  in turn into accented Latin (every other line), CJK ideographs and Hangul (one character
  per word, so the shingle structure survives); each CJK or Hangul one is opened by a real
  paragraph from CPython's ``test/cjkencodings/*-utf8.txt`` when those files exist.

Run it for a summary: ``python benchmarks/corpus.py``.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import statistics
import sys
import sysconfig
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LONG_MIN_WORDS = 1000
LONG_MAX_WORDS = 2000
SHORT_MIN_WORDS = 10
SHORT_MAX_WORDS = 40

LICENSES = "/usr/share/common-licenses/*"
COPYRIGHTS = "/usr/share/doc/*/copyright"
DPKG_STATUS = "/var/lib/dpkg/status"
APT_PACKAGES = "/var/lib/apt/lists/*_Packages"
_SKIPPED_DIRECTORIES = frozenset({"site-packages", "dist-packages", "__pycache__"})
_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ACCENTED = str.maketrans("aeiouncyAEIOUNCY", "áéîõüñçÿÀÉÎÕÜÑÇŸ")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True, slots=True)
class Document:
    """One benchmark text and where it came from (``family`` plus the files it was cut from)."""

    text: str
    family: str
    sources: tuple[str, ...]


def _read(path: str) -> str | None:
    """The file as UTF-8 text, or None when it is unreadable, not UTF-8, or blank."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.strip() else None


def _distinct_files(pattern: str) -> list[str]:
    """Files matching ``pattern`` in sorted order, each real file once (symlinks collapse)."""
    seen: set[str] = set()
    files = []
    for path in sorted(glob.glob(pattern)):
        real = os.path.realpath(path)
        if os.path.isfile(real) and real not in seen:
            seen.add(real)
            files.append(path)
    return files


def stdlib_directory() -> str:
    return sysconfig.get_paths()["stdlib"]


def stdlib_sources() -> list[str]:
    """The standard library's ``*.py`` files (no site-packages), sorted by relative path."""
    root = stdlib_directory()
    found: list[str] = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if d not in _SKIPPED_DIRECTORIES]
        found.extend(os.path.join(directory, f) for f in files if f.endswith(".py"))
    return sorted(found, key=lambda path: os.path.relpath(path, root))


def _long_target(index: int) -> int:
    """Word count of the index-th long document of a family: spread over 1,000..2,000."""
    return LONG_MIN_WORDS + (index * 617) % (LONG_MAX_WORDS - LONG_MIN_WORDS + 1)


def _cut_long(family: str, paths: Iterable[str]) -> Iterator[Document]:
    """Documents of exactly their target word count, in file order; small files are joined
    with a blank line, large ones cut at word boundaries (original spacing kept inside)."""
    pieces: list[str] = []
    sources: list[str] = []
    have = 0
    target = _long_target(0)
    emitted = 0
    for path in paths:
        text = _read(path)
        if text is None:
            continue
        spans = [match.span() for match in _WORD.finditer(text)]
        position = 0
        while position < len(spans):
            taken = spans[position : position + target - have]
            pieces.append(text[taken[0][0] : taken[-1][1]])
            if not sources or sources[-1] != path:
                sources.append(path)
            have += len(taken)
            position += len(taken)
            if have == target:
                yield Document("\n\n".join(pieces), family, tuple(sources))
                emitted += 1
                pieces, sources, have = [], [], 0
                target = _long_target(emitted)


def _round_robin(streams: list[Iterator[Document]]) -> Iterator[Document]:
    active = list(streams)
    while active:
        for stream in list(active):
            document = next(stream, None)
            if document is None:
                active.remove(stream)
            else:
                yield document


def _long_stream() -> Iterator[Document]:
    return _round_robin(
        [
            _cut_long("license", _distinct_files(LICENSES)),
            _cut_long("copyright", sorted(glob.glob(COPYRIGHTS))),
            _cut_long("stdlib", stdlib_sources()),
        ]
    )


def long_documents(limit: int) -> list[Document]:
    """Up to ``limit`` long documents (1,000 to 2,000 words), the families interleaved."""
    return list(itertools.islice(_long_stream(), limit))


def long_texts(limit: int) -> list[str]:
    return [document.text for document in long_documents(limit)]


def _first_words(text: str, limit: int) -> tuple[str, int]:
    """The text up to its ``limit``-th word (spacing kept) and how many words that is."""
    spans = [match.span() for _, match in zip(range(limit), _WORD.finditer(text), strict=False)]
    if not spans:
        return "", 0
    return text[: spans[-1][1]].strip(), len(spans)


def package_descriptions(paths: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(package, synopsis plus long description) of every stanza of dpkg/apt control files."""
    for path in paths:
        text = _read(path)
        if text is None:
            continue
        for stanza in text.split("\n\n"):
            package = ""
            lines: list[str] = []
            in_description = False
            for line in stanza.splitlines():
                if line.startswith("Package:"):
                    package = line.partition(":")[2].strip()
                if line.startswith("Description:"):
                    in_description = True
                    lines.append(line.partition(":")[2].strip())
                elif in_description and line.startswith(" "):
                    body = line.strip()
                    if body != ".":
                        lines.append(body)
                elif in_description:
                    in_description = False
            if len(lines) > 1:
                yield package, " ".join([lines[0].rstrip(".") + ".", *lines[1:]])
            elif lines:
                yield package, lines[0]


def _short_candidates() -> Iterator[Document]:
    control_files = [DPKG_STATUS, *sorted(glob.glob(APT_PACKAGES))]
    for package, description in package_descriptions(control_files):
        yield Document(description, "package-description", (package,))
    prose = [*_distinct_files(LICENSES), *sorted(glob.glob(COPYRIGHTS))]
    for path in prose:
        text = _read(path)
        if text is None:
            continue
        for sentence in _SENTENCE_END.split(text):
            yield Document(sentence, "sentence", (path,))
    for document in _long_stream():
        words = [match.span() for match in _WORD.finditer(document.text)]
        for start in range(0, len(words), SHORT_MAX_WORDS):
            length = SHORT_MIN_WORDS + (start // SHORT_MAX_WORDS * 7) % 31  # 10..40 words
            window = words[start : start + length]
            text = document.text[window[0][0] : window[-1][1]]
            yield Document(text, f"window-{document.family}", document.sources[:1])


def short_documents(limit: int) -> list[Document]:
    """Up to ``limit`` short documents of 10 to 40 words, descriptions first (see module)."""
    found = []
    for candidate in _short_candidates():
        text, count = _first_words(candidate.text, SHORT_MAX_WORDS)
        if count >= SHORT_MIN_WORDS:
            found.append(Document(text, candidate.family, candidate.sources))
            if len(found) == limit:
                break
    return found


def short_texts(limit: int) -> list[str]:
    return [document.text for document in short_documents(limit)]


@cache
def cjk_paragraphs() -> tuple[str, ...]:
    """Real CJK paragraphs: CPython's codec test texts, when the test package is installed."""
    pattern = os.path.join(stdlib_directory(), "test", "cjkencodings", "*-utf8.txt")
    paragraphs = []
    for path in _distinct_files(pattern):
        text = _read(path)
        if text is not None:
            paragraphs.append(" ".join(text.split()))
    return tuple(dict.fromkeys(paragraphs))  # several codecs share one text


def _to_cjk(word: str, hangul: bool) -> str:
    code = zlib.crc32(word.lower().encode("ascii"))
    if hangul:
        return chr(0xAC00 + code % 11172)
    return chr(0x4E00 + code % 0x5200)


def transliterate(text: str, index: int) -> tuple[str, str]:
    """(kind, text): the index-th non-ASCII variant of an ASCII-ish text (see module doc)."""
    if index % 3 == 0:
        lines = text.splitlines()
        return "latin-accented", "\n".join(
            line.translate(_ACCENTED) if i % 2 == 0 else line for i, line in enumerate(lines)
        )
    hangul = index % 3 == 2
    converted = _LATIN_WORD.sub(lambda match: _to_cjk(match.group(), hangul), text)
    paragraphs = cjk_paragraphs()
    if paragraphs:
        converted = f"{paragraphs[index // 3 % len(paragraphs)]}\n\n{converted}"
    return ("hangul" if hangul else "cjk-ideographs"), converted


def non_ascii_documents(limit: int) -> list[Document]:
    """``limit`` long documents made non-ASCII by :func:`transliterate`."""
    documents = []
    for index, document in enumerate(long_documents(limit)):
        kind, text = transliterate(document.text, index)
        documents.append(Document(text, f"{kind}:{document.family}", document.sources))
    return documents


def non_ascii_texts(limit: int) -> list[str]:
    return [document.text for document in non_ascii_documents(limit)]


def summary(documents: list[Document]) -> dict[str, object]:
    """Sizes and sources of a corpus, for a benchmark's JSON record."""
    words = [len(document.text.split()) for document in documents]
    families: dict[str, int] = {}
    files: dict[str, set[str]] = {}
    for document in documents:
        families[document.family] = families.get(document.family, 0) + 1
        files.setdefault(document.family, set()).update(document.sources)
    return {
        "documents": len(documents),
        "whitespace_words": {
            "min": min(words, default=0),
            "median": statistics.median(words) if words else 0,
            "max": max(words, default=0),
            "total": sum(words),
        },
        "characters": sum(len(document.text) for document in documents),
        "utf8_bytes": sum(len(document.text.encode("utf-8")) for document in documents),
        "non_ascii_documents": sum(not document.text.isascii() for document in documents),
        "documents_by_family": families,
        "source_files_by_family": {family: len(paths) for family, paths in files.items()},
    }


def sources() -> dict[str, str]:
    """Where the corpora come from on this machine."""
    return {
        "licenses": LICENSES,
        "copyrights": COPYRIGHTS,
        # Named by Python's version, not its path on the machine that ran the benchmark.
        "stdlib": f"the standard library of Python {sys.version.split()[0]}: **/*.py"
        " (no site-packages)",
        "package_descriptions": f"{DPKG_STATUS}, {APT_PACKAGES} (uncompressed only)",
        "cjk_paragraphs": f"the standard library of Python {sys.version.split()[0]}:"
        " test/cjkencodings/*-utf8.txt",
    }


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "sources": sources(),
                "long": summary(long_documents(1000)),
                "short": summary(short_documents(5000)),
                "non_ascii": summary(non_ascii_documents(200)),
            },
            indent=2,
        )
    )
