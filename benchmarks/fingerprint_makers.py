"""The fingerprint makers the benchmark times: ours and the peers', each returning how many
fingerprints it made (so a pass that silently skips documents is caught)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import datasketch
import numpy as np
import rensa
import simhash as simhash_package
from numpy.typing import NDArray
from report import log, summary

from simindex.core.minhash import MinHasher, Scheme
from simindex.core.simhash import simhash, simhash_batch

NUM_PERM = 128
SEED = 1
SCHEMES = ("classic", "one_permutation", "bottom_k")
T = TypeVar("T")
Hashes = NDArray[np.uint64]
Work = Callable[[], int]


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


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]
"""What a pass is timed with: wall time, or this process's CPU time (``--clock cpu``), which a
machine shared with other work disturbs far less (the benchmark runs on one core, and the
peers' thread pools are held to one thread)."""


def measure(name: str, work: Work, documents: int, repeats: int) -> Timing:
    """Best and median of ``repeats`` timed passes after one warm-up pass, garbage collector off."""
    times = []
    for attempt in range(repeats + 1):
        gc.collect()
        gc.disable()
        try:
            start = clock()
            made = work()
            elapsed = clock() - start
        finally:
            gc.enable()
        if made != documents:
            raise RuntimeError(f"{name}: made {made} fingerprints for {documents} documents")
        if attempt:
            times.append(elapsed)
    spread = summary(times, ("min", "median"), digits=9)
    timing = Timing(name, documents, spread["min"], spread["median"], repeats)
    log(f"  {name:<52} {timing.rate:>10,.0f} docs/s")
    return timing


def timing_record(timing: Timing) -> dict[str, object]:
    return {
        **asdict(timing),
        "docs_per_second": round(timing.rate, 1),
        "median_docs_per_second": round(timing.documents / timing.median_seconds, 1),
        "microseconds_per_document": round(1e6 / timing.rate, 2),
    }


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
