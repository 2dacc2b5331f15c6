"""Part 3 of the fingerprint benchmark: the end-to-end path for long texts cut into its stages,
each timed alone on the previous stage's stored output, and cProfile of whole paths (the
per-text one and the one through the spec that build and sync take)."""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
from pathlib import Path
from typing import Protocol

import fingerprint_makers as makers
import numpy as np
from fingerprint_makers import Timing, Work, measure, timing_record
from fingerprint_spec import DEFAULT_MINHASH, METHODS, spec_work
from numpy.typing import NDArray
from report import log

from simindex.core.minhash import MinHasher
from simindex.core.spec import resolve
from simindex.core.text import Shingling, _token_bytes, combine_ngrams, hash_strings, normalize

Hashes = NDArray[np.uint64]


class Size(Protocol):
    """The sizes of a run (``fingerprint.Size``) this part reads."""

    @property
    def batch(self) -> int: ...

    @property
    def repeats(self) -> int: ...


def stage_profile(texts: list[str], size: Size) -> dict[str, object]:
    """Each stage of the end-to-end path timed alone on the previous stage's stored output."""
    shingling = Shingling()
    minhashers = makers.hashers()
    normalized = [normalize(text) for text in texts]
    tokens = [_token_bytes(text) for text in normalized]
    units = [hash_strings(items, shingling.seed) for items in tokens]
    shingles = [combine_ngrams(values, shingling.size) for values in units]
    specs = {
        method: resolve(METHODS[method]).to_json() for method in ("SimHash()", DEFAULT_MINHASH)
    }
    chunks: list[list[str | None]] = [list(chunk) for chunk in makers.batches(texts, size.batch)]
    ascii_rows = [text for text in normalized if text.isascii()]
    other_rows = [text for text in normalized if not text.isascii()]
    count = len(texts)

    def run(name: str, work: Work, documents: int = count) -> Timing:
        return measure(name, work, documents, size.repeats)

    log("part 3: profile of the end-to-end path, long texts")
    stages = {
        "normalize": run("normalize", lambda: len([normalize(t) for t in texts])),
        "tokenize": run("tokenize", lambda: len([_token_bytes(t) for t in normalized])),
        "unit_hashing": run(
            "unit hashing (xxh3 per token)",
            lambda: len([hash_strings(t, shingling.seed) for t in tokens]),
        ),
        "ngram_combining": run(
            "n-gram combining", lambda: len([combine_ngrams(u, shingling.size) for u in units])
        ),
        "simhash": run("SimHash-64 of shingle hashes", lambda: makers.simhash_count(shingles)),
        **{
            scheme: run(f"MinHash {scheme} of shingle hashes", _minhash_work(hasher, shingles))
            for scheme, hasher in minhashers.items()
        },
    }
    measured = {
        "shingling_hashes": run(
            "Shingling.hashes", lambda: len(list(map(shingling.hashes, texts)))
        ),
        "tokenize_ascii_documents": run(
            "tokenize, ASCII documents only",
            lambda: len([_token_bytes(t) for t in ascii_rows]),
            len(ascii_rows),
        ),
        "tokenize_non_ascii_documents": run(
            "tokenize, non-ASCII documents only",
            lambda: len([_token_bytes(t) for t in other_rows]),
            len(other_rows),
        ),
    }
    ascii_seconds = measured["tokenize_ascii_documents"].best_seconds if ascii_rows else 0.0
    other_seconds = measured["tokenize_non_ascii_documents"].best_seconds if other_rows else 0.0
    return {
        "documents": count,
        "ascii_documents": len(ascii_rows),
        "non_ascii_share_of_tokenize_time": other_seconds / (ascii_seconds + other_seconds),
        "tokens_per_document": statistics.median(map(len, tokens)),
        "stages": {name: timing_record(timing) for name, timing in stages.items()},
        "measured": {
            name: timing_record(timing) for name, timing in measured.items() if timing.documents
        },
        "cprofile": {
            "simhash": cprofile_summary(lambda: makers.simhash_count(map(shingling.hashes, texts))),
            "classic": cprofile_summary(
                lambda: makers.minhash_count(minhashers["classic"], map(shingling.hashes, texts))
            ),
            **{
                f"through the spec, {method}": cprofile_summary(spec_work(spec, chunks))
                for method, spec in specs.items()
            },
        },
    }


def _minhash_work(hasher: MinHasher, shingles: list[Hashes]) -> Work:
    return lambda: makers.minhash_count(hasher, shingles)


def cprofile_summary(work: Work, top: int = 10) -> list[dict[str, object]]:
    """The functions with the most own time over one pass under cProfile."""
    profiler = cProfile.Profile()
    profiler.runcall(work)
    stats = pstats.Stats(profiler, stream=io.StringIO()).get_stats_profile()
    total = stats.total_tt or 1.0
    ranked = sorted(stats.func_profiles.items(), key=lambda item: -item[1].tottime)[:top]
    return [
        {
            "function": name
            if profile.file_name == "~"
            else f"{Path(profile.file_name).name}:{profile.line_number}({name})",
            "calls": profile.ncalls,
            "own_seconds": round(profile.tottime, 4),
            "own_share": round(profile.tottime / total, 3),
        }
        for name, profile in ranked
    ]
