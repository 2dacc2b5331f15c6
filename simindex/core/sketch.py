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
:func:`sketch` serves one text; :func:`sketch_rows` many at once from their non-empty bins'
least hashes, with the same bits (``tests/unit/test_minhash_batch.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

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
    document: NDArray[np.intp],
    bins: NDArray[np.intp],
    least: NDArray[np.uint64],
    count: int,
    values: int,
    seed: int,
) -> NDArray[np.uint8]:
    """:func:`sketch` with one bit a value of ``count`` documents, each with a non-empty bin,
    from their non-empty bins only: each one's document, bin and least hash, in the order of
    document and bin.

    Suited to short texts, whose bins are mostly empty. Every bin first takes what the
    cyclic order would lend it, made for a block of documents in a few passes over its bins
    (each run of bins between two non-empty ones along the order borrows from one bin, at a
    distance growing by one); the probes are followed backwards, from each non-empty bin to
    the probes naming it, for the bins a probe serves instead; then one pass mixes them all.
    """
    result = np.empty((count, -(-values // 8)), np.uint8)
    tables = _tables(values, seed)
    size = min(count, _BLOCK) * values
    work = (np.empty(size, np.uint64), np.empty(size, np.uint64), np.empty(size, np.uint32))
    bounds = np.searchsorted(document, np.arange(0, count + _BLOCK, _BLOCK)).tolist()
    for block, start in enumerate(range(0, count, _BLOCK)):
        held = slice(bounds[block], bounds[block + 1])
        stop = min(start + _BLOCK, count)
        result[start:stop] = _sketch_block(
            document[held] - start, bins[held], least[held], stop - start, tables, work
        )
    return result


_BLOCK = 32
"""Documents :func:`sketch_rows` computes together: their arrays stay in cache."""


@dataclass(frozen=True, slots=True)
class _Tables:
    """What :func:`sketch_rows` looks up, for one ``(values, seed)``."""

    naming_bin: NDArray[np.intp]
    naming_probe: NDArray[np.uint32]
    """:func:`_probed_by`, the probes' numbers shifted above a place in a block's ``least``."""
    naming_starts: NDArray[np.intp]
    position: NDArray[np.intp]
    """Each bin's position along the cyclic order reversed."""
    steps: NDArray[np.uint64]
    """``position * golden``: the distance term of a position's rotated value."""
    mixed_cells: NDArray[np.uint64]
    """``bin * golden`` of each flat index ``document * values + bin`` of a block: the term a
    probe's borrowed value is mixed with."""


_PLACE_BITS = 24
"""Bits of a place in a block's ``least`` (a block has fewer non-empty bins than 2**24)."""
_PLACE = np.uint32((1 << _PLACE_BITS) - 1)
_UNNAMED = np.uint32(0xFFFFFFFF)
"""A bin no probe of a non-empty bin names (above every probe number)."""


@functools.lru_cache(maxsize=8)
def _tables(values: int, seed: int) -> _Tables:
    naming_bin, naming_probe, starts = _probed_by(values, seed)
    _, position = _backwards(values, seed)
    mixed = np.arange(values, dtype=np.uint64) * _GOLDEN
    tables = _Tables(
        naming_bin,
        naming_probe.astype(np.uint32) << np.uint32(_PLACE_BITS),
        starts,
        position,
        np.arange(values, dtype=np.uint64) * _GOLDEN,
        np.tile(mixed, _BLOCK),
    )
    for table in (tables.naming_probe, tables.steps, tables.mixed_cells):
        table.setflags(write=False)
    return tables


def _sketch_block(
    document: NDArray[np.intp],
    bins: NDArray[np.intp],
    least: NDArray[np.uint64],
    count: int,
    tables: _Tables,
    work: tuple[NDArray[np.uint64], NDArray[np.uint64], NDArray[np.uint32]],
) -> NDArray[np.uint8]:
    values = len(tables.position)
    size = count * values
    filled, spare, first = work[0][:size], work[1][:size], work[2][:size]
    # Rotation, along the cyclic order reversed: position q of a document whose last
    # non-empty position at or before it is p (before its first, its last one, a row
    # earlier) takes fmix64(least of p's bin + (q - p) * golden), as sketch() does; a
    # non-empty bin's own position gives its least hash back (distance 0).
    at = document * values + tables.position[bins]
    order = np.argsort(at)
    at, lent = at[order], least[order]
    held = len(at)
    firsts = np.searchsorted(document[order], np.arange(count))
    lasts = np.append(firsts[1:], held) - 1
    runs = held + count
    row_runs = firsts + np.arange(count)
    held_runs = np.ones(runs, bool)
    held_runs[row_runs] = False
    run_start = np.empty(runs, np.intp)
    run_start[row_runs] = np.arange(0, size, values)
    run_start[held_runs] = at
    base = np.empty(runs, np.uint64)  # the run's lender's value less its start times golden
    own = (at - document[order] * values).astype(np.uint64)
    base[held_runs] = lent - own * _GOLDEN
    base[row_runs] = lent[lasts] - (own[lasts] - np.uint64(values)) * _GOLDEN
    rotated = np.repeat(base, np.diff(run_start, append=size)).reshape(count, values)
    rotated += tables.steps
    np.take(rotated, tables.position, axis=1, out=filled.reshape(count, values))
    # Probes, followed backwards: the entries naming each non-empty bin, and for each bin so
    # named its first such probe (the probes of a non-empty bin too: its value is put back),
    # as the least probe number shifted above the naming bin's place in ``least``.
    starts = tables.naming_starts[bins]
    named = tables.naming_starts[bins + 1] - starts
    ends = np.cumsum(named)
    entry = np.arange(ends[-1]) + np.repeat(starts - (ends - named), named)
    cell = np.repeat(document * values, named) + tables.naming_bin[entry]
    first.fill(_UNNAMED)
    places = np.repeat(np.arange(len(bins), dtype=np.uint32), named)
    np.minimum.at(first, cell, tables.naming_probe[entry] | places)
    won = np.flatnonzero(first < _UNNAMED)  # document * values + bin
    borrowed = least[first[won] & _PLACE]
    borrowed ^= tables.mixed_cells[won]  # as _borrowed mixes: the borrowing bin's number
    filled[won] = borrowed
    _fmix64(filled, spare)
    filled[document * values + bins] = least
    filled &= _ONE
    return np.packbits(filled.astype(np.uint8).reshape(count, values), axis=1)


def _fmix64(values: NDArray[np.uint64], spare: NDArray[np.uint64]) -> None:
    """:func:`~simindex.core.text.fmix64` in place, its shifts into ``spare`` (no
    temporaries: a block's arrays stay where they are in cache)."""
    for multiplier in (_FMIX_1, _FMIX_2):
        np.right_shift(values, _SHIFT_33, out=spare)
        values ^= spare
        values *= multiplier
    np.right_shift(values, _SHIFT_33, out=spare)
    values ^= spare


_SHIFT_33 = np.uint64(33)
_FMIX_1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
