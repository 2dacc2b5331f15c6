"""numpy ``int64`` arrays sent to PostgreSQL as binary ``bigint[]`` parameters.

The sync worker writes every fingerprint, permuted prefix, signature and band hash of a batch as
arrays. Letting psycopg dump a Python list of ints means a ``tolist()`` and then a look at every
element to choose its type; the binary array format is a fixed header and then, per element, a
length and 8 big-endian bytes, which numpy writes in one step.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import cast

import numpy as np
import psycopg
from numpy.typing import ArrayLike, NDArray
from psycopg.adapt import Dumper, PyFormat

from simindex.db.connection import PgConnection

_INT8_OID = 20
_INT8_ARRAY_OID = 1016
# The binary array header: dimensions, has-nulls flag, element type; then per dimension its
# length and lower bound.
_HEADER = struct.Struct("!iiIii")
_ELEMENTS = np.dtype([("length", ">i4"), ("value", ">i8")])


class BigintArray:
    """A one-dimensional ``bigint[]`` parameter; write ``%(name)b`` for it in the statement."""

    __slots__ = ("values",)

    def __init__(self, values: ArrayLike) -> None:
        self.values: NDArray[np.int64] = np.asarray(values, dtype=np.int64).reshape(-1)


class _BigintArrayDumper(Dumper):
    format = psycopg.pq.Format.BINARY
    oid = _INT8_ARRAY_OID

    def dump(self, obj: BigintArray) -> bytes:
        count = len(obj.values)
        if count == 0:  # PostgreSQL's own form of an empty array: no dimensions
            return struct.pack("!iiI", 0, 0, _INT8_OID)
        elements = np.empty(count, dtype=_ELEMENTS)
        elements["length"] = 8
        elements["value"] = obj.values
        return _HEADER.pack(1, 0, _INT8_OID, count, 1) + elements.tobytes()


def register(conn: PgConnection) -> None:
    """Teach ``conn`` to send :class:`BigintArray` (once per connection; cheap to repeat).

    Registering on the connection, not globally, covers connections an app opened before
    simindex was imported."""
    try:
        conn.adapters.get_dumper(BigintArray, PyFormat.BINARY)
    except psycopg.ProgrammingError:
        conn.adapters.register_dumper(BigintArray, _BigintArrayDumper)


def key_array(conn: PgConnection, keys: Sequence[object]) -> object:
    """``keys`` as an array parameter for ``conn``, cast to the key type in the statement.

    Integer keys (the common case, and the one psycopg dumps slowest: it checks every value to
    pick a type) go as a binary ``bigint[]``; strings (a sync batch's keys, taken in their
    text form) as one array literal of unknown type, which the statement's ``::key_type[]``
    reads with the key type's own input function (no cast: a cast from text could be the
    type owner's function), so any value PostgreSQL can print comes back as it was; anything
    else as a list for psycopg to adapt."""
    if keys and all(type(key) is str for key in keys):
        return array_literal(cast("Sequence[str]", keys))
    if keys and type(keys[0]) is int:
        try:
            values = np.fromiter(keys, dtype=np.int64, count=len(keys))
        except (OverflowError, TypeError, ValueError):
            return list(keys)
        register(conn)
        return BigintArray(values)
    return list(keys)


_ELEMENT_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"'})


def array_literal(values: Sequence[str]) -> str:
    """``values`` as a PostgreSQL array literal, every element quoted (so that ``NULL`` or
    ``{`` in a value is a value)."""
    return "{" + ",".join('"' + value.translate(_ELEMENT_ESCAPES) + '"' for value in values) + "}"
