"""The benchmarks' shared reporter: its statistics, its table and its JSON result; and the rule
that no benchmark file grows past 600 lines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import report  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)

MAX_LINES = 600

finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=50), st.integers(0, 100))
def test_percentile_is_numpys_linear_interpolation(values: list[float], q: int) -> None:
    expected = float(np.percentile(np.array(values), q))
    assert report.percentile(values, q) == pytest.approx(expected, rel=1e-9, abs=1e-6)


def test_percentile_between_ranks() -> None:
    assert report.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert report.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 99) == pytest.approx(4.96)
    assert report.percentile([7.0], 99) == 7.0


@pytest.mark.parametrize("q", [-1, 101])
def test_percentile_refuses_a_rank_outside_0_to_100(q: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 100"):
        report.percentile([1.0], q)


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        report.percentile([], 50)


def test_summary_min_median_max() -> None:
    assert report.summary([3.0, 1.0, 2.0, 10.0]) == {"n": 4, "min": 1.0, "median": 2.5, "max": 10.0}


def test_summary_names_rounds_and_suffixes() -> None:
    found = report.summary([1.0, 2.0, 4.0], ("mean", "p50", "p99"), digits=2, suffix="_ms")
    assert found == {"mean_ms": 2.33, "p50_ms": 2.0, "p99_ms": 3.96}


def test_summary_keeps_integer_extremes_integral() -> None:
    found = report.summary([3, 1, 2], ("max", "min"))
    assert found == {"max": 3, "min": 1}
    assert isinstance(found["max"], int)


def test_summary_of_nothing_counts_zero() -> None:
    assert report.summary([], ("p50", "max")) == {"n": 0}


def test_summary_refuses_an_unknown_statistic() -> None:
    with pytest.raises(ValueError, match="unknown statistic 'p9x'"):
        report.summary([1.0], ("p9x",))


def test_latency_ms_has_the_keys_the_readme_figures_come_from() -> None:
    found = report.latency_ms([0.001, 0.002, 0.003, 0.004])
    assert found == {
        "n": 4,
        "mean_ms": 2.5,
        "p50_ms": 2.5,
        "p95_ms": 3.85,
        "p99_ms": 3.97,
        "max_ms": 4.0,
    }


def test_per_second_and_since() -> None:
    assert report.per_second(2.0, 1000) == {"seconds": 2.0, "docs_per_second": 500}
    assert report.since(0.0, 0)["seconds"] > 0


def test_median_run_keeps_the_lower_middle_run_and_every_value() -> None:
    runs = [{"id": "a", "rate": 3.0}, {"id": "b", "rate": 1.0}, {"id": "c", "rate": 2.0}]
    assert report.median_run(runs, "rate") == {"id": "c", "rate": 2.0, "all_rate": [3.0, 1.0, 2.0]}
    assert report.median_run(runs[:2], "rate")["id"] == "b"
    with pytest.raises(ValueError, match="no runs"):
        report.median_run([], "rate")


def test_timed_calls_stops_once_the_budget_is_spent() -> None:
    seconds, results = report.timed_calls([1, 2, 3], lambda x: x * 2)
    assert results == [2, 4, 6]
    assert len(seconds) == 3
    assert all(s >= 0 for s in seconds)
    _, cut = report.timed_calls([1, 2, 3], lambda x: x, budget_seconds=-1.0)
    assert cut == [1]


def test_fmt() -> None:
    assert report.fmt(None) == "-"
    assert report.fmt("text") == "text"
    assert report.fmt(1234567.4) == "1,234,567"
    assert report.fmt(2.345, ".1f") == "2.3"


def test_table_layout() -> None:
    text = report.table(
        "Title", ["method", "rows", "p50 ms"], [["a", "1,000", "0.5"], ["bb", 7, ""]]
    )
    assert text.split("\n") == [
        "",
        "Title",
        "method   rows  p50 ms",
        "------  -----  ------",
        "a       1,000     0.5",
        "bb          7        ",
    ]


def test_table_alignment_per_column() -> None:
    text = report.table("T", ["a", "b"], [["x", "yyy"]], align="rl")
    assert text.split("\n")[2:] == ["a  b  ", "-  ---", "x  yyy"]


def test_table_refuses_a_row_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        report.table("T", ["a", "b", "c"], [["1", "2"]])
    with pytest.raises(ValueError, match="one l or r per column"):
        report.table("T", ["a", "b"], [["1", "2"]], align="lx")


def test_print_table_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    report.print_table("T", ["a"], [["1"]])
    assert capsys.readouterr().out == report.table("T", ["a"], [["1"]]) + "\n"


def test_result_carries_the_machine_facts(tmp_path: Path) -> None:
    result = report.new_result("query", ["--quick"], ("xxhash",))
    result["figure"] = {"p50_ms": 0.18}
    path = tmp_path / "results" / "query.json"
    report.write_result(path, result, "PostgreSQL 18.1 on x86_64-pc-linux-gnu, compiled by gcc")
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written == report.read_result(path)
    assert written["benchmark"] == "query"
    assert written["command"] == "python benchmarks/query.py --quick"
    assert written["created"].endswith("+00:00")
    assert written["figure"] == {"p50_ms": 0.18}
    assert written["elapsed_seconds"] >= 0
    facts = written["machine"]
    assert facts["cpu_count"] >= 1
    assert facts["python"] == sys.version.split()[0]
    assert facts["postgresql"] == "PostgreSQL 18.1"
    assert facts["versions"]["numpy"] == np.__version__
    assert set(facts["versions"]) >= {"simindex", "psycopg", "xxhash"}
    assert len(facts["simindex_commit"]) >= 40
    assert {"memory_gib", "cpu_model", "platform", "load_average_at_start"} <= set(facts)
    assert len(facts["load_average_at_end"]) == 3


def test_read_result_refuses_what_is_no_result(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="no benchmark result"):
        report.read_result(path)


def test_no_benchmark_file_reaches_600_lines() -> None:
    files = sorted(BENCHMARKS.rglob("*.py"))
    assert len(files) > 5
    long = {
        str(path.relative_to(BENCHMARKS)): count
        for path in files
        if (count := len(path.read_text(encoding="utf-8").splitlines())) >= MAX_LINES
    }
    assert long == {}, f"benchmark files of {MAX_LINES} lines or more: {long}"
