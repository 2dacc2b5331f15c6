"""Rows written as they come, as CSV, JSON Lines or a table, to stdout or to a file.

For results that may run to millions of rows (all pairs, cluster members): nothing holds them
all. The header goes out with the first row, so an error before any row leaves stdout empty;
a file appears under its name only once complete.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TextIO

from simindex import _terminal as terminal
from simindex.cli._common import json_value
from simindex.errors import SimindexError

FORMATS = ("table", "csv", "jsonl")


def write_rows(
    form: str, stream: TextIO, headers: Sequence[str], rows: Iterable[Sequence[object]]
) -> None:
    """Write ``rows`` to ``stream`` in ``form`` (one of :data:`FORMATS`)."""
    if form == "table":
        for line in terminal.table_lines(headers, (_text_row(row) for row in rows)):
            stream.write(line + "\n")
        return
    rows = iter(rows)
    first = next(rows, None)
    if form == "csv":
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(headers)
        if first is not None:
            writer.writerows(_text_row(row) for row in itertools.chain([first], rows))
    elif form == "jsonl":
        if first is not None:
            for row in itertools.chain([first], rows):
                line = json.dumps(dict(zip(headers, row, strict=True)), default=json_value)
                stream.write(line + "\n")
    else:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {form!r}")


def _text_row(row: Sequence[object]) -> list[object]:
    """Booleans as PostgreSQL prints them (and COPY reads them back)."""
    return [("true" if value else "false") if isinstance(value, bool) else value for value in row]


@contextmanager
def output(path: str | None) -> Iterator[TextIO]:
    """stdout, or a new file written beside ``path`` and renamed to it when the block ends
    without an error (removed otherwise), so a reader never takes half a file for all of it."""
    if path is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115  # closed below, then renamed
            "w",
            encoding="utf-8",
            newline="",
            dir=os.path.dirname(os.path.abspath(path)),
            prefix=".simindex-",
            suffix=".tmp",
            delete=False,
        )
    except OSError as exc:
        raise SimindexError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with handle:
            yield handle  # type: ignore[misc]  # a wrapper of a TextIO, with its methods
        os.chmod(handle.name, 0o666 & ~_umask())  # as open() would have made it
        os.replace(handle.name, path)
    except OSError as exc:
        with suppress(OSError):
            os.unlink(handle.name)
        raise SimindexError(f"cannot write {path}: {exc.strerror}") from exc
    except BaseException:
        with suppress(OSError):
            os.unlink(handle.name)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
