"""How the CLI writes log records: one line each on stderr, as ``key=value`` text or as JSON.

The sync worker's records carry structured fields (``record.simindex``, see
:mod:`simindex.ops.sync_report`); a text line shows them as ``event key=value ...``, a JSON line
as one object with ``time``, ``level`` and ``event`` first. Other records become their message.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

from simindex.cli._common import PROG, json_value

FORMATS = ("text", "json")
_PLAIN = re.compile(r"[^\s\"=\\]+")


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``--log-format`` (``text`` or ``json``)."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {FORMATS}, got {log_format!r}")
    return JsonLines() if log_format == "json" else TextLines()


def _fields(record: logging.LogRecord) -> dict[str, Any] | None:
    found = getattr(record, "simindex", None)
    return found if isinstance(found, dict) else None


class TextLines(logging.Formatter):
    """``simindex: batch index=docs taken=2000 ...``; other records as ``simindex: message``."""

    def format(self, record: logging.LogRecord) -> str:
        found = _fields(record)
        if found is None:
            return f"{PROG}: {' '.join(record.getMessage().split())}"
        event = found.get("event", "message")
        pairs = " ".join(
            f"{name}={_value(value)}" for name, value in found.items() if name != "event"
        )
        return f"{PROG}: {event} {pairs}".rstrip()


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else json_value(value)
    if _PLAIN.fullmatch(text):
        return text
    return json.dumps(" ".join(text.split()), ensure_ascii=False)


class JsonLines(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, event, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        found = _fields(record) or {"event": "message", "message": record.getMessage()}
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            **found,
        }
        return json.dumps(line, ensure_ascii=False, default=json_value)
