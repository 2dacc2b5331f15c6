"""``simindex ...`` in a process of its own, without starting a new interpreter each time.

Of the second or so a ``python -m simindex`` run takes in the tests, nearly all is importing
SQLAlchemy, psycopg and simindex; the command tests run it some 250 times. So each test process
keeps one fork server (multiprocessing's ``forkserver``, a fresh interpreter that imported
simindex once) and every run is a child forked from it: a process of its own, with the
arguments, environment, working directory, standard streams, exit status and ``atexit`` ending
of its own, running ``simindex/__main__.py`` as ``python -m simindex`` does.

What only a new interpreter shows (that ``python -m simindex`` and the console script start at
all, a pipe closed early, signals to a worker that follows the queue) is tested by the tests
that start one with :mod:`subprocess`: ``tests/acceptance/test_cli_worker.py``,
``test_cli_dedup.py`` (a pipe, the demo), ``tests/integration/test_readme.py`` and the shell
blocks of ``test_docs.py``.
"""

from __future__ import annotations

import atexit
import io
import locale
import multiprocessing
import os
import pkgutil
import runpy
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

import simindex

_SERVER = multiprocessing.get_context("forkserver")
# Every module of the package but the one that runs the command: what any command imports.
_SERVER.set_forkserver_preload(
    [
        module.name
        for module in pkgutil.walk_packages(simindex.__path__, "simindex.")
        if module.name != "simindex.__main__"
    ]
)
# The fork server starts on the first run, with this process's environment.
_SERVER_ENVIRONMENT = dict(os.environ)
# What the command line would show: ``python -m simindex`` as subprocess.run was given it.
_ARGS = (sys.executable, "-m", "simindex")


def run_simindex(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
    timeout: float,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """What ``subprocess.run([sys.executable, "-m", "simindex", *args], input=stdin,
    capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)`` returns."""
    command = [*_ARGS, *args]
    given = dict(os.environ if env is None else env)
    if (
        _read_at_startup(given) != _read_at_startup(_SERVER_ENVIRONMENT)
        or os.environ.get("SIMINDEX_TEST_NEW_INTERPRETER") == "1"
    ):
        # PYTHONPATH and the like shape an interpreter as it starts: a new one, then; or
        # always, when asked (to rule the fork server out, or to compare).
        return subprocess.run(
            command, input=stdin, capture_output=True, text=True, env=given, timeout=timeout,
            cwd=cwd, check=False,
        )  # fmt: skip
    encoding = locale.getpreferredencoding(False)  # as subprocess's text mode
    with tempfile.TemporaryDirectory(prefix="simindex-run-") as directory:
        streams = [Path(directory, name) for name in ("stdin", "stdout", "stderr")]
        streams[0].write_bytes(stdin.encode(encoding))
        for path in streams[1:]:
            path.touch()
        child = _SERVER.Process(
            target=_run,
            args=(
                list(args),
                given,
                str(cwd if cwd is not None else Path.cwd()),
                [str(path) for path in streams],
            ),
        )
        child.start()
        child.join(timeout)
        code = child.exitcode
        if code is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(
                command, timeout, streams[1].read_bytes(), streams[2].read_bytes()
            )
        child.close()
        stdout, stderr = (_text(path.read_bytes(), encoding) for path in streams[1:])
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def _read_at_startup(env: Mapping[str, str]) -> dict[str, str]:
    """The variables the interpreter reads as it starts (PYTHONPATH, PYTHONWARNINGS, ...)."""
    return {name: value for name, value in env.items() if name.startswith("PYTHON")}


def _text(data: bytes, encoding: str) -> str:
    """Decoded with universal newlines, as subprocess's text mode reads a pipe."""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


def _run(args: list[str], env: dict[str, str], cwd: str, streams: list[str]) -> None:
    """In the forked child: become ``python -m simindex *args`` and exit as it would."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    flags = (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY)
    for fd, (path, flag) in enumerate(zip(streams, flags, strict=True)):
        opened = os.open(path, flag)
        os.dup2(opened, fd)
        os.close(opened)
    # New standard streams on the new descriptors, made as the interpreter makes its own.
    template = sys.__stdout__ or sys.stdout
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=template.encoding)
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding=template.encoding, errors=template.errors
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding=template.encoding,
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.argv = ["-m", *args]  # run_module puts the path of simindex/__main__.py first
    code = 0
    try:
        runpy.run_module("simindex", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = _exit_code(exit_)
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # what the interpreter exits with when it cannot flush
    os._exit(code)


def _exit_code(exit_: SystemExit) -> int:
    """The status ``sys.exit(value)`` leaves, as the interpreter computes it."""
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code & 0xFF
    print(exit_.code, file=sys.stderr)
    return 1
