"""How one build's evaluation ended, in every command: :class:`Status` (one vocabulary
for ``run``'s report, the sweep database, regress measurements, peers and tune),
:class:`Check` (a build's results against the reference) and :class:`Outcome` (the
check with the build's timing and speedup). A light module: the sweep database and
report read statuses without loading IREE's runtime."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tdsched.targets.timing import Interval, Timing


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


@dataclass(frozen=True)
class Outcome:
    """What evaluating one build found: its :class:`Check` against the reference and,
    when it was timed, its milliseconds per call, its baseline's (IREE default, timed
    interleaved with it) and its speedup over the baseline: the median of the per-round
    ratios and its interval (:func:`~tdsched.targets.timing.speedup`)."""

    check: Check
    timing: Timing | None = None
    baseline: Timing | None = None
    speedup: Interval | None = None

    @property
    def status(self) -> Status:
        return self.check.status

    def as_dict(self) -> dict[str, Any]:
        """The outcome as JSON values (its check's fields flat beside the timings)."""
        return {
            **self.check.as_dict(),
            "timing": self.timing.as_dict() if self.timing else None,
            "baseline": self.baseline.as_dict() if self.baseline else None,
            "speedup": self.speedup.as_list() if self.speedup else None,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Outcome:
        """The outcome :meth:`as_dict` gave as ``data``."""
        timing, baseline, speedup = data["timing"], data["baseline"], data["speedup"]
        return Outcome(
            Check(Status(data["status"]), data["max_abs_error"], data["error"]),
            Timing(**timing) if timing else None,
            Timing(**baseline) if baseline else None,
            Interval.from_list(speedup) if speedup else None,
        )
