"""Deliberate failures for testing a sweep's isolation: ``TDSCHED_SWEEP_FAULTS``.

A real compiler segfault or a kernel that never returns cannot be produced on demand, yet
the promise that a crashing or hanging candidate only fails itself has to be tested (by
tdsched's tests, or on a new cluster). When the environment variable is set, workers
fault on the candidates it names::

    TDSCHED_SWEEP_FAULTS="compile:crash:TM=16;run:hang:TN=64"

Rules are ``PHASE:FAULT:NAME=VALUE[,NAME=VALUE...]`` separated by ``;``: PHASE is
``compile`` or ``run``, FAULT ``crash`` (the worker process dies with SIGSEGV) or ``hang``
(it sleeps forever); a rule applies to candidates whose parameters have all the values.
Unset (always, outside tests), this module does nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping

VARIABLE = "TDSCHED_SWEEP_FAULTS"


def inject(phase: str, params: Mapping[str, object]) -> None:
    """Crash or hang this process if a rule names ``phase`` and matches ``params``."""
    for rule in filter(None, os.environ.get(VARIABLE, "").split(";")):
        parts = rule.split(":", 2)
        if len(parts) != 3:
            raise ValueError(f"{VARIABLE}: {rule!r} is not PHASE:FAULT:NAME=VALUE[,...]")
        rule_phase, fault, condition = parts
        if rule_phase != phase:
            continue
        wanted = dict(item.split("=", 1) for item in condition.split(",") if "=" in item)
        if all(str(params.get(name)) == value for name, value in wanted.items()):
            if fault == "crash":
                os.kill(os.getpid(), signal.SIGSEGV)
            if fault == "hang":
                while True:
                    time.sleep(3600)
