"""simindex: near-duplicate search that lives inside PostgreSQL.

The fingerprint core (text shingling, SimHash, MinHash, index designs) is pure Python and
numpy; it imports no database driver. The rest keeps indexes of an app's tables in
PostgreSQL and queries them there.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING, Any

from simindex.core.bits import hamming_distance
from simindex.core.design import LshDesign, MankuDesign, choose_lsh, choose_manku
from simindex.core.minhash import MinHasher, MinHashSignature, Scheme
from simindex.core.simhash import simhash, simhash_batch
from simindex.core.spec import MinHash, SimHash
from simindex.core.text import Shingling, normalize, tokenize
from simindex.core.tokens import register_tokenizer
from simindex.errors import (
    IncompatibleSignaturesError,
    IndexExistsError,
    IndexNotFoundError,
    IndexNotReadyError,
    KeyNotIndexedError,
    LowRecallWarning,
    SchemaNotMigratedError,
    SerialBuildWarning,
    SimindexError,
)

try:
    __version__ = metadata.version("simindex")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
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

# The database side loads on first use, so fingerprinting alone never imports a driver.
_LAZY = {
    "BuildReport": "simindex.ops.build",
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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'simindex' has no attribute {name!r}")


__all__ = [
    "BuildReport",
    "IncompatibleSignaturesError",
    "Index",
    "IndexExistsError",
    "IndexNotFoundError",
    "IndexNotReadyError",
    "KeyNotIndexedError",
    "LowRecallWarning",
    "LshDesign",
    "MankuDesign",
    "Match",
    "MinHash",
    "MinHashSignature",
    "MinHasher",
    "SchemaNotMigratedError",
    "Scheme",
    "SerialBuildWarning",
    "Shingling",
    "SimHash",
    "Similar",
    "SimindexError",
    "__version__",
    "choose_lsh",
    "choose_manku",
    "create_index",
    "drop_index",
    "get_index",
    "grant",
    "hamming_distance",
    "list_indexes",
    "migrate",
    "normalize",
    "register_tokenizer",
    "simhash",
    "simhash_batch",
    "tokenize",
]
