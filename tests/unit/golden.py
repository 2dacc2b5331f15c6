"""Golden vectors: fingerprint values that users' databases store, pinned in the repository.

``python -m tests.unit.golden`` rewrites ``golden_vectors.json``. Doing so means stored
fingerprints change: only with a new spec version and a migration path for users.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from simindex.core.bits import to_signed
from simindex.core.design import LshDesign, MankuDesign
from simindex.core.fingerprints import fingerprint_batch
from simindex.core.frequency import count_shingles
from simindex.core.minhash import MinHasher, _mixed, set_hash, sketch
from simindex.core.packing import band_keys, packed_signatures
from simindex.core.simhash import simhash
from simindex.core.spec import IndexSpec, MinHash, SimHash, resolve
from simindex.core.text import Shingling
from simindex.db.catalog import store_for
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import Source
from tests.unit import tokenizers as _registers_tokenizers  # noqa: F401

PATH = Path(__file__).with_name("golden_vectors.json")

_LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua. "
)

INPUTS: dict[str, str | None] = {
    "null": None,
    "empty": "",
    "whitespace": " \t\n\u00a0 ",
    "punctuation": "!?... --- ***",
    "one_word": "hello",
    "two_words": "Hello, World",
    "sentence": "The quick brown fox jumps over the lazy dog.",
    "sentence_edited": "The quick brown fox jumped over the lazy dog!",
    "case_and_width": "ＴＨＥ Ｑｕｉｃｋ BROWN fox",
    "german": "Straße, Maß und Fuß: Übergrößen für Äpfel.",
    "french": "L'été à Noël, naïve café crème brûlée.",
    "russian": "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "greek": "Γαζέες καὶ μυρτιὲς δὲν θὰ βρῶ πιὰ στὸ χρυσαφὶ ξέφωτο.",
    "arabic": "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر",
    "hindi": "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले",
    "chinese": "我能吞下玻璃而不伤身体。天下大势，分久必合，合久必分。",
    "japanese": "いろはにほへと ちりぬるを わかよたれそ つねならむ カタカナ ｶﾀｶﾅ",
    "korean": "키스의 고유조건은 입술끼리 만나야 하고 특별한 기술은 필요치 않다",
    "mixed_cjk_latin": "PostgreSQL 数据库 の インデックス 인덱스 version 15",
    "emoji": "I ❤️ near-duplicates 🐘🔍 👩‍💻 ✨✨ done",
    "digits_and_codes": "SKU-12345 costs $99.99; call +1 (555) 010-9999 x_y_z",
    "control_and_surrogate": "binary\x00junk\x07 and \ud800 lone surrogate",
    "very_long": " ".join(_LOREM for _ in range(2000)) + " the end",
    # Inputs the token options are for (added with them; every shingling pins them).
    "html": (
        "<!DOCTYPE html><html><head><style>p { color: red; }</style></head><body>"
        "<!-- a comment --><h1>Near&nbsp;duplicates &amp; copies</h1><p>It&#39;s 100% "
        "<b>free</b>, since 2007. Call 555-0100.</p><script>var x = 1 < 2;</script>"
        "<![CDATA[raw data]]></body></html>"
    ),
    "code": (
        "def near_duplicates(row_id, max_distance=3):\n"
        "    # find rows within max_distance bits of row_id\n"
        "    return [r for r in rows_2024 if hamming(r.fp, fp_of(row_id)) <= max_distance]\n"
    ),
    "punctuated_prose": "Don't re-index e-mail: it's state-of-the-art (v2.0, 3.14%).",
}

SHINGLINGS: dict[str, Shingling] = {
    "word3": Shingling(),
    "word1": Shingling(size=1),
    "word2_chars": Shingling(size=2, with_characters=True, seed=11),
    "char5": Shingling(unit="char", size=5),
    # The token options, each alone and all together (added with them).
    "word3_delete": Shingling(punctuation="delete"),
    "word3_identifiers": Shingling(identifiers=True),
    "word3_no_numbers": Shingling(numbers="drop"),
    "word3_markup": Shingling(strip_markup=True),
    "word2_code": Shingling(
        size=2, punctuation="delete", identifiers=True, numbers="drop", strip_markup=True, seed=5
    ),
    "char5_markup": Shingling(unit="char", size=5, strip_markup=True),
    "word3_tokenizer": Shingling(tokenizer="test-words"),
}

HASHERS = {
    scheme: MinHasher(scheme, 128, 1) for scheme in ("classic", "one_permutation", "bottom_k")
}


# MinHash with other shinglings, sizes and seeds: (shingling, hasher) per pinned label.
OTHER_HASHERS: dict[str, tuple[str, MinHasher]] = {
    "word3.minhash_classic_64_seed7": ("word3", MinHasher("classic", 64, 7)),
    "word3.minhash_one_permutation_256_seed42": ("word3", MinHasher("one_permutation", 256, 42)),
    "word1.minhash_classic": ("word1", HASHERS["classic"]),
    "word2_chars.minhash_one_permutation_32_seed3": (
        "word2_chars",
        MinHasher("one_permutation", 32, 3),
    ),
    "char5.minhash_classic_16_seed_max": ("char5", MinHasher("classic", 16, 2**64 - 1)),
    "char5.minhash_bottom_k_64_seed5": ("char5", MinHasher("bottom_k", 64, 5)),
}


# Index specs whose values build and sync store, computed for all inputs in one batch by the
# function they call (fingerprint_batch), and pinned in their stored form: bigint values
# (unsigned - 2**63), SimHash's permuted-prefix columns, MinHash's set hash, band keys and
# one-bit sketch (simindex.core.packing).
_ONE_PERMUTATION = MinHash(
    0.5, 64, "one_permutation", 9, Shingling(size=2, with_characters=True, seed=11)
)
SPECS: dict[str, IndexSpec] = {
    "simhash_k3_4_blocks": resolve(SimHash(max_distance=3, num_blocks=4, expected_rows=1_000_000)),
    "simhash_k2_top24_char5": resolve(
        SimHash(
            max_distance=2,
            num_blocks=3,
            top_n=24,
            shingling=Shingling(unit="char", size=5),
            expected_rows=1_000_000,
        )
    ),
    "simhash_k3_4_blocks_markup": resolve(
        SimHash(
            max_distance=3,
            num_blocks=4,
            shingling=Shingling(strip_markup=True),
            expected_rows=1_000_000,
        )
    ),
    "simhash_k3_sized_to_853_rows": resolve(SimHash(max_distance=3), 853),
    # MinHash with the designs 9x13 and 14x4 (fixed bands and rows).
    "minhash_0.8": resolve(MinHash(0.8, num_bands=9, rows_per_band=13)),
    "minhash_one_permutation_0.5_64_seed9_word2_chars": resolve(
        MinHash(0.5, 64, "one_permutation", 9, _ONE_PERMUTATION.shingling, 14, 4)
    ),
    # What MinHash(0.8) is: the recall-first design.
    "minhash_0.8_recall_first": resolve(MinHash(0.8)),
}


def _learned(method: MinHash | SimHash) -> IndexSpec:
    """``method`` with the shingle counts of the inputs plus eleven more copies of "sentence",
    whose shingles are then common (in 12 of 37 rows), as a build would learn them."""
    texts = [*INPUTS.values(), *[INPUTS["sentence"]] * 11]
    counts = count_shingles(method.shingling.hashes(text) for text in texts)
    return replace(resolve(method), counts=counts)


# The common-shingle filter and IDF weights.
SPECS |= {
    "minhash_0.8_ignore_common_0.1": _learned(MinHash(0.8, ignore_common=0.1)),
    "simhash_k3_4_blocks_idf": _learned(
        SimHash(max_distance=3, num_blocks=4, expected_rows=1_000_000, idf=True)
    ),
    "simhash_k3_4_blocks_idf_ignore_common_0.1": _learned(
        SimHash(max_distance=3, num_blocks=4, expected_rows=1_000_000, idf=True, ignore_common=0.1)
    ),
}


def digest(array: np.ndarray) -> str:
    return f"{xxhash.xxh3_64_intdigest(array.astype('<u8').tobytes()):016x}"


def stored_digest(values: np.ndarray) -> str:
    """xxh3-64 of stored values' little-endian bytes: 8 each (bigint), 4 each (integer)."""
    width = "<i4" if values.dtype == np.int32 else "<u8"
    return f"{xxhash.xxh3_64_intdigest(values.astype(width).tobytes()):016x}"


def stored(spec: IndexSpec, texts: list[str | None]) -> list[Any]:
    """Per text, the stored form of its value as build and sync compute it (None: no row)."""
    values, present = fingerprint_batch(spec.to_json(), texts)
    rows: list[Any] = []
    if isinstance(spec.design, MankuDesign):
        store = SimHashStore("simindex", "golden", "bigint", spec.design)
        for i, (_, *columns) in enumerate(store.rows(list(range(len(texts))), values)):
            rows.append(columns if present[i] else None)
        return rows
    assert isinstance(spec.method, MinHash)
    minhash = store_for("simindex", "golden", Source(0, "s", "t", "k", "bigint", "b"), spec)
    assert isinstance(minhash, MinHashStore)
    held = minhash.stored(values)
    for i in range(len(texts)):
        if not present[i]:
            rows.append(None)
            continue
        sketch = held.sketches[i]
        rows.append(
            {
                "set_hash": int(held.set_hashes[i]),
                "bands": held.bands[i].tolist(),
                "sketch": [len(sketch), sketch[:17], xxhash.xxh3_64_hexdigest(sketch.encode())],
            }
        )
    return rows


def compute() -> dict[str, Any]:
    """Every pinned value, recomputed from the current code."""
    result: dict[str, Any] = {}
    for name, text in INPUTS.items():
        entry: dict[str, Any] = {}
        for label, shingling in SHINGLINGS.items():
            hashes = shingling.hashes(text)
            entry[f"{label}.features"] = [len(hashes), hashes[:3].tolist(), digest(hashes)]
            fingerprint = simhash(hashes)
            entry[f"{label}.simhash"] = None if fingerprint is None else f"{fingerprint:016x}"
        hashes = SHINGLINGS["word3"].hashes(text)
        sparse = simhash(hashes, top_n=16)
        entry["word3.simhash_top16"] = None if sparse is None else f"{sparse:016x}"
        weights = np.linspace(0.5, 2.0, len(hashes))
        weighted = simhash(hashes, weights)
        entry["word3.simhash_weighted"] = None if weighted is None else f"{weighted:016x}"
        for scheme, hasher in HASHERS.items():
            signature = hasher.signature(hashes)
            entry[f"word3.minhash_{scheme}"] = (
                None
                if signature is None
                else [len(signature.array), signature.array[:4].tolist(), digest(signature.array)]
            )
        classic = HASHERS["classic"].signature(hashes)
        entry["word3.bands_16x8"] = (
            None
            if classic is None
            else LshDesign(16, 8).band_hashes(classic.array[None, :])[0, :4].tolist()
        )
        # What a MinHash index stores (simindex.core.packing).
        for scheme in ("classic", "one_permutation"):
            signature = HASHERS[scheme].signature(hashes)
            if signature is not None:
                packed = packed_signatures(signature.array[None, :])
                entry[f"word3.packed_{scheme}"] = [
                    packed.shape[1],
                    packed[0, :4].tolist(),
                    f"{xxhash.xxh3_64_intdigest(packed.astype('<i4').tobytes()):016x}",
                ]
                if scheme == "classic":
                    keys = band_keys(LshDesign(9, 13), packed)
                    entry["word3.band_keys_9x13"] = keys[0].tolist()
        # The one-bit sketch a MinHash index stores (simindex.core.minhash.sketch).
        if len(hashes):
            distinct = np.unique(hashes)
            ordered = np.sort(_mixed(distinct, 1))
            bits = sketch(ordered, 2048, 1, 1)
            entry["word3.sketch_2048_seed1"] = [len(bits), bits[:8].tolist(), digest(bits)]
            entry["word3.set_hash"] = f"{set_hash(distinct):016x}"
        fingerprint = simhash(hashes)
        if fingerprint is not None:
            tables = MankuDesign(3, 6).tables
            entry["word3.manku_3_6_permuted"] = [
                f"{t.permute(fingerprint):016x}" for t in tables[:4]
            ]
        for label, (shingling_label, hasher) in OTHER_HASHERS.items():
            signature = hasher.signature(SHINGLINGS[shingling_label].hashes(text))
            entry[label] = (
                None
                if signature is None
                else [len(signature.array), signature.array[:4].tolist(), digest(signature.array)]
            )
        if fingerprint is not None:
            entry["word3.simhash_stored_bigint"] = to_signed(fingerprint)
        result[name] = entry
    texts = list(INPUTS.values())
    for spec_name, spec in SPECS.items():
        for name, value in zip(INPUTS, stored(spec, texts), strict=True):
            result[name][f"stored.{spec_name}"] = value
    result["specs"] = {spec_name: spec.to_json() for spec_name, spec in SPECS.items()}
    return result


def render(values: dict[str, Any]) -> str:
    """One line per pinned value, so a diff shows exactly what moved."""
    lines = []
    for name, entry in values.items():
        fields = ",\n".join(
            f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in entry.items()
        )
        lines.append(f" {json.dumps(name)}: {{\n{fields}\n }}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


if __name__ == "__main__":
    PATH.write_text(render(compute()), encoding="utf-8")
    print(f"wrote {PATH}")
