"""How many values of how many bits the MinHash estimate needs: recall, precision and bytes.

    python benchmarks/minhash_format.py [--corpora licences,docs,code,short] [--output PATH]

For each corpus of ``quality_corpora.py`` (simindex's own tokens, exact Jaccard of every pair
from the shingle sets), the candidates of the default LSH design (15 bands x 7 rows of the
128-bin one-permutation signature, as an index finds them) are scored by each stored form's
estimate -- the same arithmetic the SQL functions do: the share ``P`` of equal ``b``-bit
values among ``K``, and ``(P - 2**-b) / (1 - 2**-b)`` (Li and König, "b-Bit Minwise Hashing",
WWW 2010) -- and a pair is an answer when that reaches the threshold. Printed per form: recall
and precision at J >= 0.8 (and 0.5, 0.9), the estimate's standard deviation at 0.75 <= J < 0.85,
and the form's bytes a row (its bit string as PostgreSQL stores it). Writes
``benchmarks/results/minhash-format.json``. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from quality_corpora import corpora, sparse_truth
from report import RESULTS, log, new_result, print_table, write_result

from simindex.core.design import choose_lsh
from simindex.core.minhash import MinHasher, SchemeName
from simindex.core.spec import MinHash, resolve

THRESHOLDS = (0.5, 0.8, 0.9)
COLUMNS: tuple[str, ...] = ("corpus", "form", "bytes", "recall", "precision")
COLUMNS += ("error_sd_near_0.8", "error_mean_near_0.8")
LONG = ("licences", "docs", "code")


@dataclass(frozen=True)
class Form:
    """A stored form of the estimate: ``values`` values of ``bits`` bits (32: the full
    32-bit values of a scheme's signature, compared for equality)."""

    label: str
    scheme: SchemeName
    values: int
    bits: int

    @property
    def bytes_a_row(self) -> int:
        """Bytes of the value as stored: a bit string's 4-byte header and bit count, or an
        ``integer[]``'s 24-byte header."""
        if self.bits == 32:
            return 24 + 4 * self.values
        return 8 + self.values * self.bits // 8


FORMS = (
    Form("classic 128 x 32 (before)", "classic", 128, 32),
    Form("one-perm 128 x 32", "one_permutation", 128, 32),
    Form("one-perm 512 x 1", "one_permutation", 512, 1),
    Form("one-perm 1024 x 1", "one_permutation", 1024, 1),
    Form("one-perm 512 x 2", "one_permutation", 512, 2),
    Form("one-perm 1536 x 1", "one_permutation", 1536, 1),
    Form("one-perm 1792 x 1 (default)", "one_permutation", 1792, 1),
    Form("one-perm 768 x 2", "one_permutation", 768, 2),
    Form("one-perm 2048 x 1", "one_permutation", 2048, 1),
    Form("one-perm 1024 x 2", "one_permutation", 1024, 2),
    Form("one-perm 512 x 4", "one_permutation", 512, 4),
    Form("one-perm 256 x 8", "one_permutation", 256, 8),
    Form("one-perm 1024 x 8", "one_permutation", 1024, 8),
)


def estimates(form: Form, seed: int, features: list[NDArray[np.uint64]]) -> Any:
    """A function of two row numbers (from 0) giving the form's estimate of their Jaccard."""
    if form.bits == 32:
        values, _ = MinHasher(form.scheme, form.values, seed).signature_matrix(features)
        return lambda a, b: np.count_nonzero(values[a] == values[b], axis=-1) / form.values
    sketch = MinHasher("one_permutation", 128, seed).sketch_matrix(features, form.values, form.bits)
    chance = 2.0**-form.bits

    def estimate(a: NDArray[np.intp], b: NDArray[np.intp]) -> NDArray[np.float64]:
        both = np.bitwise_xor(sketch[a], sketch[b])
        # a value is equal when all its bits are: OR the value's bits together first
        if form.bits > 1:
            folded = np.zeros_like(both)
            for shift in range(form.bits):
                folded |= both >> np.uint8(shift)
            both = folded & np.uint8(sum(1 << (i * form.bits) for i in range(8 // form.bits)))
        differ = np.bitwise_count(both).sum(axis=-1)
        share = 1.0 - differ / form.values
        result: NDArray[np.float64] = np.maximum(0.0, (share - chance) / (1.0 - chance))
        return result

    return estimate


def run(
    names: list[str], only: list[str], seeds: range, thresholds: tuple[float, ...] = THRESHOLDS
) -> dict[str, Any]:
    result: dict[str, Any] = {"forms": [], "rows": []}
    forms = [form for form in FORMS if any(part in form.label for part in only)]
    for form in forms:
        result["forms"].append({"label": form.label, "bytes": form.bytes_a_row})
    for corpus in corpora(names):
        spec = resolve(MinHash(0.8, scheme="one_permutation"))
        features = [np.unique(row) for row in spec.features(corpus.texts)]
        truth = sparse_truth(features, 0.3)
        pairs = np.array(list(truth), np.intp) - 1
        jaccard = np.array(list(truth.values()))
        log(f"{corpus.name}: {len(corpus.texts)} texts, {len(pairs)} pairs with J >= 0.3")
        for threshold in thresholds:
            design = choose_lsh(threshold, 128)
            values, _ = MinHasher("one_permutation", 128, 1).signature_matrix(features)
            rows = design.rows_per_band
            shared = np.zeros(len(pairs), bool)
            for band in range(design.num_bands):
                part = slice(band * rows, (band + 1) * rows)
                shared |= (values[pairs[:, 0], part] == values[pairs[:, 1], part]).all(axis=1)
            wanted = jaccard >= threshold
            for form in forms:
                started = time.perf_counter()
                hits = answers = 0
                errors = []
                for seed in seeds:
                    estimate = estimates(form, seed, features)(pairs[:, 0], pairs[:, 1])
                    answered = shared & (estimate >= threshold)
                    hits += int(np.count_nonzero(answered & wanted))
                    answers += int(answered.sum())
                    errors.append(estimate - jaccard)
                seconds = time.perf_counter() - started
                near = (jaccard >= 0.75) & (jaccard < 0.85)
                error = np.concatenate([e[near] for e in errors])
                result["rows"].append(
                    {
                        "corpus": corpus.name,
                        "threshold": threshold,
                        "form": form.label,
                        "bytes": form.bytes_a_row,
                        "recall": round(hits / max(1, int(wanted.sum()) * len(seeds)), 4),
                        "precision": round(hits / max(1, answers), 4),
                        "true_pairs": int(wanted.sum()),
                        "seeds": len(seeds),
                        "error_sd_near_0.8": round(float(np.std(error)), 4),
                        "error_mean_near_0.8": round(float(np.mean(error)), 4),
                        "seconds": round(seconds, 3),
                    }
                )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default="licences,docs,code,short")
    parser.add_argument("--forms", default="x", help="forms whose label has one of these")
    parser.add_argument("--output", type=Path, default=RESULTS / "minhash-format.json")
    parser.add_argument(
        "--seeds", type=int, default=1, help="seeds 1..N of the estimate's hashing, pooled"
    )
    parser.add_argument("--thresholds", default="0.5,0.8,0.9")
    args = parser.parse_args()
    result = new_result("minhash_format", sys.argv[1:])
    thresholds = tuple(float(t) for t in args.thresholds.split(","))
    seeds = range(1, 1 + args.seeds)
    result.update(run(args.corpora.split(","), args.forms.split(","), seeds, thresholds))
    rows = [[r[k] for k in COLUMNS] for r in result["rows"] if r["threshold"] == 0.8]
    print_table(
        "The estimate alone at J >= 0.8 (default 15 x 7 bands find the candidates)",
        ["corpus", "stored form", "bytes", "recall", "precision", "sd near 0.8", "bias"],
        rows,
        "llrrrrr",
    )
    write_result(args.output, result)


if __name__ == "__main__":
    main()
