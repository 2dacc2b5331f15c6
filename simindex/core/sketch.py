"""The one-bit one-permutation sketch that a MinHash row is scored by in SQL.

One mixed hash of each shingle falls in one of ``values`` equal ranges of the 64-bit hashes
("bins"): bin ``floor(v * values / 2**64)``. A bin keeps the low bit of its least hash (Li and
König, "b-Bit Minwise Hashing", WWW 2010); an empty bin borrows the least hash of the first
non-empty bin among its own ``PROBES`` seeded probes, mixed with its own number (Shrivastava,
"Optimal Densification for Fast and Accurate Minwise Hashing", ICML 2017), or when none of
them is non-empty (a text of a handful of shingles) the next non-empty bin along a fixed
cyclic order of the bins, mixed with its distance there (rotation densification, Shrivastava
and Li, ICML 2014).

Probes and the cyclic order depend only on ``(values, seed)``: they are tables made once.
:func:`sketch` serves one text; :func:`sketch_rows` many at once from their bins' least
hashes, with the same bits (``tests/unit/test_minhash_batch.py``).
"""

from __future__ import annotations

import functools

import numpy as np
import xxhash
from numpy.typing import NDArray

from simindex.core.text import fmix64

PROBES = 32
"""Probes of an empty bin for a non-empty one before the cyclic order."""
_FIRST = 8
"""Probes looked at first, one text at a time: a long text's empty bins nearly all stop there."""
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LOW_32 = np.uint64(0xFFFFFFFF)
_SHIFT_32 = np.uint64(32)
_ONE = np.uint64(1)


def derived(seed: int, label: bytes, count: int) -> list[int]:
    """``count`` constants of a seed: xxh3-64 of the label and each number (never a random
    generator whose stream could change between library versions)."""
    return [xxhash.xxh3_64_intdigest(label + i.to_bytes(4, "little"), seed) for i in range(count)]


@functools.lru_cache(maxsize=32)
def bin_starts(values: int) -> NDArray[np.uint64]:
    """The least hash of each of ``values`` equal bins: ``ceil(i * 2**64 / values)``."""
    return np.array([-(-(i << 64) // values) for i in range(values)], np.uint64)


def bins_of(hashes: NDArray[np.uint64], values: int) -> NDArray[np.intp]:
    """The bin of each hash, ``floor(v * values / 2**64)`` (the last of :func:`bin_starts` not
    above it), from 32-bit halves: ``values`` is at most 2**12, so no product overflows."""
    if values > 1 and not values & (values - 1):  # a power of two: the top bits
        return (hashes >> np.uint64(65 - values.bit_length())).astype(np.intp)
    count = np.uint64(values)
    low = (hashes & _LOW_32) * count
    low >>= _SHIFT_32
    high = hashes >> _SHIFT_32
    high *= count
    high += low
    high >>= _SHIFT_32
    return high.astype(np.intp)


@functools.lru_cache(maxsize=8)
def _probes(values: int, seed: int) -> NDArray[np.intp]:
    """Row i: the bins empty bin i looks at first, in order, to borrow a value."""
    keys = np.array(derived(seed, b"probes", values * PROBES), np.uint64)
    probes = (keys % np.uint64(values)).astype(np.intp).reshape(values, PROBES)
    probes.setflags(write=False)
    return probes


@functools.lru_cache(maxsize=8)
def _first_probes(values: int, seed: int) -> NDArray[np.intp]:
    """The first ``_FIRST`` columns of :func:`_probes`, contiguous."""
    first = np.ascontiguousarray(_probes(values, seed)[:, :_FIRST])
    first.setflags(write=False)
    return first


@functools.lru_cache(maxsize=8)
def _backwards(values: int, seed: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """:func:`_rotation` reversed: the bin at each position, and each bin's position."""
    order, position = _rotation(values, seed)
    backwards = np.ascontiguousarray(order[::-1])
    backwards_position = (values - 1) - position
    backwards.setflags(write=False)
    backwards_position.setflags(write=False)
    return backwards, backwards_position


@functools.lru_cache(maxsize=8)
def _block_tables(
    values: int, seed: int
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """For each flat index ``document * values + bin`` of a block of :func:`sketch_rows`: the
    bin, the row's first flat index, and the flat index of the bin's place in the cyclic order
    reversed; and for each such place, the flat index of its bin (lookups, not divisions)."""
    backwards, backwards_position = _backwards(values, seed)
    bins = np.tile(np.arange(values), _BLOCK)
    rows = np.repeat(np.arange(_BLOCK) * values, values)
    at = rows + backwards_position[bins]
    placed = rows + backwards[bins]
    for table in (bins, rows, at, placed):
        table.setflags(write=False)
    return bins, rows, at, placed


@functools.lru_cache(maxsize=8)
def _probed_by(
    values: int, seed: int
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """The probes naming each bin: entries ``starts[b]`` to ``starts[b + 1]`` of the empty
    bins and the probes (the rows and columns of :func:`_probes`) whose bin is ``b``."""
    probed = _probes(values, seed).ravel()
    naming = np.argsort(probed, kind="stable")
    starts = np.searchsorted(probed[naming], np.arange(values + 1))
    empty_bin, probe = np.divmod(naming, PROBES)
    for table in (empty_bin, probe, starts):
        table.setflags(write=False)
    return empty_bin, probe, starts


@functools.lru_cache(maxsize=8)
def _rotation(values: int, seed: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The fixed cyclic order of the bins that an empty bin borrows along (position to bin),
    and each bin's position in it."""
    keys = np.array(derived(seed, b"rotation", values), np.uint64)
    order = np.argsort(keys, kind="stable")
    position = np.empty(values, np.intp)
    position[order] = np.arange(values)
    order.setflags(write=False)
    position.setflags(write=False)
    return order, position


def least_of(
    ordered: NDArray[np.uint64], values: int
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """Each bin's least hash (0 when empty) of sorted hashes, and which bins hold one."""
    bins = bins_of(ordered, values)
    first = np.ones(len(bins), bool)
    np.not_equal(bins[1:], bins[:-1], out=first[1:])
    held = bins[first]
    least = np.zeros(values, np.uint64)
    least[held] = ordered[first]
    nonempty = np.zeros(values, bool)
    nonempty[held] = True
    return least, nonempty


def _borrowed(
    least: NDArray[np.uint64], nonempty: NDArray[np.bool_], empty: NDArray[np.intp], seed: int
) -> tuple[NDArray[np.bool_], NDArray[np.uint64]]:
    """Which empty bins find a non-empty one along their own probes, and the value each
    borrows: the found bin's least hash mixed with the empty bin's number, so two bins that
    borrow from one bin of unlike values differ independently (their bits are not copies)."""
    probes = _probes(len(least), seed)
    first = _first_probes(len(least), seed).take(empty, axis=0)
    found = nonempty[first]
    column = found.argmax(axis=1)  # the first non-empty probe, or 0 when none is
    rows = np.arange(len(empty))
    hit = found[rows, column]
    picked = first[rows, column]
    missed = np.flatnonzero(~hit)
    if len(missed) and PROBES > _FIRST:  # a long text's bins: nearly all served by now
        rest = probes[empty[missed], _FIRST:]
        found = nonempty[rest]
        column = found.argmax(axis=1)
        rows = np.arange(len(missed))
        hit[missed] = found[rows, column]
        picked[missed] = rest[rows, column]
    values = fmix64(least[picked[hit]] ^ (empty[hit].astype(np.uint64) * _GOLDEN))
    return hit, values


def sketch(ordered: NDArray[np.uint64], values: int, bits: int, seed: int) -> NDArray[np.uint8]:
    """The b-bit one-permutation sketch of one document's sorted, distinct mixed hashes.

    A bin keeps the low ``bits`` bits of its value (two bins agree with probability ``J + (1 -
    J) 2**-b``); densified as the module says, so the estimate's error stays that of as many
    independent bins, ``sqrt((1 - J**2) / values)`` for one bit, on texts of fewer shingles
    than bins too. Packed most significant bit first, as PostgreSQL's ``bit(values * bits)``
    reads it.
    """
    least, nonempty = least_of(ordered, values)
    filled = least.copy()
    empty = np.flatnonzero(~nonempty)
    if len(empty):
        hit, borrowed = _borrowed(least, nonempty, empty, seed)
        filled[empty[hit]] = borrowed
        rest = empty[~hit]
        if len(rest):
            order, position = _rotation(values, seed)
            full = np.flatnonzero(nonempty[order])
            at = position[rest]
            source = full[np.searchsorted(full, at) % len(full)]
            distance = ((source - at) % values).astype(np.uint64)
            filled[rest] = fmix64(least[order[source]] + distance * _GOLDEN)
    low = (filled & np.uint64((1 << bits) - 1)).astype(np.uint8)
    if bits == 1:
        return np.packbits(low)
    shifts = np.arange(bits - 1, -1, -1, dtype=np.uint8)
    return np.packbits(((low[:, None] >> shifts) & 1).astype(np.uint8).ravel())


def sketch_rows(
    least: NDArray[np.uint64], nonempty: NDArray[np.bool_], seed: int
) -> NDArray[np.uint8]:
    """:func:`sketch` with one bit a value of many documents, each with a non-empty bin,
    from their (documents x values) bins' least hashes and which bins hold one.

    Suited to short texts, whose bins are mostly empty: the probes are followed backwards,
    from each non-empty bin to the probes naming it, and the cyclic order walked once over
    a block of documents for the bins left.
    """
    count, values = least.shape
    result = np.empty((count, -(-values // 8)), np.uint8)
    for start in range(0, count, _BLOCK):
        block = slice(start, start + _BLOCK)
        result[block] = _sketch_block(least[block], nonempty[block], seed)
    return result


_BLOCK = 32
"""Documents :func:`sketch_rows` computes together: their arrays stay in cache (38 against
98 µs a short text with 1,792 bins in blocks of 256, measured on one core)."""


def _sketch_block(
    least: NDArray[np.uint64], nonempty: NDArray[np.bool_], seed: int
) -> NDArray[np.uint8]:
    count, values = least.shape
    filled = least.ravel().copy()
    # Probes: (empty bin, probe) pairs naming a non-empty bin; the first probe wins.
    documents, bins = np.nonzero(nonempty)
    naming_bin, naming_probe, starts = _probed_by(values, seed)
    counts = starts[bins + 1] - starts[bins]
    entry = np.arange(counts.sum()) + np.repeat(starts[bins] - (np.cumsum(counts) - counts), counts)
    cell = np.repeat(documents * values, counts) + naming_bin[entry]
    open_ = ~nonempty.ravel()[cell]
    first = np.full(count * values, PROBES, np.intp)
    np.minimum.at(first, cell[open_], naming_probe[entry[open_]])
    won = np.flatnonzero(first < PROBES)  # document * values + empty bin
    bin_of, row_of, backwards_at, backwards_bin = _block_tables(values, seed)
    won_bin = bin_of[won]
    lender = _probes(values, seed)[won_bin, first[won]]
    lent = filled[won - won_bin + lender]
    filled[won] = fmix64(lent ^ (won_bin.astype(np.uint64) * _GOLDEN))  # as _borrowed mixes
    # Rotation for the rest: along the cyclic order reversed, each document's row holds at
    # each position the last non-empty position at or before it (an empty bin's source);
    # before the row's first, the row's last (wrapping round).
    left = ~nonempty.ravel()
    left[won] = False
    rest = np.flatnonzero(left)
    if len(rest):
        _, backwards_position = _backwards(values, seed)
        index = np.full(count * values, -1, np.intp)
        held = documents * values + backwards_position[bins]
        index[held] = held
        np.maximum.accumulate(index, out=index)
        base = row_of[rest]
        at = backwards_at[rest]
        source = index[at]
        wrapped = np.flatnonzero(source < base)
        source[wrapped] = index[base[wrapped] + values - 1]
        distance = at - source
        distance[wrapped] += values
        lent = filled[backwards_bin[source]]
        filled[rest] = fmix64(lent + distance.view(np.uint64) * _GOLDEN)
    bits = (filled & _ONE).astype(np.uint8)
    return np.packbits(bits.reshape(count, values), axis=1)
