"""MinHash signatures: estimate Jaccard similarity of shingle sets from a few numbers.

Leskovec, Rajaraman and Ullman, *Mining of Massive Datasets*, ch. 3 (classic MinHash); Li,
Owen and Zhang, "One Permutation Hashing", NIPS 2012, with Shrivastava's "Optimal
Densification for Fast and Accurate Minwise Hashing", ICML 2017; Broder's bottom-k sketch,
also the "k least values of one hash function" cluster key of the simhashing essay (seed 000).

Three schemes, all over the *set* of a document's feature hashes (duplicates do not count):

* ``classic``: ``num_perm`` hash functions ``h_i(x) = (a_i * x + b_i) mod p`` with the
  Mersenne prime ``p = 2**31 - 1``, over the top 31 bits ``x`` of each feature hash, ``a_i``
  in [1, p), ``b_i`` in [0, p) (Carter-Wegman universal hashing: full-range multipliers, and
  ``a_i * x`` fits 64-bit arithmetic exactly). Slot i holds the minimum of ``h_i``.
  Estimate: the fraction of equal slots.
* ``one_permutation``: one mixed hash ``v = fmix64(h ^ seed')`` splits into ``num_perm`` equal
  ranges ("bins") by its top bits; slot i holds the smallest ``v`` in bin i. An empty bin takes
  the value of the first non-empty bin along its own seeded probe order over all bins.
* ``bottom_k``: the ``num_perm`` smallest distinct ``v``, ascending (fewer for a smaller set).
  Estimate: among the ``num_perm`` smallest values of the union, the fraction in both.

Every constant derives from xxh3-64 and the seed, never from a random generator whose stream
could change between library versions: stored signatures stay comparable.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np
import xxhash
from numpy.typing import NDArray

from simindex.core.bits import BITS, MAX_UNSIGNED
from simindex.core.sketch import bins_of, derived, least_of, sketch_rows
from simindex.core.sketch import sketch as sketch
from simindex.core.text import fmix64
from simindex.errors import IncompatibleSignaturesError

SchemeName = Literal["classic", "one_permutation", "bottom_k"]
MERSENNE_PRIME = (1 << 31) - 1
_PRIME = np.int64(MERSENNE_PRIME)
_SHIFT = np.int64(31)
_TOP_31 = np.uint64(BITS - 31)
_CHUNK_FEATURES = 1024  # features per classic step: two num_perm x 1024 blocks fit in L2 cache


class Scheme(StrEnum):
    """Which MinHash construction a signature was made with."""

    CLASSIC = "classic"
    ONE_PERMUTATION = "one_permutation"
    BOTTOM_K = "bottom_k"


@functools.lru_cache(maxsize=32)
def _classic_coefficients(
    num_perm: int, seed: int
) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
    a = np.array([1 + v % (MERSENNE_PRIME - 1) for v in derived(seed, b"a", num_perm)], np.uint64)
    b = np.array([v % MERSENNE_PRIME for v in derived(seed, b"b", num_perm)], np.uint64)
    return a, b


@functools.lru_cache(maxsize=32)
def _probe_order(num_perm: int, seed: int) -> NDArray[np.intp]:
    """Row i: the order in which empty bin i looks at the bins to borrow a value."""
    keys = np.array(derived(seed, b"probe", num_perm * num_perm), np.uint64)
    order = np.argsort(keys.reshape(num_perm, num_perm), axis=1, kind="stable")
    order.setflags(write=False)
    return order


def _distinct(hashes: NDArray[np.uint64]) -> NDArray[np.uint64]:
    ordered = np.sort(hashes)
    keep = np.empty(len(ordered), dtype=bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _mixed(hashes: NDArray[np.uint64], seed: int) -> NDArray[np.uint64]:
    mix = np.uint64(xxhash.xxh3_64_intdigest(b"mix", seed))
    return fmix64(np.bitwise_xor(hashes, mix))


@dataclass(frozen=True, slots=True)
class MinHashSignature:
    """An immutable signature that knows how it was made and refuses unlike comparisons.

    ``values`` are little-endian uint64 bytes: the same on every machine, ready to store.
    """

    scheme: Scheme
    num_perm: int
    seed: int
    values: bytes

    @property
    def array(self) -> NDArray[np.uint64]:
        """The values as a read-only uint64 array."""
        return np.frombuffer(self.values, dtype="<u8").astype(np.uint64)

    def _check(self, other: MinHashSignature) -> None:
        if not isinstance(other, MinHashSignature):
            raise TypeError(f"expected a MinHashSignature, got {type(other).__name__}")
        mine = (self.scheme, self.num_perm, self.seed)
        theirs = (other.scheme, other.num_perm, other.seed)
        if mine != theirs:
            raise IncompatibleSignaturesError(
                f"cannot compare a (scheme, num_perm, seed) = {mine} signature with {theirs}"
            )

    def jaccard(self, other: MinHashSignature) -> float:
        """Estimated Jaccard similarity of the two shingle sets."""
        self._check(other)
        mine, theirs = self.array, other.array
        if self.scheme is not Scheme.BOTTOM_K:
            return float(np.count_nonzero(mine == theirs)) / self.num_perm
        union = np.union1d(mine, theirs)[: self.num_perm]
        both = np.intersect1d(mine, theirs, assume_unique=True)
        return float(np.count_nonzero(np.isin(union, both))) / len(union)


@dataclass(frozen=True, slots=True, init=False)
class MinHasher:
    """Makes :class:`MinHashSignature` values of one scheme, size and seed.

    Parameters:
        scheme: ``"classic"``, ``"one_permutation"`` or ``"bottom_k"``.
        num_perm: number of values in a signature (permutations, bins, or k).
        seed: selects the hash functions; signatures with different seeds are incomparable.
    """

    scheme: Scheme
    num_perm: int
    seed: int

    def __init__(
        self, scheme: Scheme | SchemeName = Scheme.CLASSIC, num_perm: int = 128, seed: int = 1
    ) -> None:
        if isinstance(num_perm, bool) or not isinstance(num_perm, int):
            raise TypeError(f"num_perm must be an int, got {type(num_perm).__name__}")
        if not 1 <= num_perm <= 4096:
            raise ValueError(f"num_perm must be from 1 to 4096, got {num_perm}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if not 0 <= seed <= MAX_UNSIGNED:
            raise ValueError(f"seed must be an unsigned 64-bit integer, got {seed}")
        object.__setattr__(self, "scheme", Scheme(scheme))
        object.__setattr__(self, "num_perm", num_perm)
        object.__setattr__(self, "seed", seed)

    def signature(self, hashes: NDArray[np.uint64]) -> MinHashSignature | None:
        """Signature of one document's feature hashes, ``None`` when it has none."""
        return self.signatures([hashes])[0]

    def signatures(self, documents: Sequence[NDArray[np.uint64]]) -> list[MinHashSignature | None]:
        """Signatures of many documents (``None`` for one without features)."""
        values, lengths = self.signature_matrix(documents)
        return [
            self.wrap(row[:length]) if length else None
            for row, length in zip(values, lengths.tolist(), strict=True)
        ]

    def wrap(self, values: NDArray[np.uint64]) -> MinHashSignature:
        """A signature of this hasher's parameters around stored values."""
        values = np.asarray(values, dtype=np.uint64)
        if self.scheme is Scheme.BOTTOM_K:
            if not 1 <= len(values) <= self.num_perm:
                raise ValueError(f"a bottom-k signature has 1 to {self.num_perm} values")
        elif len(values) != self.num_perm:
            raise ValueError(f"expected {self.num_perm} values, got {len(values)}")
        return MinHashSignature(
            self.scheme, self.num_perm, self.seed, values.astype("<u8").tobytes()
        )

    def signature_matrix(
        self, documents: Sequence[NDArray[np.uint64]]
    ) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
        """Signatures as a (documents x num_perm) array, and the length of each row.

        A length is 0 for a document without features, and below ``num_perm`` for a bottom-k
        signature of a smaller set; the rest of such a row is filled with 2**64 - 1.
        """
        sizes = np.fromiter(map(len, documents), np.int64, len(documents))
        result = np.full((len(documents), self.num_perm), MAX_UNSIGNED, dtype=np.uint64)
        lengths = np.where(sizes > 0, self.num_perm, 0)
        if self.scheme is Scheme.CLASSIC:
            self._classic(documents, sizes > 0, result)
            return result, lengths
        for row in np.flatnonzero(sizes).tolist():
            mixed = np.sort(_mixed(_distinct(np.asarray(documents[row], np.uint64)), self.seed))
            if self.scheme is Scheme.BOTTOM_K:
                lengths[row] = min(len(mixed), self.num_perm)
                result[row, : lengths[row]] = mixed[: self.num_perm]
            else:
                result[row] = self._one_permutation(mixed)
        return result, lengths

    def _classic(
        self,
        documents: Sequence[NDArray[np.uint64]],
        present: NDArray[np.bool_],
        result: NDArray[np.uint64],
    ) -> None:
        a, b = _classic_coefficients(self.num_perm, self.seed)
        rows = np.flatnonzero(present)
        if not len(rows):
            return
        sets = [_distinct(np.asarray(documents[i], np.uint64)) >> _TOP_31 for i in rows.tolist()]
        sizes = np.fromiter(map(len, sets), np.int64, len(sets))
        x = np.concatenate(sets).astype(np.int64)
        ends = np.cumsum(sizes)
        # mod p by folding the bits above 31 down once (2**31 = 1 mod p): a * x + b is at most
        # 2**62 - 2**32, so u = (v & p) + (v >> 31) is at most 2p - 1, and h = u or u - p.
        # In int64 with p * 2**31 subtracted beforehand (which leaves the low 31 bits alone and
        # takes p off the arithmetic shift), each value comes out as u - p in [-p, p): a
        # non-negative one is h itself, a negative one is h - p. So per permutation the
        # minimum h is the smaller of the least non-negative value (the least as unsigned) and
        # the most negative value plus p.
        a_column = a.astype(np.int64)[:, None]
        b_column = (b.astype(np.int64) - (MERSENNE_PRIME << 31))[:, None]
        # (num_perm x features) blocks: each permutation's values are contiguous, so every
        # step is a long vector operation and the minimum per document a reduction along rows.
        block = np.empty((self.num_perm, min(_CHUNK_FEATURES, len(x))), np.int64)
        spare = np.empty_like(block)
        minima = np.full((self.num_perm, len(rows)), MAX_UNSIGNED, np.uint64)
        for start in range(0, len(x), _CHUNK_FEATURES):
            chunk = x[start : start + _CHUNK_FEATURES]
            v, t = block[:, : len(chunk)], spare[:, : len(chunk)]
            np.multiply(a_column, chunk, out=v)
            np.add(v, b_column, out=v)
            np.right_shift(v, _SHIFT, out=t)
            np.bitwise_and(v, _PRIME, out=v)
            np.add(v, t, out=v)
            first = int(np.searchsorted(ends, start, side="right"))
            last = int(np.searchsorted(ends, start + len(chunk), side="left"))
            cuts = np.concatenate([[0], ends[first:last] - start])
            least = np.minimum.reduceat(v.view(np.uint64), cuts, axis=1)
            lowest = np.minimum.reduceat(v, cuts, axis=1)
            wrapped = np.where(lowest < 0, lowest + MERSENNE_PRIME, MERSENNE_PRIME)
            np.minimum(least, wrapped.astype(np.uint64), out=least)
            np.minimum(minima[:, first : last + 1], least, out=minima[:, first : last + 1])
        result[rows] = minima.T

    def sketch_matrix(
        self, documents: Sequence[NDArray[np.uint64]], values: int, bits: int
    ) -> NDArray[np.uint8]:
        """b-bit one-permutation sketches (see :func:`sketch`) of many documents, one row of
        ``values * bits / 8`` bytes each (zeros for a document without features)."""
        result = np.zeros((len(documents), values * bits // 8), np.uint8)
        for row, hashes in enumerate(documents):
            if len(hashes):
                ordered = np.sort(_mixed(_distinct(np.asarray(hashes, np.uint64)), self.seed))
                result[row] = sketch(ordered, values, bits, self.seed)
        return result

    def rows(
        self, documents: Sequence[NDArray[np.uint64]], sketch_bits: int
    ) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
        """What a MinHash index stores of each document, as a (documents x (num_perm +
        sketch_bits / 64 + 1)) array: the signature (:meth:`signature_matrix`), the one-bit
        sketch of ``sketch_bits`` values (:func:`sketch`) as 64-bit words, most significant
        bit first, and the hash of the shingle set (:func:`set_hash`); and the length of each
        row's signature (0: no features, a row of zeros after the signature).

        The one-permutation scheme sorts each set's mixed hashes once for both.
        """
        words = sketch_bits // 64
        width = self.num_perm + words + 1
        result = np.zeros((len(documents), width), np.uint64)
        if self.scheme is not Scheme.ONE_PERMUTATION:
            values, lengths = self.signature_matrix(documents)
            result[:, : self.num_perm] = values
        else:
            sizes = np.fromiter(map(len, documents), np.int64, len(documents))
            lengths = np.where(sizes > 0, self.num_perm, 0)
        # Short texts together (their per-call costs dominate), long ones one at a time
        # (the batch's sorts and probe lookups grow faster than one text's own work).
        present = [row for row, hashes in enumerate(documents) if 0 < len(hashes) < _BATCHED]
        for row, hashes in enumerate(documents):
            if len(hashes) >= _BATCHED:
                distinct = _distinct(np.asarray(hashes, np.uint64))
                ordered = np.sort(_mixed(distinct, self.seed))
                if self.scheme is Scheme.ONE_PERMUTATION:
                    result[row, : self.num_perm] = self._one_permutation(ordered)
                packed = sketch(ordered, sketch_bits, 1, self.seed)
                result[row, self.num_perm : width - 1] = packed.view(">u8")
                result[row, -1] = set_hash(distinct)
        for start in range(0, len(present), _BATCH_DOCUMENTS):
            rows = present[start : start + _BATCH_DOCUMENTS]
            batch = _SortedBatch.of([documents[row] for row in rows], self.seed)
            if self.scheme is Scheme.ONE_PERMUTATION:
                result[rows, : self.num_perm] = batch.one_permutation(self.num_perm, self.seed)
            packed = batch.sketches(sketch_bits, self.seed)
            result[rows, self.num_perm : width - 1] = packed.view(">u8")
            result[rows, -1] = batch.set_hashes()
        return result, lengths

    def _one_permutation(self, ordered: NDArray[np.uint64]) -> NDArray[np.uint64]:
        values, nonempty = least_of(ordered, self.num_perm)
        empty = np.flatnonzero(~nonempty)
        if len(empty):
            candidates = _probe_order(self.num_perm, self.seed)[empty]
            source = candidates[np.arange(len(empty)), nonempty[candidates].argmax(axis=1)]
            values[empty] = values[source]
        return values


_BATCH_DOCUMENTS = 256
"""Documents whose sketches :meth:`MinHasher.rows` computes together (a few MiB of arrays)."""
_BATCHED = 250
"""Texts of fewer feature hashes are computed in batches, longer ones one at a time (faster
from about 250 on: 201 against 241 µs a text at 200 distinct hashes, 273 against 225 at 300,
CPU time on one core of a busy machine with 1,792 sketch bits)."""


def by_owner(
    hashes: NDArray[np.uint64], owner: NDArray[np.intp], documents: int
) -> NDArray[np.intp]:
    """The order that sorts hashes by owner, then value: ``np.lexsort((hashes, owner))``, as a
    sort of the values and a stable sort of their owners as small integers (a radix sort)."""
    ascending = np.argsort(hashes)
    small = owner[ascending].astype(np.min_scalar_type(documents))
    return ascending[np.argsort(small, kind="stable")]


@dataclass(frozen=True, slots=True)
class _SortedBatch:
    """Documents' distinct feature hashes and their mixed hashes, sorted per document, all in
    flat arrays: what :meth:`MinHasher.rows` computes for many documents at once, with the
    same results as :func:`sketch` and :meth:`MinHasher._one_permutation` document by
    document (``tests/unit/test_minhash_batch.py``)."""

    distinct: NDArray[np.uint64]
    """Each document's distinct hashes, ascending, documents one after another."""
    cuts: NDArray[np.intp]
    """Where each document's hashes start in ``distinct`` and ``mixed``, and the end."""
    mixed: NDArray[np.uint64]
    """Each document's mixed hashes, ascending."""
    document: NDArray[np.intp]
    """The document of each mixed hash."""

    @classmethod
    def of(cls, documents: Sequence[NDArray[np.uint64]], seed: int) -> _SortedBatch:
        sizes = np.fromiter(map(len, documents), np.intp, len(documents))
        owner = np.repeat(np.arange(len(documents)), sizes)
        hashes = np.concatenate([np.asarray(d, np.uint64) for d in documents])
        order = by_owner(hashes, owner, len(documents))
        hashes, owner = hashes[order], owner[order]
        keep = np.ones(len(hashes), bool)
        np.logical_or(hashes[1:] != hashes[:-1], owner[1:] != owner[:-1], out=keep[1:])
        distinct, owner = hashes[keep], owner[keep]
        cuts = np.searchsorted(owner, np.arange(len(documents) + 1))
        mixed = _mixed(distinct, seed)
        order = by_owner(mixed, owner, len(documents))
        return cls(distinct, cuts, mixed[order], owner[order])

    def set_hashes(self) -> NDArray[np.uint64]:
        """:func:`set_hash` of each document."""
        bounds = self.cuts.tolist()
        return np.array(
            [set_hash(self.distinct[a:b]) for a, b in itertools.pairwise(bounds)],
            np.uint64,
        )

    def held(self, values: int) -> tuple[NDArray[np.intp], NDArray[np.uint64]]:
        """Each document's non-empty bins among ``values`` as flat indexes ``document *
        values + bin``, ascending, and their least mixed hashes: ascending within a
        document, a bin's first hash is its least."""
        cell = self.document * values + bins_of(self.mixed, values)
        first = np.ones(len(cell), bool)
        np.not_equal(cell[1:], cell[:-1], out=first[1:])
        return cell[first], self.mixed[first]

    def one_permutation(self, num_perm: int, seed: int) -> NDArray[np.uint64]:
        """:meth:`MinHasher._one_permutation` of each document: an empty bin takes the value
        of the first non-empty bin of its probe order, the least rank among the document's
        non-empty bins in that order (:func:`_ranks`)."""
        cells, least = self.held(num_perm)
        count = len(self.cuts) - 1
        document, bins = np.divmod(cells, num_perm)
        ranks, width = _ranks(num_perm, seed)
        starts = np.searchsorted(document, np.arange(count))
        least_rank = np.minimum.reduceat(ranks[bins], starts, axis=0)
        lender = (least_rank & ((1 << width) - 1)).astype(np.intp)
        lender += np.arange(0, count * num_perm, num_perm)[:, None]
        values = np.zeros(count * num_perm, np.uint64)
        values[cells] = least
        result: NDArray[np.uint64] = values[lender]
        result.ravel()[cells] = least
        return result

    def sketches(self, values: int, seed: int) -> NDArray[np.uint8]:
        """:func:`~simindex.core.sketch.sketch` of each document with one bit a value."""
        cells, least = self.held(values)
        document, bins = np.divmod(cells, values)
        return sketch_rows(document, bins, least, len(self.cuts) - 1, values, seed)


@functools.lru_cache(maxsize=8)
def _ranks(num_perm: int, seed: int) -> tuple[NDArray[np.unsignedinteger], int]:
    """Row b: for each empty bin i, where bin b comes in i's probe order (:func:`_probe_order`),
    shifted above b itself (``width`` bits): the least of a document's rows names the bin
    each empty bin borrows from."""
    width = (num_perm - 1).bit_length()
    order = _probe_order(num_perm, seed)
    shifted = np.empty((num_perm, num_perm), np.int64)
    shifted[order, np.arange(num_perm)[:, None]] = np.arange(num_perm) << width
    shifted |= np.arange(num_perm)[:, None]
    ranks: NDArray[np.unsignedinteger] = shifted.astype(np.uint16 if 2 * width <= 16 else np.uint32)
    ranks.setflags(write=False)
    return ranks, width


def set_hash(distinct: NDArray[np.uint64]) -> int:
    """xxh3-64 of a shingle set: its sorted distinct hashes as little-endian bytes. Two rows of
    one index with equal set hashes have the same set (but with probability ``2**-64``)."""
    return xxhash.xxh3_64_intdigest(np.ascontiguousarray(distinct, "<u8").tobytes())


def bottom_k_key(hashes: NDArray[np.uint64], k: int) -> int | None:
    """The stable cluster key of seed 000: the XOR of the ``k`` smallest distinct feature hashes
    (all of them for a smaller set); None for a text with no features.

    Two sets share the key with probability about J**k (J their Jaccard similarity), and
    adding or removing a feature changes it only if that feature is among the k smallest, so
    a row's key, unlike a cluster found by comparisons, never depends on other rows.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if not len(hashes):
        return None
    smallest = _distinct(hashes)[:k]
    return int(np.bitwise_xor.reduce(smallest))
