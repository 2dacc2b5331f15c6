"""Make the sample corpus that ``simindex demo`` ships: Debian 12 package descriptions.

Reads two files of a Debian 12 ("bookworm") machine's apt index:

* ``*_debian_dists_bookworm_main_binary-amd64_Packages[.lz4|.gz|.xz]``: every binary package
  of bookworm's main area with its source package and the MD5 of its description;
* ``*_debian_dists_bookworm_main_i18n_Translation-en[.lz4|.gz|.xz]``: the full English
  descriptions, keyed by package and that MD5. A stock Debian container image leaves this one
  out (``Acquire::Languages "none"``); ``apt-get update -o Acquire::Languages=en`` fetches it.

Near-duplicates in Debian come in families: the binary packages built from one source
(``libfoo1``, ``libfoo-dev``, ``libfoo-doc``, ``foo-l10n-de``...) usually share most of their
long description. So the sample keeps whole families: source packages are taken in the order
of the SHA-256 of their name (deterministic, unrelated to content) until the corpus holds at
least :data:`TARGET_RECORDS` descriptions, each with all its binary packages that have a long
description. Sources with more than :data:`MAX_FAMILY` binaries (cross compilers, task lists)
are left out, so that no single family crowds out the rest.

Each output line is ``{"id": n, "package": ..., "title": ..., "body": ...}``: ``title`` is the
synopsis (the description's first line), ``body`` the extended description with Debian's
control-file indentation undone (a line holding only "." becomes an empty line). Records are
sorted by package name and numbered from 1. The file is gzip with a zero timestamp, so the same
inputs give the same bytes.

Run from the repository root::

    python benchmarks/demo_corpus.py            # writes simindex/data/debian_descriptions.jsonl.gz
    python benchmarks/demo_corpus.py --lists DIR --output FILE
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import lzma
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TARGET_RECORDS = 3000
MAX_FAMILY = 40
APT_LISTS = Path("/var/lib/apt/lists")
PACKAGES = "*_debian_dists_bookworm_main_binary-amd64_Packages*"
TRANSLATIONS = "*_debian_dists_bookworm_main_i18n_Translation-en*"
OUTPUT = Path(__file__).resolve().parents[1] / "simindex" / "data" / "debian_descriptions.jsonl.gz"


@dataclass(frozen=True, slots=True)
class Binary:
    """One binary package of the Packages file: its name, source and description's MD5."""

    package: str
    source: str
    description_md5: str


def read_index_file(path: Path) -> str:
    """An apt index file as text, whichever compression apt stored it with."""
    if path.suffix == ".lz4":
        # Python's standard library has no LZ4; the lz4 tool comes with apt's own dependencies.
        data = subprocess.run(["lz4cat", str(path)], capture_output=True, check=True).stdout
    elif path.suffix == ".gz":
        data = gzip.decompress(path.read_bytes())
    elif path.suffix == ".xz":
        data = lzma.decompress(path.read_bytes())
    else:
        data = path.read_bytes()
    return data.decode("utf-8")


def stanzas(text: str) -> Iterator[dict[str, str]]:
    """The paragraphs of a Debian control file as {field: value} (continuation lines kept)."""
    for paragraph in text.split("\n\n"):
        fields: dict[str, str] = {}
        name = None
        for line in paragraph.splitlines():
            if line.startswith((" ", "\t")) and name is not None:
                fields[name] += "\n" + line
            elif ":" in line:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
        if fields:
            yield fields


def binaries(packages_text: str) -> list[Binary]:
    """Every binary package once (the first stanza of a name wins), with its source's name."""
    seen: dict[str, Binary] = {}
    for fields in stanzas(packages_text):
        package = fields.get("Package")
        md5 = fields.get("Description-md5")
        if package is None or md5 is None or package in seen:
            continue
        # "Source: foo (1.2-3)" names a source whose version differs from the binary's.
        source = fields.get("Source", package).split(" ", 1)[0]
        seen[package] = Binary(package, source, md5)
    return list(seen.values())


def descriptions(translation_text: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(package, description MD5) -> (title, body) from a Translation-en file."""
    found = {}
    for fields in stanzas(translation_text):
        text = fields.get("Description-en")
        if text is None or "Package" not in fields or "Description-md5" not in fields:
            continue
        title, _, extended = text.partition("\n")
        found[(fields["Package"], fields["Description-md5"])] = (title.strip(), body(extended))
    return found


def body(extended: str) -> str:
    """The extended description as plain text: one leading space off each line, "." lines
    (Debian's paragraph breaks) empty."""
    lines = []
    for line in extended.splitlines():
        line = line[1:] if line.startswith(" ") else line
        lines.append("" if line.strip() == "." else line.rstrip())
    return "\n".join(lines).strip()


def source_order(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def select(
    packages: list[Binary],
    texts: dict[tuple[str, str], tuple[str, str]],
    target: int = TARGET_RECORDS,
    max_family: int = MAX_FAMILY,
) -> list[dict[str, object]]:
    """Whole source families in hash order until ``target`` records; numbered by package."""
    families: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for binary in packages:
        title, text = texts.get((binary.package, binary.description_md5), ("", ""))
        if text:
            families[binary.source].append((binary.package, title, text))
    chosen: list[tuple[str, str, str]] = []
    for source in sorted(families, key=source_order):
        if len(chosen) >= target:
            break
        if len(families[source]) <= max_family:
            chosen += families[source]
    chosen.sort()
    return [
        {"id": number, "package": package, "title": title, "body": text}
        for number, (package, title, text) in enumerate(chosen, start=1)
    ]


def write(records: list[dict[str, object]], output: Path) -> None:
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    buffer = io.BytesIO()
    # mtime=0 and no file name in the header: the same records always give the same bytes.
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as packed:
        packed.write(lines.encode("utf-8"))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(buffer.getvalue())


def only_match(directory: Path, pattern: str) -> Path:
    # apt keeps one compression of each index; an uncompressed copy beside it is the same data.
    matches = sorted(directory.glob(pattern), key=lambda path: path.suffix != ".lz4")
    if not matches:
        raise SystemExit(
            f"no {pattern} in {directory}: this needs a Debian 12 apt index "
            "(apt-get update -o Acquire::Languages=en)"
        )
    return matches[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lists", type=Path, default=APT_LISTS, help="apt's lists directory")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--target", type=int, default=TARGET_RECORDS)
    args = parser.parse_args()
    packages_file = only_match(args.lists, PACKAGES)
    translation_file = only_match(args.lists, TRANSLATIONS)
    records = select(
        binaries(read_index_file(packages_file)),
        descriptions(read_index_file(translation_file)),
        target=args.target,
    )
    write(records, args.output)
    print(
        f"{len(records)} descriptions from {packages_file.name} and {translation_file.name} "
        f"-> {args.output} ({args.output.stat().st_size} bytes)"
    )


if __name__ == "__main__":
    main()
