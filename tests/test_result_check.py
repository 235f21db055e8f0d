"""tdsched's one rule for comparing a result with its reference (run, sweep, regress,
peers and check all use it): elementwise |got - want| <= atol + rtol * |want|, nothing
passes where the reference is undefined, and a NaN where the reference has a number fails."""

from __future__ import annotations

import numpy as np
from tdsched.schedules.dsl.recipe import Tolerance
from tdsched.schedules.measure.evaluation import compare_outputs
from tdsched.schedules.measure.status import Status
from tdsched.targets.result_check import compare_result

WANT = np.array([1.0, -2.0, 0.0, np.inf])


def test_within_tolerance_passes_and_equal_infinities_count_as_equal() -> None:
    c = compare_result(WANT + np.array([1e-5, 0, 1e-5, 0]), WANT, atol=1e-4, rtol=1e-4)
    assert c.ok and c.compared == 4 and c.max_abs_error <= 1e-5 + 1e-12


def test_elementwise_not_relative_to_the_largest_value() -> None:
    # 0.01 off an element of 0 fails, however large the other elements are.
    want = np.array([1000.0, 0.0])
    c = compare_result(np.array([1000.0, 0.01]), want, atol=1e-4, rtol=1e-4)
    assert not c.ok and c.mismatched == 1
    assert c.problem(1e-4, 1e-4) == (
        "results differ from the reference at 1 of 2 elements (max abs error 0.01, "
        "atol 0.0001, rtol 0.0001)"
    )


def test_nan_in_the_reference_is_undefined_and_never_passes() -> None:
    want = np.array([np.nan, 1.0])
    c = compare_result(np.array([np.nan, 1.0]), want, atol=1e-4, rtol=1e-4)
    assert not c.ok and (c.compared, c.undefined) == (1, 1)
    assert "undefined at 1 of 2 elements" in (c.problem(1e-4, 1e-4) or "")


def test_marked_undefined_elements_are_not_compared() -> None:
    mask = np.array([False, True, False, False])
    c = compare_result(WANT, WANT, atol=0.0, rtol=0.0, undefined=mask)
    assert not c.ok and (c.compared, c.undefined, c.mismatched) == (3, 1, 0)


def test_nan_in_the_result_fails() -> None:
    c = compare_result(np.array([1.0, np.nan]), np.array([1.0, 2.0]), atol=1e-4, rtol=1e-4)
    assert not c.ok and c.nan == 1 and c.problem(1e-4, 1e-4) == "1 of 2 results are NaN"


def test_run_check_names_the_result_and_keeps_json_finite() -> None:
    good, bad = np.ones(3), np.array([1.0, np.nan, 1.0])
    check = compare_outputs([good, bad], [good, np.ones(3)], Tolerance())
    assert check.status is Status.WRONG and check.error == "result #1: 1 of 3 results are NaN"
    assert check.max_abs_error is None  # a NaN has no error size (JSON has no infinity)
    shape = compare_outputs([np.ones(2)], [np.ones(3)], Tolerance())
    assert shape.error == "result shape (2,), expected (3,)"
    assert compare_outputs([good], [good], Tolerance()).status is Status.OK
