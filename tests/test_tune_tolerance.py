"""The model recipe's tolerance follows IREE's own build of the model: where IREE
default misses it against the model's reference, the schedules are held to about IREE's
error, not to a bound no build meets."""

from __future__ import annotations

from typing import Any

import pytest
from tdsched.schedules.measure.run_report import RunReport
from tdsched.schedules.measure.status import Status
from tdsched.schedules.tune.tolerance import TOLERANCE, widened, widened_line


def _report(status: Status, baseline: dict[str, Any] | None) -> RunReport:
    return RunReport(
        "m_tuned", "x86", "m", {}, 1, "iree-default", status=status, baseline_check=baseline
    )


IREE_MISSES = {"status": "wrong", "max_abs_error": 3.6e-4, "error": "differ at 5 elements"}


def test_iree_s_own_error_sets_the_tolerance_at_twice_it_rounded_up() -> None:
    after = widened(_report(Status.WRONG, IREE_MISSES), TOLERANCE)
    assert after == {"atol": 1e-3, "rtol": 1e-4}  # 2 x 3.6e-4 = 7.2e-4 -> 1e-3
    line = widened_line(TOLERANCE, after, 3.6e-4)
    assert line == (
        "check    IREE default's own build of the model differs from its reference by up to "
        "0.00036 (above atol 0.0001): the model recipe is checked within atol 0.001, rtol "
        "0.0001 (2x IREE's error, rounded up to a power of ten)"
    )


@pytest.mark.parametrize(
    ("status", "baseline"),
    [
        (Status.WRONG, {"status": "ok", "max_abs_error": 2e-5}),  # the schedules' fault
        (Status.WRONG, None),  # IREE default is the reference: nothing to compare
        (Status.OK, IREE_MISSES),  # the recipe passed: nothing to widen
        (Status.WRONG, {"status": "wrong", "max_abs_error": None}),
    ],
)
def test_the_tolerance_stays_unless_iree_misses_it_too(
    status: Status, baseline: dict[str, Any] | None
) -> None:
    assert widened(_report(status, baseline), TOLERANCE) is None


def test_a_tolerance_is_never_narrowed() -> None:
    loose = {"atol": 1e-2, "rtol": 1e-3}
    assert widened(_report(Status.WRONG, IREE_MISSES), loose) == loose
