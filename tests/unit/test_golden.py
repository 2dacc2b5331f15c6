from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.golden import INPUTS, PATH, compute

PINNED: dict[str, Any] = json.loads(PATH.read_text(encoding="utf-8"))
CURRENT = compute()


def test_every_input_is_pinned() -> None:
    assert len(INPUTS) >= 20
    assert set(PINNED) == set(INPUTS)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_values_have_not_drifted(name: str) -> None:
    # json round trip: tuples and lists compare alike.
    assert json.loads(json.dumps(CURRENT[name])) == PINNED[name], (
        f"fingerprints of input {name!r} changed: stored values in users' databases would no "
        "longer match. See tests/unit/golden.py."
    )


def test_empty_inputs_have_no_fingerprints() -> None:
    for name in ("null", "empty", "whitespace", "punctuation"):
        assert PINNED[name]["word3.simhash"] is None
        assert PINNED[name]["word3.minhash_classic"] is None
