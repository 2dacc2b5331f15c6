"""The checks of the arguments every face takes alike (the facade, the CLI, SQLAlchemy):
each raises TypeError for a value of the wrong type and ValueError for one out of range, with
a message that names the argument, what it takes and what it got. One place, so a limit or a
threshold means the same thing however it is given."""

from __future__ import annotations

from typing import overload


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(name: str, value: object, *, low: int, high: int | None = None) -> int:
    """``value`` if it is an int from ``low`` to ``high`` (no upper bound when None)."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    assert isinstance(value, int)
    if high is not None and not low <= value <= high:
        raise ValueError(f"{name} must be from {low:,} to {high:,}, got {value}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return value


def positive(name: str, value: object) -> int:
    """``value`` if it is an int of at least 1; ValueError otherwise, naming it."""
    if not _is_int(value) or value < 1:  # type: ignore[operator]
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    assert isinstance(value, int)
    return value


def limit(value: int | None) -> int | None:
    """A query's ``limit``: None (every row) or a positive int."""
    if value is None:
        return None
    if not _is_int(value):
        raise TypeError(f"limit must be an int or None, got {type(value).__name__}")
    return integer("limit", value, low=1)


@overload
def text_bytes(value: int) -> int: ...
@overload
def text_bytes(value: int | None) -> int | None: ...
def text_bytes(value: int | None) -> int | None:
    """``max_text_bytes``: a non-negative int, or None (no limit)."""
    if value is not None and (not _is_int(value) or value < 0):
        raise ValueError(f"max_text_bytes must be a non-negative int or None, got {value!r}")
    return value


@overload
def distance(value: int | None, index_max: int) -> int: ...
@overload
def distance(value: int | None, index_max: int | None) -> int | None: ...
def distance(value: int | None, index_max: int | None) -> int | None:
    """``max_distance``, or the index's (``index_max``) when None; never more than the
    index's. ``index_max`` None: not known here (the SQL function checks it)."""
    if value is None:
        return index_max
    if not _is_int(value):
        raise TypeError(f"max_distance must be an int, got {type(value).__name__}")
    if index_max is None:
        return integer("max_distance", value, low=0)
    if not 0 <= value <= index_max:
        raise ValueError(f"max_distance must be from 0 to the index's {index_max}, got {value}")
    return value


@overload
def threshold(value: float | None, default: float) -> float: ...
@overload
def threshold(value: float | None, default: float | None) -> float | None: ...
def threshold(value: float | None, default: float | None) -> float | None:
    """A Jaccard ``threshold`` from 0 to 1, or ``default`` when None."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"threshold must be a number, got {type(value).__name__}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"threshold must be from 0 to 1, got {value}")
    return float(value)
