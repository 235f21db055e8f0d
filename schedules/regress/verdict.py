"""Judging a measurement against its entry: pass, regressed, inconclusive, ...

Pure functions of the numbers, so the rules are testable without timing anything:

* the build failed the check → ``wrong``; a step matched nothing → ``not_applied``;
  the build or run failed otherwise → ``error``;
* the calibration kernel's time changed by more than ``calibration_tolerance`` between
  before and after (the machine's load changed): the speedup's interval is widened by
  that factor both ways, and only a verdict the widened interval still clears stands
  (a gross regression stays a regression); otherwise → ``inconclusive``;
* blessing (``--update``) needs a calm and precise measurement, else ``inconclusive``;
  one whose median is below 1.0x (slower than IREE's own pipeline) is ``slower``, a
  failure, unless ``--allow-slower`` blesses it anyway;
* the speedup's 95% interval is wholly at or above the gate → ``pass``; wholly below →
  ``regressed``; straddling it → decided by the median when the interval is within
  ``precision``, else ``inconclusive`` (the time cap ran out before the noise did).

A measurement timed twice (its calibration kernel drifted too much in the first attempt,
see :mod:`.measure`) says so at the end of its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tdsched.targets.timing import Ratio, relative_half_width

from ..measure.status import Status
from .baseline_file import Settings
from .calibration import CalibrationDrift
from .measure import Measurement


class GateStatus(StrEnum):
    """The regression gate's verdict on one entry (a string in JSON and printed text)."""

    PASS = "pass"
    """The speedup clears the gate: its interval wholly at or above, or its median when precise."""
    BLESSED = "blessed"
    """(``--update``) Measured precisely enough to become the entry's expected_speedup."""
    REGRESSED = "regressed"
    """The speedup is below the gate: its interval wholly below, or its median when precise."""
    WRONG = "wrong"
    """The scheduled build's results failed the numerics check."""
    NOT_APPLIED = "not_applied"
    """A schedule step matched nothing: the build would not be the scheduled one."""
    ERROR = "error"
    """Measuring failed otherwise: not planned or built, not run, crashed, or timed out."""
    UNBLESSED = "unblessed"
    """The entry has no expected_speedup yet (and this is not ``--update``): a failure."""
    INCONCLUSIVE = "inconclusive"
    """Too noisy to decide: the interval stayed too wide, or the machine's load changed."""
    SLOWER = "slower"
    """(``--update``) Measured precisely but slower than IREE default (median below
    1.0x): not blessed without ``--allow-slower``; a failure."""


FAILING: frozenset[GateStatus] = frozenset(
    {
        GateStatus.REGRESSED,
        GateStatus.WRONG,
        GateStatus.NOT_APPLIED,
        GateStatus.ERROR,
        GateStatus.UNBLESSED,
        GateStatus.SLOWER,
    }
)
IREE_DEFAULT = 1.0
"""The speedup of IREE's own pipeline over itself: blessing below it needs ``--allow-slower``."""


def slower_than_default(median: float) -> bool:
    """Whether a speedup ``median`` is below IREE default's, as blessing would write it
    (rounded to 3 decimals: 0.9996 is blessed as, and printed as, 1.000x)."""
    return round(median, 3) < IREE_DEFAULT


@dataclass(frozen=True)
class Verdict:
    status: GateStatus
    reason: str


def judge(
    measurement: Measurement,
    expected: float | None,
    settings: Settings,
    *,
    bless: bool = False,
    allow_slower: bool = False,
) -> Verdict:
    """The verdict on ``measurement`` for an entry expecting ``expected`` (``bless``:
    for ``--update``, which needs a measurement precise enough to become the baseline,
    and not slower than IREE default unless ``allow_slower``)."""
    verdict = _judge(measurement, expected, settings, bless, allow_slower)
    if measurement.attempts < 2:
        return verdict
    times = "twice" if measurement.attempts == 2 else f"{measurement.attempts} times"
    return Verdict(
        verdict.status,
        f"{verdict.reason} (timed {times}: the calibration kernel drifted more than "
        f"±{settings.calibration_tolerance:.0%} in the first attempt; this is the attempt "
        "in which it drifted least)",
    )


def _judge(
    measurement: Measurement,
    expected: float | None,
    settings: Settings,
    bless: bool,
    allow_slower: bool,
) -> Verdict:
    failed = _failure(measurement)
    if failed is not None:
        return failed
    speedup, calibration = measurement.speedup, measurement.calibration
    assert speedup is not None and calibration is not None
    median, low, high = speedup.median, speedup.low, speedup.high
    measured = f"{median:.3f}x, 95% interval [{low:.3f}, {high:.3f}]"
    if expected is None and not bless:  # a failure whatever the machine's load
        return Verdict(
            GateStatus.UNBLESSED,
            f"{measured}; the entry has no expected_speedup yet: bless it with "
            "'tdsched regress BASELINE --update'",
        )
    if abs(calibration.drift) > settings.calibration_tolerance:
        return _despite_load_change(speedup, calibration, expected, settings, bless)
    precise = relative_half_width(median, low, high) <= settings.precision
    if bless:
        if not precise:
            return _imprecise(speedup, settings, "to bless")
        blessed = f"{measured}; expected_speedup set to {median:.3f}"
        if not slower_than_default(median):
            return Verdict(GateStatus.BLESSED, blessed)
        if allow_slower:
            return Verdict(
                GateStatus.BLESSED,
                f"{blessed}, slower than IREE's own pipeline (--allow-slower)",
            )
        return Verdict(
            GateStatus.SLOWER,
            f"{measured}: the schedule is slower than IREE's own pipeline, so it is not "
            "blessed; bless it anyway with --update --allow-slower",
        )
    assert expected is not None
    gate = settings.gate(expected)
    if low >= gate or (precise and median >= gate):
        if settings.tolerance > 0 and low > expected * (1.0 + settings.tolerance):
            return Verdict(
                GateStatus.PASS,
                f"{measured}: faster than expected ({expected:.3f}x); re-bless with "
                "--update to tighten the gate",
            )
        return Verdict(GateStatus.PASS, measured)
    if high < gate or precise:
        return Verdict(
            GateStatus.REGRESSED, f"{measured}, below the gate {gate_text(expected, settings)}"
        )
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
                GateStatus.REGRESSED,
                f"{measured}, below the gate {gate_text(expected, settings)} even with the "
                f"interval widened to {widened} for the load change ({load})",
            )
        if speedup.low / factor >= gate:
            return Verdict(
                GateStatus.PASS,
                f"{measured}; clears the gate even widened to {widened} for the load "
                f"change ({load})",
            )
    return Verdict(
        GateStatus.INCONCLUSIVE,
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
    if measurement.status is Status.OK:
        return None
    if measurement.status is Status.NOT_APPLIED:
        return Verdict(GateStatus.NOT_APPLIED, f"the schedule did not apply: {error}")
    if measurement.status is Status.WRONG:
        return Verdict(GateStatus.WRONG, error)
    what = {
        Status.COMPILE_FAILED: "the build failed",
        Status.RUN_FAILED: "the module could not be run",
        Status.CRASHED: "the measuring process crashed",
        Status.TIMEOUT: "the measurement timed out",
    }.get(measurement.status, "error")
    return Verdict(GateStatus.ERROR, f"{what}: {error}")


def _imprecise(speedup: Ratio, settings: Settings, purpose: str) -> Verdict:
    return Verdict(
        GateStatus.INCONCLUSIVE,
        f"after {speedup.rounds:.0f} rounds ({speedup.seconds:.0f} s) the speedup's 95% "
        f"interval [{speedup.low:.3f}, {speedup.high:.3f}] is too wide {purpose} "
        f"(precision {settings.precision:.0%}); raise time_cap_s or re-run on a quieter machine",
    )
