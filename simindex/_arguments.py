"""What an index's SQL functions take for a text: :meth:`simindex.index.Index.fingerprint`."""

from __future__ import annotations

from dataclasses import dataclass

from simindex.core.bits import to_signed
from simindex.core.spec import SimHash
from simindex.db.catalog import IndexInfo, store_of
from simindex.db.minhash_store import MinHashStore


@dataclass(frozen=True, slots=True)
class SimilarArguments:
    """A text's MinHash as ``<name>_similar_v1(sketch, band_keys, threshold, max_rows,
    set_hash)`` takes it: the sketch as a bit string's hexadecimal input (``X...``)."""

    sketch: str
    band_keys: tuple[int, ...]
    set_hash: int


def function_arguments(info: IndexInfo, text: str | None) -> int | SimilarArguments | None:
    """The signed fingerprint (SimHash) or the two arrays (MinHash, packed as stored) of
    ``text``; None for a text with no features."""
    spec = info.spec
    if isinstance(spec.method, SimHash):
        values, present = spec.simhash_values([text])
        return to_signed(int(values[0])) if present[0] else None
    store = store_of(info)
    assert isinstance(store, MinHashStore)
    signatures, lengths = spec.minhash_values([text])
    if not lengths[0]:
        return None
    sketch, band_keys, set_hash = store.query_arguments(signatures[0])
    return SimilarArguments(sketch, tuple(band_keys), set_hash)
