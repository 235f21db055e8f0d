"""The ``tdsched`` command line run as a subprocess, as a user runs it (shared by tests)."""

from __future__ import annotations

import subprocess
import sys


def tdsched(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``tdsched ARGS`` with this interpreter; ``check`` asserts exit status 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "tdsched.schedules.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc
