"""simindex: near-duplicate search that lives inside PostgreSQL.

The fingerprint core (text shingling, SimHash, MinHash, index designs) is pure Python and
numpy; it imports no database driver. The rest keeps indexes of an app's tables in
PostgreSQL and queries them there.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from simindex.errors import (
    IncompatibleSignaturesError,
    IndexExistsError,
    IndexNotFoundError,
    IndexNotReadyError,
    KeyNotIndexedError,
    LowRecallWarning,
    MissingRightError,
    SchemaNotMigratedError,
    SerialBuildWarning,
    SimindexError,
)

# The one place the version is written (pyproject.toml reads it): reading it from the
# installed metadata would cost `simindex --version` a tenth of a second.
__version__ = "0.1.0"

if TYPE_CHECKING:
    from simindex.core.bits import hamming_distance
    from simindex.core.design import LshDesign, MankuDesign, choose_lsh, choose_manku
    from simindex.core.minhash import MinHasher, MinHashSignature, Scheme
    from simindex.core.shingle_batch import hashes_batch
    from simindex.core.simhash import simhash, simhash_batch
    from simindex.core.spec import MinHash, SimHash
    from simindex.core.text import Shingling, normalize, tokenize
    from simindex.core.tokens import register_tokenizer
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

# Everything loads on first use: fingerprinting alone never imports a driver, and the command
# line (`simindex --help`) imports neither numpy nor a driver until a command needs them.
_LAZY = {
    "hamming_distance": "simindex.core.bits",
    "LshDesign": "simindex.core.design",
    "MankuDesign": "simindex.core.design",
    "choose_lsh": "simindex.core.design",
    "choose_manku": "simindex.core.design",
    "MinHasher": "simindex.core.minhash",
    "MinHashSignature": "simindex.core.minhash",
    "Scheme": "simindex.core.minhash",
    "hashes_batch": "simindex.core.shingle_batch",
    "simhash": "simindex.core.simhash",
    "simhash_batch": "simindex.core.simhash",
    "MinHash": "simindex.core.spec",
    "SimHash": "simindex.core.spec",
    "Shingling": "simindex.core.text",
    "normalize": "simindex.core.text",
    "tokenize": "simindex.core.text",
    "register_tokenizer": "simindex.core.tokens",
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
    "MissingRightError",
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
    "hashes_batch",
    "list_indexes",
    "migrate",
    "normalize",
    "register_tokenizer",
    "simhash",
    "simhash_batch",
    "tokenize",
]
