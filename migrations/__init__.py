"""simindex's own migrations, installed as ``simindex.migrations``; ``simindex.migrate`` runs them.

Revision ids count up (``0001``, ``0002``, ...). A new revision, from a checkout::

    from alembic import command
    from simindex.db.schema import alembic_config
    command.revision(alembic_config(), "what it does", rev_id="0002")

(with ``alembic_config(connection=...)`` and ``autogenerate=True`` to compare the database
with ``simindex.db.catalog``).
"""
