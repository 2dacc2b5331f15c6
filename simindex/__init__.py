"""simindex: near-duplicate search that lives inside PostgreSQL.

The fingerprint core (text shingling, SimHash, MinHash, index designs) is pure Python and
numpy; it imports no database driver.
"""

from __future__ import annotations

from simindex.bits import hamming_distance
from simindex.design import LshDesign, MankuDesign, choose_lsh, choose_manku
from simindex.errors import IncompatibleSignaturesError, SimindexError
from simindex.migrate import migrate
from simindex.minhash import MinHasher, MinHashSignature, Scheme
from simindex.simhash import simhash, simhash_batch
from simindex.text import Shingling, normalize, tokenize

__all__ = [
    "IncompatibleSignaturesError",
    "LshDesign",
    "MankuDesign",
    "MinHashSignature",
    "MinHasher",
    "Scheme",
    "Shingling",
    "SimindexError",
    "choose_lsh",
    "choose_manku",
    "hamming_distance",
    "migrate",
    "normalize",
    "simhash",
    "simhash_batch",
    "tokenize",
]
