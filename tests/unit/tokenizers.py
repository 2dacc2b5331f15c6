"""Tokenizers named by import path in tests and golden vectors (never change what they return:
golden vectors pin the fingerprints made from their tokens)."""

from __future__ import annotations

from collections.abc import Iterator

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
