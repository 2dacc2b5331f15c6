"""Index specs: everything needed to recompute a stored fingerprint and to query (layer 4).

A user names a *method* (:class:`SimHash` or :class:`MinHash`) with the knobs they care about;
:func:`resolve` turns it into a frozen :class:`IndexSpec` with every choice made (the Manku
blocks or the LSH bands, chosen from the expected row count unless given). The spec is stored
as JSON beside the index, with :data:`SPEC_VERSION`, so a later release reads it back and
computes the very same values.

A SimHash design given neither ``num_blocks`` nor ``expected_rows`` is *sized to the table*:
chosen for the source's row count when the index is created, and chosen again for the real
count by every build (:func:`refreshed`).

Either method may ignore the shingles common in the table, and SimHash may weigh features by
IDF (:mod:`simindex.core.frequency`): the counts are learned from a sample by every build and
kept in the spec, so every later fingerprint of the index drops and weighs the same shingles.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simindex.core.cost import Cost, minhash_cost, simhash_cost
from simindex.core.design import LshDesign, MankuDesign, choose_lsh, choose_manku
from simindex.core.frequency import ShingleCounts, check_share, without_common
from simindex.core.minhash import MinHasher, Scheme, SchemeName
from simindex.core.shingle_batch import hashes_batch, hashes_concatenated
from simindex.core.simhash import check_top_n, simhash_concatenated
from simindex.core.text import Shingling
from simindex.core.tokens import find_tokenizer, load_tokenizer

SPEC_VERSION = 1
"""The version of the stored form, written with every spec: a release reads the versions it
knows and refuses any other instead of misreading it."""
_TOKEN_OPTIONS = ("punctuation", "identifiers", "numbers", "strip_markup", "tokenizer")
DEFAULT_EXPECTED_ROWS = 1_000_000


@dataclass(frozen=True, slots=True)
class SimHash:
    """Find rows whose 64-bit SimHash differs in at most ``max_distance`` bits.

    Parameters:
        max_distance: the largest distance queries may ask for (k); 3 suits web pages.
        shingling: how text becomes features.
        num_blocks: Manku blocks; by default chosen for the table's size.
        top_n: the sparse variant: set exactly this many bits.
        expected_rows: the table size to choose the design for, fixed; by default the
            source's real row count at create and at every build.
        ignore_common: shingles held by more than this share of the table's rows are no
            features (boilerplate); learned by each build.
        idf: weigh each feature by how rare it is in the table (IDF), learned by each build.
    """

    max_distance: int = 3
    shingling: Shingling = field(default_factory=Shingling)
    num_blocks: int | None = None
    top_n: int | None = None
    expected_rows: int | None = None
    ignore_common: float | None = None
    idf: bool = False


@dataclass(frozen=True, slots=True)
class MinHash:
    """Find rows whose estimated Jaccard similarity reaches ``threshold``.

    Parameters:
        threshold: the similarity the LSH bands are tuned for, in (0, 1).
        num_perm: values per signature: the LSH bands are cut from them.
        scheme: ``"one_permutation"`` or ``"classic"`` (bottom-k has no aligned slots to
            band): how the band values are made.
        sketch_bits: one-bit values of the sketch the similarity is estimated from in SQL
            (:func:`simindex.core.sketch.sketch`), a multiple of 64.
        seed: selects the hash functions.
        shingling: how text becomes features.
        num_bands: overrides the bands chosen for ``threshold`` (with ``rows_per_band``).
        rows_per_band: overrides the rows per band chosen for ``threshold``.
        ignore_common: shingles held by more than this share of the table's rows are no
            features (boilerplate); learned by each build.
    """

    threshold: float = 0.8
    num_perm: int = 128
    scheme: Scheme | SchemeName = Scheme.ONE_PERMUTATION
    seed: int = 1
    shingling: Shingling = field(default_factory=Shingling)
    num_bands: int | None = None
    rows_per_band: int | None = None
    ignore_common: float | None = None
    sketch_bits: int = 1792


Method = SimHash | MinHash


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """A resolved, validated method: what is stored, and how it was computed.

    ``sized_rows``: the row count a design sized to the table was chosen for, else None.
    ``counts``: the shingle counts the last build learned, for a method that uses them.
    ``common``: the shingles those counts make common (derived from them once, not per text:
    every fingerprint and every exact verification asks for it).
    """

    method: Method
    design: MankuDesign | LshDesign
    sized_rows: int | None = None
    counts: ShingleCounts | None = None
    common: NDArray[np.uint64] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        share = self.method.ignore_common
        if share is not None and self.counts is not None:
            object.__setattr__(self, "common", self.counts.common(share))

    @property
    def learns(self) -> bool:
        """Whether builds learn shingle counts for this method (common shingles, IDF)."""
        method = self.method
        return method.ignore_common is not None or (isinstance(method, SimHash) and method.idf)

    @property
    def sized_to_table(self) -> bool:
        """Whether builds choose the SimHash design again for the table's real size."""
        method = self.method
        return (
            isinstance(method, SimHash)
            and method.num_blocks is None
            and method.expected_rows is None
        )

    @property
    def cost(self) -> Cost:
        """Side tables and estimated bytes a row of this design (see :mod:`simindex.core.cost`)."""
        if isinstance(self.design, MankuDesign):
            return simhash_cost(self.design)
        assert isinstance(self.method, MinHash)
        return minhash_cost(self.design, self.method.sketch_bits)

    @property
    def kind(self) -> str:
        return "simhash" if isinstance(self.method, SimHash) else "minhash"

    @property
    def hasher(self) -> MinHasher:
        """The MinHasher of a MinHash spec."""
        if not isinstance(self.method, MinHash):
            raise TypeError("a SimHash spec has no MinHasher")
        return MinHasher(self.method.scheme, self.method.num_perm, self.method.seed)

    def check_tokenizer(self) -> IndexSpec:
        """The spec with the version of the tokenizer it names recorded: the one registered in
        this process (:func:`~simindex.core.tokens.register_tokenizer`), which must be the
        version the spec names, if it names one. Creating an index fails here, with the
        reason (:class:`~simindex.errors.TokenizerError`), rather than every row of a build."""
        shingling = self.method.shingling
        if shingling.tokenizer is None:
            return self
        load_tokenizer(shingling.tokenizer, shingling.tokenizer_version)
        if shingling.tokenizer_version is not None:
            return self
        _, version = find_tokenizer(shingling.tokenizer)
        pinned = replace(shingling, tokenizer_version=version)
        return replace(self, method=replace(self.method, shingling=pinned))

    def features(self, texts: Sequence[str | None]) -> list[NDArray[np.uint64]]:
        """The feature hashes of each text: its shingles (one per occurrence), without the
        common ones when the method ignores them (:func:`~simindex.core.frequency.without_common`).
        Every fingerprint and every exact verification of the index starts here."""
        if self.common is None:
            return hashes_batch(self.method.shingling, texts)
        features, counts = self.features_concatenated(texts)
        return np.split(features, np.cumsum(counts)[:-1]) if len(texts) else []

    def features_concatenated(
        self, texts: Sequence[str | None]
    ) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
        """:meth:`features` of all texts in one array, text after text, and how many each
        text has."""
        features, counts = hashes_concatenated(self.method.shingling, texts)
        common = self.common
        if common is None:
            return features, counts
        return without_common(features, counts, common)

    def simhash_values(
        self, texts: Sequence[str | None]
    ) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
        """SimHash of each text, and which texts had features (see :mod:`simindex.core.text`)."""
        method = self.method
        if not isinstance(method, SimHash):
            raise TypeError("simhash_values needs a SimHash spec")
        features, counts = self.features_concatenated(texts)
        weights = None
        if method.idf and self.counts is not None:
            weights = self.counts.idf(features)  # one lookup for the whole batch
        return simhash_concatenated(features, counts, weights, top_n=method.top_n)

    def minhash_values(
        self, texts: Sequence[str | None]
    ) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
        """The stored rows of ``texts`` (:meth:`~simindex.core.minhash.MinHasher.rows`: the
        signature, the sketch's words and the shingle set's hash) and their lengths (0: no
        features)."""
        assert isinstance(self.method, MinHash)
        return self.hasher.rows(self.features(texts), self.method.sketch_bits)

    def to_json(self) -> str:
        """The stored form: stable key order, with the spec version."""
        return json.dumps(_as_dict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> IndexSpec:
        """Read a stored spec back; refuses versions this release does not know."""
        data = json.loads(text)
        version = data.get("spec_version")
        if version != SPEC_VERSION:
            raise ValueError(
                f"index spec version {version!r} is not supported by this release "
                f"(it reads version {SPEC_VERSION})"
            )
        shingling = Shingling(**data["shingling"])
        method: Method
        common = data.get("ignore_common")
        counts = None
        if "shingle_counts" in data:
            counts = ShingleCounts.from_dict(data["shingle_counts"])
        if data["kind"] == "simhash" and "sized_rows" in data:
            method = SimHash(
                data["max_distance"],
                shingling,
                None,
                data["top_n"],
                None,
                common,
                data.get("idf", False),
            )
            check_top_n(method.top_n)
            design = MankuDesign(data["max_distance"], data["num_blocks"])
            return IndexSpec(method, design, sized_rows=int(data["sized_rows"]), counts=counts)
        if data["kind"] == "simhash":
            method = SimHash(
                data["max_distance"],
                shingling,
                data["num_blocks"],
                data["top_n"],
                data["expected_rows"],
                common,
                data.get("idf", False),
            )
        elif data["kind"] == "minhash":
            method = MinHash(
                data["threshold"],
                data["num_perm"],
                Scheme(data["scheme"]),
                data["seed"],
                shingling,
                data["num_bands"],
                data["rows_per_band"],
                common,
                data["sketch_bits"],
            )
        else:
            raise ValueError(f"unknown index kind {data['kind']!r}")
        return replace(resolve(method), counts=counts)


def _as_dict(spec: IndexSpec) -> dict[str, Any]:
    shingling = spec.method.shingling
    data: dict[str, Any] = {
        "spec_version": SPEC_VERSION,
        "kind": spec.kind,
        "shingling": {
            "unit": shingling.unit,
            "size": shingling.size,
            "with_characters": shingling.with_characters,
            "seed": shingling.seed,
        },
    }
    if not shingling.plain:
        data["shingling"] |= {name: getattr(shingling, name) for name in _TOKEN_OPTIONS}
    if shingling.tokenizer is not None:
        data["shingling"]["tokenizer_version"] = shingling.tokenizer_version
    method = spec.method
    if method.ignore_common is not None:
        data["ignore_common"] = method.ignore_common
    if isinstance(method, SimHash) and method.idf:
        data["idf"] = True
    if spec.counts is not None:
        data["shingle_counts"] = spec.counts.to_dict()
    if isinstance(method, SimHash):
        assert isinstance(spec.design, MankuDesign)
        data |= {
            "max_distance": method.max_distance,
            "num_blocks": spec.design.num_blocks,
            "top_n": method.top_n,
            "expected_rows": method.expected_rows,
        }
        if spec.sized_rows is not None:
            data["sized_rows"] = spec.sized_rows
    else:
        assert isinstance(spec.design, LshDesign)
        data |= {
            "threshold": method.threshold,
            "num_perm": method.num_perm,
            "scheme": str(Scheme(method.scheme)),
            "seed": method.seed,
            "num_bands": spec.design.num_bands,
            "rows_per_band": spec.design.rows_per_band,
            "sketch_bits": method.sketch_bits,
        }
    return data


def resolve(method: Method, rows: int | None = None) -> IndexSpec:
    """Validate a method and make every remaining choice.

    ``rows``: the source table's size, for a SimHash design sized to the table (unknown:
    :data:`DEFAULT_EXPECTED_ROWS`, until the first build counts them).
    """
    if not isinstance(method, SimHash | MinHash):
        hint = " (the strings 'simhash' and 'minhash' are for the Alembic operation)"
        raise TypeError(
            f"method must be SimHash(...) or MinHash(...), got {type(method).__name__} "
            f"{method!r}{hint if isinstance(method, str) else ''}"
        )
    if not isinstance(method.shingling, Shingling):
        raise TypeError(f"shingling must be a Shingling, got {type(method.shingling).__name__}")
    check_share(method.ignore_common)
    if isinstance(method, SimHash) and not isinstance(method.idf, bool):
        raise TypeError(f"idf must be a bool, got {type(method.idf).__name__}")
    if isinstance(method, SimHash):
        expected = method.expected_rows
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)):
            raise TypeError("expected_rows must be an int or None")
        check_top_n(method.top_n)
        _check_max_distance(method.max_distance)
        if method.num_blocks is not None:
            return IndexSpec(method, MankuDesign(method.max_distance, method.num_blocks))
        if expected is not None:
            return IndexSpec(method, choose_manku(method.max_distance, expected))
        sized = DEFAULT_EXPECTED_ROWS if rows is None else max(int(rows), 0)
        return IndexSpec(method, choose_manku(method.max_distance, sized), sized_rows=sized)
    if isinstance(method, MinHash):
        threshold = method.threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise TypeError(
                f"threshold must be a number between 0 and 1, got {type(threshold).__name__} "
                f"{threshold!r}"
            )
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {threshold}")
        hasher = MinHasher(method.scheme, method.num_perm, method.seed)
        if hasher.scheme is Scheme.BOTTOM_K:
            raise ValueError("a MinHash index needs scheme 'classic' or 'one_permutation'")
        check_sketch_bits(method.sketch_bits)
        given = (method.num_bands, method.rows_per_band)
        if given == (None, None):
            lsh = choose_lsh(method.threshold, method.num_perm)
        elif None in given:
            raise ValueError("give both num_bands and rows_per_band, or neither")
        else:
            lsh = LshDesign(method.num_bands, method.rows_per_band)  # type: ignore[arg-type]
            if lsh.num_perm > method.num_perm:
                raise ValueError(
                    f"{lsh.num_bands} bands x {lsh.rows_per_band} rows need {lsh.num_perm} "
                    f"values but num_perm is {method.num_perm}"
                )
        if not 0.0 < method.threshold < 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {method.threshold}")
        return IndexSpec(method, lsh)
    raise TypeError(f"method must be SimHash(...) or MinHash(...), got {type(method).__name__}")


def check_sketch_bits(value: object) -> None:
    """A MinHash ``sketch_bits``: a multiple of 64 from 64 to 8192."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"sketch_bits must be an int, got {type(value).__name__}")
    if not 64 <= value <= 8192 or value % 64:
        raise ValueError(f"sketch_bits must be a multiple of 64 from 64 to 8192, got {value}")


def _check_max_distance(value: object) -> None:
    """A SimHash ``max_distance``: the bits two 64-bit fingerprints may differ in, 0 to 63 (a
    Manku design needs more blocks than that many)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_distance must be an int from 0 to 63, got {type(value).__name__}")
    if not 0 <= value <= 63:
        raise ValueError(
            f"max_distance must be from 0 to 63 (bits of a 64-bit SimHash), got {value}"
        )


def refreshed(spec: IndexSpec, rows: int, counts: ShingleCounts | None = None) -> IndexSpec:
    """The spec a build of ``rows`` source rows writes: a SimHash design sized to the table is
    chosen again for ``rows``; a method that learns shingle counts takes the build's
    ``counts``. Anything the user fixed stays."""
    learned = counts if spec.learns else None
    if spec.sized_to_table:
        return replace(resolve(spec.method, rows), counts=learned)
    return replace(spec, counts=learned)
