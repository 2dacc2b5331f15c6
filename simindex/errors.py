"""The exceptions simindex raises: one base class, a few meaningful subclasses."""

from __future__ import annotations


class SimindexError(Exception):
    """simindex could not do what was asked."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class IncompatibleSignaturesError(SimindexError, ValueError):
    """Two signatures were made with different parameters and cannot be compared."""


class DatabaseUnavailableError(SimindexError, RuntimeError):
    """No PostgreSQL server could be reached or started."""
