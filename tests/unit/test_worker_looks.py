"""How often a following worker looks for work: soon after work, less and less often idle."""

from __future__ import annotations

import threading

from simindex.ops.sync_connections import Looks, wait_for_work


def test_each_look_that_finds_nothing_doubles_the_wait_up_to_the_longest() -> None:
    looks = Looks(0.01, 0.05)
    waited: list[float] = []

    def pending() -> bool:
        waited.append(looks.interval)
        return len(waited) == 6

    wait_for_work(threading.Event(), 60.0, looks, pending)
    assert waited == [0.01, 0.02, 0.04, 0.05, 0.05, 0.05]
    looks.worked()
    assert looks.interval == 0.01


def test_a_pass_without_work_does_not_start_the_waits_over() -> None:
    """A look that finds entries another worker holds is followed by a pass that takes none:
    the next wait is longer, so the worker does not spin."""
    looks = Looks(0.01, 0.05)
    for _ in range(3):
        looks.idle()
    assert looks.interval == 0.05


def test_the_wait_ends_at_its_deadline_or_stop_without_looking_again() -> None:
    looks = Looks(0.01, 0.02)
    asked: list[float] = []

    def nothing() -> bool:
        asked.append(looks.interval)
        return False

    wait_for_work(threading.Event(), 0.05, looks, nothing)
    assert 1 <= len(asked) <= 4
    stop = threading.Event()
    stop.set()
    before = len(asked)
    wait_for_work(stop, 60.0, looks, nothing)
    assert len(asked) == before
