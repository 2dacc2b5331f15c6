from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core.text import Shingling
from simindex.core.tokens import load_tokenizer, strip_markup
from simindex.errors import TokenizerError


def test_markup_is_read_as_its_visible_text() -> None:
    html = (
        "<html><head><style>p {color: red}</style><script>if (a < b) x();</script></head>"
        "<body><!-- hidden --><p class='x'>Fish &amp; chips</p><br/>a < b &lt; c"
        "<![CDATA[kept]]></body></html>"
    )
    assert strip_markup(html).split() == ["Fish", "&", "chips", "a", "<", "b", "<", "c", "kept"]


def test_unclosed_comments_and_scripts_end_the_text() -> None:
    assert strip_markup("seen <!-- never closed").split() == ["seen"]
    assert strip_markup("seen <SCRIPT>never closed").split() == ["seen"]


def test_plain_text_passes_unchanged() -> None:
    assert strip_markup("no markup here: 3 < 4 > 2") == "no markup here: 3 < 4 > 2"


@pytest.mark.parametrize(
    ("options", "tokens"),
    [
        ({}, ["don", "t", "re", "index", "row", "id", "e", "mail", "v2", "0", "3", "14"]),
        ({"punctuation": "delete"}, ["dont", "reindex", "rowid", "email", "v20", "314"]),
        (
            {"identifiers": True},
            ["don", "t", "re", "index", "row_id", "e", "mail", "v2", "0", "3", "14"],
        ),
        ({"numbers": "drop"}, ["don", "t", "re", "index", "row", "id", "e", "mail", "v2"]),
        (
            {"punctuation": "delete", "identifiers": True, "numbers": "drop"},
            ["dont", "reindex", "row_id", "email", "v20"],
        ),
    ],
)
def test_token_options(options: dict[str, object], tokens: list[str]) -> None:
    text = "Don't re-index ROW_ID e-mail (v2.0, 3.14%)"
    assert Shingling(**options).tokens(text) == tokens  # type: ignore[arg-type]


def test_numbers_are_any_numeric_script() -> None:
    assert Shingling(numbers="drop").tokens("٣ ½ 2nd 12 x") == ["2nd", "x"]


def test_delete_keeps_cjk_tokens_and_marks() -> None:
    shingling = Shingling(punctuation="delete")
    assert shingling.tokens("東京、タワー! naïve-café हिन्दी") == [
        "東", "京", "タ", "ワ", "ー", "naïvecafé", "हिन्दी",
    ]  # fmt: skip


no_markup = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_characters="<&"),
        st.sampled_from(" _-.,'\u3000é東"),
    ),
    max_size=120,
)


@given(no_markup)
@settings(max_examples=300)
def test_a_no_op_option_takes_the_option_path_to_the_same_values(raw: str) -> None:
    # strip_markup on a text without markup changes nothing, but takes the option path:
    # both paths must make the same tokens and the same hashes.
    plain, optioned = Shingling(), Shingling(strip_markup=True)
    assert not optioned.plain
    assert optioned.tokens(raw) == plain.tokens(raw)
    assert optioned.hashes(raw).tolist() == plain.hashes(raw).tolist()


@given(
    st.text(max_size=200),
    st.sampled_from(["split", "delete"]),
    st.booleans(),
    st.sampled_from(["keep", "drop"]),
    st.booleans(),
    st.integers(1, 4),
)
@settings(max_examples=200)
def test_hashes_and_shingles_agree_under_options(
    raw: str, punctuation: str, identifiers: bool, numbers: str, markup: bool, size: int
) -> None:
    shingling = Shingling(
        size=size,
        punctuation=punctuation,  # type: ignore[arg-type]
        identifiers=identifiers,
        numbers=numbers,  # type: ignore[arg-type]
        strip_markup=markup,
    )
    grams = shingling.shingles(raw)
    hashes = shingling.hashes(raw)
    assert len(grams) == len(hashes)
    seen: dict[str, int] = {}
    for gram, value in zip(grams, hashes.tolist(), strict=True):
        assert seen.setdefault(gram, value) == value


@given(
    st.text(alphabet=st.characters(max_codepoint=127), max_size=200),
    st.sampled_from(["split", "delete"]),
    st.booleans(),
    st.sampled_from(["keep", "drop"]),
)
@settings(max_examples=300)
def test_the_ascii_fast_path_follows_the_option_rules(
    raw: str, punctuation: str, identifiers: bool, numbers: str
) -> None:
    shingling = Shingling(
        punctuation=punctuation,  # type: ignore[arg-type]
        identifiers=identifiers,
        numbers=numbers,  # type: ignore[arg-type]
    )
    expected = shingling._unicode_tokens(raw)
    assert [token.decode() for token in shingling._ascii_tokens(raw)] == expected
    assert shingling.tokens(raw) == expected


def test_char_shingles_can_strip_markup() -> None:
    assert Shingling(unit="char", size=3, strip_markup=True).shingles("<b>abc</b>") == ["abc"]


def test_a_tokenizer_by_import_path() -> None:
    shingling = Shingling(size=1, tokenizer="tests.unit.tokenizers:words")
    assert shingling.tokens("Hello, World!") == ["hello,", "world!"]
    lazy = Shingling(size=1, tokenizer="tests.unit.tokenizers:lazy_words")
    assert lazy.hashes("Hello, World!").tolist() == shingling.hashes("Hello, World!").tolist()
    assert shingling.hashes(" ").tolist() == []


def test_a_tokenizer_sees_the_text_after_markup_is_stripped() -> None:
    shingling = Shingling(size=1, tokenizer="tests.unit.tokenizers:words", strip_markup=True)
    assert shingling.tokens("<p>A&amp;B</p>") == ["a&b"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_module_here:tokens", "No module named 'no_such_module_here'"),
        ("tests.unit.tokenizers:missing", "has no 'missing'"),
        ("tests.unit.tokenizers:NOT_CALLABLE", "is a int, not callable"),
        ("tests.unit.tokenizers:not_tokens", "returned a str"),
        ("tests.unit.tokenizers:numbers", "returned a int token"),
    ],
)
def test_a_tokenizer_that_cannot_work_says_why(path: str, message: str) -> None:
    shingling = Shingling(tokenizer=path)  # the path is only imported when used
    with pytest.raises(TokenizerError, match=message):
        shingling.hashes("some text")


def test_tokenizers_are_imported_once() -> None:
    assert load_tokenizer("tests.unit.tokenizers:words") is load_tokenizer(
        "tests.unit.tokenizers:words"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"punctuation": "remove"}, "punctuation must be 'split' or 'delete'"),
        ({"numbers": "none"}, "numbers must be 'keep' or 'drop'"),
        ({"unit": "char", "punctuation": "delete"}, "word shingles only"),
        ({"unit": "char", "numbers": "drop"}, "word shingles only"),
        ({"tokenizer": "just_a_name"}, "import path such as 'myapp.text:tokens'"),
        ({"tokenizer": "a.b:c", "unit": "char"}, "needs unit 'word'"),
        ({"tokenizer": "a.b:c", "identifiers": True}, "a tokenizer makes its own"),
    ],
)
def test_bad_token_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Shingling(**options)  # type: ignore[arg-type]  # deliberately wrong values


def test_token_option_types_are_checked() -> None:
    with pytest.raises(TypeError, match="identifiers must be a bool"):
        Shingling(identifiers=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="import path str"):
        Shingling(tokenizer=len)  # type: ignore[arg-type]
