"""Measuring one baseline entry: build, prove the schedule applied, check, time.

:func:`measure` runs in a child process of its own (see :mod:`.isolation`): a crash in
a compiled module fails one entry, and a Vulkan device (lavapipe keeps two cores busy
once opened) never outlives the entry that opened it. It never raises for the recipe's
failures; they become the :class:`Measurement`'s status.

The speedup is timed between two timings of the calibration kernel. When the kernel's
time moved more than the entry's ``calibration_tolerance`` (the machine's load changed
while the ratio was timed) and the time cap leaves room for it, the calibration and the
ratio are timed once more, and the attempt whose calibration kernel moved least is kept
(:func:`second_attempt_cap`); :attr:`Measurement.attempts` says how many were made.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import iree.compiler.version
from tdsched.targets.timing import Ratio, Variant, time_ratio

from ..base.errors import RecipeError, Where
from ..measure.evaluation import EVALUATION_ERRORS, build_and_check, prepare_device, status_of
from ..measure.isolation import Progress
from ..measure.request import Request
from ..measure.status import Status
from .calibration import Calibration, CalibrationDrift

SAMPLE_S = 0.02
"""Seconds per timing sample: short, so each round's two samples are taken close
together and many rounds fit the time cap."""
MIN_ROUNDS = 8
"""Rounds :func:`~tdsched.targets.timing.time_ratio` takes at least, whatever its cap."""
MAX_ATTEMPTS = 2
"""Timings of the calibration and the ratio an entry gets at most."""


@dataclass(frozen=True)
class MeasureRequest:
    """One entry to measure: the :class:`~..measure.request.Request` (its ``tolerance``:
    the entry's ``numerics``) and how to time it; plain JSON values (it crosses a
    process boundary)."""

    request: Request
    precision: float
    threshold: float | None
    """Stop early once the speedup's interval is wholly above or below this."""
    time_cap_s: float
    cache_dir: str
    """Where the calibration kernel's build is kept for the run."""
    calibration_tolerance: float = 0.25
    """The entry's allowed calibration drift: more, and the ratio is timed again if the
    time cap leaves room (:func:`second_attempt_cap`)."""

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "request": self.request.to_json()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> MeasureRequest:
        """The request :meth:`to_json` gave as ``data``."""
        return MeasureRequest(**{**data, "request": Request.from_json(data["request"])})


@dataclass(frozen=True)
class Measurement:
    status: Status
    """OK (measured), or how the entry failed."""
    error: str | None = None
    recipe_name: str | None = None
    target: str | None = None
    numerics: dict[str, float] | None = None
    """The tolerance the check used."""
    max_abs_error: float | None = None
    reference: str | None = None
    speedup: Ratio | None = None
    """The scheduled build's speedup over IREE default, with its interval."""
    calibration: CalibrationDrift | None = None
    """The calibration kernel before and after the timing."""
    iree_version: str = field(default_factory=lambda: iree.compiler.version.VERSION)
    seconds: float = 0.0
    attempts: int = 1
    """How many times the calibration and the ratio were timed (a second time when the
    calibration kernel drifted too much in the first); ``speedup`` and ``calibration``
    are from the attempt whose calibration kernel drifted least."""

    def to_json(self) -> dict[str, Any]:
        return {
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
            "status": str(self.status),
            "speedup": self.speedup.as_dict() if self.speedup else None,
            "calibration": self.calibration.as_dict() if self.calibration else None,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Measurement:
        speedup, calibration = data.get("speedup"), data.get("calibration")
        return Measurement(
            **{
                **data,
                "status": Status(data["status"]),
                "speedup": Ratio.from_dict(speedup) if speedup else None,
                "calibration": CalibrationDrift.from_dict(calibration) if calibration else None,
            }
        )


def measure(request: MeasureRequest) -> Measurement:
    """Compile the entry's recipe (every schedule step must apply; a shape-table entry
    that runs IREE's own pipeline is an error: nothing to gate) and IREE default, check
    the scheduled results, then time the speedup between two calibrations (twice when
    the first drifted too much and the cap leaves time: :func:`second_attempt_cap`)."""
    start = time.perf_counter()
    names: dict[str, Any] = {}
    try:
        p = request.request.plan()
        tolerance = p.recipe.tolerance
        names = {
            "recipe_name": p.recipe.name,
            "target": p.target.name,
            "numerics": {"atol": tolerance.atol, "rtol": tolerance.rtol},
        }
        choice = p.recipe.shape_choice
        if choice is not None and choice.runs_iree_default:
            raise RecipeError(
                choice.entry.where if choice.entry else Where(p.recipe.source),
                f"at this shape the recipe runs IREE's own pipeline ({choice.describe()}), "
                "so there is no schedule to gate; gate a shape whose entry has tuned "
                "values, or give them in the entry's params",
            )
        if p.scripts.has_host_loops:
            raise RecipeError(
                p.scripts.has_host_loops.where,
                "this graph schedule leaves host-level loops, which IREE cannot compile, "
                "so it cannot be timed; gate a recipe that schedules kernels",
            )
        prepare_device(p.target, request.request.build.run_threads)
        with tempfile.TemporaryDirectory(prefix="tdsched-regress-") as tmp:
            _, checked = build_and_check(p, Path(tmp), request.request.seed)
            found = {"max_abs_error": checked.check.max_abs_error, **names}
            found["reference"] = checked.reference.kind
            if checked.check.status is not Status.OK:
                return Measurement(
                    checked.check.status, checked.check.error, **found, seconds=_since(start)
                )
            calibration = Calibration(p.target, Path(request.cache_dir))
            runners = checked.runners()
            attempts = _timed_attempts(
                calibration, runners["scheduled"], runners["baseline"], request
            )
        kept = min(attempts, key=lambda attempt: abs(attempt.calibration.drift))
        return Measurement(
            Status.OK,
            speedup=kept.speedup,
            calibration=kept.calibration,
            seconds=_since(start),
            attempts=len(attempts),
            **found,
        )
    except EVALUATION_ERRORS as exc:
        return Measurement(status_of(exc), str(exc), **names, seconds=_since(start))


@dataclass(frozen=True)
class Attempt:
    """One timing of the ratio between two timings of the calibration kernel."""

    speedup: Ratio
    calibration: CalibrationDrift


def _timed_attempts(
    calibration: Calibration, scheduled: Variant, baseline: Variant, request: MeasureRequest
) -> list[Attempt]:
    """The first attempt, and a second one when :func:`second_attempt_cap` allows it."""
    attempts = [_attempt(calibration, scheduled, baseline, request, request.time_cap_s)]
    while len(attempts) < MAX_ATTEMPTS:
        cap = second_attempt_cap(attempts, request.calibration_tolerance, request.time_cap_s)
        if cap is None:
            break
        attempts.append(_attempt(calibration, scheduled, baseline, request, cap))
    return attempts


def _attempt(
    calibration: Calibration,
    scheduled: Variant,
    baseline: Variant,
    request: MeasureRequest,
    time_cap_s: float,
) -> Attempt:
    before = calibration.time()
    ratio = time_ratio(
        scheduled,
        baseline,
        precision=request.precision,
        threshold=request.threshold,
        time_cap_s=time_cap_s,
        min_rounds=MIN_ROUNDS,
        min_sample_s=SAMPLE_S,
        labels=("scheduled", "iree_default"),
    )
    warmup = tuple(t.median for t in calibration.warmup)
    return Attempt(ratio, CalibrationDrift(before, calibration.time(), warmup))


def second_attempt_cap(
    attempts: list[Attempt], calibration_tolerance: float, time_cap_s: float
) -> float | None:
    """The time cap of another attempt after ``attempts``, or ``None`` for none.

    Another attempt is made only when every attempt so far saw the calibration kernel
    drift more than ``calibration_tolerance``, and the time left of ``time_cap_s`` (the
    seconds all attempts so far spent timing the ratio count against it) holds the
    :data:`MIN_ROUNDS` rounds the new one takes at least, at the pace of the last one's
    rounds; it gets all of that time.
    """
    if any(abs(a.calibration.drift) <= calibration_tolerance for a in attempts):
        return None
    left = time_cap_s - sum(a.speedup.seconds for a in attempts)
    last = attempts[-1].speedup
    needed = last.seconds / max(last.rounds, 1) * MIN_ROUNDS
    return left if left >= needed and left > 0 else None


def measure_json(request: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """:func:`measure` over JSON, the entry point of the child process that measures."""
    return measure(MeasureRequest.from_json(request)).to_json()


def _since(start: float) -> float:
    return time.perf_counter() - start
