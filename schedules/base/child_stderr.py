"""Where a child process's stderr goes: a log file the parent reads when the child dies,
and, under ``tdsched -v``, this process's stderr for the iree-compile command lines the
child prints, as it prints them (``run``'s evaluation child, ``sweep``'s workers)."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO, Any

from tdsched.targets.compiler import VERBOSE_PREFIX, verbose


class ChildStderr:
    """A child's stderr: give :attr:`target` to ``Popen(stderr=...)``, then
    :meth:`follow` the started process; :meth:`join` once it has exited."""

    def __init__(self, log: IO[str], default: IO[str] | int) -> None:
        """``log``: the file every line ends up in; ``default``: Popen's ``stderr`` when
        nothing is relayed (``log`` itself, or ``subprocess.STDOUT`` beside a logged stdout)."""
        self.log = log
        self.relayed = verbose()
        self.target: IO[str] | int = subprocess.PIPE if self.relayed else default
        self._thread: threading.Thread | None = None

    def follow(self, proc: subprocess.Popen[Any]) -> None:
        """Copy ``proc``'s stderr to the log, echoing the command lines (when relayed).
        Precondition: ``proc`` was started in text mode with ``stderr=self.target``."""
        if self.relayed:
            self._thread = threading.Thread(target=self._copy, args=(proc.stderr,), daemon=True)
            self._thread.start()

    def join(self) -> None:
        """Wait until everything the child wrote is copied (its stderr has closed)."""
        if self._thread is not None:
            self._thread.join()

    def _copy(self, stream: IO[str]) -> None:
        for line in stream:
            self.log.write(line)
            self.log.flush()
            if line.startswith(VERBOSE_PREFIX):
                sys.stderr.write(line)
                sys.stderr.flush()
