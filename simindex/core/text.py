"""Text to feature hashes: normalise, tokenise, shingle and hash (layer 1, no I/O).

Every fingerprint simindex stores is a function of these feature hashes, so their values are
pinned by golden-vector tests. The rules:

* **normalise**: Unicode NFKC, casefold, whitespace runs collapsed to one space, trimmed.
* **tokenise**: a token is a run of letters, digits and combining marks; every CJK ideograph,
  Kana and Hangul character is a token of its own (those scripts do not separate words with
  spaces). Underscore and punctuation separate tokens.
* **unit hash**: xxh3-64 of the unit's UTF-8 bytes with the shingling seed. A unit is a token
  (word shingles) or a character of the normalised text (character shingles; each distinct
  character is hashed once per document).
* **shingle hash**: for n = 1 the unit hash; for n > 1 the unit hashes ``u0..u(n-1)`` are
  combined as ``fmix64(((u0 * K + u1) * K + u2) ...)`` modulo 2**64, vectorised with numpy, so
  no Python work is done per shingle. A text with fewer than n units (but at least one) gives
  one shingle of all its units, so short texts are still fingerprinted.
* **NULL, empty, or no units**: no features. Fingerprint functions return ``None`` for it and an
  index does not store it (it is counted as skipped).

Options change the tokens, never the hashing: ``strip_markup`` (HTML/XML tags, comments,
scripts and character references, :func:`simindex.core.tokens.strip_markup`, before anything
else), ``punctuation="delete"`` (punctuation is removed instead of separating tokens:
``don't`` is ``dont``), ``identifiers`` (the underscore joins a token, as in code:
``row_id``), ``numbers="drop"`` (tokens of digits only are left out), or a user ``tokenizer``
registered by name, whose tokens are used as they come (no normalisation). With every option
at its default the rules above apply unchanged, so existing indexes keep their values.

Term frequency weighting is implicit: a shingle that occurs three times is three features.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Literal, NamedTuple, cast

import numpy as np
import xxhash
from numpy.typing import NDArray

from simindex.core.bits import MAX_UNSIGNED
from simindex.core.tokens import (
    check_tokenizer_name,
    check_tokenizer_version,
    strip_markup,
    user_tokens,
)

Unit = Literal["word", "char"]
Punctuation = Literal["split", "delete"]
Numbers = Literal["keep", "drop"]
UINT64 = np.dtype(np.uint64)
EMPTY = np.zeros(0, dtype=UINT64)

# Ideographs, Kana, Hangul and their compatibility / extension blocks: one token per character.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3105-\u312f\u3130-\u318f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)


def _mark_ranges() -> str:
    """A regex class body of every combining mark (category M), which ``\\w`` leaves out."""
    ranges: list[tuple[int, int]] = []
    start = previous = -2
    for code in itertools.chain(range(0x20000), range(0xE0000, sys.maxunicode + 1)):
        if unicodedata.category(chr(code)).startswith("M"):
            if code != previous + 1:
                if start >= 0:
                    ranges.append((start, previous))
                start = code
            previous = code
    ranges.append((start, previous))
    return "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in ranges)


class _Patterns(NamedTuple):
    token: re.Pattern[str]
    # The option rules: the underscore joins tokens (identifiers); punctuation deleted is
    # every character that is neither part of a token nor a space.
    identifier_token: re.Pattern[str]
    punctuation: re.Pattern[str]
    punctuation_not_underscore: re.Pattern[str]


@functools.cache
def _patterns() -> _Patterns:
    """The token regexes, made on first use: listing the marks walks every code point (a
    tenth of a second), which importing the package (``simindex --help``) should not pay."""
    marks = _mark_ranges()
    return _Patterns(
        re.compile(f"[{_CJK}]|(?:[^\\W_{_CJK}]|[{marks}])+"),
        re.compile(f"[{_CJK}]|(?:[^\\W{_CJK}]|[{marks}])+"),
        re.compile(f"[^\\w\\s{marks}]|_"),
        re.compile(f"[^\\w\\s{marks}]"),
    )


_CJK_CHARACTER = re.compile(f"[{_CJK}]")
# Kana voiced sound marks follow the regex's own precedence only through the regex itself.
_KANA_MARKS = ("\u3099", "\u309a")
# Fast paths giving exactly the tokens of _TOKEN (a property test holds them to it):
# pure ASCII text is a byte translation and a split, lowercasing on the way when not
# normalised yet (NFKC is the identity on ASCII, and casefold is lower()); other text splits
# its UTF-8 bytes on ASCII separators and translates only the pieces holding non-ASCII.
_ASCII_SEPARATORS = bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))
_ASCII_LOWER_SEPARATORS = _ASCII_SEPARATORS.translate(
    bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
)
_UTF8_SEPARATORS = bytes(c if c >= 0x80 else _ASCII_SEPARATORS[c] for c in range(256))
# The same fast path for the token options, indexed by ``identifiers``: what the punctuation
# regexes delete from ASCII text, and the lowercasing separator table with "_" a letter or not.
_ASCII_DELETED = tuple(
    bytes(
        c
        for c in range(128)
        if not (chr(c).isalnum() or chr(c).isspace() or (keep and chr(c) == "_"))
    )
    for keep in (False, True)
)
_ASCII_OPTION_SEPARATORS = (
    _ASCII_LOWER_SEPARATORS,
    bytes(95 if i == 95 else c for i, c in enumerate(_ASCII_LOWER_SEPARATORS)),
)


class _TokenCharacters(dict[int, int | str]):
    """A ``str.translate`` table, filled on first sight of each character: letters, digits and
    marks stay, a CJK character gets spaces around it, anything else becomes a space."""

    def __missing__(self, code: int) -> int | str:
        character = chr(code)
        if _CJK_CHARACTER.match(character):
            value: int | str = f" {character} "
        elif (character.isalnum() and character != "_") or unicodedata.category(
            character
        ).startswith("M"):
            value = code
        else:
            value = " "
        self[code] = value
        return value


_TOKEN_CHARACTERS = _TokenCharacters()

# Odd multiplier for combining unit hashes (the 64-bit golden ratio).
_COMBINE = np.uint64(0x9E3779B97F4A7C15)


def normalize(text: str) -> str:
    """NFKC, casefold, collapse whitespace: the form every other step works on."""
    if not isinstance(text, str):
        raise TypeError(f"expected str text, got {type(text).__name__}")
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def tokenize(normalized: str) -> list[str]:
    """Tokens of an already normalised text (see the module docstring for the rule)."""
    if normalized.isascii():
        return normalized.encode("ascii").translate(_ASCII_SEPARATORS).decode("ascii").split()
    return _patterns().token.findall(normalized)


def _token_bytes(normalized: str) -> list[bytes]:
    """UTF-8 tokens of a normalised text, as :func:`tokenize` would give them."""
    if normalized.isascii():
        return normalized.encode("ascii").translate(_ASCII_SEPARATORS).split()
    if any(mark in normalized for mark in _KANA_MARKS):
        return [
            token.encode("utf-8", "surrogatepass")
            for token in _patterns().token.findall(normalized)
        ]
    data = normalized.encode("utf-8", "surrogatepass")
    if (len(data) - len(normalized)) * 64 > len(normalized):  # mostly non-ASCII: all at once
        return _translated(normalized)
    pieces = data.translate(_UTF8_SEPARATORS).split()
    tokens: list[bytes] = []
    last = 0
    for position in [i for i, piece in enumerate(pieces) if not piece.isascii()]:
        tokens += pieces[last:position]
        tokens += _translated(pieces[position].decode("utf-8", "surrogatepass"))
        last = position + 1
    tokens += pieces[last:]
    return tokens


def _translated(text: str) -> list[bytes]:
    return text.translate(_TOKEN_CHARACTERS).encode("utf-8", "surrogatepass").split()


def _word_tokens(text: str) -> list[bytes]:
    """Tokens of a raw text: normalise only as far as tokens can tell."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_LOWER_SEPARATORS).split()
    return _token_bytes(unicodedata.normalize("NFKC", text).casefold())


def fmix64(values: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """MurmurHash3's 64-bit finaliser, in place: a bijection that spreads every input bit."""
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xFF51AFD7ED558CCD)
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xC4CEB9FE1A85EC53)
    values ^= values >> np.uint64(33)
    return values


def hash_strings(items: Sequence[bytes] | Sequence[str], seed: int = 0) -> NDArray[np.uint64]:
    """xxh3-64 of each item (str is UTF-8 encoded): features a caller already has."""
    data: Sequence[bytes]
    if items and isinstance(items[0], str):
        data = [cast(str, item).encode("utf-8", "surrogatepass") for item in items]
    else:
        data = cast(Sequence[bytes], items)
    return np.fromiter(map(xxhash.xxh3_64_intdigest, data, repeat(seed)), UINT64, len(data))


def combine_ngrams(unit_hashes: NDArray[np.uint64], size: int) -> NDArray[np.uint64]:
    """Shingle hashes of every run of ``size`` consecutive units (see module docstring)."""
    count = len(unit_hashes)
    if size == 1 or count == 0:
        return unit_hashes
    size = min(size, count)
    windows = count - size + 1
    combined = unit_hashes[:windows].copy()
    for offset in range(1, size):
        combined *= _COMBINE
        combined += unit_hashes[offset : offset + windows]
    return fmix64(combined)


def _char_hashes(normalized: str, seed: int) -> NDArray[np.uint64]:
    """Unit hash of every character, hashing each distinct character once."""
    codes = np.frombuffer(normalized.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    distinct = sorted(set(normalized))
    keys = np.fromiter(map(ord, distinct), np.uint32, len(distinct))
    values = hash_strings(distinct, seed)
    return values[np.searchsorted(keys, codes)]


@dataclass(frozen=True, slots=True)
class Shingling:
    """How a text becomes features; part of every index spec, since it decides stored values.

    Parameters:
        unit: ``"word"`` for token n-grams, ``"char"`` for character n-grams.
        size: n, the number of units in a shingle.
        with_characters: word unit only: also add every character of every token as a feature
            (the "token similarity" mode, which makes misspellings land closer).
        seed: xxh3 seed of unit hashes.
        punctuation: ``"split"`` (punctuation separates tokens) or ``"delete"`` (it is removed,
            so ``e-mail`` and ``email`` are one token).
        identifiers: the underscore is part of a token (``row_id`` stays whole), for code.
        numbers: ``"keep"`` or ``"drop"`` the tokens made of digits only.
        strip_markup: read HTML or XML as its visible text (tags, comments, scripts and
            character references removed) before anything else.
        tokenizer: the name of a tokenizer registered in the process
            (:func:`simindex.fingerprint.register_tokenizer`, or the ``simindex.tokenizers``
            entry-point group): a function taking the text and returning its tokens (str),
            used instead of the built-in rules; it must be registered wherever fingerprints
            are computed (the app, build, sync).
        tokenizer_version: the version of that tokenizer the index is made with; None takes
            the registered one's when the index is created.
    """

    unit: Unit = "word"
    size: int = 3
    with_characters: bool = False
    seed: int = 0
    punctuation: Punctuation = "split"
    identifiers: bool = False
    numbers: Numbers = "keep"
    strip_markup: bool = False
    tokenizer: str | None = None
    tokenizer_version: str | None = None

    def __post_init__(self) -> None:
        if self.unit not in ("word", "char"):
            raise ValueError(f"unit must be 'word' or 'char', got {self.unit!r}")
        if (
            isinstance(self.size, bool)
            or not isinstance(self.size, int)
            or not 1 <= self.size <= 64
        ):
            raise ValueError(f"size must be an integer from 1 to 64, got {self.size!r}")
        if self.with_characters and self.unit != "word":
            raise ValueError("with_characters applies to word shingles only")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed must be an int, got {type(self.seed).__name__}")
        if not 0 <= self.seed <= MAX_UNSIGNED:
            raise ValueError(f"seed must be an unsigned 64-bit integer, got {self.seed}")
        self._check_token_options()

    def _check_token_options(self) -> None:
        if self.punctuation not in ("split", "delete"):
            raise ValueError(f"punctuation must be 'split' or 'delete', got {self.punctuation!r}")
        if self.numbers not in ("keep", "drop"):
            raise ValueError(f"numbers must be 'keep' or 'drop', got {self.numbers!r}")
        for name in ("identifiers", "strip_markup"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        token_rules = [
            name
            for name, value in (
                ("punctuation", self.punctuation != "split"),
                ("identifiers", self.identifiers),
                ("numbers", self.numbers != "keep"),
            )
            if value
        ]
        if self.tokenizer_version is not None:
            check_tokenizer_version(self.tokenizer_version)
            if self.tokenizer is None:
                raise ValueError("tokenizer_version needs a tokenizer")
        if self.tokenizer is not None:
            check_tokenizer_name(self.tokenizer)
            if self.unit != "word":
                raise ValueError("a tokenizer makes word shingles: it needs unit 'word'")
            if token_rules:
                raise ValueError(
                    f"{', '.join(token_rules)} change the built-in tokens; a tokenizer makes "
                    "its own"
                )
        elif token_rules and self.unit != "word":
            raise ValueError(f"{', '.join(token_rules)} apply to word shingles only")

    @property
    def plain(self) -> bool:
        """Whether every token option is at its default (the rules of the module docstring)."""
        return (
            self.punctuation == "split"
            and not self.identifiers
            and self.numbers == "keep"
            and not self.strip_markup
            and self.tokenizer is None
        )

    def tokens(self, text: str | None) -> list[str]:
        """The word units of ``text`` under these options (for inspection and tests)."""
        if text is None:
            return []
        if not isinstance(text, str):
            raise TypeError(f"expected str text, got {type(text).__name__}")
        if self.plain:
            return tokenize(normalize(text))
        if self.strip_markup:
            text = strip_markup(text)
        if self.tokenizer is not None:
            return user_tokens(self.tokenizer, self.tokenizer_version, text)
        if text.isascii():
            return [token.decode("ascii") for token in self._ascii_tokens(text)]
        return self._unicode_tokens(text)

    def _unicode_tokens(self, text: str) -> list[str]:
        """The option rules, by regex: the definition the ASCII fast path is held to."""
        folded = unicodedata.normalize("NFKC", text).casefold()
        patterns = _patterns()
        if self.punctuation == "delete":
            deleted = (
                patterns.punctuation_not_underscore if self.identifiers else patterns.punctuation
            )
            folded = deleted.sub("", folded)
        found = (patterns.identifier_token if self.identifiers else patterns.token).findall(folded)
        if self.numbers == "drop":
            return [token for token in found if not token.isnumeric()]
        return found

    def _ascii_tokens(self, text: str) -> list[bytes]:
        """:meth:`_unicode_tokens` of ASCII text, by byte translation (NFKC is the identity
        on ASCII, and casefold is lower())."""
        data = text.encode("ascii")
        if self.punctuation == "delete":
            data = data.translate(None, _ASCII_DELETED[self.identifiers])
        found = data.translate(_ASCII_OPTION_SEPARATORS[self.identifiers]).split()
        if self.numbers == "drop":
            return [token for token in found if not token.isdigit()]
        return found

    def _option_tokens(self, text: str) -> list[bytes]:
        """UTF-8 tokens of a text under non-default options (see :meth:`tokens`)."""
        if self.strip_markup:
            text = strip_markup(text)
        if self.tokenizer is None and text.isascii():
            return self._ascii_tokens(text)
        if self.tokenizer is None:
            found = self._unicode_tokens(text)
        else:
            found = user_tokens(self.tokenizer, self.tokenizer_version, text)
        return [token.encode("utf-8", "surrogatepass") for token in found]

    def _characters(self, text: str) -> str:
        """The normalised text character shingles are cut from."""
        return normalize(strip_markup(text) if self.strip_markup else text)

    def hashes(self, text: str | None) -> NDArray[np.uint64]:
        """One feature hash per shingle occurrence; empty for NULL or empty text."""
        if text is None:
            return EMPTY
        if not isinstance(text, str):
            raise TypeError(f"expected str text, got {type(text).__name__}")
        if self.unit == "char":
            return combine_ngrams(_char_hashes(self._characters(text), self.seed), self.size)
        tokens = _word_tokens(text) if self.plain else self._option_tokens(text)
        unit_hashes = hash_strings(tokens, self.seed)
        shingles = combine_ngrams(unit_hashes, self.size)
        if not self.with_characters or not tokens:
            return shingles
        characters = _char_hashes(b"".join(tokens).decode("utf-8", "surrogatepass"), self.seed)
        return np.concatenate([shingles, characters])

    def shingles(self, text: str | None) -> list[str]:
        """The shingles as text (word shingles joined by one space), in the order of :meth:`hashes`.

        For weight look-ups and inspection; slower than :meth:`hashes`.
        """
        if text is None:
            return []
        units = list(self._characters(text)) if self.unit == "char" else self.tokens(text)
        if not units:
            return []
        size = min(self.size, len(units))
        joiner = "" if self.unit == "char" else " "
        grams = [joiner.join(units[i : i + size]) for i in range(len(units) - size + 1)]
        if self.with_characters:
            grams.extend(char for token in units for char in token)
        return grams

    def weighted_hashes(
        self, text: str | None, weights: Mapping[str, float], default_weight: float = 1.0
    ) -> tuple[NDArray[np.uint64], NDArray[np.float64]]:
        """Feature hashes with a caller's weight per shingle text (e.g. IDF), else the default."""
        hashes = self.hashes(text)
        grams = self.shingles(text)
        if len(grams) != len(hashes):
            raise AssertionError("shingles and hashes disagree")  # a bug, never user input
        lookup = weights.get
        values = np.fromiter((lookup(g, default_weight) for g in grams), np.float64, len(grams))
        return hashes, values
