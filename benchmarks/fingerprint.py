"""Fingerprint throughput on one core: simindex against the simhash package, datasketch, rensa.

    python benchmarks/fingerprint.py [--quick] [--output PATH]

Four parts, all on the corpora of ``benchmarks/corpus.py``:

1. **identical shingle lists**: every library gets the same word-3-gram shingles of each long
   document (``Shingling().shingles``) and turns them into a fingerprint with its own hashing;
2. **end to end**: text in, fingerprint out, per-document calls and the batch APIs, for long,
   short and non-ASCII texts (peers shingle with our ``shingles`` and hash their own way);
3. **profile**: the end-to-end path for long texts cut into its stages;
4. **sanity**: Jaccard estimates of every MinHash against the exact value on edited copies.

A rate is documents over the best (fastest) of several timed passes after a warm-up pass; the
median pass is recorded too. Each pass returns how many fingerprints it made, and that must
equal the number of documents. Not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import os

# One core: numerical and Rust thread pools read these when their library is first imported.
os.environ.update(
    dict.fromkeys(
        (
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS",
            "NUMEXPR_NUM_THREADS",
            "VECLIB_MAXIMUM_THREADS",
            "RAYON_NUM_THREADS",
        ),
        "1",
    )
)

import argparse
import cProfile
import gc
import io
import json
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import corpus
import datasketch
import numpy as np
import rensa
import simhash as simhash_package
import xxhash
from machine import cpu_model, package_versions
from numpy.typing import NDArray

from simindex.core.minhash import MinHasher, Scheme
from simindex.core.simhash import simhash, simhash_batch
from simindex.core.text import Shingling, _token_bytes, combine_ngrams, hash_strings, normalize

NUM_PERM = 128
SEED = 1
SCHEMES = ("classic", "one_permutation", "bottom_k")
DEFAULT_OUTPUT = Path(__file__).parent / "results" / "fingerprint.json"

T = TypeVar("T")
Work = Callable[[], int]
Hashes = NDArray[np.uint64]


@dataclass(frozen=True, slots=True)
class Size:
    long: int
    short: int
    non_ascii: int
    batch: int
    repeats: int


FULL = Size(long=1000, short=5000, non_ascii=200, batch=1000, repeats=3)
QUICK = Size(long=60, short=600, non_ascii=30, batch=60, repeats=2)


@dataclass(frozen=True, slots=True)
class Timing:
    name: str
    documents: int
    best_seconds: float
    median_seconds: float
    repeats: int

    @property
    def rate(self) -> float:
        return self.documents / self.best_seconds


def measure(name: str, work: Work, documents: int, repeats: int) -> Timing:
    """Best and median of ``repeats`` timed passes after one warm-up pass, garbage collector off."""
    times = []
    for attempt in range(repeats + 1):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            made = work()
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        if made != documents:
            raise RuntimeError(f"{name}: made {made} fingerprints for {documents} documents")
        if attempt:
            times.append(elapsed)
    timing = Timing(name, documents, min(times), statistics.median(times), repeats)
    print(f"  {name:<52} {timing.rate:>10,.0f} docs/s", file=sys.stderr)
    return timing


def batches(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


# --- fingerprint makers: each returns how many fingerprints it made ---------------------------


def simhash_package_count(shingle_lists: Iterable[list[str]], **options: object) -> int:
    return sum(simhash_package.Simhash(s, **options).value is not None for s in shingle_lists)


def datasketch_count(byte_lists: Iterable[list[bytes]], **options: object) -> int:
    made = 0
    for items in byte_lists:
        sketch = datasketch.MinHash(num_perm=NUM_PERM, seed=SEED, **options)
        sketch.update_batch(items)
        made += len(sketch.digest()) == NUM_PERM
    return made


def datasketch_bulk_count(byte_lists: Iterable[list[bytes]]) -> int:
    sketches = datasketch.MinHash.bulk(byte_lists, num_perm=NUM_PERM, seed=SEED)
    return sum(len(sketch.digest()) == NUM_PERM for sketch in sketches)


def rensa_count(sketch_class: Any, token_lists: Iterable[list[str]]) -> int:
    made = 0
    for tokens in token_lists:
        sketch = sketch_class(NUM_PERM, SEED)
        sketch.update(tokens)
        made += len(sketch.digest()) == NUM_PERM
    return made


def rensa_matrix_count(token_lists: Iterable[list[str]]) -> int:
    matrix = rensa.RMinHash.digest_matrix_from_token_sets(token_lists, NUM_PERM, SEED)
    return int(matrix.len())


def simhash_count(hash_lists: Iterable[Hashes]) -> int:
    return sum(simhash(hashes) is not None for hashes in hash_lists)


def simhash_batch_count(hash_lists: Sequence[Hashes]) -> int:
    return int(np.count_nonzero(simhash_batch(hash_lists)[1]))


def minhash_count(hasher: MinHasher, hash_lists: Iterable[Hashes]) -> int:
    return sum(hasher.signature(hashes) is not None for hashes in hash_lists)


def matrix_count(hasher: MinHasher, hash_lists: Sequence[Hashes]) -> int:
    return int(np.count_nonzero(hasher.signature_matrix(hash_lists)[1]))


def hashers() -> dict[str, MinHasher]:
    return {scheme: MinHasher(Scheme(scheme), NUM_PERM, SEED) for scheme in SCHEMES}


# --- part 1: identical shingle lists ---------------------------------------------------------


def identical_shingles(texts: list[str], size: Size) -> list[Timing]:
    """Shingle list in, fingerprint out: every library hashes the same shingle strings."""
    shingling = Shingling()
    strings = [shingling.shingles(text) for text in texts]
    encoded = [[s.encode("utf-8") for s in shingles] for shingles in strings]
    minhashers = hashers()
    chunks = batches(encoded, size.batch)
    string_chunks = batches(strings, size.batch)
    count = len(texts)

    def run(name: str, work: Work) -> Timing:
        return measure(name, work, count, size.repeats)

    def ours(scheme: str) -> Work:
        return lambda: minhash_count(minhashers[scheme], map(hash_strings, encoded))

    def ours_batch(scheme: str) -> Work:
        hasher = minhashers[scheme]
        return lambda: sum(matrix_count(hasher, list(map(hash_strings, c))) for c in chunks)

    xxh64: dict[str, object] = {"hashfunc": xxhash.xxh3_64_intdigest}
    xxh32: dict[str, object] = {"hashfunc": xxhash.xxh32_intdigest}
    print("part 1: identical shingle lists", file=sys.stderr)
    return [
        run(
            "simindex hash_strings only (xxh3 per shingle)",
            lambda: len(list(map(hash_strings, encoded))),
        ),
        run("simindex SimHash-64", lambda: simhash_count(map(hash_strings, encoded))),
        *(run(f"simindex MinHash {scheme}", ours(scheme)) for scheme in SCHEMES),
        run(
            "simindex SimHash-64 batch",
            lambda: sum(simhash_batch_count(list(map(hash_strings, c))) for c in chunks),
        ),
        *(run(f"simindex MinHash {scheme} batch", ours_batch(scheme)) for scheme in SCHEMES),
        run("simhash Simhash (md5, default)", lambda: simhash_package_count(strings)),
        run("simhash Simhash (xxh3 hashfunc)", lambda: simhash_package_count(strings, **xxh64)),
        run("datasketch MinHash update_batch (sha1, default)", lambda: datasketch_count(encoded)),
        run("datasketch MinHash.bulk (sha1, default)", lambda: datasketch_bulk_count(encoded)),
        run(
            "datasketch MinHash update_batch (xxh32 hashfunc)",
            lambda: datasketch_count(encoded, **xxh32),
        ),
        run("rensa RMinHash", lambda: rensa_count(rensa.RMinHash, strings)),
        run("rensa CMinHash", lambda: rensa_count(rensa.CMinHash, strings)),
        run(
            "rensa RMinHash digest_matrix batch",
            lambda: sum(rensa_matrix_count(c) for c in string_chunks),
        ),
    ]


# --- part 2: end to end ----------------------------------------------------------------------


def end_to_end(label: str, texts: list[str], size: Size, peers: bool = True) -> list[Timing]:
    """Text in, fingerprint out; peers shingle with ``Shingling.shingles`` and hash their way."""
    shingling = Shingling()
    minhashers = hashers()
    chunks = batches(texts, size.batch)
    count = len(texts)

    def run(name: str, work: Work) -> Timing:
        return measure(f"{name} [{label}]", work, count, size.repeats)

    def hashes(chunk: Sequence[str]) -> list[Hashes]:
        return [shingling.hashes(text) for text in chunk]

    def ours(scheme: str) -> Work:
        return lambda: minhash_count(minhashers[scheme], map(shingling.hashes, texts))

    def ours_batch(scheme: str) -> Work:
        return lambda: sum(matrix_count(minhashers[scheme], hashes(c)) for c in chunks)

    def strings() -> Iterator[list[str]]:
        return map(shingling.shingles, texts)

    def encoded() -> Iterator[list[bytes]]:
        return ([s.encode("utf-8") for s in shingling.shingles(text)] for text in texts)

    print(f"part 2: end to end, {label} texts", file=sys.stderr)
    timings = [
        run("simindex SimHash-64", lambda: simhash_count(map(shingling.hashes, texts))),
        *(run(f"simindex MinHash {scheme}", ours(scheme)) for scheme in SCHEMES),
        run(
            "simindex SimHash-64 batch", lambda: sum(simhash_batch_count(hashes(c)) for c in chunks)
        ),
        *(run(f"simindex MinHash {scheme} batch", ours_batch(scheme)) for scheme in SCHEMES),
    ]
    if not peers:
        return timings
    return [
        *timings,
        run("simhash Simhash (md5, default)", lambda: simhash_package_count(strings())),
        run("datasketch MinHash update_batch (sha1, default)", lambda: datasketch_count(encoded())),
        run("datasketch MinHash.bulk (sha1, default)", lambda: datasketch_bulk_count(encoded())),
        run("rensa RMinHash", lambda: rensa_count(rensa.RMinHash, strings())),
        run("rensa CMinHash", lambda: rensa_count(rensa.CMinHash, strings())),
        run(
            "rensa RMinHash digest_matrix batch",
            lambda: sum(rensa_matrix_count(list(map(shingling.shingles, c))) for c in chunks),
        ),
    ]


# --- part 3: profile -------------------------------------------------------------------------


def stage_profile(texts: list[str], size: Size) -> dict[str, object]:
    """Each stage of the end-to-end path timed alone on the previous stage's stored output."""
    shingling = Shingling()
    minhashers = hashers()
    normalized = [normalize(text) for text in texts]
    tokens = [_token_bytes(text) for text in normalized]
    units = [hash_strings(items, shingling.seed) for items in tokens]
    shingles = [combine_ngrams(values, shingling.size) for values in units]
    ascii_rows = [text for text in normalized if text.isascii()]
    other_rows = [text for text in normalized if not text.isascii()]
    count = len(texts)

    def run(name: str, work: Work, documents: int = count) -> Timing:
        return measure(name, work, documents, size.repeats)

    print("part 3: profile of the end-to-end path, long texts", file=sys.stderr)
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
        "simhash": run("SimHash-64 of shingle hashes", lambda: simhash_count(shingles)),
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
            "simhash": cprofile_summary(lambda: simhash_count(map(shingling.hashes, texts))),
            "classic": cprofile_summary(
                lambda: minhash_count(minhashers["classic"], map(shingling.hashes, texts))
            ),
        },
    }


def _minhash_work(hasher: MinHasher, shingles: list[Hashes]) -> Work:
    return lambda: minhash_count(hasher, shingles)


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


# --- part 4: sanity of the estimates ---------------------------------------------------------


def edited_copy(text: str) -> str:
    """A light edit: every 25th word replaced and every 40th word dropped."""
    words = text.split()
    return " ".join(
        f"edit{i}" if i % 25 == 24 else word for i, word in enumerate(words) if i % 40 != 39
    )


def jaccard_sanity(texts: list[str]) -> dict[str, object]:
    """Mean absolute error of each Jaccard estimator against the exact Jaccard of shingle sets."""
    shingling = Shingling()
    minhashers = hashers()
    errors: dict[str, list[float]] = {}
    first: dict[str, float] = {}
    for text in texts:
        pair = (text, edited_copy(text))
        strings = [shingling.shingles(t) for t in pair]
        a, b = (set(s) for s in strings)
        estimates = {"exact": len(a & b) / len(a | b)}
        for scheme, hasher in minhashers.items():
            signatures = hasher.signatures([shingling.hashes(t) for t in pair])
            if signatures[0] is None or signatures[1] is None:
                raise RuntimeError(f"no {scheme} signature for a long document")
            estimates[f"simindex {scheme}"] = signatures[0].jaccard(signatures[1])
        sketches = [datasketch.MinHash(num_perm=NUM_PERM, seed=SEED) for _ in pair]
        for sketch, items in zip(sketches, strings, strict=True):
            sketch.update_batch([s.encode("utf-8") for s in items])
        estimates["datasketch"] = float(sketches[0].jaccard(sketches[1]))
        for name in ("RMinHash", "CMinHash"):
            rensa_sketches = [getattr(rensa, name)(NUM_PERM, SEED) for _ in pair]
            for sketch, items in zip(rensa_sketches, strings, strict=True):
                sketch.update(items)
            estimates[f"rensa {name}"] = float(rensa_sketches[0].jaccard(rensa_sketches[1]))
        fingerprints, _ = simhash_batch([shingling.hashes(t) for t in pair])
        estimates["simindex SimHash bits differing"] = int(
            fingerprints[0] ^ fingerprints[1]
        ).bit_count()
        package = [simhash_package.Simhash(s) for s in strings]
        estimates["simhash package bits differing"] = package[0].distance(package[1])
        if not first:
            first = estimates
        for name, value in estimates.items():
            if "bits" in name:
                errors.setdefault(name, []).append(value)
            elif name != "exact":
                errors.setdefault(name, []).append(abs(value - estimates["exact"]))
    return {
        "documents": len(texts),
        "edit": "every 25th word replaced, every 40th word dropped",
        "first_document": first,
        "mean_absolute_error": {
            name: statistics.fmean(values) for name, values in errors.items() if "bits" not in name
        },
        "mean_simhash_bits_differing": {
            name: statistics.fmean(values) for name, values in errors.items() if "bits" in name
        },
    }


# --- reporting -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """How many times faster ``ours`` ran than the fastest of ``peers`` (on the same input)."""

    ours: str
    peer: str
    ratio: float
    target: float | None

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target


def timing_record(timing: Timing) -> dict[str, object]:
    return {
        **asdict(timing),
        "docs_per_second": round(timing.rate, 1),
        "median_docs_per_second": round(timing.documents / timing.median_seconds, 1),
        "microseconds_per_document": round(1e6 / timing.rate, 2),
    }


def compare(
    timings: list[Timing], ours: str, peers: Sequence[str], target: float | None = None
) -> Comparison:
    by_name = {timing.name.split(" [")[0]: timing for timing in timings}
    peer = max((by_name[name] for name in peers), key=lambda timing: timing.rate)
    return Comparison(ours, peer.name, by_name[ours].rate / peer.rate, target)


DATASKETCH_DEFAULT = (
    "datasketch MinHash update_batch (sha1, default)",
    "datasketch MinHash.bulk (sha1, default)",
)
MINHASH_TARGETS = {"classic": 3.0, "one_permutation": 15.0, "bottom_k": 15.0}
END_TO_END_TARGETS = {  # long texts, one core, docs/s
    "simindex SimHash-64": 2500.0,
    "simindex MinHash one_permutation": 2500.0,
    "simindex MinHash classic": 1500.0,
}


def comparisons(timings: list[Timing], with_targets: bool) -> list[Comparison]:
    """simindex against each peer: the issue's targets first, then informative ratios."""
    found = [
        compare(
            timings,
            "simindex SimHash-64",
            ["simhash Simhash (md5, default)"],
            8.0 if with_targets else None,
        )
    ]
    found += [
        compare(
            timings,
            f"simindex MinHash {scheme}",
            DATASKETCH_DEFAULT,
            MINHASH_TARGETS[scheme] if with_targets else None,
        )
        for scheme in SCHEMES
    ]
    names = {timing.name.split(" [")[0] for timing in timings}
    if "simhash Simhash (xxh3 hashfunc)" in names:
        found.append(compare(timings, "simindex SimHash-64", ["simhash Simhash (xxh3 hashfunc)"]))
    for scheme in SCHEMES:
        for peer in (
            "datasketch MinHash update_batch (xxh32 hashfunc)",
            "rensa RMinHash",
            "rensa CMinHash",
        ):
            if peer in names:
                found.append(compare(timings, f"simindex MinHash {scheme}", [peer]))
        found.append(
            compare(
                timings,
                f"simindex MinHash {scheme} batch",
                ["rensa RMinHash digest_matrix batch"],
            )
        )
    return found


def print_rates(title: str, timings: list[Timing]) -> None:
    print(f"\n{title}")
    print(f"  {'implementation':<52} {'docs/s':>10} {'us/doc':>9} {'median us':>10}")
    for timing in timings:
        name = timing.name.split(" [")[0]
        median = 1e6 * timing.median_seconds / timing.documents
        print(f"  {name:<52} {timing.rate:>10,.0f} {1e6 / timing.rate:>9.1f} {median:>10.1f}")


def print_comparisons(found: list[Comparison]) -> None:
    print(f"  {'simindex':<40} {'vs peer':<48} {'ratio':>7} {'target':>8}  met")
    for item in found:
        target = "" if item.target is None else f">= {item.target:g}x"
        met = "" if item.met is None else ("yes" if item.met else "NO")
        peer = item.peer.split(" [")[0]
        print(f"  {item.ours:<40} {peer:<48} {item.ratio:>6.2f}x {target:>8}  {met}")


def absolute_targets(runs: dict[str, list[Timing]]) -> list[dict[str, object]]:
    """The issue's docs/s targets against the long runs (all of them, and ASCII-only)."""
    rows: list[dict[str, object]] = []
    for label in ("long", "long_ascii_only"):
        by_name = {timing.name.split(" [")[0]: timing for timing in runs.get(label, [])}
        for name, target in END_TO_END_TARGETS.items():
            for variant in (name, f"{name} batch"):
                if variant not in by_name:
                    continue
                rate = by_name[variant].rate
                rows.append(
                    {
                        "corpus": label,
                        "measure": variant,
                        "target": target,
                        "docs_per_second": rate,
                        "met": rate >= target,
                    }
                )
    return rows


def print_profile(profile: dict[str, object]) -> None:
    stages = profile["stages"]
    assert isinstance(stages, dict)
    micro = {name: record["microseconds_per_document"] for name, record in stages.items()}
    shared = ["normalize", "tokenize", "unit_hashing", "ngram_combining"]
    print(
        f"\nProfile of the end-to-end path, long texts ({profile['documents']} documents, "
        f"{profile['ascii_documents']} pure ASCII, median {profile['tokens_per_document']} "
        "tokens), each stage timed alone"
    )
    print(f"  {'stage':<39} {'us/doc':>9} {'% SimHash':>10} {'% classic':>10} {'% one-perm':>11}")
    for path in ("simhash", "classic", "one_permutation"):
        micro[f"total:{path}"] = sum(micro[name] for name in [*shared, path])
    for name in [*shared, "simhash", "classic", "one_permutation", "bottom_k"]:
        shares = []
        for path in ("simhash", "classic", "one_permutation"):
            part = name in shared or name == path
            shares.append(f"{100 * micro[name] / micro[f'total:{path}']:.0f}%" if part else "")
        print(f"  {name:<39} {micro[name]:>9.1f} {shares[0]:>10} {shares[1]:>10} {shares[2]:>11}")
    for path in ("simhash", "classic", "one_permutation"):
        print(f"  {'sum of stages, ' + path:<39} {micro[f'total:{path}']:>9.1f}")
    measured = profile["measured"]
    assert isinstance(measured, dict)
    for name, record in measured.items():
        print(f"  measured {name:<30} {record['microseconds_per_document']:>9.1f}")
    print(
        f"  non-ASCII documents take {profile['non_ascii_share_of_tokenize_time']:.0%} of the "
        "tokenize time"
    )
    cprofile = profile["cprofile"]
    assert isinstance(cprofile, dict)
    for path, rows in cprofile.items():
        print(f"  cProfile, end-to-end {path}: top functions by own time")
        for row in rows[:8]:
            print(f"    {row['own_share']:>6.1%} {row['calls']:>8}  {row['function']}")


def print_sanity(sanity: dict[str, object]) -> None:
    first = sanity["first_document"]
    errors = sanity["mean_absolute_error"]
    bits = sanity["mean_simhash_bits_differing"]
    assert isinstance(first, dict) and isinstance(errors, dict) and isinstance(bits, dict)
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


# --- main ------------------------------------------------------------------------------------


def pin_one_core(cpu: int | None) -> list[int]:
    """Run on one CPU (threads started later, e.g. rensa's, inherit it)."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {allowed[0] if cpu is None else cpu})
    return sorted(os.sched_getaffinity(0))


def machine(pinned: list[int]) -> dict[str, object]:
    model = cpu_model()
    versions = package_versions(("simindex", "numpy", "xxhash", "datasketch", "simhash", "rensa"))
    return {
        "python": sys.version,
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "pinned_cpus": pinned,
        "versions": versions,
        "thread_variables": {k: v for k, v in os.environ.items() if k.endswith("_THREADS")},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small corpora, < 30 s smoke run")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results path")
    parser.add_argument("--cpu", type=int, help="CPU to pin to (default: the lowest allowed)")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    pinned = pin_one_core(args.cpu)
    started = time.perf_counter()

    long_documents = corpus.long_documents(size.long)
    short_documents = corpus.short_documents(size.short)
    non_ascii_documents = corpus.non_ascii_documents(size.non_ascii)
    long_texts = [document.text for document in long_documents]
    shingle_counts = [len(Shingling().shingles(text)) for text in long_texts]

    identical = identical_shingles(long_texts, size)
    ascii_texts = [text for text in long_texts if text.isascii()]
    end_to_end_runs = {
        "long": end_to_end("long", long_texts, size),
        "long_ascii_only": end_to_end("long, ASCII-only", ascii_texts, size, peers=False),
        "short": end_to_end("short", [d.text for d in short_documents], size),
        "non_ascii": end_to_end("non-ASCII", [d.text for d in non_ascii_documents], size),
    }
    profile = stage_profile(long_texts, size)
    sanity = jaccard_sanity(long_texts[: min(20, len(long_texts))])

    identical_found = comparisons(identical, with_targets=True)
    targets = absolute_targets(end_to_end_runs)
    median_shingles = statistics.median(shingle_counts)
    print_rates(
        f"Fingerprint only, identical shingle lists: {len(long_texts)} long documents, "
        f"median {median_shingles:g} word-3-gram shingles each (one core)",
        identical,
    )
    print_comparisons(identical_found)
    end_to_end_found: dict[str, list[Comparison]] = {}
    for label, timings in end_to_end_runs.items():
        title = timings[0].name.split(" [")[1].rstrip("]")
        print_rates(f"End to end, {title} texts ({timings[0].documents} documents)", timings)
        if len(timings) > 2 * (1 + len(SCHEMES)):  # peers were measured too
            end_to_end_found[label] = comparisons(timings, with_targets=False)
            print_comparisons(end_to_end_found[label])
    print("\nEnd-to-end targets, long texts, one core")
    for row in targets:
        print(
            f"  {row['corpus']:<16} {row['measure']:<40} target >= {row['target']:>6,.0f} "
            f"docs/s  measured {row['docs_per_second']:>7,.0f}  {'yes' if row['met'] else 'NO'}"
        )
    print_profile(profile)
    print_sanity(sanity)
    elapsed = time.perf_counter() - started
    print(f"\n{'quick' if args.quick else 'full'} run, {elapsed:.0f} s; JSON: {args.output}")

    results = {
        "benchmark": "fingerprint",
        "quick": args.quick,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "elapsed_seconds": round(elapsed, 1),
        "machine": machine(pinned),
        "settings": {
            **asdict(size),
            "num_perm": NUM_PERM,
            "seed": SEED,
            "shingling": "word 3-grams, Shingling() defaults",
            "rate": "documents / best of `repeats` timed passes after one warm-up pass",
        },
        "corpus": {
            "sources": corpus.sources(),
            "long": corpus.summary(long_documents),
            "long_ascii_only_documents": len(ascii_texts),
            "long_shingles_per_document": {
                "min": min(shingle_counts),
                "median": median_shingles,
                "max": max(shingle_counts),
            },
            "short": corpus.summary(short_documents),
            "non_ascii": corpus.summary(non_ascii_documents),
        },
        "identical_shingles": {
            "timings": [timing_record(timing) for timing in identical],
            "comparisons": [{**asdict(c), "met": c.met} for c in identical_found],
        },
        "end_to_end": {
            label: {
                "timings": [timing_record(timing) for timing in timings],
                "comparisons": [
                    {**asdict(c), "met": c.met} for c in end_to_end_found.get(label, [])
                ],
            }
            for label, timings in end_to_end_runs.items()
        },
        "end_to_end_targets_long": targets,
        "profile_long": profile,
        "jaccard_sanity": sanity,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
