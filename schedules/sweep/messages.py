"""The messages between a sweep and its workers: what it asks them to do (jobs) and
what they answer (outcomes), plain data, JSON-ready.

Workers run in other processes (the local pool) or on other machines (Ray), so every
message is a frozen dataclass of JSON values; :func:`to_json` / ``from_json`` convert.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tdsched.targets.timing import Timing

from ..compile.build_target import BuildTarget
from ..frontends.recipe_trust import UNTRUSTED, Trust
from ..measure.status import Check, Status

T = TypeVar("T")


@dataclass(frozen=True)
class SweepContext:
    """What every worker of one sweep needs: the recipe, build and run settings.

    ``recipe`` is a recipe file path (workers load it themselves), ``build`` the build
    every candidate is for (its target known), ``fixed`` the command-line parameter
    overrides shared by every candidate.
    """

    recipe: str
    build: BuildTarget
    fixed: dict[str, Any] = field(default_factory=dict)
    repeats: int = 5
    """Screening rounds per candidate (each: the candidate, then IREE default, or back)."""
    sample_s: float = 0.02
    """Seconds of back-to-back calls per timing sample."""
    seed: int = 0
    baseline_artifact: str = ""
    """The compiled IREE default build; benchmark workers time it and, when the workload
    has no numpy reference, check candidates against its results."""
    trust: Trust = UNTRUSTED
    """What the command line granted the recipe file (workers load it with this)."""

    @property
    def target(self) -> str:
        """The target's name."""
        return self.build.name


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
    check: Check
    """Its status (OK, WRONG, RUN_FAILED, CRASHED or TIMEOUT), the largest error against
    the reference, and why it failed."""
    timing: Timing | None = None
    """Milliseconds per call of the candidate."""
    baseline_timing: Timing | None = None
    """IREE default, timed interleaved with the candidate (the speedup's denominator)."""
    speedup: list[float] | None = None
    """Median, low and high of the per-round ratio IREE default / candidate (95%)."""
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
    return dataclasses.asdict(message)


def from_json(kind: type[T], data: dict[str, Any]) -> T:
    """Rebuild a message of type ``kind`` (a status string becomes a :class:`Status`, a
    check a :class:`Check`, a timing a :class:`~tdsched.targets.timing.Timing`, a trust
    a :class:`Trust`, a build a :class:`BuildTarget`)."""
    data = dict(data)
    if "status" in data:
        data["status"] = Status(data["status"])
    if "check" in data:
        data["check"] = Check(**{**data["check"], "status": Status(data["check"]["status"])})
    if "trust" in data:
        data["trust"] = Trust(**data["trust"])
    if "build" in data:
        data["build"] = BuildTarget.from_json(data["build"])
    for name in ("timing", "baseline_timing"):
        if data.get(name) is not None:
            data[name] = Timing(**data[name])
    return kind(**data)
