"""How one build's evaluation ended, in every command: :class:`Status` (one vocabulary
for ``run``'s report, the sweep database, regress measurements, peers and tune) and
:class:`Check` (a build's results against the reference). A light module: the sweep
database and report read statuses without loading IREE's runtime."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """How evaluating one build ended (a string in JSON and databases)."""

    OK = "ok"
    """Built, every schedule step applied, results right (and timed where asked)."""
    WRONG = "wrong"
    """Results differ from the reference beyond the tolerance (or are NaN, or mis-shaped)."""
    NOT_APPLIED = "not_applied"
    """A schedule step matched nothing: the build would not be the scheduled one."""
    COMPILE_FAILED = "compile_failed"
    """iree-compile failed (or printed an error) on the scheduled build."""
    RUN_FAILED = "run_failed"
    """The module was built but could not be loaded or run on the device."""
    ERROR = "error"
    """The recipe could not be planned or emitted (an error naming the recipe field)."""
    CRASHED = "crashed"
    """The process evaluating it died (a segfault in a compiled module)."""
    TIMEOUT = "timeout"
    """It ran past its time limit and was stopped."""


BUILD_FAILURES: frozenset[Status] = frozenset(
    {Status.ERROR, Status.NOT_APPLIED, Status.COMPILE_FAILED}
)
"""Statuses decided when building: building again gives the same (compiles are
deterministic), so a sweep never re-runs them."""


@dataclass(frozen=True)
class Check:
    """A build's results against the reference: ``status`` is OK or WRONG; ``error``
    says why they are wrong."""

    status: Status
    max_abs_error: float | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The check as JSON values (``status``, ``max_abs_error``, ``error``)."""
        return {
            "status": str(self.status),
            "max_abs_error": self.max_abs_error,
            "error": self.error,
        }
