"""What a text is before it is tokenised: markup stripped, or a user's own tokenizer (layer 1).

Both are part of an index's spec (:class:`simindex.core.text.Shingling`), so a worker and a build
reproduce them: markup stripping is a fixed rule pinned by golden vectors, and a user
tokenizer is named by its import path (``"myapp.text:tokens"``) and imported wherever
fingerprints are computed.
"""

from __future__ import annotations

import functools
import html
import importlib
import re
from collections.abc import Callable, Iterable

from simindex.errors import TokenizerError

Tokenizer = Callable[[str], Iterable[str]]

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# Code and styles are not text a reader sees; their content goes with their tags.
_HIDDEN = re.compile(r"<(script|style)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.DOTALL | re.IGNORECASE)
_CDATA = re.compile(r"<!\[CDATA\[(.*?)(?:\]\]>|\Z)", re.DOTALL)
# A tag starts with a letter, "/", "!" or "?" right after "<": "a < b" in prose is not a tag.
_TAG = re.compile(r"<[A-Za-z/!?][^<>]*>")
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def strip_markup(text: str) -> str:
    """The text a reader of an HTML or XML document sees: comments, scripts and styles
    removed, every tag replaced by a space, character references decoded."""
    if "<" in text:
        text = _COMMENT.sub(" ", text)
        text = _HIDDEN.sub(" ", text)
        text = _CDATA.sub(r" \1 ", text)
        text = _TAG.sub(" ", text)
    return html.unescape(text) if "&" in text else text


def check_import_path(path: str) -> str:
    """``path`` if it has the form ``package.module:function``; ValueError otherwise."""
    if not isinstance(path, str):
        raise TypeError(f"tokenizer must be an import path str, got {type(path).__name__}")
    if not _IMPORT_PATH.fullmatch(path):
        raise ValueError(
            f"tokenizer must be an import path such as 'myapp.text:tokens' (module, a colon, "
            f"then the function), got {path!r}"
        )
    return path


@functools.cache
def load_tokenizer(path: str) -> Tokenizer:
    """The callable ``path`` names, imported once per process; :class:`TokenizerError` with
    the reason when it cannot be."""
    module_name, _, attributes = check_import_path(path).partition(":")
    try:
        found: object = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or anything the module raises as it loads
        raise TokenizerError(
            f"cannot import the tokenizer {path!r}: {type(exc).__name__}: {exc} (it must be "
            "importable wherever fingerprints are computed: the app, `simindex build`, "
            "`simindex sync`)"
        ) from exc
    for attribute in attributes.split("."):
        try:
            found = getattr(found, attribute)
        except AttributeError as exc:
            raise TokenizerError(
                f"cannot import the tokenizer {path!r}: {module_name} has no {attributes!r}"
            ) from exc
    if not callable(found):
        raise TokenizerError(f"the tokenizer {path!r} is a {type(found).__name__}, not callable")
    return found  # checked callable above; its signature is the user's


def user_tokens(path: str, text: str) -> list[str]:
    """The tokens the user's tokenizer gives for ``text``, empty ones left out."""
    tokens = load_tokenizer(path)(text)
    if isinstance(tokens, str | bytes):
        raise TokenizerError(
            f"the tokenizer {path!r} returned a {type(tokens).__name__}; it must return an "
            "iterable of str tokens"
        )
    result = list(tokens)
    for token in result:
        if not isinstance(token, str):
            raise TokenizerError(
                f"the tokenizer {path!r} returned a {type(token).__name__} token; tokens must "
                "be str"
            )
    return [token for token in result if token]
