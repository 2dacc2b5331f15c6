"""How common each shingle is in a table: learned from a sample at build (layer 1, no I/O).

Templated corpora (licences, generated package descriptions, e-mail footers) share whole
sentences between rows that are otherwise unrelated, and a near-duplicate index then chains
them into one cluster. Two cures use the same counts:

* **ignore common shingles** (``ignore_common`` of either method): a shingle held by more than
  that share of the sampled rows, and by more than :data:`MIN_COMMON_ROWS` of them, is no
  feature (the floor keeps a small table's near-duplicates: in 100 rows, 1% is one row). A row
  whose every shingle is common keeps them all, so identical copies of a template still find
  each other.
* **IDF weights** (``idf=True`` of SimHash): each feature weighs ``1 + ln((1 + n) / (1 + df))``
  for a sample of ``n`` rows, ``df`` of which hold it; a shingle not among the counted ones
  weighs as if one row held it.

The counts are part of the index spec (:mod:`simindex.core.spec`), so sync, queries and exact
verification drop and weigh exactly what the build did. Only the :data:`KEPT_SHINGLES` most
common shingles held by at least two sampled rows are kept, which bounds the spec's size.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

SAMPLE_ROWS = 20_000
"""Rows a build samples to count shingles (a table this small or smaller is read whole)."""
MIN_COMMON_ROWS = 10
"""A shingle held by this many sampled rows or fewer is never common."""
MAX_FEATURES = 16_000_000
"""Distinct shingles of all sampled rows together at most (8 bytes each, a few copies while
counting)."""
KEPT_SHINGLES = 8192
"""The most common shingles a spec keeps the counts of (12 bytes each)."""
_UINT64 = np.dtype("<u8")
_UINT32 = np.dtype("<u4")


def check_share(share: object) -> float | None:
    """``share`` if it is None or a number in (0, 1); the error says which it was not."""
    if share is None:
        return None
    if isinstance(share, bool) or not isinstance(share, int | float):
        raise TypeError(f"ignore_common must be a number or None, got {type(share).__name__}")
    if not 0.0 < share < 1.0 or math.isnan(share):
        raise ValueError(f"ignore_common must be a share of rows between 0 and 1, got {share}")
    return float(share)


@dataclass(frozen=True, slots=True, eq=False)
class ShingleCounts:
    """The most common shingles of a sample of ``rows`` rows and how many rows hold each.

    ``hashes`` are sorted; ``counts[i]`` rows of the sample hold ``hashes[i]``.
    """

    rows: int
    hashes: NDArray[np.uint64]
    counts: NDArray[np.uint32]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ShingleCounts)
            and self.rows == other.rows
            and np.array_equal(self.hashes, other.hashes)
            and np.array_equal(self.counts, other.counts)
        )

    def __hash__(self) -> int:
        return hash((self.rows, self.hashes.tobytes(), self.counts.tobytes()))

    def common(self, share: float) -> NDArray[np.uint64]:
        """The shingles held by more than ``share`` of the rows (and more than
        :data:`MIN_COMMON_ROWS`), sorted."""
        return self.hashes[self.counts > max(share * self.rows, MIN_COMMON_ROWS)]

    def idf(self, features: NDArray[np.uint64]) -> NDArray[np.float64]:
        """The IDF weight of each feature (see the module docstring)."""
        counts = np.ones(len(features), dtype=np.float64)
        if not self.rows:  # an empty table: nothing is rarer than anything else
            return counts
        where, found = _lookup(self.hashes, features)
        counts[found] = self.counts[where[found]]
        return 1.0 + np.log((1.0 + self.rows) / (1.0 + counts))

    def to_dict(self) -> dict[str, Any]:
        """The stored form: little-endian arrays in base64, so a spec stays one short JSON."""
        return {
            "rows": self.rows,
            "hashes": base64.b64encode(self.hashes.astype(_UINT64).tobytes()).decode("ascii"),
            "counts": base64.b64encode(self.counts.astype(_UINT32).tobytes()).decode("ascii"),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShingleCounts:
        try:
            rows = int(data["rows"])
            hashes = np.frombuffer(base64.b64decode(data["hashes"], validate=True), _UINT64)
            counts = np.frombuffer(base64.b64decode(data["counts"], validate=True), _UINT32)
        except (KeyError, TypeError, ValueError) as exc:  # binascii.Error is a ValueError
            raise ValueError(f"stored shingle counts are damaged: {exc}") from None
        if len(hashes) != len(counts) or np.any(hashes[1:] <= hashes[:-1]):
            raise ValueError("stored shingle counts are damaged: hashes and counts disagree")
        return cls(rows, hashes.astype(np.uint64), counts.astype(np.uint32))


def count_shingles(
    features: Iterable[NDArray[np.uint64]],
    *,
    kept: int = KEPT_SHINGLES,
    max_features: int = MAX_FEATURES,
) -> ShingleCounts:
    """Count, for each shingle, the rows holding it; rows without features are not counted.
    Rows are taken until they hold ``max_features`` distinct shingles in all (long documents
    make a smaller sample), so memory stays bounded."""
    distinct = []
    total = 0
    for row in features:
        unique = np.unique(row)
        if len(unique):
            distinct.append(unique)
            total += len(unique)
            if total >= max_features:
                break
    if not distinct:
        return ShingleCounts(0, np.zeros(0, np.uint64), np.zeros(0, np.uint32))
    hashes, counts = np.unique(np.concatenate(distinct), return_counts=True)
    shared = np.flatnonzero(counts >= 2)
    if len(shared) > kept:
        # The most common first; among equals, the smaller hash, so the choice is reproducible.
        order = np.lexsort((hashes[shared], -counts[shared]))
        shared = np.sort(shared[order[:kept]])
    return ShingleCounts(len(distinct), hashes[shared], counts[shared].astype(np.uint32))


def without_common(
    features: NDArray[np.uint64], counts: NDArray[np.int64], common: NDArray[np.uint64]
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """The features of each text without the common shingles, or all of them if every one is
    common. ``features`` holds ``counts[i]`` features of text ``i``, text after text; so does
    the result, with its own counts."""
    rare = ~_lookup(common, features)[1]
    text = np.repeat(np.arange(len(counts)), counts)
    kept = np.bincount(text, weights=rare, minlength=len(counts)).astype(np.int64)
    every = kept == 0  # a text whose every shingle is common keeps them all
    rare |= every[text]
    kept[every] = counts[every]
    return features[rare], kept


def _lookup(
    hashes: NDArray[np.uint64], features: NDArray[np.uint64]
) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """Where each feature is in the sorted ``hashes``, and whether it is there at all."""
    if not len(hashes):
        return np.zeros(len(features), np.intp), np.zeros(len(features), np.bool_)
    where = np.minimum(np.searchsorted(hashes, features), len(hashes) - 1)
    return where, hashes[where] == features
