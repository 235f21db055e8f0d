"""Judging a measurement against its entry: pass, regressed, inconclusive, ...

Pure functions of the numbers, so the rules are testable without timing anything:

* the build failed the check → ``wrong``; a step matched nothing → ``not_applied``;
  the build or run failed otherwise → ``error``;
* the calibration kernel's time changed by more than ``calibration_tolerance`` between
  before and after (the machine's load changed): the speedup's interval is widened by
  that factor both ways, and only a verdict the widened interval still clears stands
  (a gross regression stays a regression); otherwise → ``inconclusive``;
* the speedup's 95% interval is wholly at or above the gate → ``pass``; wholly below →
  ``regressed``; straddling it → decided by the median when the interval is within
  ``precision``, else ``inconclusive`` (the time cap ran out before the noise did).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tdsched.targets.timing import Ratio, relative_half_width

from ..evaluation import Status as Outcome
from .baseline_file import Settings
from .calibration import CalibrationDrift
from .measure import Measurement

Status = Literal[
    "pass", "blessed", "regressed", "wrong", "not_applied", "error", "unblessed", "inconclusive"
]
FAILING: frozenset[str] = frozenset({"regressed", "wrong", "not_applied", "error", "unblessed"})


@dataclass(frozen=True)
class Verdict:
    status: Status
    reason: str


def judge(
    measurement: Measurement, expected: float | None, settings: Settings, *, bless: bool = False
) -> Verdict:
    """The verdict on ``measurement`` for an entry expecting ``expected`` (``bless``:
    for ``--update``, which needs a measurement precise enough to become the baseline)."""
    failed = _failure(measurement)
    if failed is not None:
        return failed
    speedup, calibration = measurement.speedup, measurement.calibration
    assert speedup is not None and calibration is not None
    median, low, high = speedup.median, speedup.low, speedup.high
    measured = f"{median:.3f}x, 95% interval [{low:.3f}, {high:.3f}]"
    if expected is None and not bless:  # a failure whatever the machine's load
        return Verdict(
            "unblessed",
            f"{measured}; the entry has no expected_speedup yet: bless it with "
            "'tdsched regress BASELINE --update'",
        )
    if abs(calibration.drift) > settings.calibration_tolerance:
        return _despite_load_change(speedup, calibration, expected, settings, bless)
    precise = relative_half_width(median, low, high) <= settings.precision
    if bless:
        if not precise:
            return _imprecise(speedup, settings, "to bless")
        return Verdict("blessed", f"{measured}; expected_speedup set to {median:.3f}")
    assert expected is not None
    gate = settings.gate(expected)
    if low >= gate or (precise and median >= gate):
        if settings.tolerance > 0 and low > expected * (1.0 + settings.tolerance):
            return Verdict(
                "pass",
                f"{measured}: faster than expected ({expected:.3f}x); re-bless with "
                "--update to tighten the gate",
            )
        return Verdict("pass", measured)
    if high < gate or precise:
        return Verdict("regressed", f"{measured}, below the gate {gate_text(expected, settings)}")
    return _imprecise(speedup, settings, f"to decide against the gate {gate:.3f}x")


def _despite_load_change(
    speedup: Ratio,
    calibration: CalibrationDrift,
    expected: float | None,
    settings: Settings,
    bless: bool,
) -> Verdict:
    """The verdict when the machine's load changed during the measurement: the
    speedup's interval widened by the calibration kernel's change (factor ``f``: the
    interval becomes [low / f, high x f]) must still clear the gate on one side."""
    before, after = calibration.before.median, calibration.after.median
    factor = max(after / before, before / after)
    load = (
        f"the calibration kernel took {before:.3f} ms before and {after:.3f} ms after "
        f"({calibration.drift:+.0%}, allowed ±{settings.calibration_tolerance:.0%})"
    )
    measured = f"{speedup.median:.3f}x, 95% interval [{speedup.low:.3f}, {speedup.high:.3f}]"
    if expected is not None and not bless:
        gate = settings.gate(expected)
        widened = f"[{speedup.low / factor:.3f}, {speedup.high * factor:.3f}]"
        if speedup.high * factor < gate:
            return Verdict(
                "regressed",
                f"{measured}, below the gate {gate_text(expected, settings)} even with the "
                f"interval widened to {widened} for the load change ({load})",
            )
        if speedup.low / factor >= gate:
            return Verdict(
                "pass",
                f"{measured}; clears the gate even widened to {widened} for the load "
                f"change ({load})",
            )
    return Verdict(
        "inconclusive",
        f"{load}: the machine's load changed during the measurement, enough to change "
        "the verdict; re-run on a quieter machine",
    )


def gate_text(expected: float, settings: Settings) -> str:
    """``0.910x (1.213x - 25%)``, or ``1.050x`` for a plain minimum (no tolerance)."""
    gate = settings.gate(expected)
    if not settings.tolerance:
        return f"{gate:.3f}x"
    return f"{gate:.3f}x ({expected:.3f}x - {settings.tolerance:.0%})"


def _failure(measurement: Measurement) -> Verdict | None:
    error = measurement.error or ""
    if measurement.status is Outcome.OK:
        return None
    if measurement.status is Outcome.NOT_APPLIED:
        return Verdict("not_applied", f"the schedule did not apply: {error}")
    if measurement.status is Outcome.WRONG:
        return Verdict("wrong", error)
    what = {
        Outcome.COMPILE_FAILED: "the build failed",
        Outcome.RUN_FAILED: "the module could not be run",
        Outcome.CRASHED: "the measuring process crashed",
        Outcome.TIMEOUT: "the measurement timed out",
    }.get(measurement.status, "error")
    return Verdict("error", f"{what}: {error}")


def _imprecise(speedup: Ratio, settings: Settings, purpose: str) -> Verdict:
    return Verdict(
        "inconclusive",
        f"after {speedup.rounds:.0f} rounds ({speedup.seconds:.0f} s) the speedup's 95% "
        f"interval [{speedup.low:.3f}, {speedup.high:.3f}] is too wide {purpose} "
        f"(precision {settings.precision:.0%}); raise time_cap_s or re-run on a quieter machine",
    )
