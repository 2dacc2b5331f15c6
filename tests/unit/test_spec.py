from __future__ import annotations

import json
from typing import Any

import pytest

from simindex.core.design import LshDesign, MankuDesign, choose_lsh
from simindex.core.spec import SPEC_VERSION, IndexSpec, MinHash, SimHash, resolve
from simindex.core.text import Shingling
from tests.unit import tokenizers as _registers_tokenizers  # noqa: F401

METHODS = [
    SimHash(),
    SimHash(max_distance=5, shingling=Shingling("char", 4, seed=9), num_blocks=7, top_n=20),
    MinHash(),
    MinHash(0.5, 64, "one_permutation", 7, Shingling(size=1), num_bands=16, rows_per_band=4),
    MinHash(shingling=Shingling(punctuation="delete", identifiers=True, numbers="drop")),
    SimHash(shingling=Shingling(unit="char", size=4, strip_markup=True)),
    MinHash(shingling=Shingling(size=2, tokenizer="test-words", tokenizer_version="1")),
    MinHash(0.7, ignore_common=0.01),
    SimHash(idf=True, ignore_common=0.05),
]


@pytest.mark.parametrize("method", METHODS)
def test_spec_survives_its_stored_form(method: SimHash | MinHash) -> None:
    spec = resolve(method)
    stored = spec.to_json()
    # One version; the token options are written only when one is used.
    assert json.loads(stored)["spec_version"] == SPEC_VERSION == 1
    assert ("punctuation" in stored) == (not method.shingling.plain)
    again = IndexSpec.from_json(stored)
    assert again.to_json() == stored
    assert again.design == spec.design


def test_design_is_chosen_from_expected_rows() -> None:
    assert resolve(SimHash(expected_rows=1_000)).design == MankuDesign(3, 4)
    assert resolve(SimHash(expected_rows=50_000_000)).design == MankuDesign(3, 5)
    design = resolve(MinHash(0.8, 128)).design
    assert design == choose_lsh(0.8, 128)
    assert isinstance(design, LshDesign) and design.probability(0.8) >= 0.97


# A stored MinHash(threshold=0.8, num_bands=9, rows_per_band=13), four shingling fields.
STORED = {
    "spec_version": 1,
    "kind": "minhash",
    "shingling": {"unit": "word", "size": 3, "with_characters": False, "seed": 0},
    "threshold": 0.8,
    "num_perm": 128,
    "scheme": "one_permutation",
    "seed": 1,
    "num_bands": 9,
    "rows_per_band": 13,
    "sketch_bits": 1792,
}


def test_a_stored_spec_keeps_its_design_and_tokens() -> None:
    spec = IndexSpec.from_json(json.dumps(STORED))
    assert spec.design == LshDesign(9, 13)
    assert spec.method.shingling == Shingling()
    texts = ["The quick brown fox jumps over the lazy dog", "a b, c d"]
    assert (spec.minhash_values(texts)[0] == resolve(MinHash()).minhash_values(texts)[0]).all()


@pytest.mark.parametrize("version", [SPEC_VERSION + 1, 2, 3, 0, None])
def test_unknown_spec_version_is_refused(version: int | None) -> None:
    data = json.loads(resolve(SimHash()).to_json())
    data["spec_version"] = version
    with pytest.raises(ValueError, match="not supported by this release"):
        IndexSpec.from_json(json.dumps(data))


@pytest.mark.parametrize(
    ("method", "message"),
    [
        (MinHash(scheme="bottom_k"), "needs scheme 'classic' or 'one_permutation'"),
        (MinHash(num_bands=4), "give both num_bands and rows_per_band"),
        (MinHash(num_perm=16, num_bands=8, rows_per_band=4), "need 32 values"),
        (MinHash(threshold=1.5), "threshold"),
        (SimHash(max_distance=4, num_blocks=4), "num_blocks"),
        (SimHash(top_n=64), "top_n"),
    ],
)
def test_bad_methods_are_refused(method: SimHash | MinHash, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve(method)


@pytest.mark.parametrize(
    ("method", "error", "message"),
    [
        (SimHash(max_distance=-1), ValueError, r"max_distance must be from 0 to 63 .*got -1"),
        (SimHash(max_distance=99), ValueError, r"max_distance must be from 0 to 63 .*got 99"),
        (SimHash(max_distance=2.0), TypeError, r"max_distance must be an int from 0 to 63"),  # type: ignore[arg-type]
        (MinHash(threshold="0.8"), TypeError, r"threshold must be a number .*got str '0.8'"),  # type: ignore[arg-type]
        (MinHash(threshold=1.5), ValueError, r"threshold must be between 0 and 1, got 1.5"),
    ],
)
def test_a_bad_method_argument_names_itself_and_what_is_allowed(
    method: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        resolve(method)
