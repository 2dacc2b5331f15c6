from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any, get_args, get_origin, get_type_hints

import pytest

import simindex
from simindex import SimindexError


def test_fingerprinting_imports_no_database_driver() -> None:
    code = (
        "import sys, simindex, simindex.fingerprint, simindex.core.spec\n"
        "loaded = sorted(m for m in ('psycopg', 'sqlalchemy', 'alembic') if m in sys.modules)\n"
        "print(','.join(loaded))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_public_names_resolve() -> None:
    for name in simindex.__all__:
        assert getattr(simindex, name) is not None
    assert simindex.create_index.__module__ == "simindex.index"


def test_documented_import_paths_work() -> None:
    """Every import the docs show."""
    from simindex import CheckReport, check, repair, stop_on_signals, sync
    from simindex.fingerprint import choose_lsh, choose_manku, manku_cost_table
    from simindex.sqlalchemy import near, near_key, similar, similar_key, track

    assert manku_cost_table(max_distance=3, rows=1_000)
    assert choose_manku(3, 1_000).max_distance == 3
    assert choose_lsh(0.8, 128).num_bands > 0
    for function in (check, repair, near, near_key, similar, similar_key, track, sync):
        assert callable(function)
    assert CheckReport.__name__ == "CheckReport"
    assert stop_on_signals.__module__ == "simindex.ops.sync"
    subprocess.run(
        [sys.executable, "-c", "import simindex.alembic; import simindex.cli"], check=True
    )


def test_one_import_path_per_name() -> None:
    """No alias module re-exports the layers below under a second path."""
    import importlib.util

    for alias in ("simindex.sync", "simindex.check", "simindex.design", "simindex.bits"):
        assert importlib.util.find_spec(alias) is None
    assert simindex.sync.__module__ == "simindex.ops.sync"
    assert simindex.check.__module__ == "simindex.ops.check"


def test_every_exception_is_at_the_top_level() -> None:
    import inspect

    from simindex import errors

    raised = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, Warning | SimindexError)
    }
    assert len(raised) == 16
    for name in raised:
        assert name in simindex.__all__
        assert getattr(simindex, name) is getattr(errors, name)


def test_result_types_are_at_the_top_level() -> None:
    """What the index API returns is importable where the index API is."""
    from simindex.ops.check import CheckReport
    from simindex.ops.clusters import ClusterMember, ClusterReport, Survivor
    from simindex.ops.pairs import IdenticalGroup, NearPair, SimilarPair
    from simindex.ops.stats import IndexStats
    from simindex.ops.sync_report import SyncReport

    for result in (
        CheckReport,
        ClusterMember,
        ClusterReport,
        Survivor,
        IdenticalGroup,
        NearPair,
        SimilarPair,
        IndexStats,
        SyncReport,
    ):
        assert result.__name__ in simindex.__all__
        assert getattr(simindex, result.__name__) is result


def test_the_fingerprint_toolkit_is_one_module() -> None:
    """The toolkit is imported from simindex.fingerprint, and from there only: the top level
    is the index API."""
    import simindex.fingerprint as fingerprint

    toolkit = {
        "Shingling",
        "normalize",
        "tokenize",
        "simhash",
        "simhash_batch",
        "hashes_batch",
        "MinHasher",
        "MinHashSignature",
        "Scheme",
        "hamming_distance",
        "choose_manku",
        "choose_lsh",
        "MankuDesign",
        "LshDesign",
        "register_tokenizer",
        "to_signed",
        "to_unsigned",
        "manku_cost_table",
        "minhash_cost",
    }
    assert toolkit <= set(fingerprint.__all__)
    for name in fingerprint.__all__:
        assert getattr(fingerprint, name).__module__.startswith("simindex.core.")
    assert not toolkit & set(simindex.__all__)
    assert not any(hasattr(simindex, name) for name in toolkit)
    assert set(fingerprint.__all__) == simindex._TOOLKIT
    with pytest.raises(AttributeError, match=r"from simindex\.fingerprint import Shingling"):
        simindex.Shingling  # noqa: B018
    with pytest.raises(AttributeError, match=r"no attribute 'nothing'$"):
        simindex.nothing  # noqa: B018
    assert fingerprint.to_unsigned(fingerprint.to_signed(2**63)) == 2**63


def _any_in(hint: object) -> bool:
    """Whether ``Any`` stands for a type in ``hint`` (a numpy array's shape is not a type)."""
    import numpy as np

    if hint is Any:
        return True
    if get_origin(hint) is np.ndarray:
        return False
    return any(_any_in(argument) for argument in get_args(hint))


def test_public_functions_return_precise_types() -> None:
    """No public function or method of the index API or the toolkit returns Any, or an
    iterator or list of Any (keys in and out are the source's own type, so Any in)."""
    import inspect

    from sqlalchemy.engine import Connection, Engine

    import simindex.fingerprint as fingerprint
    import simindex.sqlalchemy as sa

    # Names the modules import for type checking only (the drivers load on first use).
    drivers = {"Engine": Engine, "Connection": Connection}
    checked = 0
    for module in (simindex, fingerprint, sa):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value):
                functions = [f for n, f in vars(value).items() if inspect.isfunction(f)
                             and not n.startswith("_")]  # fmt: skip
            else:
                functions = [value] if inspect.isfunction(value) else []
            for function in functions:
                returned = get_type_hints(function, localns=drivers).get("return")
                assert not _any_in(returned), f"{module.__name__}.{function.__qualname__}"
                checked += 1
    assert checked > 60
    assert (
        get_type_hints(simindex.Index.pairs)["return"]
        == Iterator[simindex.NearPair | simindex.SimilarPair | simindex.IdenticalGroup]
    )


def test_sync_and_check_each_name_one_module() -> None:
    """The worker is ops.sync and check/repair ops.check; no alias or face module shares
    those names (the CLI's commands for them are cli/_upkeep.py)."""
    from pathlib import Path

    package = Path(simindex.__file__).parent
    for concept in ("sync", "check"):
        found = sorted(
            str(path.relative_to(package))
            for path in package.rglob("*.py")
            if path.stem.lstrip("_") == concept
        )
        assert found == [f"ops/{concept}.py"]
