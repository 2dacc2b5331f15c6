"""XXH3-64 of many byte strings at once, in numpy: the unit hashes of a whole batch of texts.

The same values as ``xxhash.xxh3_64_intdigest(item, seed)`` (a property test holds it to the
library on every length class), computed with a few dozen array operations for all items
instead of one Python call each. The strings are ranges ``[start, start + length)`` of one
buffer. Lengths 1 to 128 follow Collet's short-input paths of XXH3 (xxhash 0.8, ``xxhash.h``:
``XXH3_len_1to3_64b``, ``4to8``, ``9to16``, ``17to128``); anything else (empty, or longer
than 128 bytes, rare for a token) is handed to the library one item at a time.
"""

from __future__ import annotations

import numpy as np
import xxhash
from numpy.typing import NDArray

_U64 = np.dtype(np.uint64)
# The first 128 bytes of XXH3's default secret (kSecret), all that inputs up to 128 bytes read.
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
)
_PRIME64_1 = np.uint64(0x9E3779B185EBCA87)
_PRIME64_2 = np.uint64(0xC2B2AE3D27D4EB4F)
_PRIME64_3 = np.uint64(0x165667B19E3779F9)
_PRIME_MX1 = np.uint64(0x165667919E3779F9)
_PRIME_MX2 = np.uint64(0x9FB21C651E98DF25)
_LOW32 = np.uint64(0xFFFFFFFF)
MAX_VECTORISED = 128
"""Longest string hashed by array operations; longer ones go to the library one by one."""
# The path of each length: 0 the library (empty), 1 to 4 the vectorised ones, 5 the library.
_PATH_OF_LENGTH = np.searchsorted(
    np.array([1, 4, 9, 17, MAX_VECTORISED + 1]), np.arange(MAX_VECTORISED + 2), "right"
).astype(np.int8)
_BLOCK = 32768  # strings per step: the temporaries stay in the L2 cache


def _secret64(offset: int) -> int:
    return int.from_bytes(_SECRET[offset : offset + 8], "little")


def _secret32(offset: int) -> int:
    return int.from_bytes(_SECRET[offset : offset + 4], "little")


def _u(value: int) -> np.uint64:
    return np.uint64(value % (1 << 64))


def _words(buffer: NDArray[np.uint8]) -> NDArray[np.uint64]:
    """Every little-endian 8-byte word starting at each byte of ``buffer`` (which ends in 8
    bytes of padding), as a strided view: no copy."""
    view: NDArray[np.uint64] = np.ndarray((len(buffer) - 7,), np.dtype("<u8"), buffer.data, 0, (1,))
    return view


def _mul128_fold64(left: NDArray[np.uint64], right: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The low and high halves of the 128-bit product, XORed (XXH3_mul128_fold64)."""
    thirty_two = np.uint64(32)
    left_low, left_high = left & _LOW32, left >> thirty_two
    right_low, right_high = right & _LOW32, right >> thirty_two
    low_low = left_low * right_low
    high_low = left_high * right_low
    cross = (low_low >> thirty_two) + (high_low & _LOW32) + left_low * right_high
    upper = (high_low >> thirty_two) + (cross >> thirty_two) + left_high * right_high
    lower = (cross << thirty_two) | (low_low & _LOW32)
    folded: NDArray[np.uint64] = lower ^ upper
    return folded


def _avalanche(h: NDArray[np.uint64]) -> NDArray[np.uint64]:
    h ^= h >> np.uint64(37)
    h *= _PRIME_MX1
    h ^= h >> np.uint64(32)
    return h


Seed = int | NDArray[np.uint64]
"""One seed for every string, or one each (kept a Python int when one: no array of it)."""


def _plus(constant: int, seed: Seed) -> np.uint64 | NDArray[np.uint64]:
    """``constant + seed`` modulo 2**64."""
    return _u(constant + seed) if isinstance(seed, int) else _u(constant) + seed


def _minus(constant: int, seed: Seed) -> np.uint64 | NDArray[np.uint64]:
    """``constant - seed`` modulo 2**64."""
    return _u(constant - seed) if isinstance(seed, int) else _u(constant) - seed


def _byte_at(word: NDArray[np.uint64], index: NDArray[np.int64]) -> NDArray[np.uint64]:
    """Byte ``index`` (0 to 7) of each little-endian word."""
    shifted: NDArray[np.uint64] = word >> (index << 3).astype(np.uint64)
    return shifted & np.uint64(0xFF)


def _len_1to3(
    words: NDArray[np.uint64],
    word: NDArray[np.uint64],
    starts: NDArray[np.int64],
    lengths: NDArray[np.int64],
    seed: Seed,
) -> NDArray[np.uint64]:
    combined = (word & np.uint64(0xFF)) << np.uint64(16)
    combined |= _byte_at(word, lengths >> 1) << np.uint64(24)
    combined |= _byte_at(word, lengths - 1)
    combined |= lengths.astype(np.uint64) << np.uint64(8)
    h: NDArray[np.uint64] = combined ^ _plus(_secret32(0) ^ _secret32(4), seed)
    h ^= h >> np.uint64(33)
    h *= _PRIME64_2
    h ^= h >> np.uint64(29)
    h *= _PRIME64_3
    h ^= h >> np.uint64(32)
    return h


def _len_4to8(
    words: NDArray[np.uint64],
    word: NDArray[np.uint64],
    starts: NDArray[np.int64],
    lengths: NDArray[np.int64],
    seed: Seed,
) -> NDArray[np.uint64]:
    if isinstance(seed, int):
        seed ^= int.from_bytes((seed & 0xFFFFFFFF).to_bytes(4, "little"), "big") << 32
    else:
        swapped = (seed & _LOW32).astype(np.uint32).byteswap().astype(np.uint64)
        seed = seed ^ (swapped << np.uint64(32))
    last = (word >> ((lengths - 4) << 3).astype(np.uint64)) & _LOW32
    h: NDArray[np.uint64] = (word << np.uint64(32)) + last
    h ^= _minus(_secret64(8) ^ _secret64(16), seed)
    h ^= ((h << np.uint64(49)) | (h >> np.uint64(15))) ^ (
        (h << np.uint64(24)) | (h >> np.uint64(40))
    )
    h *= _PRIME_MX2
    h ^= (h >> np.uint64(35)) + lengths.astype(np.uint64)
    h *= _PRIME_MX2
    h ^= h >> np.uint64(28)
    return h


def _len_9to16(
    words: NDArray[np.uint64],
    word: NDArray[np.uint64],
    starts: NDArray[np.int64],
    lengths: NDArray[np.int64],
    seed: Seed,
) -> NDArray[np.uint64]:
    low = word ^ _plus(_secret64(24) ^ _secret64(32), seed)
    high = words[starts + lengths - 8] ^ _minus(_secret64(40) ^ _secret64(48), seed)
    swapped = low.byteswap()
    acc = lengths.astype(np.uint64) + swapped + high + _mul128_fold64(low, high)
    return _avalanche(acc)


def _mix16(
    words: NDArray[np.uint64], at: NDArray[np.int64], secret: int, seed: Seed
) -> NDArray[np.uint64]:
    return _mul128_fold64(
        words[at] ^ _plus(_secret64(secret), seed),
        words[at + 8] ^ _minus(_secret64(secret + 8), seed),
    )


def _len_17to128(
    words: NDArray[np.uint64],
    word: NDArray[np.uint64],
    starts: NDArray[np.int64],
    lengths: NDArray[np.int64],
    seed: Seed,
) -> NDArray[np.uint64]:
    acc = lengths.astype(np.uint64) * _PRIME64_1
    ends = starts + lengths
    acc += _mix16(words, starts, 0, seed) + _mix16(words, ends - 16, 16, seed)
    # Each further pair of 16-byte blocks only for the strings long enough to have it.
    for above, secret in ((32, 32), (64, 64), (96, 96)):
        longer = np.flatnonzero(lengths > above)
        if not len(longer):
            break
        first = starts[longer] + secret // 2
        second = ends[longer] - secret // 2 - 16
        seeds = seed if isinstance(seed, int) else seed[longer]
        acc[longer] += _mix16(words, first, secret, seeds) + _mix16(
            words, second, secret + 16, seeds
        )
    return _avalanche(acc)


def xxh3_64_ranges(
    buffer: bytes,
    starts: NDArray[np.int64],
    lengths: NDArray[np.int64],
    seed: Seed = 0,
) -> NDArray[np.uint64]:
    """``xxh3_64_intdigest(buffer[s : s + n], seed)`` for each ``s, n`` of ``starts, lengths``
    (and of ``seed``, when it is an array: one seed each)."""
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    result = np.empty(len(starts), _U64)
    words = _words(np.frombuffer(buffer + bytes(8), np.uint8))
    each = np.broadcast_to(np.asarray(seed, np.uint64), starts.shape)
    for first in range(0, len(starts), _BLOCK):
        block = slice(first, first + _BLOCK)
        seeds = seed if isinstance(seed, int) else each[block]
        result[block] = _hash_block(buffer, words, starts[block], lengths[block], seeds)
    return result


def _hash_block(
    buffer: bytes,
    words: NDArray[np.uint64],
    starts: NDArray[np.int64],
    lengths: NDArray[np.int64],
    seed: Seed,
) -> NDArray[np.uint64]:
    result = np.empty(len(starts), _U64)
    paths = _PATH_OF_LENGTH[np.minimum(lengths, MAX_VECTORISED + 1)]
    first_words = words[starts]  # the first 8 bytes: all that strings up to 8 bytes read
    for number, path in enumerate(_PATHS, start=1):
        where = np.flatnonzero(paths == number)
        if len(where):
            seeds = seed if isinstance(seed, int) else seed[where]
            result[where] = path(words, first_words[where], starts[where], lengths[where], seeds)
    for i in np.flatnonzero((paths == 0) | (paths == len(_PATHS) + 1)).tolist():
        start = int(starts[i])
        item = buffer[start : start + int(lengths[i])]
        result[i] = xxhash.xxh3_64_intdigest(item, seed if isinstance(seed, int) else int(seed[i]))
    return result


_PATHS = (_len_1to3, _len_4to8, _len_9to16, _len_17to128)
