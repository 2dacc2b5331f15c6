"""Fingerprints of a batch of texts, by spec: the one function build, sync and check share.

It takes the spec as JSON so that it can run in worker processes (a string pickles cheaply
and the parsed spec is cached per process).
"""

from __future__ import annotations

import functools
from typing import Any

from numpy.typing import NDArray

from simindex.core.spec import IndexSpec

Batch = tuple[NDArray[Any], NDArray[Any]]
"""(values, has-features): one fingerprint or signature row per text, and whether it has one."""


@functools.lru_cache(maxsize=64)  # bounded: each rebuild of a learning index is a new spec
def _spec(spec_json: str) -> IndexSpec:
    return IndexSpec.from_json(spec_json)


def fingerprint_batch(spec_json: str, texts: list[str | None]) -> Batch:
    """(values, has-features) of a batch of texts; runs in worker processes."""
    spec = _spec(spec_json)
    if spec.kind == "simhash":
        return spec.simhash_values(texts)
    values, lengths = spec.minhash_values(texts)
    return values, lengths > 0
