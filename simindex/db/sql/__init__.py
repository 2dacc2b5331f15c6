"""The ``.sql`` files every statement comes from (loaded by :mod:`simindex.db.statements`)."""
