"""What an operator reads from the worker: log lines and the Prometheus exposition."""

from __future__ import annotations

import json
import logging

import pytest

from simindex._metrics import exposition, label
from simindex.cli._logs import JsonLines, TextLines, formatter
from simindex.ops.batch import BatchResult
from simindex.ops.sync_report import SyncReport


def record(message: str, **fields: object) -> logging.LogRecord:
    made = logging.LogRecord("simindex.ops.sync", logging.WARNING, __file__, 1, message, (), None)
    if fields:
        made.simindex = fields
    return made


def test_text_lines_are_event_then_key_value_pairs() -> None:
    line = TextLines().format(
        record("ignored", event="row_failed", index="docs", key=7, error='bad "x"\nnext', ok=True)
    )
    assert line == 'simindex: row_failed index=docs key=7 error="bad \\"x\\" next" ok=true'


def test_text_lines_without_fields_are_the_message_on_one_line() -> None:
    assert TextLines().format(record("two\n  lines")) == "simindex: two lines"


def test_json_lines() -> None:
    line = json.loads(JsonLines().format(record("m", event="batch", index="docs", taken=3)))
    assert list(line)[:3] == ["time", "level", "event"]
    assert (line["level"], line["event"], line["index"], line["taken"]) == (
        "warning",
        "batch",
        "docs",
        3,
    )
    plain = json.loads(JsonLines().format(record("hello")))
    assert (plain["event"], plain["message"]) == ("message", "hello")


def test_an_unknown_log_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log format"):
        formatter("xml")


def test_labels_are_escaped() -> None:
    assert label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_the_worker_counters_by_index() -> None:
    report = SyncReport()
    report.add_batch("docs", BatchResult(3, 2, 0, 1))
    report.add_batch("docs", BatchResult(1, 1, 0, 0))
    report.reconnects = 2
    text = exposition([], report)
    assert 'simindex_sync_batches_total{index="docs"} 2' in text
    assert 'simindex_sync_rows_indexed_total{index="docs"} 3' in text
    assert 'simindex_sync_rows_failed_total{index="docs"} 1' in text
    assert "simindex_sync_reconnects_total 2" in text
    assert "# TYPE simindex_sync_rows_taken_total counter" in text
    assert text.endswith("\n")
    assert not report.ok and report.failed == 1
