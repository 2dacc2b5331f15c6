"""The values of today's code, computed here, against the ones pinned in golden_vectors.json."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from simindex.core.bits import to_signed
from simindex.core.fingerprints import fingerprint_batch
from simindex.core.minhash import MinHasher
from simindex.core.simhash import simhash
from simindex.core.spec import IndexSpec, MinHash, SimHash
from tests.unit.golden import INPUTS, PATH, SPECS, compute

PINNED: dict[str, Any] = json.loads(PATH.read_text(encoding="utf-8"))
CURRENT = compute()


def as_json(value: Any) -> Any:
    """The value as the file holds it (tuples and lists compare alike)."""
    return json.loads(json.dumps(value))


def test_every_input_and_every_value_is_pinned() -> None:
    assert len(INPUTS) >= 20
    assert set(PINNED) == set(CURRENT) == {*INPUTS, "specs"}
    for name in INPUTS:
        assert set(CURRENT[name]) == set(PINNED[name]), name


@pytest.mark.parametrize("name", [*sorted(INPUTS), "specs"])
def test_values_have_not_drifted(name: str) -> None:
    assert as_json(CURRENT[name]) == PINNED[name], (
        f"fingerprints of input {name!r} changed: stored values in users' databases would no "
        "longer match. See tests/unit/golden.py."
    )


def test_empty_inputs_have_no_fingerprints() -> None:
    for name in ("null", "empty", "whitespace", "punctuation"):
        entry = CURRENT[name]
        assert entry["word3.simhash"] is None
        assert entry["word3.minhash_classic"] is None
        assert entry["stored.simhash_k3_4_blocks"] is None
        assert entry["stored.minhash_0.8"] is None
    assert CURRENT["punctuation"]["stored.simhash_k2_top24_char5"] is not None  # characters


def test_stored_specs_read_back_as_the_same_spec() -> None:
    for name, spec in SPECS.items():
        read = IndexSpec.from_json(PINNED["specs"][name])
        assert (read.design, read.to_json()) == (spec.design, PINNED["specs"][name])


def test_a_stored_simhash_is_the_fingerprint_minus_2_to_the_63() -> None:
    for name in INPUTS:
        entry = CURRENT[name]
        if entry["word3.simhash"] is None:
            continue
        unsigned = int(entry["word3.simhash"], 16)
        assert entry["word3.simhash_stored_bigint"] == unsigned - 2**63 == to_signed(unsigned)
        # The SimHash spec with the default shingling stores the very same fingerprint first.
        assert entry["stored.simhash_k3_4_blocks"][0] == entry["word3.simhash_stored_bigint"]


def test_the_batch_path_equals_one_text_at_a_time() -> None:
    texts = list(INPUTS.values())
    for spec in SPECS.values():
        values, present = fingerprint_batch(spec.to_json(), texts)
        method = spec.method
        for i, text in enumerate(texts):
            hashes = spec.features([text])[0]
            if isinstance(method, SimHash):
                weights = spec.counts.idf(hashes) if method.idf and spec.counts else None
                alone = simhash(hashes, weights, top_n=method.top_n)
                assert (int(values[i]) if present[i] else None) == alone, text
                continue
            assert isinstance(method, MinHash)
            signature = MinHasher(method.scheme, method.num_perm, method.seed).signature(hashes)
            if signature is None:
                assert not present[i]
            else:
                row = values[i, : method.num_perm]
                assert present[i] and np.array_equal(row, signature.array), text
