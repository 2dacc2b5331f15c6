"""What a text is before it is tokenised: markup stripped, or a user's own tokenizer (layer 1).

Both are part of an index's spec (:class:`simindex.core.text.Shingling`), so a worker and a build
reproduce them: markup stripping is a fixed rule pinned by golden vectors, and a user tokenizer
is named by a name and a version the process registered (:func:`register_tokenizer`, or the
``simindex.tokenizers`` entry-point group of an installed package). A spec is data from the
database: its tokenizer name is only ever looked up among those, never imported.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points

from simindex.errors import TokenizerError

Tokenizer = Callable[[str], Iterable[str]]

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# Code and styles are not text a reader sees; their content goes with their tags.
_HIDDEN = re.compile(r"<(script|style)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.DOTALL | re.IGNORECASE)
_CDATA = re.compile(r"<!\[CDATA\[(.*?)(?:\]\]>|\Z)", re.DOTALL)
# A tag starts with a letter, "/", "!" or "?" right after "<": "a < b" in prose is not a tag.
_TAG = re.compile(r"<[A-Za-z/!?][^<>]*>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,62}")
ENTRY_POINT_GROUP = "simindex.tokenizers"
"""The entry-point group whose names are tokenizers (the object: a callable; its version: its
``simindex_version`` attribute, else ``"1"``)."""

_registry: dict[str, tuple[Tokenizer, str]] = {}
_registry_lock = threading.Lock()


def strip_markup(text: str) -> str:
    """The text a reader of an HTML or XML document sees: comments, scripts and styles
    removed, every tag replaced by a space, character references decoded."""
    if "<" in text:
        text = _COMMENT.sub(" ", text)
        text = _HIDDEN.sub(" ", text)
        text = _CDATA.sub(r" \1 ", text)
        text = _TAG.sub(" ", text)
    return html.unescape(text) if "&" in text else text


def check_tokenizer_name(name: str) -> str:
    """``name`` if it can name a tokenizer (letters, digits, ``_ . -``, at most 63); else
    ValueError. A name is looked up, never imported: an import path is not a name."""
    if not isinstance(name, str):
        raise TypeError(f"tokenizer must be a registered name (str), got {type(name).__name__}")
    if not _NAME.fullmatch(name):
        raise ValueError(
            "tokenizer must be the name of a tokenizer registered in this process "
            "(simindex.fingerprint.register_tokenizer('myapp-words', function, version='1'): "
            f"letters, digits, '_', '.' and '-', at most 63), got {name!r}"
        )
    return name


def check_tokenizer_version(version: str) -> str:
    """``version`` if it is a non-empty str of at most 63 characters; else ValueError."""
    if not isinstance(version, str):
        raise TypeError(f"tokenizer version must be a str, got {type(version).__name__}")
    if not 0 < len(version) <= 63 or not version.isprintable():
        raise ValueError(f"tokenizer version must be 1 to 63 printable characters, got {version!r}")
    return version


def register_tokenizer(name: str, function: Tokenizer, *, version: str = "1") -> None:
    """Make ``function`` (text -> iterable of str tokens) the tokenizer ``name`` in this process.

    Register it wherever fingerprints are computed (the app, ``simindex build`` and ``simindex
    sync``), or ship it in a package's ``simindex.tokenizers`` entry-point group, which every
    process finds by itself. An index records the name and ``version``: change the version when
    the tokens change, and a process with another version refuses to fingerprint for the
    index (rebuild it after creating it again). Registering a name again with the same
    function and version changes nothing; with another one it raises ValueError.
    """
    check_tokenizer_name(name)
    check_tokenizer_version(version)
    if not callable(function):
        raise TypeError(f"a tokenizer must be callable, got {type(function).__name__}")
    with _registry_lock:
        existing = _registry.get(name)
        if existing is not None and existing != (function, version):
            raise ValueError(
                f"a tokenizer named {name!r} is already registered (version {existing[1]!r})"
            )
        _registry[name] = (function, version)


def registered_tokenizers() -> dict[str, tuple[Tokenizer, str]]:
    """The tokenizers :func:`register_tokenizer` registered (entry points not included): what
    a build hands its worker processes."""
    with _registry_lock:
        return dict(_registry)


def install_tokenizers(tokenizers: Mapping[str, tuple[Tokenizer, str]]) -> None:
    """Register each of ``tokenizers`` (a build's worker process, from its parent)."""
    for name, (function, version) in tokenizers.items():
        register_tokenizer(name, function, version=version)


def find_tokenizer(name: str) -> tuple[Tokenizer, str]:
    """The tokenizer registered as ``name`` and its version; :class:`TokenizerError` when no
    tokenizer of that name is registered in this process (nothing is imported by name)."""
    found = _registry.get(name)  # one dict read: no lock on every text
    if found is not None:
        return found
    check_tokenizer_name(name)
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            function = entry.load()
        except Exception as exc:  # anything the installed package raises as it loads
            raise TokenizerError(
                f"the tokenizer {name!r} of the {ENTRY_POINT_GROUP!r} entry points "
                f"({entry.value}) does not load: {type(exc).__name__}: {exc}"
            ) from exc
        if not callable(function):
            raise TokenizerError(
                f"the tokenizer {name!r} ({entry.value}) is a {type(function).__name__}, "
                "not callable"
            )
        version = str(getattr(function, "simindex_version", "1"))
        with _registry_lock:
            return _registry.setdefault(name, (function, version))
    raise TokenizerError(
        f"no tokenizer named {name!r} is registered in this process: call "
        f"simindex.fingerprint.register_tokenizer({name!r}, function, version=...) before "
        f"fingerprints are computed (the app, `simindex build`, `simindex sync`), or install a "
        f"package that names it in the {ENTRY_POINT_GROUP!r} entry-point group"
    )


def load_tokenizer(name: str, version: str | None = None) -> Tokenizer:
    """The tokenizer registered as ``name``, checked to be of ``version`` if one is given."""
    function, registered = find_tokenizer(name)
    if version is not None and registered != version:
        raise TokenizerError(
            f"the index was made with version {version!r} of the tokenizer {name!r}; this "
            f"process registered version {registered!r}, whose tokens may differ (register "
            "the index's version, or create the index again and build it)"
        )
    return function


def user_tokens(name: str, version: str | None, text: str) -> list[str]:
    """The tokens the registered tokenizer ``name`` gives for ``text``, empty ones left out."""
    tokens = load_tokenizer(name, version)(text)
    if isinstance(tokens, str | bytes):
        raise TokenizerError(
            f"the tokenizer {name!r} returned a {type(tokens).__name__}; it must return an "
            "iterable of str tokens"
        )
    result = list(tokens)
    for token in result:
        if not isinstance(token, str):
            raise TokenizerError(
                f"the tokenizer {name!r} returned a {type(token).__name__} token; tokens must "
                "be str"
            )
    return [token for token in result if token]
