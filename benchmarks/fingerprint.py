"""Fingerprint throughput on one core: simindex against the simhash package, datasketch, rensa.

    python benchmarks/fingerprint.py [--quick] [--output PATH] [--cpu N] [--clock wall|cpu]
                                     [--baseline TREE] [--print FILE]

Four parts, all on the corpora of ``benchmarks/corpus.py``:

1. **identical shingle lists**: every library gets the same word-3-gram shingles of each long
   document (``Shingling().shingles``) and turns them into a fingerprint with its own hashing;
2. **end to end**: text in, fingerprint out, per-document calls, the batch APIs and the path
   build and sync take (``fingerprint_batch`` with a stored spec, ``fingerprint_spec``), for
   long, short and non-ASCII texts (peers shingle with our ``shingles`` and hash their own
   way); with ``--baseline TREE`` (another checkout of simindex, e.g. main's from ``git
   archive``) that path is timed for both trees in turn, so "times faster than before" comes
   from one run;
3. **profile**: the end-to-end path for long texts cut into its stages;
4. **sanity**: Jaccard estimates of every MinHash against the exact value on edited copies.

A rate is documents over the best (fastest) of several timed passes after a warm-up pass; the
median pass is recorded too. Each pass returns how many fingerprints it made, and that must
equal the number of documents. The makers and their timing are in ``fingerprint_makers``, the
tables (printed from the JSON result, so ``--print FILE`` shows a written one again) in
``fingerprint_tables``. Not a test: nothing here asserts a timing.
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
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import corpus
import datasketch
import fingerprint_makers as makers
import numpy as np
import rensa
import simhash as simhash_package
import xxhash
from fingerprint_makers import NUM_PERM, SCHEMES, SEED, Timing, Work, measure, timing_record
from fingerprint_profile import stage_profile
from fingerprint_spec import (
    before_and_after,
    spec_timings,
    speed_targets,
)
from fingerprint_tables import print_report
from numpy.typing import NDArray
from report import log, new_result, read_result, write_result

from simindex.core.simhash import simhash_batch
from simindex.core.text import Shingling, hash_strings

DEFAULT_OUTPUT = Path(__file__).parent / "results" / "fingerprint.json"

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


# --- part 1: identical shingle lists ---------------------------------------------------------


def identical_shingles(texts: list[str], size: Size) -> list[Timing]:
    """Shingle list in, fingerprint out: every library hashes the same shingle strings."""
    shingling = Shingling()
    strings = [shingling.shingles(text) for text in texts]
    encoded = [[s.encode("utf-8") for s in shingles] for shingles in strings]
    minhashers = makers.hashers()
    chunks = makers.batches(encoded, size.batch)
    string_chunks = makers.batches(strings, size.batch)
    count = len(texts)

    def run(name: str, work: Work) -> Timing:
        return measure(name, work, count, size.repeats)

    def ours(scheme: str) -> Work:
        return lambda: makers.minhash_count(minhashers[scheme], map(hash_strings, encoded))

    def ours_batch(scheme: str) -> Work:
        hasher = minhashers[scheme]
        return lambda: sum(makers.matrix_count(hasher, list(map(hash_strings, c))) for c in chunks)

    xxh64: dict[str, object] = {"hashfunc": xxhash.xxh3_64_intdigest}
    xxh32: dict[str, object] = {"hashfunc": xxhash.xxh32_intdigest}
    log("part 1: identical shingle lists")
    return [
        run(
            "simindex hash_strings only (xxh3 per shingle)",
            lambda: len(list(map(hash_strings, encoded))),
        ),
        run("simindex SimHash-64", lambda: makers.simhash_count(map(hash_strings, encoded))),
        *(run(f"simindex MinHash {scheme}", ours(scheme)) for scheme in SCHEMES),
        run(
            "simindex SimHash-64 batch",
            lambda: sum(makers.simhash_batch_count(list(map(hash_strings, c))) for c in chunks),
        ),
        *(run(f"simindex MinHash {scheme} batch", ours_batch(scheme)) for scheme in SCHEMES),
        run("simhash Simhash (md5, default)", lambda: makers.simhash_package_count(strings)),
        run(
            "simhash Simhash (xxh3 hashfunc)",
            lambda: makers.simhash_package_count(strings, **xxh64),
        ),
        run(
            "datasketch MinHash update_batch (sha1, default)",
            lambda: makers.datasketch_count(encoded),
        ),
        run(
            "datasketch MinHash.bulk (sha1, default)", lambda: makers.datasketch_bulk_count(encoded)
        ),
        run(
            "datasketch MinHash update_batch (xxh32 hashfunc)",
            lambda: makers.datasketch_count(encoded, **xxh32),
        ),
        run("rensa RMinHash", lambda: makers.rensa_count(rensa.RMinHash, strings)),
        run("rensa CMinHash", lambda: makers.rensa_count(rensa.CMinHash, strings)),
        run(
            "rensa RMinHash digest_matrix batch",
            lambda: sum(makers.rensa_matrix_count(c) for c in string_chunks),
        ),
    ]


# --- part 2: end to end ----------------------------------------------------------------------


def end_to_end(label: str, texts: list[str], size: Size, peers: bool = True) -> list[Timing]:
    """Text in, fingerprint out; peers shingle with ``Shingling.shingles`` and hash their way."""
    shingling = Shingling()
    minhashers = makers.hashers()
    chunks = makers.batches(texts, size.batch)
    count = len(texts)

    def run(name: str, work: Work) -> Timing:
        return measure(f"{name} [{label}]", work, count, size.repeats)

    def hashes(chunk: Sequence[str]) -> list[Hashes]:
        return [shingling.hashes(text) for text in chunk]

    def ours(scheme: str) -> Work:
        return lambda: makers.minhash_count(minhashers[scheme], map(shingling.hashes, texts))

    def ours_batch(scheme: str) -> Work:
        return lambda: sum(makers.matrix_count(minhashers[scheme], hashes(c)) for c in chunks)

    def strings() -> Iterator[list[str]]:
        return map(shingling.shingles, texts)

    def encoded() -> Iterator[list[bytes]]:
        return ([s.encode("utf-8") for s in shingling.shingles(text)] for text in texts)

    log(f"part 2: end to end, {label} texts")
    timings = [
        run("simindex SimHash-64", lambda: makers.simhash_count(map(shingling.hashes, texts))),
        *(run(f"simindex MinHash {scheme}", ours(scheme)) for scheme in SCHEMES),
        run(
            "simindex SimHash-64 batch",
            lambda: sum(makers.simhash_batch_count(hashes(c)) for c in chunks),
        ),
        *(run(f"simindex MinHash {scheme} batch", ours_batch(scheme)) for scheme in SCHEMES),
        *spec_timings(label, texts, size.batch, size.repeats),
    ]
    if not peers:
        return timings
    return [
        *timings,
        run("simhash Simhash (md5, default)", lambda: makers.simhash_package_count(strings())),
        run(
            "datasketch MinHash update_batch (sha1, default)",
            lambda: makers.datasketch_count(encoded()),
        ),
        run(
            "datasketch MinHash.bulk (sha1, default)",
            lambda: makers.datasketch_bulk_count(encoded()),
        ),
        run("rensa RMinHash", lambda: makers.rensa_count(rensa.RMinHash, strings())),
        run("rensa CMinHash", lambda: makers.rensa_count(rensa.CMinHash, strings())),
        run(
            "rensa RMinHash digest_matrix batch",
            lambda: sum(
                makers.rensa_matrix_count(list(map(shingling.shingles, c))) for c in chunks
            ),
        ),
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
    minhashers = makers.hashers()
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


# --- main ------------------------------------------------------------------------------------


def pin_one_core(cpu: int | None) -> list[int]:
    """Run on one CPU (threads started later, e.g. rensa's, inherit it)."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {allowed[0] if cpu is None else cpu})
    return sorted(os.sched_getaffinity(0))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small corpora, < 30 s smoke run")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="JSON results path")
    parser.add_argument("--cpu", type=int, help="CPU to pin to (default: the lowest allowed)")
    parser.add_argument(
        "--clock",
        choices=sorted(makers.CLOCKS),
        default="wall",
        help="time passes by wall time or by this process's CPU time (a shared machine)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another simindex tree (e.g. main from git archive): its spec path is timed first",
    )
    parser.add_argument(
        "--print", dest="print_only", type=Path, help="print the tables of a written JSON and stop"
    )
    args = parser.parse_args(argv)
    if args.print_only:
        print_report(read_result(args.print_only))
        return 0
    size = QUICK if args.quick else FULL
    makers.clock = makers.CLOCKS[args.clock]
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
    baseline = None
    if args.baseline:
        baseline = before_and_after(
            args.baseline, long_texts, size.batch, size.repeats, args.cpu, args.clock
        )
    profile = stage_profile(long_texts, size)
    sanity = jaccard_sanity(long_texts[: min(20, len(long_texts))])

    identical_found = comparisons(identical, with_targets=True)
    end_to_end_found = {
        label: comparisons(timings, with_targets=False)
        for label, timings in end_to_end_runs.items()
        if label != "long_ascii_only"  # the others were measured beside the peers
    }
    median_shingles = statistics.median(shingle_counts)
    elapsed = time.perf_counter() - started
    results = new_result("fingerprint", argv, ("xxhash", "datasketch", "simhash", "rensa"))
    results["machine"] |= {
        "pinned_cpus": pinned,
        "thread_variables": {k: v for k, v in os.environ.items() if k.endswith("_THREADS")},
    }
    results |= {
        "quick": args.quick,
        "settings": {
            **asdict(size),
            "num_perm": NUM_PERM,
            "seed": SEED,
            "shingling": "word 3-grams, Shingling() defaults",
            "rate": "documents / best of `repeats` timed passes after one warm-up pass",
            "clock": args.clock,
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
        "end_to_end_targets_long": absolute_targets(end_to_end_runs),
        "baseline": baseline,
        "speed_targets_long": speed_targets(end_to_end_runs["long"], baseline),
        "profile_long": profile,
        "jaccard_sanity": sanity,
    }
    write_result(args.output, results)
    print_report(results)
    print(f"\n{'quick' if args.quick else 'full'} run, {elapsed:.0f} s; JSON: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
