"""``simindex pairs``, ``clusters`` and ``demo`` in subprocesses, against the Python API."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import psycopg
import pytest

from simindex.core.spec import MinHash, SimHash
from simindex.index import Index, create_index
from simindex.ops.pairs import IdenticalGroup, NearPair, SimilarPair
from simindex.ops.verify import Verify
from tests.acceptance.test_cli import environment, one_error_line, simindex

BASE = (
    "postgres keeps the queue durable so a worker that dies loses nothing at all and the "
    "next worker picks up where it stopped without any help from the application"
)
OTHER = "a completely different sentence about databases, indexes and fingerprints of texts"


def planted() -> list[tuple[int, str]]:
    """Three copies of BASE (one shouted, one with an extra word), two of OTHER, and rows
    unlike anything else."""
    rows = [
        (1, BASE),
        (2, BASE.upper() + "!"),
        (3, BASE + " today"),
        (4, OTHER),
        (5, "  " + OTHER.title()),
    ]
    words = ["apples", "trains", "violins", "glaciers", "parsers", "kettles"]
    rows += [(10 + n, f"row {n} talks about {word} and nothing else at all") for n, word in
             enumerate(words)]  # fmt: skip
    rows.append((30, None))  # type: ignore[arg-type]  # no text: not in the index
    return rows


@pytest.fixture
def table(database_dsn: str) -> str:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text, updated date)")
        conn.cursor().executemany(
            "INSERT INTO docs (id, body, updated) VALUES (%s, %s, date '2024-01-01' - %s)",
            [(key, body, key) for key, body in planted()],
        )
    return database_dsn


@pytest.fixture
def simhash(table: str) -> Index:
    index = create_index(table, "docs", "docs", "body", method=SimHash(max_distance=6))
    index.build()
    return index


@pytest.fixture
def minhash(table: str) -> Index:
    index = create_index(table, "notes", "docs", "body", method=MinHash(threshold=0.5))
    index.build()
    return index


def run(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    result = simindex(*args, SIMINDEX_DSN=dsn)
    assert result.returncode == 0, result.stderr
    return result


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def near(pairs: Iterable[NearPair | SimilarPair]) -> list[NearPair]:
    found = list(pairs)
    assert all(isinstance(pair, NearPair) for pair in found)
    return found  # type: ignore[return-value]  # checked just above


def similar(pairs: Iterable[NearPair | SimilarPair]) -> list[SimilarPair]:
    found = list(pairs)
    assert all(isinstance(pair, SimilarPair) for pair in found)
    return found  # type: ignore[return-value]  # checked just above


# -- pairs


def test_pairs_as_csv_and_json_lines_are_the_api_pairs(simhash: Index, table: str) -> None:
    expected = near(simhash.pairs())
    assert len(expected) >= 3  # the planted copies
    result = run("pairs", "docs", dsn=table)
    assert csv_rows(result.stdout) == [["left", "right", "distance"]] + [
        [str(pair.left), str(pair.right), str(pair.distance)] for pair in expected
    ]
    summary = result.stderr.splitlines()[-1]
    assert summary.startswith(f"simindex: {len(expected):,} pairs of docs in ")

    lines = run("pairs", "docs", "--json", "--max-distance", "1", dsn=table).stdout.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"left": pair.left, "right": pair.right, "distance": pair.distance}
        for pair in near(simhash.pairs(max_distance=1))
    ]


def test_minhash_pairs_to_a_file(minhash: Index, table: str, tmp_path: Path) -> None:
    expected = similar(minhash.pairs(threshold=0.6))
    assert expected
    path = tmp_path / "pairs.jsonl"
    result = run("pairs", "notes", "--threshold", "0.6", "--format", "jsonl",
                 "--output", str(path), dsn=table)  # fmt: skip
    assert result.stdout == ""
    assert f"to {path}" in result.stderr
    assert [json.loads(line) for line in path.read_text("utf-8").splitlines()] == [
        {"left": pair.left, "right": pair.right, "similarity": pair.similarity} for pair in expected
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["pairs.jsonl"]  # no temporary file left


def test_minhash_pairs_verified_by_the_estimate(minhash: Index, table: str) -> None:
    lines = run("pairs", "notes", "--verify", "estimate", "--json", dsn=table).stdout.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"left": pair.left, "right": pair.right, "similarity": pair.similarity}
        for pair in similar(minhash.pairs(verify="estimate"))
    ]


def test_pairs_as_a_table(simhash: Index, table: str) -> None:
    lines = run("pairs", "docs", "--format", "table", dsn=table).stdout.splitlines()
    assert lines[0].split() == ["left", "right", "distance"]
    assert [line.split() for line in lines[2:]] == [
        [str(pair.left), str(pair.right), str(pair.distance)] for pair in near(simhash.pairs())
    ]


# -- clusters


def test_clusters_report_as_text_and_json(simhash: Index, table: str) -> None:
    text = run("clusters", "docs", dsn=table).stdout
    members = list(simhash.cluster_members())
    ids = list(dict.fromkeys(member.cluster_id for member in members))
    assert ids[:2] == [1, 4]  # the three copies of BASE, then the two of OTHER
    assert text.startswith("clustered docs (pairs): 11 rows in ")
    # Its pair count is not the number `pairs` prints: it says which pairs it counts.
    assert re.search(r"; \d+ pairs? of distinct rows joined them in \d+ rounds?;", text)
    shown = [line.split(None, 2) for line in text.splitlines()[-len(ids) :]]
    assert shown == [
        [str(cluster_id), str(sum(m.cluster_id == cluster_id for m in members)),
         ", ".join(str(m.key) for m in members if m.cluster_id == cluster_id)]
        for cluster_id in ids
    ]  # fmt: skip

    report = json.loads(run("clusters", "docs", "--json", "--largest", "1", dsn=table).stdout)
    assert report["rows"] == 11 and report["method"] == "pairs"
    assert report["duplicate_rows"] == len(members)
    assert report["largest_clusters"] == [
        {"cluster_id": 1, "size": 3, "keys": [m.key for m in members if m.cluster_id == 1]}
    ]


def test_a_cluster_cut_short_says_how_many_more_and_how_to_list_them(table: str) -> None:
    """A cluster of 16 rows listed by its first 10 keys says the 6 it leaves out and the
    option that lists them (issue 19, item 12); ``--members all`` lists every key."""
    with psycopg.connect(table) as conn:  # 14 more copies of row 4: a cluster of 16 with row 5
        conn.execute("INSERT INTO docs (id, body) SELECT n, body FROM docs, generate_series(101, "
                     "114) AS n WHERE id = 4")  # fmt: skip
    index = create_index(table, "docs", "docs", "body", method=SimHash(max_distance=6))
    index.build()
    keys = [4, 5, *range(101, 115)]

    def lines_of_cluster_4(text: str) -> list[list[str]]:
        return [line.split(None, 2) for line in text.splitlines() if line.lstrip()[:2] == "4 "]

    text = run("clusters", "docs", dsn=table).stdout
    assert lines_of_cluster_4(text) == [["4", "16", ", ".join(map(str, keys[:10])) + " and 6 more"]]
    assert "(at most 10 keys a cluster: --members all lists them all" in text
    assert "1, 2, 3\n" in text  # the cluster of BASE, listed whole

    every = run("clusters", "docs", "--members", "all", dsn=table).stdout
    assert lines_of_cluster_4(every) == [["4", "16", ", ".join(map(str, keys))]]
    assert "more\n" not in every and "at most" not in every

    three = run("clusters", "docs", "--members", "3", "--show", "updated", dsn=table).stdout
    assert [line[2].split() for line in lines_of_cluster_4(three)] == [
        ["4", "2023-12-28"], ["5", "2023-12-27"], ["101"], ["and", "13", "more"]
    ]  # fmt: skip
    assert "(at most 3 keys a cluster: --members all" in three

    report = json.loads(run("clusters", "docs", "--json", "--members", "all", dsn=table).stdout)
    assert report["largest_clusters"][0] == {"cluster_id": 4, "size": 16, "keys": keys}
    refused = simindex("clusters", "docs", "--members", "0", SIMINDEX_DSN=table)
    assert refused.returncode == 2 and "--members" in refused.stderr


def test_clusters_members_with_survivors(simhash: Index, table: str, tmp_path: Path) -> None:
    result = run("clusters", "docs", "--format", "csv", "--survivors", "newest:updated",
                 dsn=table)  # fmt: skip
    survivors = list(simhash.survivors("pairs", prefer="newest:updated"))
    assert csv_rows(result.stdout) == [["cluster_id", "key", "size", "survivor"]] + [
        [str(s.cluster_id), str(s.key), str(s.cluster_size), str(s.survivor).lower()]
        for s in survivors
    ]
    assert {s.key for s in survivors if s.survivor} == {1, 4}  # the newest dates
    assert "clustered docs" in result.stderr  # the report, out of the way of the CSV

    path = tmp_path / "members.csv"
    result = run("clusters", "docs", "--method", "bottom_k", "--bottom-k", "2",
                 "--min-size", "3", "--output", str(path), "--json", dsn=table)  # fmt: skip
    assert json.loads(result.stdout)["method"] == "bottom_k"
    assert csv_rows(path.read_text("utf-8")) == [["cluster_id", "key", "size"]] + [
        [str(m.cluster_id), str(m.key), str(m.size)] for m in simhash.cluster_members(min_size=3)
    ]
    assert "simindex: wrote " in result.stderr


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_minhash_clusters_as_json_lines(minhash: Index, table: str, verify: Verify) -> None:
    lines = run("clusters", "notes", "--threshold", "0.6", "--format", "jsonl",
                "--verify", verify, dsn=table).stdout.splitlines()  # fmt: skip
    assert [json.loads(line) for line in lines] == [
        {"cluster_id": m.cluster_id, "key": m.key, "size": m.size}
        for m in minhash.cluster_members()
    ]
    report = minhash.clusters(threshold=0.6, verify=verify)
    # Identical rows collapse first: the report counts the pairs between groups; verified
    # exactly, also the edges joining each group's rows to its first one.
    found = list(minhash.pairs(threshold=0.6, verify=verify, groups=True))
    joined = sum(len(g.keys) - 1 for g in found if isinstance(g, IdenticalGroup))
    between = sum(isinstance(pair, SimilarPair) for pair in found)
    assert report.pairs == between + (joined if verify == "exact" else 0)


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["pairs", "docs", "--threshold", "0.5"], 2, "--threshold: docs is a simhash index"),
        (["pairs", "docs", "--max-distance", "9"], 1, "max_distance"),
        (["pairs", "docs", "--json", "--format", "csv"], 2, "--json"),
        (["clusters", "docs", "--threshold", "0.5"], 2, "simhash index"),
        (["clusters", "docs", "--method", "leader", "--max-distance", "2"], 2, "leader"),
        (["clusters", "docs", "--bottom-k", "3"], 2, "--bottom-k"),
        (["pairs", "docs", "--verify", "exact"], 2, "--verify: docs is a simhash index"),
        (["clusters", "docs", "--method", "bottom_k", "--verify", "exact"], 2, "only for"),
        (["clusters", "docs", "--survivors", "tallest"], 2, "--survivors"),
        (["clusters", "docs", "--survivors", "newest:nosuchcolumn"], 1, "nosuchcolumn"),
        (["pairs", "nosuchindex"], 1, "nosuchindex"),
    ],
)
def test_bad_requests_are_one_line(
    simhash: Index, table: str, args: list[str], code: int, expected: str
) -> None:
    result = simindex(*args, SIMINDEX_DSN=table)
    assert result.returncode == code, result.stderr
    assert expected in one_error_line(result)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["clusters", "docs", "--method", "nearest"], "--method"),
        (["clusters", "docs", "--min-size", "0"], "--min-size"),
        (["pairs", "docs", "--format", "xml"], "--format"),
    ],
)
def test_bad_flags_are_usage_errors(args: list[str], expected: str) -> None:
    result = simindex(*args, "--dsn", "dbname=never_reached")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and expected in errors[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_pairs_into_a_closed_pipe_is_quiet(simhash: Index, table: str) -> None:
    head = subprocess.run(
        f"{sys.executable} -m simindex pairs docs | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        env=environment(SIMINDEX_DSN=table),
        timeout=20,
        check=False,
    )
    assert head.stdout == "left,right,distance\n"
    assert "Traceback" not in head.stderr and "error" not in head.stderr


# -- demo


def test_demo_without_a_database_runs_on_a_throwaway_server() -> None:
    # Unreachable on purpose: the demo ignores them and starts its own server.
    unreachable = "postgresql://127.0.0.1:1/never_used"
    result = subprocess.run(
        [sys.executable, "-m", "simindex", "demo"],
        capture_output=True,
        text=True,
        env=environment(SIMINDEX_DSN=unreachable, DATABASE_URL=unreachable),
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Clusters of near-duplicates" in result.stdout
    assert "clusters of" in result.stdout
    assert "starting a throwaway PostgreSQL" in result.stderr
    assert unreachable not in result.stdout + result.stderr


def test_show_prints_columns_beside_the_keys(simhash: Index, table: str) -> None:
    pairs = csv_rows(run("pairs", "docs", "--show", "updated", dsn=table).stdout)
    assert pairs[0] == ["left", "right", "distance", "left_updated", "right_updated"]
    assert len(pairs) > 1
    assert all(len(row) == 5 and row[3].startswith("20") for row in pairs[1:])

    report = run("clusters", "docs", "--show", "body", "--show", "updated", dsn=table).stdout
    header = next(line for line in report.splitlines() if line.startswith("cluster_id"))
    assert header.split() == ["cluster_id", "rows", "key", "body", "updated"]
    assert BASE[:20] in report and "2023-12-31" in report

    members = csv_rows(run("clusters", "docs", "--format", "csv", "--show", "updated",
                           dsn=table).stdout)  # fmt: skip
    assert members[0] == ["cluster_id", "key", "size", "updated"]

    query = run("query", "docs", "--key", "1", "--show", "body", "--json", dsn=table)
    matches = json.loads(query.stdout)["matches"]
    assert matches and all(set(m["columns"]) == {"body"} for m in matches)
    assert BASE.upper() + "!" in [m["columns"]["body"] for m in matches]

    missing = simindex("pairs", "docs", "--show", "nosuch", SIMINDEX_DSN=table)
    assert missing.returncode == 1 and 'column "nosuch" does not exist' in missing.stderr


def test_a_threshold_below_the_tuned_one_is_a_warning_line(minhash: Index, table: str) -> None:
    result = run("pairs", "notes", "--threshold", "0.3", dsn=table)
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and warning[0].startswith("simindex: warning: threshold 0.3 is below")


def test_pairs_by_groups_of_identical_rows(table: str) -> None:
    with psycopg.connect(table) as conn:  # three more copies of row 1: a group of four
        conn.execute("INSERT INTO docs (id, body) SELECT n, body FROM docs, generate_series(40, "
                     "42) AS n WHERE id = 1")  # fmt: skip
    index = create_index(table, "docs", "docs", "body", method=SimHash(max_distance=6))
    index.build()
    expected: list[dict[str, object]] = []
    for found in index.pairs(groups=True):
        if isinstance(found, IdenticalGroup):
            first, *others = found.keys
            expected += [
                {"left": first, "right": other, "distance": 0, "identical": True}
                for other in others
            ]
        else:
            assert isinstance(found, NearPair)
            pair = {"left": found.left, "right": found.right, "distance": found.distance}
            expected.append(pair | {"identical": False})
    assert {"left": 1, "right": 40, "distance": 0, "identical": True} in expected
    result = run("pairs", "docs", "--groups", "--json", dsn=table)
    assert [json.loads(line) for line in result.stdout.splitlines()] == expected
    assert re.search(r"simindex: [\d,]+ groups and pairs of docs in ", result.stderr)
    rows = csv_rows(run("pairs", "docs", "--groups", dsn=table).stdout)
    assert rows[0] == ["left", "right", "distance", "identical"]
    assert ["1", "40", "0", "true"] in rows


def test_pairs_and_clusters_name_no_row_deleted_and_not_swept(simhash: Index, table: str) -> None:
    """The CLI runs as whoever the DSN names (here a superuser, who sees every index row):
    a row deleted and not swept yet is named by no pair and no cluster."""
    with psycopg.connect(table) as conn:
        conn.execute("DELETE FROM docs WHERE id = 1")  # the BASE cluster's id until now
    result = run("pairs", "docs", "--json", dsn=table)
    pairs = [json.loads(line) for line in result.stdout.splitlines()]
    named = {pair[side] for pair in pairs for side in ("left", "right")}
    assert 1 not in named and {2, 3} <= named
    report = json.loads(run("clusters", "docs", "--json", "--largest", "1", dsn=table).stdout)
    assert report["rows"] == 10
    assert report["largest_clusters"] == [{"cluster_id": 2, "size": 2, "keys": [2, 3]}]
