"""Index designs, pure maths: Manku permutation tables for SimHash, LSH bands for MinHash.

**Manku tables** (Manku, Jain, Das Sarma, "Detecting near-duplicates for web crawling",
WWW 2007). Split the 64 bits into ``num_blocks`` blocks. If two fingerprints differ in at most
``k`` bits, at most ``k`` blocks differ, so some ``num_blocks - k`` blocks agree exactly
(pigeonhole). One table per choice of those blocks stores the fingerprint *permuted* so the
chosen blocks come first: a query then needs, per table, only the rows whose first
``prefix_bits`` equal its own permuted prefix -- one btree range scan -- and every fingerprint
within ``k`` bits is found, exactly. More blocks mean longer prefixes (fewer candidates) but
``C(num_blocks, k)`` tables.

**LSH bands** (Leskovec, Rajaraman, Ullman, *Mining of Massive Datasets*, ch. 3.4). A
signature of ``num_bands * rows_per_band`` values is cut into bands; two documents are
candidates when any band agrees entirely, with probability ``1 - (1 - s**r)**b`` at Jaccard
similarity ``s``. The chooser is recall-first: among the designs that make a pair right at the
threshold a candidate with probability at least ``min_probability`` (0.97), it takes the one
with the least weighted area of false positives (below the threshold) and false negatives
(above it) under that S-curve. Candidates are verified afterwards, so a false positive costs
a comparison while a false negative is an answer lost for good.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import xxhash
from numpy.typing import NDArray

from simindex.core.bits import BITS, MAX_UNSIGNED, to_signed_array

# Relative costs of the two parts of a SimHash query, in "one btree descent" units: each table
# is one index descent; each candidate is one index tuple read and a bit_count, and ~100 share
# a leaf page.
PROBE_COST = 1.0
CANDIDATE_COST = 0.02
MAX_TABLES = 64
# Recall-first LSH: a pair right at the threshold becomes a candidate at least this often.
MIN_CANDIDATE_PROBABILITY = 0.97


def block_widths(num_blocks: int) -> tuple[int, ...]:
    """Widths of the blocks, most significant first; the wider ones come first."""
    if not 1 <= num_blocks <= BITS:
        raise ValueError(f"num_blocks must be from 1 to {BITS}, got {num_blocks}")
    base, extra = divmod(BITS, num_blocks)
    return tuple(base + 1 if i < extra else base for i in range(num_blocks))


@functools.cache
def _moves(order: tuple[int, ...], widths: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """(source shift, mask, destination shift) of each block of a permutation."""
    source_shift = [BITS - sum(widths[: block + 1]) for block in range(len(widths))]
    moves = []
    destination = BITS
    for block in order:
        destination -= widths[block]
        moves.append((source_shift[block], (1 << widths[block]) - 1, destination))
    return tuple(moves)


@dataclass(frozen=True, slots=True)
class MankuTable:
    """One permutation: the fingerprint's blocks in ``order``; the first ``prefix_blocks`` of
    them form the prefix a query must match exactly."""

    order: tuple[int, ...]
    widths: tuple[int, ...]
    prefix_blocks: int

    @property
    def prefix_bits(self) -> int:
        return sum(self.widths[block] for block in self.order[: self.prefix_blocks])

    @property
    def moves(self) -> tuple[tuple[int, int, int], ...]:
        """(source shift, mask, destination shift) of each block, in output order."""
        return _moves(self.order, self.widths)

    def permute(self, fingerprint: int) -> int:
        """The fingerprint with this table's blocks moved to the front."""
        return sum(
            ((fingerprint >> src) & mask) << dst
            for src, mask, dst in _moves(self.order, self.widths)
        )

    def permute_array(self, fingerprints: NDArray[np.uint64]) -> NDArray[np.uint64]:
        """Vectorised :meth:`permute`."""
        result = np.zeros(len(fingerprints), dtype=np.uint64)
        for src, mask, dst in self.moves:
            moved = (fingerprints >> np.uint64(src)) & np.uint64(mask)
            result |= moved << np.uint64(dst)
        return result

    @property
    def prefix_mask(self) -> int:
        """The fingerprint bits (in their own, unpermuted places) that form this table's prefix:
        two fingerprints share the prefix exactly when their XOR has none of them set."""
        return sum(mask << src for src, mask, _ in self.moves[: self.prefix_blocks])

    def prefix_range(self, fingerprint: int) -> tuple[int, int]:
        """Unsigned bounds of the permuted values that share the query's prefix."""
        suffix = (1 << (BITS - self.prefix_bits)) - 1
        low = self.permute(fingerprint) & (MAX_UNSIGNED ^ suffix)
        return low, low | suffix


@dataclass(frozen=True, slots=True)
class MankuDesign:
    """All the tables that find every fingerprint within ``max_distance`` bits.

    Parameters:
        max_distance: k, the largest Hamming distance a query can ask for.
        num_blocks: blocks the 64 bits are cut into; must exceed ``max_distance``.
    """

    max_distance: int
    num_blocks: int

    def __post_init__(self) -> None:
        if isinstance(self.max_distance, bool) or not isinstance(self.max_distance, int):
            raise TypeError(f"max_distance must be an int, got {self.max_distance!r}")
        if not 0 <= self.max_distance < BITS:
            raise ValueError(f"max_distance must be from 0 to 63, got {self.max_distance}")
        if not self.max_distance < self.num_blocks <= BITS:
            raise ValueError(
                f"num_blocks must be from max_distance + 1 = {self.max_distance + 1} to 64, "
                f"got {self.num_blocks}"
            )
        if self.table_count > MAX_TABLES:
            raise ValueError(
                f"{self.num_blocks} blocks for max_distance {self.max_distance} need "
                f"{self.table_count} tables; at most {MAX_TABLES} are allowed"
            )

    @property
    def table_count(self) -> int:
        return math.comb(self.num_blocks, self.max_distance)

    @property
    def tables(self) -> tuple[MankuTable, ...]:
        return _tables(self.num_blocks, self.num_blocks - self.max_distance)

    def expected_candidates(self, rows: int) -> float:
        """Rows a query reads, summed over tables, for ``rows`` uniformly random fingerprints."""
        return sum(rows / 2.0**table.prefix_bits for table in self.tables)

    def query_cost(self, rows: int) -> float:
        """Model cost of one query (see PROBE_COST and CANDIDATE_COST)."""
        return self.table_count * PROBE_COST + self.expected_candidates(rows) * CANDIDATE_COST


@functools.cache
def _tables(num_blocks: int, keep: int) -> tuple[MankuTable, ...]:
    widths = block_widths(num_blocks)
    tables = []
    for chosen in itertools.combinations(range(num_blocks), keep):
        rest = tuple(b for b in range(num_blocks) if b not in chosen)
        tables.append(MankuTable(chosen + rest, widths, keep))
    return tuple(tables)


def manku_cost_table(max_distance: int, rows: int) -> list[tuple[MankuDesign, float, float]]:
    """Every allowed design for ``max_distance`` with (candidates, cost) at ``rows`` rows."""
    designs = []
    for num_blocks in range(max_distance + 1, BITS + 1):
        if math.comb(num_blocks, max_distance) > MAX_TABLES:
            break
        design = MankuDesign(max_distance, num_blocks)
        designs.append((design, design.expected_candidates(rows), design.query_cost(rows)))
    return designs


def choose_manku(max_distance: int, expected_rows: int) -> MankuDesign:
    """The design with the lowest model query cost for a table of ``expected_rows`` rows."""
    if expected_rows < 0:
        raise ValueError(f"expected_rows must not be negative, got {expected_rows}")
    table = manku_cost_table(max_distance, expected_rows)
    if not table:
        raise ValueError(f"no design with at most {MAX_TABLES} tables for {max_distance}")
    return min(table, key=lambda row: (row[2], row[0].table_count))[0]


@dataclass(frozen=True, slots=True)
class LshDesign:
    """``num_bands`` bands of ``rows_per_band`` signature values each."""

    num_bands: int
    rows_per_band: int

    def __post_init__(self) -> None:
        for name in ("num_bands", "rows_per_band"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

    @property
    def num_perm(self) -> int:
        """Signature values the bands use (a signature may be longer; the rest is unused)."""
        return self.num_bands * self.rows_per_band

    def probability(self, similarity: float) -> float:
        """Chance that two documents of this Jaccard similarity share at least one band."""
        return 1.0 - (1.0 - similarity**self.rows_per_band) ** self.num_bands

    def band_hashes(self, signatures: NDArray[np.uint64]) -> NDArray[np.int64]:
        """(documents x num_bands) band keys, as ``bigint`` values (see :mod:`simindex.core.bits`).

        Band i's key is xxh3-64, seeded with i, of its values' little-endian bytes.
        """
        if signatures.ndim != 2 or signatures.shape[1] < self.num_perm:
            raise ValueError(
                f"expected a (documents x >= {self.num_perm}) signature array, "
                f"got shape {signatures.shape}"
            )
        width = self.rows_per_band * 8
        raw = np.ascontiguousarray(signatures[:, : self.num_perm], dtype="<u8").tobytes()
        row_bytes = self.num_perm * 8
        keys = np.fromiter(
            (
                xxhash.xxh3_64_intdigest(
                    raw[start + band * width : start + (band + 1) * width], band
                )
                for start in range(0, len(raw), row_bytes)
                for band in range(self.num_bands)
            ),
            np.uint64,
            len(signatures) * self.num_bands,
        )
        return to_signed_array(keys).reshape(len(signatures), self.num_bands)


def _error_areas(
    threshold: float, num_perm: int
) -> tuple[list[LshDesign], NDArray[np.float64], NDArray[np.float64]]:
    designs = [
        LshDesign(bands, rows)
        for bands in range(1, num_perm + 1)
        for rows in range(1, num_perm // bands + 1)
    ]
    bands = np.array([d.num_bands for d in designs], dtype=np.float64)[:, None]
    rows = np.array([d.rows_per_band for d in designs], dtype=np.float64)[:, None]
    below = np.linspace(0.0, threshold, 257)
    above = np.linspace(threshold, 1.0, 257)
    false_positive = np.asarray(
        np.trapezoid(1.0 - (1.0 - below**rows) ** bands, below, axis=1), np.float64
    )
    false_negative = np.asarray(
        np.trapezoid((1.0 - above**rows) ** bands, above, axis=1), np.float64
    )
    return designs, false_positive, false_negative


def choose_lsh(
    threshold: float,
    num_perm: int,
    false_positive_weight: float = 0.5,
    false_negative_weight: float = 0.5,
    *,
    min_probability: float | None = MIN_CANDIDATE_PROBABILITY,
) -> LshDesign:
    """Bands x rows (using at most ``num_perm`` values) minimising the weighted error areas,
    among those that make a pair at ``threshold`` a candidate with probability at least
    ``min_probability`` (if none does, the most likely ones). ``None`` weighs every design,
    which can choose a design of low recall (9 bands x 13 rows at 0.8, which makes a pair at
    the threshold a candidate only 40 % of the time)."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be between 0 and 1 (exclusive), got {threshold}")
    if isinstance(num_perm, bool) or not isinstance(num_perm, int) or num_perm < 1:
        raise ValueError(f"num_perm must be a positive integer, got {num_perm!r}")
    if false_positive_weight < 0 or false_negative_weight < 0:
        raise ValueError("error weights must not be negative")
    if false_positive_weight + false_negative_weight == 0:
        raise ValueError("at least one error weight must be positive")
    if min_probability is not None and not 0.0 <= min_probability <= 1.0:
        raise ValueError(f"min_probability must be from 0 to 1, got {min_probability}")
    designs, false_positive, false_negative = _error_areas(threshold, num_perm)
    error = false_positive_weight * false_positive + false_negative_weight * false_negative
    if min_probability is not None:
        at_threshold = np.array([design.probability(threshold) for design in designs])
        # A hair of tolerance: 0.97 must not fail on the last bit of a float.
        allowed = at_threshold >= min(min_probability, at_threshold.max()) - 1e-12
        error = np.where(allowed, error, np.inf)
    return designs[int(np.argmin(error))]
