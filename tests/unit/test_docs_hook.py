"""The docs site's benchmark tables come from benchmarks/results/*.json when it is built."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs/hooks/benchmarks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_marker_of_the_docs_renders_a_table() -> None:
    module = hook()
    for page in (ROOT / "docs").glob("*.md"):
        rendered = module.render(page.read_text(encoding="utf-8"))
        assert "<!-- results:" not in rendered, page.name


def test_the_figures_are_the_results_files() -> None:
    module = hook()
    n = module.n
    sync = json.loads((ROOT / "benchmarks/results/sync.json").read_text(encoding="utf-8"))
    latency = json.loads(
        (ROOT / "benchmarks/results/sync-latency.json").read_text(encoding="utf-8")
    )
    rendered = module.render("<!-- results: sync -->\n<!-- results: machines -->")
    assert f"p50 {latency['latency']['latency_ms']['p50']} ms" in rendered
    assert f"({n(sync['overhead']['bulk_rows'])}-row statements" in rendered
    for path in (ROOT / "benchmarks/results").glob("*.json"):
        assert f"`{path.name}`" in rendered  # every file's machine is listed


def test_an_unknown_table_fails_the_build() -> None:
    with pytest.raises(ValueError, match="no such table"):
        hook().render("<!-- results: nonesuch -->")


def test_the_layers_table_is_the_query_facade_results() -> None:
    module = hook()
    path = ROOT / "benchmarks/results/query-facade.json"
    facade = json.loads(path.read_text(encoding="utf-8"))
    rendered = module.render("<!-- results: layers -->")
    floor = facade["simhash"]["by_key"]["latency"]["sql_typed"]
    assert f"{floor['p50_ms']:.2f} / {floor['p99_ms']:.2f} ms" in rendered
    assert "`index_engine`" in rendered and "not 1M" in rendered
