"""simindex for SQLAlchemy apps.

* :mod:`~simindex.sqlalchemy.session`: a tracked ORM session indexes its own writes before
  its commit (:func:`track`).
"""

from __future__ import annotations

from simindex.sqlalchemy.session import Tracked, index_changes, is_tracked, track, untrack

__all__ = ["Tracked", "index_changes", "is_tracked", "track", "untrack"]
