"""The batch path of word shingles, and the vectorised XXH3 under it, held to the per-text path
and to the xxhash library (the values are stored in users' databases: they must not differ)."""

from __future__ import annotations

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core import shingle_batch
from simindex.core.shingle_batch import batchable, word_hashes
from simindex.core.spec import MinHash, SimHash, resolve
from simindex.core.text import Shingling
from simindex.core.xxh3 import MAX_VECTORISED, xxh3_64_ranges

seeds = st.one_of(
    st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1)
)


def library(items: list[bytes], seed: int) -> list[int]:
    return [xxhash.xxh3_64_intdigest(item, seed) for item in items]


def ranges(items: list[bytes]) -> tuple[bytes, np.ndarray, np.ndarray]:
    lengths = np.array([len(item) for item in items], np.int64)
    return b"".join(items), np.cumsum(lengths) - lengths, lengths


@pytest.mark.parametrize("seed", [0, 1, 0x9E3779B97F4A7C15, 2**64 - 1])
def test_every_length_class_equals_the_library(seed: int) -> None:
    generator = np.random.default_rng(seed % 2**32)
    items = [
        generator.integers(0, 256, length, dtype=np.uint8).tobytes()
        for length in [*range(0, 2 * MAX_VECTORISED + 20)] * 3
    ]
    buffer, starts, lengths = ranges(items)
    assert xxh3_64_ranges(buffer, starts, lengths, seed).tolist() == library(items, seed)


@settings(deadline=None)
@given(st.lists(st.binary(max_size=140), max_size=40), seeds)
def test_any_strings_equal_the_library(items: list[bytes], seed: int) -> None:
    buffer, starts, lengths = ranges(items)
    assert xxh3_64_ranges(buffer, starts, lengths, seed).tolist() == library(items, seed)


@settings(deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=140), seeds), max_size=40))
def test_a_seed_each_equals_the_library(items: list[tuple[bytes, int]]) -> None:
    """One seed per string (band keys: a band's number), on every path."""
    buffer, starts, lengths = ranges([item for item, _ in items])
    seeds = np.array([seed for _, seed in items], np.uint64)
    expected = [xxhash.xxh3_64_intdigest(item, seed) for item, seed in items]
    assert xxh3_64_ranges(buffer, starts, lengths, seeds).tolist() == expected


def test_ranges_may_overlap_and_come_in_any_order() -> None:
    buffer = bytes(range(200))
    starts = np.array([150, 0, 3, 3, 60])
    lengths = np.array([50, 200, 9, 17, 100])
    pairs = zip(starts.tolist(), lengths.tolist(), strict=True)
    expected = [xxhash.xxh3_64_intdigest(buffer[s : s + n], 7) for s, n in pairs]
    assert xxh3_64_ranges(buffer, starts, lengths, 7).tolist() == expected


def per_text(shingling: Shingling, texts: list[str | None]) -> list[list[int]]:
    return [shingling.hashes(text).tolist() for text in texts]


def batched(shingling: Shingling, texts: list[str | None]) -> list[list[int]]:
    return [row.tolist() for row in word_hashes(shingling, texts)]


unicode_text = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.characters(max_codepoint=127),
        st.characters(min_codepoint=0x300, max_codepoint=0x36F),  # combining marks
        st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),  # kana (and voiced marks)
        st.characters(min_codepoint=0xFF00, max_codepoint=0xFFEF),  # full and half width
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40),  # ideographs
        st.characters(min_codepoint=0xAC00, max_codepoint=0xAC40),  # hangul
        st.characters(min_codepoint=0x13A0, max_codepoint=0x13FF),  # cherokee (casefold)
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
        st.sampled_from(" _-.,\t\n\u00a0\u3000é©’ßİ\u0301\u309b\uff9e"),
    ),
    max_size=120,
)
# Long ASCII with a few non-ASCII characters: the texts folded piece by piece.
mostly_ascii = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(max_codepoint=127), min_size=40, max_size=80),
        st.sampled_from(["e\u0301", "\u0301", "ß", "Ｗｉｄｅ", "İ", "ﬁ", "日本", "\u309b", "Ꭰ"]),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None)  # the first Kana text compiles the token regex
@given(
    st.lists(st.one_of(st.none(), unicode_text, mostly_ascii), max_size=8),
    st.integers(1, 5),
    seeds,
)
def test_batch_equals_one_text_at_a_time(texts: list[str | None], size: int, seed: int) -> None:
    shingling = Shingling(size=size, seed=seed)
    assert batched(shingling, texts) == per_text(shingling, texts)


def test_shingles_never_span_two_texts() -> None:
    texts: list[str | None] = ["a b", None, "c", "", "d e f g", "!!", "h i"]
    shingling = Shingling(size=3)
    assert batched(shingling, texts) == per_text(shingling, texts)
    assert [len(row) for row in batched(shingling, texts)] == [1, 0, 1, 0, 2, 0, 1]


def test_a_batch_larger_than_one_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shingle_batch, "_GROUP_CHARACTERS", 50)
    texts: list[str | None] = [
        f"text {i} " + "word " * (i % 7) + "Ünï" * (i % 3) for i in range(60)
    ]
    shingling = Shingling()
    assert batched(shingling, texts) == per_text(shingling, texts)


def test_only_plain_word_shingling_is_batched() -> None:
    assert batchable(Shingling())
    assert batchable(Shingling(size=5, seed=3))
    assert not batchable(Shingling(unit="char"))
    assert not batchable(Shingling(with_characters=True))
    assert not batchable(Shingling(punctuation="delete"))
    with pytest.raises(ValueError, match="plain word shingles"):
        word_hashes(Shingling(unit="char"), ["text"])


def test_a_text_that_is_not_text_is_refused() -> None:
    with pytest.raises(TypeError, match="expected str text, got bytes"):
        word_hashes(Shingling(), ["ok", b"bytes"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "method",
    [SimHash(), MinHash(), SimHash(shingling=Shingling(unit="char", size=4))],
)
def test_spec_features_are_the_per_text_hashes(method: SimHash | MinHash) -> None:
    spec = resolve(method)
    texts: list[str | None] = ["The quick brown fox", None, "Ünïcödé café, 日本語", "x"]
    expected = [method.shingling.hashes(text).tolist() for text in texts]
    assert [row.tolist() for row in spec.features(texts)] == expected
