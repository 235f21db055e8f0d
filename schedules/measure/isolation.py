"""Running a function in a fresh child process, so that a crash fails one evaluation and
not the command that asked for it.

A compiled module that writes out of bounds segfaults the process that runs it; a Vulkan
device on lavapipe keeps two cores busy until its process exits. ``tdsched run`` and
``tdsched regress`` therefore evaluate in a child:
``python -m tdsched.schedules.measure.isolation MODULE:FUNCTION FOLDER`` calls the function on
the request (a JSON object) and writes what it returns (a JSON object). The function may
also report progress (a JSON object, e.g. what it has planned and which stage it is in).
A child that dies, or runs past its limit, becomes a :class:`ChildFailure` with its last
progress and the end of its output; Ctrl-C, or SIGTERM to the parent (``timeout``,
``kill``), stops the child and everything it started.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.child_stderr import ChildStderr
from ..base.files import write_atomically
from .status import Status

JSON = dict[str, Any]


@dataclass(frozen=True)
class ChildFailure:
    """The child gave no result: ``status`` is CRASHED or TIMEOUT, ``message`` says how
    (``killed by SIGSEGV``) and ends with the last lines it printed; ``progress`` is the
    last progress it reported, if any."""

    status: Status
    message: str
    progress: JSON | None = None


Progress = Callable[[JSON], None]
"""What an entry calls to report progress (the parent keeps the last report)."""
Entry = Callable[[JSON, Progress], JSON]
"""An entry point: ``(request, progress) -> result``, all JSON objects."""


def call_isolated(entry: str, request: JSON, timeout_s: float | None = None) -> JSON | ChildFailure:
    """``entry`` (``module:function``, an :data:`Entry`) on ``request`` in a child
    process, killed after ``timeout_s`` (``None``: no limit)."""
    with tempfile.TemporaryDirectory(prefix="tdsched-child-") as tmp:
        folder = Path(tmp)
        (folder / REQUEST).write_text(json.dumps(request))
        result_file, progress_file = folder / RESULT, folder / PROGRESS
        with open(folder / "child.log", "w+") as log:
            stderr = ChildStderr(log, subprocess.STDOUT)
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, entry, str(folder)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=stderr.target,
                text=True,
                start_new_session=True,
            )
            stderr.follow(proc)
            try:
                with _terminate_raises():
                    code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(proc)
                progress = _read(progress_file)
                return ChildFailure(Status.TIMEOUT, f"no result within {timeout_s:.0f} s", progress)
            except BaseException:  # Ctrl-C, SIGTERM: the child is in its own session, stop it too
                _kill(proc)
                raise
            stderr.join()
            result = _read(result_file)
            if result is not None:
                return result
            progress = _read(progress_file)
            log.seek(0)
            tail = [line for line in log.read().splitlines() if line.strip()][-8:]
    cause = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    message = f"the process died ({cause})\n" + "\n".join(tail)
    return ChildFailure(Status.CRASHED, message.rstrip("\n"), progress)


REQUEST, RESULT, PROGRESS = "request.json", "result.json", "progress.json"


def _read(path: Path) -> JSON | None:
    if not path.is_file():
        return None
    data: JSON = json.loads(path.read_text())
    return data


@contextmanager
def _terminate_raises() -> Iterator[None]:
    """While the child runs, SIGTERM raises ``SystemExit`` in the parent, so the child is
    stopped with it: by default the parent would die at once and leave the child (in a
    session of its own) running. Only in the main thread, the one Python delivers
    signals to; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _kill(proc: subprocess.Popen[str]) -> None:
    """Kill the child and everything it started (iree-compile)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _entry(name: str) -> Entry:
    module, _, function = name.partition(":")
    found: Entry = getattr(importlib.import_module(module), function)
    return found


def main(argv: list[str]) -> None:
    entry, folder_text = argv
    folder = Path(folder_text)

    def progress(report: JSON) -> None:
        write_atomically(folder / PROGRESS, json.dumps(report).encode())

    result = _entry(entry)(json.loads((folder / REQUEST).read_text()), progress)
    write_atomically(folder / RESULT, json.dumps(result).encode())


if __name__ == "__main__":
    main(sys.argv[1:])
