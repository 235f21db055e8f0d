"""Each entry is measured in a fresh child process (:mod:`tdsched.schedules.measure.isolation`).

A child that dies (a compiled module's segfault) or runs past its limit becomes a
``crashed`` / ``timeout`` measurement with the end of the child's output, and the
remaining entries go on. A Vulkan device (lavapipe keeps two cores busy once opened)
never outlives the entry that opened it.
"""

from __future__ import annotations

from ..measure.isolation import ChildFailure, call_isolated
from .measure import Measurement, MeasureRequest

ENTRY = "tdsched.schedules.regress.measure:measure_json"


def measure_isolated(request: MeasureRequest, timeout_s: float) -> Measurement:
    """:func:`~.measure.measure` ``request`` in a child process, killed after ``timeout_s``."""
    result = call_isolated(ENTRY, request.to_json(), timeout_s)
    if isinstance(result, ChildFailure):
        return Measurement(result.status, f"the measuring {result.message.removeprefix('the ')}")
    return Measurement.from_json(result)
