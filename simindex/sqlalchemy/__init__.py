"""simindex for SQLAlchemy apps.

* :mod:`~simindex.sqlalchemy.session`: a tracked ORM session indexes its own writes before
  its commit (:func:`track`).
* :mod:`~simindex.sqlalchemy.query`: an index's neighbours as a table-valued selectable that
  joins the app's own models (:func:`near`, :func:`near_key`, :func:`similar`,
  :func:`similar_key`).
"""

from __future__ import annotations

from simindex.sqlalchemy.query import KeyType, QueryBind, near, near_key, similar, similar_key
from simindex.sqlalchemy.session import Tracked, index_changes, is_tracked, track, untrack

__all__ = [
    "KeyType",
    "QueryBind",
    "Tracked",
    "index_changes",
    "is_tracked",
    "near",
    "near_key",
    "similar",
    "similar_key",
    "track",
    "untrack",
]
