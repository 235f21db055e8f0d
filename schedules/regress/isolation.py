"""Each entry is measured in a fresh child process.

``python -m tdsched.schedules.regress.isolation REQUEST.json RESULT.json`` measures one
entry and writes its :class:`Measurement`. The parent reads it back; a child that dies
(a compiled module's segfault) or runs past its limit becomes a ``crashed`` / ``timeout``
measurement with the end of the child's output, and the remaining entries go on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from ..evaluation import Status
from ..files import write_atomically
from .measure import Measurement, MeasureRequest, measure


def measure_isolated(request: MeasureRequest, timeout_s: float) -> Measurement:
    """:func:`measure` ``request`` in a child process, killed after ``timeout_s``."""
    with tempfile.TemporaryDirectory(prefix="tdsched-regress-") as tmp:
        request_file, result_file = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request_file.write_text(json.dumps(dataclasses.asdict(request)))
        with open(Path(tmp) / "child.log", "w+") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(request_file), str(result_file)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return Measurement(Status.TIMEOUT, f"no result within {timeout_s:.0f} s")
            except BaseException:  # Ctrl-C: the child is in its own session, stop it too
                _kill(proc)
                raise
            if result_file.is_file():
                data = json.loads(result_file.read_text())
                return Measurement(**{**data, "status": Status(data["status"])})
            log.seek(0)
            tail = [line for line in log.read().splitlines() if line.strip()][-8:]
    cause = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    return Measurement(Status.CRASHED, f"the measuring process died ({cause})\n" + "\n".join(tail))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child and everything it started (iree-compile)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def main(argv: list[str]) -> None:
    request_file, result_file = argv
    request = MeasureRequest(**json.loads(Path(request_file).read_text()))
    result = measure(request)
    write_atomically(Path(result_file), json.dumps(dataclasses.asdict(result)).encode())


if __name__ == "__main__":
    main(sys.argv[1:])
