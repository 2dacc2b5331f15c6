"""No password is printed: the secrets a DSN carries, and text with them replaced."""

from __future__ import annotations

import json
import re
import urllib.parse
from contextlib import suppress

_PASSWORDS = (
    re.compile(r"password\s*=\s*'((?:[^'\\]|\\.)*)'?"),  # key='value'
    re.compile(r"password\s*=\s*([^\s'&][^\s&]*)"),  # key=value, ?password=value&
    re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:([^/?#@]*)@"),  # scheme://user:secret@
)
_REDACTED = "***"


def secrets_in(dsn: str) -> list[str]:
    """The password(s) a DSN carries (parsed, or found by pattern when it does not parse)."""
    found = {match.group(1) for pattern in _PASSWORDS for match in pattern.finditer(dsn)}
    # The drivers parse it too, imported only now: an error line with no DSN imports neither.
    from psycopg.conninfo import conninfo_to_dict
    from sqlalchemy.engine import make_url

    with suppress(Exception):
        found.add(conninfo_to_dict(dsn).get("password") or "")
    with suppress(Exception):
        found.add(make_url(dsn).password or "")
    decoded = {urllib.parse.unquote(secret) for secret in found}
    escaped = {json.dumps(secret)[1:-1] for secret in found | decoded}
    return sorted(filter(None, found | decoded | escaped), key=len, reverse=True)


def redact(text: str, dsn: str | None) -> str:
    """``text`` with every password ``dsn`` carries replaced by ``***`` (also as JSON writes
    it): for messages and logs that quote what a driver said."""
    if not dsn:
        return text
    for secret in secrets_in(dsn):
        text = text.replace(secret, _REDACTED)
    return text
