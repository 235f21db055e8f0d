"""schedules/isolation: a child process that outlives its parent is a leak."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLEEPER = """
import os, time

def run(request, progress):
    with open(request["pidfile"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
    return {}
"""

PARENT = (
    "from tdsched.schedules.measure.isolation import call_isolated\n"
    "call_isolated('sleeper:run', {'pidfile': 'child.pid'})\n"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.process
def test_a_terminated_parent_stops_its_isolated_child(tmp_path: Path) -> None:
    # The child imports the entry from the parent's working directory (python -m).
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=tmp_path)
    pidfile = tmp_path / "child.pid"
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.1)
    child = int(pidfile.read_text())
    assert _alive(child)
    parent.terminate()  # as `timeout` or `kill` would
    assert parent.wait(timeout=30) != 0
    deadline = time.monotonic() + 10
    while _alive(child):
        if time.monotonic() > deadline:
            os.kill(child, 9)
            raise AssertionError("the child outlived its terminated parent")
        time.sleep(0.1)
