"""simindex: near-duplicate search that lives inside PostgreSQL.

The top level is the index API: indexes of an app's tables kept in PostgreSQL, their
queries, the types they return and the errors they raise. The fingerprint toolkit (text
shingling, SimHash, MinHash, index designs) is :mod:`simindex.fingerprint`, pure Python and
numpy: it imports no database driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from simindex.errors import (
    DatabaseUnavailableError,
    IncompatibleSignaturesError,
    IndexBrokenError,
    IndexBusyError,
    IndexExistsError,
    IndexNotFoundError,
    IndexNotReadyError,
    KeyNotIndexedError,
    LowRecallWarning,
    MissingRightError,
    SchemaNotMigratedError,
    SerialBuildWarning,
    SimindexError,
    SourceChangedError,
    SourceError,
    TokenizerError,
)

# The one place the version is written (pyproject.toml reads it): reading it from the
# installed metadata would cost `simindex --version` a tenth of a second.
__version__ = "0.1.0"

if TYPE_CHECKING:
    from simindex.core.spec import MinHash, SimHash
    from simindex.db.schema import migrate
    from simindex.grants import grant
    from simindex.index import (
        Index,
        Match,
        Similar,
        create_index,
        drop_index,
        get_index,
        list_indexes,
    )
    from simindex.ops.build import BuildReport
    from simindex.ops.check import CheckReport, check, repair
    from simindex.ops.clusters import ClusterMember, ClusterReport, Survivor
    from simindex.ops.pairs import IdenticalGroup, NearPair, SimilarPair
    from simindex.ops.stats import IndexStats
    from simindex.ops.sync import stop_on_signals, sync
    from simindex.ops.sync_report import SyncReport

# Everything loads on first use: fingerprinting alone never imports a driver, and the command
# line (`simindex --help`) imports neither numpy nor a driver until a command needs them.
_LAZY = {
    "MinHash": "simindex.core.spec",
    "SimHash": "simindex.core.spec",
    "BuildReport": "simindex.ops.build",
    "CheckReport": "simindex.ops.check",
    "check": "simindex.ops.check",
    "repair": "simindex.ops.check",
    "stop_on_signals": "simindex.ops.sync",
    "sync": "simindex.ops.sync",
    "ClusterMember": "simindex.ops.clusters",
    "ClusterReport": "simindex.ops.clusters",
    "Survivor": "simindex.ops.clusters",
    "IdenticalGroup": "simindex.ops.pairs",
    "NearPair": "simindex.ops.pairs",
    "SimilarPair": "simindex.ops.pairs",
    "IndexStats": "simindex.ops.stats",
    "SyncReport": "simindex.ops.sync_report",
    "Index": "simindex.index",
    "Match": "simindex.index",
    "Similar": "simindex.index",
    "create_index": "simindex.index",
    "drop_index": "simindex.index",
    "get_index": "simindex.index",
    "grant": "simindex.grants",
    "list_indexes": "simindex.index",
    "migrate": "simindex.db.schema",
}

# The fingerprint toolkit's names, for the error that says where they are (kept here as
# strings: a missing attribute must not import numpy).
_TOOLKIT = frozenset({
    "Shingling", "normalize", "tokenize", "register_tokenizer", "hashes_batch", "simhash",
    "simhash_batch", "MinHasher", "MinHashSignature", "Scheme", "hamming_distance",
    "hamming_distances", "to_signed", "to_unsigned", "to_signed_array", "to_unsigned_array",
    "LshDesign", "MankuDesign", "MankuTable", "choose_lsh", "choose_manku", "manku_cost_table",
    "Cost", "minhash_cost", "simhash_cost",
})  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _TOOLKIT:
        raise AttributeError(
            f"module 'simindex' has no attribute {name!r}: the fingerprint toolkit is "
            f"simindex.fingerprint (from simindex.fingerprint import {name})"
        )
    raise AttributeError(f"module 'simindex' has no attribute {name!r}")


__all__ = [
    "BuildReport",
    "CheckReport",
    "ClusterMember",
    "ClusterReport",
    "DatabaseUnavailableError",
    "IdenticalGroup",
    "IncompatibleSignaturesError",
    "Index",
    "IndexBrokenError",
    "IndexBusyError",
    "IndexExistsError",
    "IndexNotFoundError",
    "IndexNotReadyError",
    "IndexStats",
    "KeyNotIndexedError",
    "LowRecallWarning",
    "Match",
    "MinHash",
    "MissingRightError",
    "NearPair",
    "SchemaNotMigratedError",
    "SerialBuildWarning",
    "SimHash",
    "Similar",
    "SimilarPair",
    "SimindexError",
    "SourceChangedError",
    "SourceError",
    "Survivor",
    "SyncReport",
    "TokenizerError",
    "__version__",
    "check",
    "create_index",
    "drop_index",
    "get_index",
    "grant",
    "list_indexes",
    "migrate",
    "repair",
    "stop_on_signals",
    "sync",
]
