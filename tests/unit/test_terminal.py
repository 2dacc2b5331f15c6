"""The command line's text rendering: tables, sizes, durations and the build's progress bar."""

from __future__ import annotations

import io

import pytest

from simindex import _terminal as terminal
from simindex._terminal import ProgressBar, StepProgress, duration, size, table, table_lines


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_table_aligns_numbers_right_and_text_left() -> None:
    shown = table(["key", "similarity"], [["a-1", 1.0], ["b-22", 0.84375]]).splitlines()
    assert shown == [
        "key   similarity",
        "----  ----------",
        "a-1       1.0000",
        "b-22      0.8438",
    ]
    assert table(["key", "distance"], [[7, 0], [1234, 3]]).splitlines()[2:] == [
        "   7         0",
        "1234         3",
    ]


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, "0 bytes"),
        (8192, "8192 bytes"),
        (16384, "16 kB"),
        (1458176, "1424 kB"),
        (99 * 1024**2, "99 MB"),
        (3 * 1024**5, "3072 TB"),
    ],
)
def test_sizes_read_as_pg_size_pretty_prints_them(count: int, expected: str) -> None:
    assert size(count) == expected


def test_durations() -> None:
    assert [duration(s) for s in (0.123, 12.4, 185, 7620)] == ["0.12 s", "12 s", "3m05s", "2h07m"]


def test_progress_on_a_terminal_redraws_one_line_then_clears_it() -> None:
    stream, clock = Terminal(), Clock()
    bar = ProgressBar("building docs", stream, clock=clock, columns=121)
    bar(2000, 10_000)  # at once: nothing yet
    assert stream.getvalue() == ""
    clock.now += 1.0
    bar(4000, 10_000)
    clock.now += 0.01  # faster than the redraw rate: skipped
    bar(6000, 10_000)
    clock.now += 1.0
    bar(8000, 10_000)
    drawn = stream.getvalue()
    assert "\n" not in drawn and drawn.count("\r") == 2
    first, second = drawn.split("\r")[1:]
    assert "building docs: 4,000 / ~10,000 rows (40%), 4,000 rows/s, 1.50 s left" in first
    assert "[################........................]" in first
    assert "8,000 / ~10,000 rows (80%)" in second
    bar.close()
    assert stream.getvalue().endswith("\r") and "\n" not in stream.getvalue()


def test_progress_elsewhere_is_an_occasional_line() -> None:
    stream, clock = io.StringIO(), Clock()
    bar = ProgressBar("building docs", stream, every=10.0, clock=clock)
    for _ in range(30):
        clock.now += 1.0
        bar(int(clock.now - 100) * 1000, None)  # no estimate: count and rate only
    bar.close()
    assert stream.getvalue().splitlines() == [
        "building docs: 10,000 rows, 1,000 rows/s",
        "building docs: 20,000 rows, 1,000 rows/s",
        "building docs: 30,000 rows, 1,000 rows/s",
    ]


def test_progress_past_the_planner_estimate_drops_the_percentage() -> None:
    bar = ProgressBar("b", io.StringIO())
    assert bar.status(1500, 1000, 1.0) == "b: 1,500 rows, 1,500 rows/s"


def test_step_progress_shows_steps_with_a_bar_when_their_number_is_known() -> None:
    stream, clock = Terminal(), Clock()
    line = StepProgress("pairs of docs", stream, clock=clock, columns=81)
    clock.now += 1.0
    line("3/10 Manku tables, 1,200 pairs", 3, 10)
    clock.now += 1.0
    line("components, round 2", 2, None)
    first, second = stream.getvalue().split("\r")[1:]
    assert first.startswith("[######..............] pairs of docs: 3/10 Manku tables, 1,200 pairs")
    assert second.rstrip() == "pairs of docs: components, round 2, 2.00 s"
    plain = io.StringIO()
    StepProgress("p", plain, clock=clock, in_place=False)("0/1 bands", 0, 1, now=True)
    assert plain.getvalue() == "p: 0/1 bands, 0.00 s\n"


def test_table_lines_take_widths_from_the_first_rows() -> None:
    lines = list(table_lines(["key", "name"], iter([(1, "a"), (22, "bb"), (333, "ccc")]), sample=2))
    assert lines == ["key  name", "---  ----", "  1  a", " 22  bb", "333  ccc"]


def test_cost_says_tables_and_bytes_a_row() -> None:
    from simindex.core.spec import MinHash, SimHash, resolve

    wide = terminal.cost(resolve(SimHash(max_distance=8), 1_000_000), 1_000_000)
    assert (
        wide == "cost: 45 permutation tables, about 2232 bytes a row (2128 MB for 1,000,000 rows)"
    )
    assert terminal.cost(resolve(SimHash(max_distance=8), 853), 853).startswith(
        "cost: 9 permutation tables"
    )
    assert terminal.cost(resolve(MinHash()), 0) == "cost: 15 band indexes, about 715 bytes a row"
