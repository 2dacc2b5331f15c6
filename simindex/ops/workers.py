"""The build's worker processes: started so that any caller works, or not at all.

Worker processes must not re-run the caller's ``__main__``: a script fed on stdin
(``python - <<EOF``), a ``python -c`` string or a script without an
``if __name__ == "__main__":`` guard cannot be re-imported, or would build again in every
worker. So on Linux, in a process without other threads, workers are forked (they import
nothing); elsewhere they are spawned. Before the first batch goes out, one probe task must
come back: if the workers cannot start, the build says so (a :class:`SerialBuildWarning`
naming the cause) and fingerprints in this process instead. An error in a task itself is
raised as it is.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from multiprocessing.context import BaseContext
from typing import Any, TypeVar

from simindex.core.tokens import install_tokenizers, registered_tokenizers
from simindex.errors import SerialBuildWarning

Batches = Iterator[tuple[list[Any], list[str | None], int]]
"""(keys, texts, bytes of text) of each batch."""
T = TypeVar("T")

AHEAD_PER_WORKER = 8
"""Batches in flight per worker at most (sent ahead while the build COPYs)."""

# Worker start-up, the probe's round trip included, is well under this on a loaded machine.
_PROBE_SECONDS = 60.0


def start_method() -> str:
    """How to start workers here: ``fork`` where that is safe (Linux, no other threads, whose
    locks a forked child could inherit held), ``spawn`` otherwise."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return "fork"
    return "spawn"


def _probe() -> bool:
    return True


def computed(
    task: Callable[[list[Any], list[str | None]], T],
    batches: Batches,
    workers: int,
    max_bytes: int,
) -> Iterator[T]:
    """``task(keys, texts)`` of each batch, in order; in ``workers`` processes when above one
    and they can start, else here (``task`` must pickle: a module's function, or a partial
    of one). Batches are sent ahead while the caller consumes the results (a COPY keeps no
    worker idle): up to :data:`AHEAD_PER_WORKER` per worker, and at most ``max_bytes`` of
    text in flight (a batch's third item, its size), one batch at least."""
    with ExitStack() as stack:
        pool = _started_pool(workers, stack) if workers > 1 else None
        if pool is None:
            for keys, texts, _ in batches:
                yield task(keys, texts)
            return
        pending: deque[tuple[int, Future[T]]] = deque()
        held = 0
        for keys, texts, size in batches:
            while pending and (
                len(pending) >= AHEAD_PER_WORKER * workers or held + size > max_bytes
            ):
                done_size, future = pending.popleft()
                held -= done_size
                yield _result(future)
            pending.append((size, pool.submit(task, keys, texts)))
            held += size
        while pending:
            _, future = pending.popleft()
            yield _result(future)


def _started_pool(workers: int, stack: ExitStack) -> ProcessPoolExecutor | None:
    """A pool whose workers answered a probe, or None (with a warning) when they cannot."""
    method = start_method()
    context: BaseContext = multiprocessing.get_context(method)
    # The tokenizers this process registered, registered in each worker too (by reference:
    # a spawned worker imports their modules, which must be importable).
    pool = ProcessPoolExecutor(
        workers,
        mp_context=context,
        initializer=install_tokenizers,
        initargs=(registered_tokenizers(),),
    )
    try:
        pool.submit(_probe).result(timeout=_PROBE_SECONDS)
    except (BrokenProcessPool, OSError, RuntimeError, TimeoutError) as exc:
        pool.shutdown(wait=False, cancel_futures=True)
        cause = str(exc) or type(exc).__name__
        if method == "spawn":
            cause += (
                "; spawned workers re-import the caller's __main__, which fails for stdin or "
                "-c scripts and re-runs scripts without an `if __name__ == '__main__':` guard"
            )
        warnings.warn(
            f"build: {workers} worker processes ({method}) could not start ({cause}): "
            "fingerprinting in this process instead",
            SerialBuildWarning,
            stacklevel=5,
        )
        return None
    return stack.enter_context(pool)


def _result(future: Future[T]) -> T:
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise RuntimeError(
            "a build worker process died (killed, or out of memory?); the index is unchanged"
        ) from exc
