"""Command lines parsed into the values the commands use, without a database."""

from __future__ import annotations

import pytest

from simindex.cli import UsageError, parser
from simindex.cli._index import _method
from simindex.core.minhash import Scheme
from simindex.core.spec import MinHash, SimHash
from simindex.core.text import Shingling


def test_method_options_become_the_spec_dataclasses() -> None:
    args = parser().parse_args(
        [
            "create",
            "d",
            "--table",
            "t",
            "--column",
            "c",
            "--max-distance",
            "5",
            "--shingle-unit",
            "char",
            "--shingle-size",
            "4",
        ]
    )
    assert _method(args) == SimHash(max_distance=5, shingling=Shingling(unit="char", size=4))
    args = parser().parse_args(
        [
            "create",
            "d",
            "--table",
            "t",
            "--column",
            "c",
            "--method",
            "minhash",
            "--threshold",
            "0.6",
            "--scheme",
            "one_permutation",
            "--seed",
            "0",
            "--with-characters",
            "--shingle-seed",
            "0",
        ]
    )
    assert _method(args) == MinHash(
        threshold=0.6,
        scheme="one_permutation",
        seed=0,
        shingling=Shingling(with_characters=True, seed=0),
    )
    assert Scheme(_method(args).scheme) is Scheme.ONE_PERMUTATION  # type: ignore[union-attr]


def test_options_of_the_other_method_are_refused() -> None:
    args = parser().parse_args(
        ["create", "d", "--table", "t", "--column", "c", "--num-perm", "64", "--seed", "2"]
    )
    with pytest.raises(UsageError, match="--num-perm, --seed: an option of --method minhash"):
        _method(args)


@pytest.mark.parametrize(
    "argv",
    [
        ["query", "docs", "--limit", "3", "some text"],
        ["query", "docs", "some text", "--limit", "3"],
        ["query", "--limit", "3", "docs", "some text"],
    ],
)
def test_query_text_may_come_after_options(argv: list[str]) -> None:
    args = parser().parse_args(argv)
    assert (args.name, args.text, args.limit) == ("docs", "some text", 3)


def test_query_stdin_dash_after_options() -> None:
    args = parser().parse_args(["query", "docs", "--max-distance", "1", "-"])
    assert (args.text, args.max_distance) == ("-", 1)


def test_a_second_text_is_still_an_error() -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["query", "docs", "one", "two"])
    assert exited.value.code == 2
