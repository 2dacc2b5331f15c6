"""The sample corpus shipped for ``simindex demo``: what its README promises, it holds."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np

from simindex.core.spec import SimHash, resolve
from simindex.demo import CORPUS, INDEXES, documents


def documented_count() -> int:
    readme = (resources.files("simindex") / "data" / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"`{re.escape(CORPUS)}`: ([\d,]+) descriptions", readme)
    assert match is not None, "the README states how many descriptions the corpus holds"
    return int(match.group(1).replace(",", ""))


def test_the_corpus_holds_the_documented_records() -> None:
    corpus = documents()
    assert len(corpus) == documented_count()
    assert [document.id for document in corpus] == list(range(1, len(corpus) + 1))
    packages = [document.package for document in corpus]
    assert packages == sorted(set(packages))  # one record per package, numbered in name order
    assert all(document.title.strip() and document.body.strip() for document in corpus)


def test_the_corpus_stays_small() -> None:
    with (resources.files("simindex") / "data" / CORPUS).open("rb") as packed:
        assert len(packed.read()) < 1_000_000


def test_the_corpus_has_near_duplicates_within_the_demo_distance() -> None:
    method = INDEXES["demo_simhash"]
    assert isinstance(method, SimHash)
    corpus = documents()
    values, present = resolve(method).simhash_values([document.body for document in corpus])
    assert present.all()
    pairs = []
    for i in range(len(values) - 1):
        distances = np.bitwise_count(values[i] ^ values[i + 1 :])
        pairs += [(i, i + 1 + int(j)) for j in np.flatnonzero(distances <= method.max_distance)]
    # Families of packages from one source (a library, its -dev and -doc packages, translations)
    # share most of their description: the demo has groups to show.
    families = {
        (corpus[i].package, corpus[j].package) for i, j in pairs if corpus[i].body != corpus[j].body
    }
    assert len(families) >= 20
    assert ("dav1d", "libdav1d-dev") in families


def test_importing_the_demo_reads_no_corpus() -> None:
    code = (
        "import sys\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: event == 'open' and opened.append(str(args[0])))\n"
        "import simindex.demo\n"
        f"print(sum({CORPUS!r} in path for path in opened))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "0"


def test_the_corpus_and_its_readme_ship_in_the_wheel() -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    patterns = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["simindex"]
    for name in (CORPUS, "README.md"):
        assert any(fnmatch.fnmatch(f"data/{name}", pattern) for pattern in patterns), name
