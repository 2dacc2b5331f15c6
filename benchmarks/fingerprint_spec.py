"""Fingerprints through the spec, as build and sync make them, and the same for an older tree.

    python benchmarks/fingerprint_spec.py [--long N] [--short N] [--batch N] [--repeats N]
                                          [--cpu N]

``simindex.core.fingerprints.fingerprint_batch`` takes a stored spec (JSON) and a batch of
texts, and is what ``build`` (in each worker process) and ``sync`` (per batch) call: these
timings are the end-to-end rate of the product. Run as a script, it prints the timings as JSON
on stdout:
``fingerprint.py --baseline DIR`` runs it that way with another checkout of simindex first on
``sys.path`` (for instance main's tree from ``git archive``), so a before/after pair is
measured in one run, on the same core, on the same texts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import corpus
import fingerprint_makers as makers
from fingerprint_makers import Timing, Work, batches, measure, timing_record
from report import log

try:
    from simindex.core.fingerprints import fingerprint_batch
except ImportError:  # a baseline tree from before core.batch became core.fingerprints
    from simindex.core.batch import fingerprint_batch  # type: ignore[no-redef,import-not-found]
from simindex.core.spec import MinHash, SimHash, resolve

DEFAULT_MINHASH = "MinHash(), the default"
"""Classic in trees before the one-permutation default; one-permutation with its sketch since."""
METHODS: dict[str, SimHash | MinHash] = {
    "SimHash()": SimHash(),
    DEFAULT_MINHASH: MinHash(),
    "MinHash(scheme='one_permutation')": MinHash(scheme="one_permutation"),
}


def spec_name(method: str) -> str:
    return f"simindex {method} through the spec"


def spec_work(spec_json: str, chunks: Sequence[list[str | None]]) -> Work:
    def work() -> int:
        made = 0
        for chunk in chunks:
            made += int(fingerprint_batch(spec_json, chunk)[1].sum())
        return made

    return work


def spec_timings(label: str, texts: list[str], batch: int, repeats: int) -> list[Timing]:
    """One timing per method: every text through ``fingerprint_batch`` in batches."""
    chunks: list[list[str | None]] = [list(chunk) for chunk in batches(texts, batch)]
    log(f"end to end through the spec, {label} texts")
    return [
        measure(
            f"{spec_name(method)} [{label}]",
            spec_work(resolve(value).to_json(), chunks),
            len(texts),
            repeats,
        )
        for method, value in METHODS.items()
    ]


def baseline_timings(
    tree: Path, long: int, batch: int, repeats: int, cpu: int | None, clock: str = "wall"
) -> dict[str, Any]:
    """The same timings with the simindex of ``tree``, in a child process pinned like this one."""
    command = [
        sys.executable,
        str(Path(__file__)),
        f"--long={long}",
        f"--batch={batch}",
        f"--repeats={repeats}",
        f"--clock={clock}",
    ]
    if cpu is not None:
        command.append(f"--cpu={cpu}")
    environment = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(tree), str(Path(__file__).parent)])
    }
    log(f"baseline: {tree}")
    found = subprocess.run(command, env=environment, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(found.stdout)
    return result


def before_and_after(
    tree: Path,
    texts: list[str],
    batch: int,
    repeats: int,
    cpu: int | None,
    clock: str,
    label: str,
    rounds: int = 2,
) -> dict[str, Any]:
    """The spec path of ``tree`` (in a child process) and of this tree, in turn ``rounds``
    times on the same texts and core, each method's best pass kept: on a machine shared with
    other work, the two are measured minutes apart at most, so their ratio holds."""
    best: dict[str, dict[str, dict[str, Any]]] = {"before": {}, "after": {}}
    child: dict[str, Any] = {}
    for _ in range(rounds):
        child = baseline_timings(tree, len(texts), batch, repeats, cpu, clock)
        mine: list[dict[str, Any]] = [
            timing_record(timing) for timing in spec_timings("long", texts, batch, repeats)
        ]
        for side, records in (("before", child["timings"]), ("after", mine)):
            for record in records:
                kept = best[side].get(record["name"])
                if kept is None or record["best_seconds"] < kept["best_seconds"]:
                    best[side][record["name"]] = record
    return {
        "baseline": label,
        "rounds": rounds,
        "before": list(best["before"].values()),
        "after": list(best["after"].values()),
    }


# Issue 22's targets, long texts on one core: times the rate before the change and times the
# fastest rensa MinHash (peers hash our shingle strings their own way), in the same run.
TARGETS = {
    "SimHash()": {"before": 2.0, "rensa": 5.0},
    DEFAULT_MINHASH: {"before": 2.0, "rensa": 2.0},
}
RENSA = ("rensa RMinHash", "rensa CMinHash", "rensa RMinHash digest_matrix batch")
DATASKETCH = (
    "datasketch MinHash update_batch (sha1, default)",
    "datasketch MinHash.bulk (sha1, default)",
)


def speed_targets(
    long_timings: Sequence[Timing], paired: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Per method through the spec: its rate beside the peers, against rensa and datasketch,
    and (``paired``, from :func:`before_and_after`) against the rate before the change."""
    by_name = {timing.name.split(" [")[0]: timing for timing in long_timings}
    rensa = max((by_name[name] for name in RENSA), key=lambda timing: timing.rate)
    datasketch = max((by_name[name] for name in DATASKETCH), key=lambda timing: timing.rate)
    rates = {
        side: {
            record["name"].split(" [")[0]: record["documents"] / record["best_seconds"]
            for record in (paired or {}).get(side, [])
        }
        for side in ("before", "after")
    }
    rows = []
    for method in METHODS:
        name = spec_name(method)
        rate = by_name[name].rate
        before, after = rates["before"].get(name), rates["after"].get(name)
        row: dict[str, Any] = {
            "measure": name,
            "docs_per_second": rate,
            "before_docs_per_second": before,
            "after_docs_per_second": after,
            "times_before": after / before if before and after else None,
            "rensa": rensa.name,
            "rensa_docs_per_second": rensa.rate,
            "times_rensa": rate / rensa.rate,
            "datasketch": datasketch.name,
            "datasketch_docs_per_second": datasketch.rate,
            "times_datasketch": rate / datasketch.rate,
        }
        target = TARGETS.get(method)
        if target is not None:
            row["target_times_before"] = target["before"]
            row["target_times_rensa"] = target["rensa"]
            row["met"] = row["times_rensa"] >= target["rensa"] and (
                row["times_before"] is None or row["times_before"] >= target["before"]
            )
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--long", type=int, default=1000, help="long documents")
    parser.add_argument("--short", type=int, default=0, help="short documents, timed apart")
    parser.add_argument("--batch", type=int, default=1000, help="texts per fingerprint_batch")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes")
    parser.add_argument("--cpu", type=int, help="CPU to pin to (default: the lowest allowed)")
    parser.add_argument("--clock", choices=sorted(makers.CLOCKS), default="wall")
    args = parser.parse_args(argv)
    makers.clock = makers.CLOCKS[args.clock]
    if hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {allowed[0] if args.cpu is None else args.cpu})
    import simindex

    texts = [document.text for document in corpus.long_documents(args.long)]
    timings = spec_timings("long", texts, args.batch, args.repeats)
    if args.short:
        short = [document.text for document in corpus.short_documents(args.short)]
        timings += spec_timings("short", short, args.batch, args.repeats)
    print(
        json.dumps(
            {
                "simindex": str(Path(simindex.__file__).parent),
                "timings": [timing_record(timing) for timing in timings],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
