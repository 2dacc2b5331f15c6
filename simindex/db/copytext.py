"""COPY's text format, built in bulk: one string per batch instead of one call per row.

``write_row`` costs microseconds per row; a build writes millions of rows (nine band rows per
MinHash document), so the stores format whole batches here and hand COPY one string.
"""

from __future__ import annotations

from collections.abc import Sequence

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def field(value: object) -> str:
    """One non-NULL value as a COPY text field (keys: integers, strings, UUIDs, ...)."""
    if isinstance(value, str):
        return value.translate(_ESCAPES)
    if isinstance(value, bool) or value is None:
        raise TypeError(f"cannot write {value!r} as a key")
    return str(value).translate(_ESCAPES)


def rows(columns: Sequence[Sequence[object]]) -> str:
    """Lines of tab-separated fields, one per row, from columns of equal length."""
    return "".join("\t".join(map(str, row)) + "\n" for row in zip(*columns, strict=True))
