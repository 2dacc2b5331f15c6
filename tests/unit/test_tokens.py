from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core.spec import IndexSpec, MinHash, resolve
from simindex.core.text import Shingling
from simindex.core.tokens import find_tokenizer, load_tokenizer, strip_markup
from simindex.errors import TokenizerError
from simindex.fingerprint import register_tokenizer
from tests.unit.tokenizers import NOT_CALLABLE, lazy_words, words


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


def test_a_tokenizer_by_registered_name() -> None:
    shingling = Shingling(size=1, tokenizer="test-words")
    assert shingling.tokens("Hello, World!") == ["hello,", "world!"]
    lazy = Shingling(size=1, tokenizer="test-lazy-words")
    assert lazy.hashes("Hello, World!").tolist() == shingling.hashes("Hello, World!").tolist()
    assert shingling.hashes(" ").tolist() == []


def test_a_tokenizer_sees_the_text_after_markup_is_stripped() -> None:
    shingling = Shingling(size=1, tokenizer="test-words", strip_markup=True)
    assert shingling.tokens("<p>A&amp;B</p>") == ["a&b"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no-such-tokenizer", "no tokenizer named 'no-such-tokenizer' is registered"),
        ("test-not-tokens", "returned a str"),
        ("test-numbers", "returned a int token"),
    ],
)
def test_a_tokenizer_that_cannot_work_says_why(name: str, message: str) -> None:
    shingling = Shingling(tokenizer=name)  # the name is only looked up when used
    with pytest.raises(TokenizerError, match=message):
        shingling.hashes("some text")


def test_a_name_from_the_database_is_never_imported() -> None:
    """A stored spec naming an import path (finding 3: ``builtins:eval`` ran row texts as
    Python) is refused as a name; a registered-looking name that is not registered is an
    error, and nothing is imported either way."""
    stored = IndexSpec.from_json(resolve(MinHash(shingling=Shingling(tokenizer="x"))).to_json())
    data = json.loads(stored.to_json())
    data["shingling"]["tokenizer"] = "builtins:eval"
    with pytest.raises(ValueError, match="registered in this process"):
        IndexSpec.from_json(json.dumps(data))
    data["shingling"]["tokenizer"] = "os.path"  # a module's name: still only a name
    spec = IndexSpec.from_json(json.dumps(data))
    before = set(sys.modules)
    with pytest.raises(TokenizerError, match=r"no tokenizer named 'os\.path' is registered"):
        spec.features(["__import__('os').system('false')"])
    assert set(sys.modules) == before


def test_the_spec_records_the_registered_version_and_holds_to_it() -> None:
    register_tokenizer("test-versioned", words, version="2")
    spec = resolve(MinHash(shingling=Shingling(tokenizer="test-versioned"))).check_tokenizer()
    assert spec.method.shingling.tokenizer_version == "2"
    stored = json.loads(spec.to_json())["shingling"]
    assert (stored["tokenizer"], stored["tokenizer_version"]) == ("test-versioned", "2")
    assert IndexSpec.from_json(spec.to_json()).method.shingling == spec.method.shingling
    older = Shingling(tokenizer="test-versioned", tokenizer_version="1")
    with pytest.raises(TokenizerError, match=r"made with version '1' .* registered version '2'"):
        older.hashes("some text")
    with pytest.raises(TokenizerError, match="made with version '1'"):
        resolve(MinHash(shingling=older)).check_tokenizer()


def test_a_name_is_registered_once() -> None:
    register_tokenizer("test-words", words)  # the same again: nothing changes
    with pytest.raises(ValueError, match="already registered"):
        register_tokenizer("test-words", lazy_words)
    with pytest.raises(ValueError, match="already registered"):
        register_tokenizer("test-words", words, version="9")
    with pytest.raises(TypeError, match="must be callable"):
        register_tokenizer("test-callable", NOT_CALLABLE)  # type: ignore[arg-type]
    assert load_tokenizer("test-words") is words


def test_an_installed_packages_entry_point_is_a_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "shipped_tokens.py"
    package.write_text(
        "def tokens(text):\n    return text.split('/')\n\ntokens.simindex_version = '3'\n"
    )
    info = tmp_path / "shipped_tokens-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shipped-tokens\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[simindex.tokenizers]\nslashes = shipped_tokens:tokens\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    shingling = Shingling(size=1, tokenizer="slashes", tokenizer_version="3")
    assert shingling.tokens("a/b/c") == ["a", "b", "c"]
    assert find_tokenizer("slashes")[1] == "3"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"punctuation": "remove"}, "punctuation must be 'split' or 'delete'"),
        ({"numbers": "none"}, "numbers must be 'keep' or 'drop'"),
        ({"unit": "char", "punctuation": "delete"}, "word shingles only"),
        ({"unit": "char", "numbers": "drop"}, "word shingles only"),
        ({"tokenizer": "myapp.text:tokens"}, "registered in this process"),
        ({"tokenizer": "has space"}, "registered in this process"),
        ({"tokenizer_version": "1"}, "tokenizer_version needs a tokenizer"),
        ({"tokenizer": "words", "tokenizer_version": ""}, "1 to 63 printable"),
        ({"tokenizer": "words", "unit": "char"}, "needs unit 'word'"),
        ({"tokenizer": "words", "identifiers": True}, "a tokenizer makes its own"),
    ],
)
def test_bad_token_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Shingling(**options)  # type: ignore[arg-type]  # deliberately wrong values


def test_token_option_types_are_checked() -> None:
    with pytest.raises(TypeError, match="identifiers must be a bool"):
        Shingling(identifiers=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="registered name"):
        Shingling(tokenizer=len)  # type: ignore[arg-type]
