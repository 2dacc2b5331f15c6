from __future__ import annotations

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core import text
from simindex.core.text import Shingling, combine_ngrams, hash_strings, normalize, tokenize


def test_normalize_folds_width_case_and_whitespace() -> None:
    assert normalize("  Ｈｅｌｌｏ\u00a0\tWORLD\n\nStraße  ") == "hello world strasse"


def test_normalize_rejects_non_text() -> None:
    with pytest.raises(TypeError, match="expected str text, got bytes"):
        normalize(b"bytes")  # type: ignore[arg-type]  # the wrong type is the point


def test_tokenize_splits_cjk_kana_hangul_per_character() -> None:
    tokens = tokenize(normalize("東京タワー 한국어 naïve café x_y"))
    assert tokens == ["東", "京", "タ", "ワ", "ー", "한", "국", "어", "naïve", "café", "x", "y"]


def test_tokenize_keeps_combining_marks_inside_words() -> None:
    assert tokenize(normalize("हिन्दी भाषा")) == ["हिन्दी", "भाषा"]


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_ascii_fast_path_matches_the_unicode_rule(raw: str) -> None:
    normalized = normalize(raw)
    assert tokenize(normalized) == text._patterns().token.findall(normalized)


unicode_text = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.characters(min_codepoint=0x300, max_codepoint=0x36F),  # combining marks
        st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),  # kana (and voiced marks)
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40),  # ideographs
        st.characters(min_codepoint=0xAC00, max_codepoint=0xAC40),  # hangul
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
        st.sampled_from(" _-.,\t\n\u00a0\u3000é©’"),
    ),
    max_size=120,
)


@given(unicode_text)
@settings(max_examples=500)
def test_fast_tokens_match_the_unicode_rule(raw: str) -> None:
    expected = [token.encode("utf-8", "surrogatepass") for token in tokenize(normalize(raw))]
    assert text._token_bytes(normalize(raw)) == expected
    assert text._word_tokens(raw) == expected


@given(st.text(max_size=200))
def test_normalize_is_idempotent(raw: str) -> None:
    assert normalize(normalize(raw)) == normalize(raw)


@given(st.text(max_size=300), st.sampled_from(["word", "char"]), st.integers(1, 5), st.booleans())
@settings(max_examples=200)
def test_hashes_and_shingles_agree(raw: str, unit: str, size: int, chars: bool) -> None:
    shingling = Shingling(unit, size, with_characters=chars and unit == "word")  # type: ignore[arg-type]
    hashes = shingling.hashes(raw)
    grams = shingling.shingles(raw)
    assert hashes.dtype == np.uint64
    assert len(hashes) == len(grams)
    # Equal shingle texts always get equal hashes (n-grams and added characters apart).
    ngrams = len(Shingling(unit, size).shingles(raw))  # type: ignore[arg-type]
    seen: dict[str, int] = {}
    for gram, value in zip(grams[:ngrams], hashes[:ngrams].tolist(), strict=True):
        assert seen.setdefault(gram, value) == value


def test_unigrams_are_plain_xxh3_of_tokens() -> None:
    hashes = Shingling(size=1, seed=7).hashes("Alpha beta, ALPHA")
    expected = [xxhash.xxh3_64_intdigest(t, 7) for t in (b"alpha", b"beta", b"alpha")]
    assert hashes.tolist() == expected


def test_ngram_hash_depends_on_order_and_seed() -> None:
    forward = Shingling().hashes("one two three")
    backward = Shingling().hashes("three two one")
    reseeded = Shingling(seed=1).hashes("one two three")
    assert len(forward) == 1
    assert forward[0] != backward[0]
    assert forward[0] != reseeded[0]


def test_short_text_is_one_shingle_of_all_units() -> None:
    assert Shingling(size=5).shingles("just three words") == ["just three words"]
    assert len(Shingling(size=5).hashes("just three words")) == 1


def test_combine_matches_a_python_reference() -> None:
    units = np.array([3, 2**64 - 1, 12345678901234567, 2**63], dtype=np.uint64)
    mask = 2**64 - 1

    def fmix(value: int) -> int:
        value ^= value >> 33
        value = (value * 0xFF51AFD7ED558CCD) & mask
        value ^= value >> 33
        value = (value * 0xC4CEB9FE1A85EC53) & mask
        return value ^ (value >> 33)

    expected = []
    for start in range(len(units) - 1):
        accumulated = int(units[start])
        accumulated = (accumulated * 0x9E3779B97F4A7C15 + int(units[start + 1])) & mask
        expected.append(fmix(accumulated))
    assert combine_ngrams(units, 2).tolist() == expected


@pytest.mark.parametrize("empty", [None, "", "   \n\t ", "!!! ... ---", "_"])
def test_no_units_means_no_features(empty: str | None) -> None:
    assert len(Shingling().hashes(empty)) == 0
    assert Shingling().shingles(empty) == []


def test_char_shingles_include_spaces_and_surrogates() -> None:
    shingling = Shingling("char", 2)
    assert shingling.shingles("ab c") == ["ab", "b ", " c"]
    odd = "a\x00b\ud800c"  # a NUL and a lone surrogate, as decoded binary can contain
    assert len(shingling.hashes(odd)) == len(odd) - 1


def test_with_characters_adds_each_letter_of_each_token() -> None:
    shingling = Shingling(size=2, with_characters=True)
    assert shingling.shingles("ab, cd") == ["ab cd", "a", "b", "c", "d"]
    plain = Shingling(size=2).hashes("ab, cd")
    letters = hash_strings(["a", "b", "c", "d"])
    assert shingling.hashes("ab, cd").tolist() == plain.tolist() + letters.tolist()


def test_weighted_hashes_look_up_shingle_text() -> None:
    hashes, weights = Shingling(size=1).weighted_hashes("rare common common", {"rare": 5.0}, 0.5)
    assert len(hashes) == 3
    assert weights.tolist() == [5.0, 0.5, 0.5]


def test_huge_text_is_linear_and_complete() -> None:
    words = [f"w{i % 5000}" for i in range(1_000_000)]
    assert len(Shingling().hashes(" ".join(words))) == len(words) - 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"unit": "line"}, "unit must be 'word' or 'char'"),
        ({"size": 0}, "size must be an integer from 1 to 64"),
        ({"size": True}, "size must be an integer"),
        ({"unit": "char", "with_characters": True}, "word shingles only"),
        ({"seed": -1}, "unsigned 64-bit"),
        ({"seed": 2**64}, "unsigned 64-bit"),
    ],
)
def test_bad_shingling_parameters_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Shingling(**kwargs)  # type: ignore[arg-type]  # deliberately wrong values
