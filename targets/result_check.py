"""How a computed result is compared with its reference: the one rule every check in
tdsched uses (``tdsched run`` against numpy or IREE default, sweeps, regress and peers,
and ``tdsched check`` of BEFORE against AFTER).

Elementwise, in float64: an element passes when ``|got - want| <= atol + rtol * |want|``;
equal infinities pass. Where the reference is undefined nothing can be compared, and the
result does not pass: a NaN in the reference, or an element the caller marks undefined
(``tdsched check`` marks those that depend on uninitialized data in BEFORE). A NaN in the
result where the reference has a number fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ResultComparison:
    """One result against its reference: what was compared and what failed."""

    size: int
    compared: int
    """Elements whose reference is defined (they were compared)."""
    undefined: int
    """Elements whose reference is NaN or marked undefined: not compared, so not passing."""
    nan: int
    """Compared elements where the result is NaN (the reference is not)."""
    mismatched: int
    """Compared elements out of tolerance (the NaNs included)."""
    max_abs_error: float
    """Largest ``|got - want|`` over the compared elements (inf where the result is NaN)."""
    max_abs_reference: float
    """Largest finite ``|want|`` over the compared elements."""
    shape_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.shape_error is None and self.undefined == 0 and self.mismatched == 0

    def problem(self, atol: float, rtol: float) -> str | None:
        """Why the result does not pass, in one line (``None`` when it passes)."""
        if self.shape_error is not None:
            return self.shape_error
        if self.undefined:
            return (
                f"the reference is undefined at {self.undefined} of {self.size} elements "
                "(NaN, or computed from uninitialized data), so they cannot be compared"
            )
        if self.nan:
            return f"{self.nan} of {self.size} results are NaN"
        if self.mismatched:
            return (
                f"results differ from the reference at {self.mismatched} of {self.size} "
                f"elements (max abs error {self.max_abs_error:.3g}, atol {atol:g}, rtol {rtol:g})"
            )
        return None


def compare_result(
    got: np.ndarray[Any, Any],
    want: np.ndarray[Any, Any],
    atol: float,
    rtol: float,
    undefined: np.ndarray[Any, Any] | None = None,
) -> ResultComparison:
    """Compare ``got`` with the reference ``want`` (same shape); ``undefined`` marks
    reference elements that are not defined even though they hold a number."""
    if got.shape != want.shape:
        return ResultComparison(
            want.size, 0, 0, 0, 0, 0.0, 0.0, f"result shape {got.shape}, expected {want.shape}"
        )
    a, b = want.astype(np.float64), got.astype(np.float64)
    unknown = np.isnan(a) if undefined is None else np.isnan(a) | undefined
    known = ~unknown
    a, b = a[known], b[known]
    with np.errstate(invalid="ignore"):  # inf - inf, 0 * inf: decided by a == b first
        diff = np.where(a == b, 0.0, np.abs(a - b))
        passing = (diff == 0.0) | (diff <= atol + rtol * np.abs(a))  # NaN: False
    nan = np.isnan(b)
    finite = np.abs(a[np.isfinite(a)])
    return ResultComparison(
        size=int(want.size),
        compared=int(a.size),
        undefined=int(unknown.sum()),
        nan=int(nan.sum()),
        mismatched=int((~passing).sum()),
        max_abs_error=float(np.nan_to_num(diff, nan=np.inf, posinf=np.inf).max(initial=0.0)),
        max_abs_reference=float(finite.max(initial=0.0)),
    )


def compare_results(
    got: list[np.ndarray[Any, Any]],
    want: list[np.ndarray[Any, Any]],
    atol: float,
    rtol: float,
    undefined: list[np.ndarray[Any, Any]] | None = None,
) -> tuple[float | None, str | None]:
    """Every result of a call against its reference by :func:`compare_result`: the
    largest error (``None`` when it is not finite: a NaN result has no error size) and why
    the results do not pass (``None`` when they do): a wrong count, or the first result
    that fails, named by its index when there are several."""
    if len(got) != len(want):
        return None, f"{len(got)} results, expected {len(want)}"
    masks: list[np.ndarray[Any, Any] | None] = list(undefined) if undefined else [None] * len(want)
    comparisons = [
        compare_result(g, w, atol, rtol, mask) for g, w, mask in zip(got, want, masks, strict=True)
    ]
    largest = max((c.max_abs_error for c in comparisons), default=0.0)
    worst = largest if np.isfinite(largest) else None
    for index, c in enumerate(comparisons):
        problem = c.problem(atol, rtol)
        if problem is not None:
            which = f"result #{index}: " if len(comparisons) > 1 else ""
            return worst, which + problem
    return worst, None
