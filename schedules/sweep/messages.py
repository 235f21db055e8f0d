"""The messages between a sweep and its workers: what it asks them to do (jobs) and
what they answer (outcomes), plain data, JSON-ready.

Workers run in other processes (the local pool) or on other machines (Ray), so every
message is a frozen dataclass of JSON values; :func:`to_json` / ``from_json`` convert.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from ..measure.request import Request
from ..measure.status import Outcome, Status

T = TypeVar("T")


@dataclass(frozen=True)
class SweepContext:
    """What every worker of one sweep needs: the request every candidate refines, and
    how to screen candidates.

    ``request.recipe`` is a recipe file path (workers load it themselves),
    ``request.build`` the build every candidate is for (its target known),
    ``request.params`` the command-line parameter overrides every candidate shares
    (a candidate's own values go on top), ``request.seed`` draws the inputs and
    ``request.trust`` is what the command line granted the recipe file.
    """

    request: Request
    repeats: int = 5
    """Screening rounds per candidate (each: the candidate, then IREE default, or back)."""
    sample_s: float = 0.02
    """Seconds of back-to-back calls per timing sample."""
    baseline_artifact: str = ""
    """The compiled IREE default build; benchmark workers time it and, when the workload
    has no numpy reference, check candidates against its results."""

    @property
    def target(self) -> str:
        """The target's name."""
        return self.request.build.name


@dataclass(frozen=True)
class CompileJob:
    """Build one candidate into ``artifact`` (a ``.vmfb`` path the worker can write)."""

    key: str
    params: dict[str, Any]
    artifact: str
    build_dir: str | None = None
    """Where to build and keep the build files (``--keep-temps``); None: a temporary
    folder, removed after the build."""


@dataclass(frozen=True)
class CompileOutcome:
    key: str
    status: Status
    """OK, or a build failure (:data:`~..measure.status.BUILD_FAILURES`), CRASHED, TIMEOUT."""
    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class BenchJob:
    """Check and time one compiled candidate (``params`` only label it)."""

    key: str
    params: dict[str, Any]
    artifact: str


@dataclass(frozen=True)
class BenchOutcome:
    key: str
    outcome: Outcome
    """Its status (OK, WRONG, RUN_FAILED, CRASHED or TIMEOUT), the largest error against
    the reference and why it failed; when right, its time per call, IREE default's
    (timed interleaved with it) and its speedup over IREE default (95% interval)."""
    timing_s: float = 0.0
    """Wall seconds spent timing (both variants)."""


@dataclass(frozen=True)
class RaceJob:
    """Race candidates against each other and IREE default (see :mod:`.racing`)."""

    artifacts: dict[str, str]
    """key → artifact."""
    settings: dict[str, Any]
    """A :class:`~.racing.RaceSettings` as keywords."""


def to_json(message: Any) -> dict[str, Any]:
    """A message as a JSON-ready dict."""
    data = dataclasses.asdict(message)
    if isinstance(message, BenchOutcome):
        data["outcome"] = message.outcome.as_dict()
    return data


def from_json(kind: type[T], data: dict[str, Any]) -> T:
    """Rebuild a message of type ``kind`` (a status string becomes a :class:`Status`, a
    bench outcome's an :class:`Outcome`, a request a :class:`~..measure.request.Request`)."""
    data = dict(data)
    if "status" in data:
        data["status"] = Status(data["status"])
    if "outcome" in data:
        data["outcome"] = Outcome.from_dict(data["outcome"])
    if "request" in data:
        data["request"] = Request.from_json(data["request"])
    return kind(**data)
