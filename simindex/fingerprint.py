"""The fingerprint toolkit: text to features, SimHash and MinHash fingerprints, the
signed/unsigned mapping of 64-bit values, and index designs (Manku tables, LSH bands) with
their costs.

Pure Python and numpy: importing it loads no database driver. The code lives in
:mod:`simindex.core`; this module is where it is imported from. The index API (indexes kept
in PostgreSQL, their queries, results and errors) is at the top level, :mod:`simindex`.
"""

from __future__ import annotations

from simindex.core.bits import (
    hamming_distance,
    hamming_distances,
    to_signed,
    to_signed_array,
    to_unsigned,
    to_unsigned_array,
)
from simindex.core.cost import Cost, minhash_cost, simhash_cost
from simindex.core.design import (
    LshDesign,
    MankuDesign,
    MankuTable,
    choose_lsh,
    choose_manku,
    manku_cost_table,
)
from simindex.core.minhash import MinHasher, MinHashSignature, Scheme
from simindex.core.shingle_batch import hashes_batch
from simindex.core.simhash import simhash, simhash_batch
from simindex.core.text import Shingling, normalize, tokenize
from simindex.core.tokens import register_tokenizer

__all__ = [
    "Cost",
    "LshDesign",
    "MankuDesign",
    "MankuTable",
    "MinHashSignature",
    "MinHasher",
    "Scheme",
    "Shingling",
    "choose_lsh",
    "choose_manku",
    "hamming_distance",
    "hamming_distances",
    "hashes_batch",
    "manku_cost_table",
    "minhash_cost",
    "normalize",
    "register_tokenizer",
    "simhash",
    "simhash_batch",
    "simhash_cost",
    "to_signed",
    "to_signed_array",
    "to_unsigned",
    "to_unsigned_array",
    "tokenize",
]
