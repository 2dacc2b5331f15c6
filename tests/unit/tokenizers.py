"""Tokenizers registered by name in tests and golden vectors (never change what they return:
golden vectors pin the fingerprints made from their tokens). Importing this module registers
them, so a spawned build worker that unpickles one registers them too."""

from __future__ import annotations

from collections.abc import Iterator

from simindex.fingerprint import register_tokenizer

NOT_CALLABLE = 42


def words(text: str) -> list[str]:
    """Whitespace-separated words, lowercased, keeping every punctuation mark."""
    return text.lower().split()


def lazy_words(text: str) -> Iterator[str]:
    """The same tokens as :func:`words`, from a generator."""
    yield from words(text)


def not_tokens(text: str) -> str:
    """A mistake: a string, not an iterable of tokens."""
    return text


def numbers(text: str) -> list[object]:
    """A mistake: tokens that are not str."""
    return [len(word) for word in text.split()]


register_tokenizer("test-words", words)
register_tokenizer("test-lazy-words", lazy_words)
register_tokenizer("test-not-tokens", not_tokens)
register_tokenizer("test-numbers", numbers)  # type: ignore[arg-type]  # the mistake it is
