"""The model recipe's tolerance: what IREE's own build of the model meets.

Task candidates are checked against IREE's build of the task, so their tolerance only
has to allow f32 accumulation reordered (:data:`TOLERANCE`). The model recipe is checked
against the model's own reference (the IR evaluator, ONNX's reference, a builder's numpy
forward pass), and a deep model's f32 error can exceed that tolerance by itself: a
ResNet bottleneck's third convolution sums terms of order 10^3, so an output near zero
misses ``atol`` 1e-4 by rounding alone (IREE default's build differed from the IR
evaluator by up to 3.6e-4 at 5 of 50176 elements on a Zen 4). A schedule cannot be
blamed for that, and a recipe held to it can never pass. So where IREE default's own
build misses the tolerance against the reference (the run's ``baseline_check``), the
model recipe is checked within :data:`MARGIN` times IREE default's largest error
instead, ``atol`` rounded up to a power of ten: the schedules must be about as accurate
as IREE's own build, not more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..measure.run_report import RunReport
from ..measure.status import Status

TOLERANCE = {"atol": 1.0e-4, "rtol": 1.0e-4}
"""The task recipes' and, unless IREE's own build misses it, the model recipe's
tolerance (f32 accumulation reordered)."""
MARGIN = 2.0
"""How many times IREE default's largest error against the reference the schedules may
differ by, where IREE default misses :data:`TOLERANCE`."""


def widened(report: RunReport, tolerance: Mapping[str, float]) -> dict[str, float] | None:
    """The tolerance to check the model recipe with, where ``report`` (a check of it) is
    wrong and IREE default's own build missed ``tolerance`` against the reference too:
    ``atol`` the power of ten at or above :data:`MARGIN` times IREE default's largest
    error, ``rtol`` kept. None where IREE default met it, or was not checked (IREE default
    is the reference) or the report is not wrong."""
    check = report.baseline_check
    if report.status is not Status.WRONG or not check or check.get("status") != "wrong":
        return None
    error = check.get("max_abs_error")
    if error is None or not math.isfinite(error) or error <= 0:
        return None
    atol = 10.0 ** math.ceil(math.log10(MARGIN * error))
    return {**tolerance, "atol": max(atol, tolerance["atol"])}


def widened_line(before: Mapping[str, float], after: Mapping[str, float], error: float) -> str:
    """The summary line that says why the model recipe's tolerance is ``after``."""
    return (
        f"check    IREE default's own build of the model differs from its reference by up "
        f"to {error:.3g} (above atol {before['atol']:g}): the model recipe is checked "
        f"within atol {after['atol']:g}, rtol {after['rtol']:g} ({MARGIN:g}x IREE's error, "
        "rounded up to a power of ten)"
    )
