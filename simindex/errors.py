"""The exceptions simindex raises: one base class, a few meaningful subclasses."""

from __future__ import annotations


class SimindexError(Exception):
    """simindex could not do what was asked."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class IncompatibleSignaturesError(SimindexError, ValueError):
    """Two signatures were made with different parameters and cannot be compared."""


class DatabaseUnavailableError(SimindexError, RuntimeError):
    """No PostgreSQL server could be reached or started."""


class TokenizerError(SimindexError, ValueError):
    """A tokenizer named by an index's spec cannot be imported, or did not return tokens."""


class SourceError(SimindexError, ValueError):
    """The source table, text column or key column cannot be indexed."""


class SourceChangedError(SourceError):
    """The source table changed while simindex was about to read it: try again."""


class IndexNotFoundError(SimindexError, LookupError):
    """No simindex index has that name."""


class IndexExistsError(SimindexError, ValueError):
    """An index of that name exists already."""


class IndexNotReadyError(SimindexError):
    """The index has not been built yet: run build() (or `simindex build`)."""


class SchemaNotMigratedError(SimindexError, LookupError):
    """simindex's schema is not installed in this database: run simindex.migrate(engine) (or
    `simindex migrate`) first."""

    @classmethod
    def of(cls, schema: str) -> SchemaNotMigratedError:
        """The error for simindex's schema ``schema``, saying what to run."""
        return cls(
            f"simindex's schema {schema!r} is not installed in this database: run "
            "simindex.migrate(engine) (or `simindex migrate`) first, or name the schema "
            "simindex was migrated into"
        )


class MissingRightError(SimindexError, PermissionError):
    """The role lacks a right simindex needs for this: an admin gives it with
    ``simindex grant ROLE --reader|--writer|--worker|--admin`` (``simindex.grant``)."""


class IndexBusyError(SimindexError, TimeoutError):
    """Another transaction held a lock simindex needs for longer than it waits (a reader's
    open transaction on an index's tables holds a build's swap off): see
    ``idle_in_transaction_session_timeout``."""


class IndexBrokenError(SimindexError):
    """The index's batches fail as a whole (its table, a column or a right gone): see
    ``stats``."""


class KeyNotIndexedError(SimindexError, LookupError):
    """That key is not in the index: no such row, its text has no features, or the row is
    queued and not synced yet."""

    @classmethod
    def of(cls, index: str, key: object, *, why: str | None = None) -> KeyNotIndexedError:
        """The error for ``key`` of index ``index``; ``why`` when it is known."""
        reason = why or (
            "no such row, its text is NULL or empty, or the row is queued and not synced yet"
        )
        return cls(f"key {key!r} is not in index {index!r} ({reason})")


class LowRecallWarning(UserWarning):
    """A MinHash query asked for a similarity below the threshold the index's LSH bands were
    tuned for: pairs between the two are found only by chance (see LshDesign.probability)."""


class SerialBuildWarning(RuntimeWarning):
    """A build could not start its worker processes and fingerprinted in the calling process
    instead (slower, same result); the message names the cause."""
