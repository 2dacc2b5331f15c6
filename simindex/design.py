"""Index designs, at their documented import path (the code: :mod:`simindex.core.design`)."""

from __future__ import annotations

from simindex.core.cost import Cost, minhash_cost, simhash_cost
from simindex.core.design import (
    MIN_CANDIDATE_PROBABILITY,
    LshDesign,
    MankuDesign,
    MankuTable,
    block_widths,
    choose_lsh,
    choose_manku,
    manku_cost_table,
)

__all__ = [
    "MIN_CANDIDATE_PROBABILITY",
    "Cost",
    "LshDesign",
    "MankuDesign",
    "MankuTable",
    "block_widths",
    "choose_lsh",
    "choose_manku",
    "manku_cost_table",
    "minhash_cost",
    "simhash_cost",
]
