"""Golden vectors: fingerprint values that users' databases store, pinned in the repository.

``python tests/unit/golden.py`` rewrites ``golden_vectors.json``. Doing so means stored
fingerprints change: only with a new spec version and a migration path for users.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from simindex.core.design import LshDesign, MankuDesign
from simindex.core.minhash import MinHasher
from simindex.core.packing import band_keys, packed_signatures
from simindex.core.simhash import simhash
from simindex.core.text import Shingling

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
}

SHINGLINGS: dict[str, Shingling] = {
    "word3": Shingling(),
    "word1": Shingling(size=1),
    "word2_chars": Shingling(size=2, with_characters=True, seed=11),
    "char5": Shingling(unit="char", size=5),
}

HASHERS = {
    scheme: MinHasher(scheme, 128, 1) for scheme in ("classic", "one_permutation", "bottom_k")
}


def digest(array: np.ndarray) -> str:
    return f"{xxhash.xxh3_64_intdigest(array.astype('<u8').tobytes()):016x}"


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
        # Storage format 2 (simindex.core.packing): what a compact MinHash index stores.
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
        fingerprint = simhash(hashes)
        if fingerprint is not None:
            tables = MankuDesign(3, 6).tables
            entry["word3.manku_3_6_permuted"] = [
                f"{t.permute(fingerprint):016x}" for t in tables[:4]
            ]
        result[name] = entry
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
