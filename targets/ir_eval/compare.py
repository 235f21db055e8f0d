"""Checking that a transformed module (AFTER) computes what the original (BEFORE) does.

Both modules are evaluated by the numpy interpreter on the same seeded random inputs
(:func:`tdsched.targets.workload.random_inputs`: floats uniform in [-1, 1), small
integers), and each result of AFTER is compared with BEFORE's. Floats are evaluated in
float64 for both, so differences come from what the schedule changed, not from rounding.
Errors are reported absolute and relative to the largest magnitude in BEFORE's result; a
result passes when ``max_abs_error <= atol + rtol * max|BEFORE|``. NaNs in the same places
in both (and equal infinities) count as equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import ir

from ..workload import Workload, random_inputs
from .errors import EvalError
from .evaluator import entry_function, evaluate, parse_module

DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9


@dataclass(frozen=True)
class OutputCheck:
    """The comparison of one result of the entry function."""

    index: int
    type: str
    """The result's MLIR type, e.g. ``tensor<8x12xf32>``."""
    max_abs_before: float
    """Largest finite magnitude in BEFORE's result: the scale of the relative error."""
    max_abs_error: float
    max_rel_error: float
    ok: bool


@dataclass(frozen=True)
class CheckReport:
    """The outcome of :func:`check_equivalent`."""

    function: str
    seed: int
    rtol: float
    atol: float
    outputs: tuple[OutputCheck, ...]

    @property
    def equivalent(self) -> bool:
        """Whether every result of AFTER matches BEFORE's within tolerance."""
        return all(o.ok for o in self.outputs)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; infinite or NaN errors are ``null``."""
        return {
            "function": self.function,
            "seed": self.seed,
            "rtol": self.rtol,
            "atol": self.atol,
            "equivalent": self.equivalent,
            "outputs": [
                {
                    "index": o.index,
                    "type": o.type,
                    "max_abs_before": _finite_or_none(o.max_abs_before),
                    "max_abs_error": _finite_or_none(o.max_abs_error),
                    "max_rel_error": _finite_or_none(o.max_rel_error),
                    "ok": o.ok,
                }
                for o in self.outputs
            ],
        }

    def format_table(self) -> str:
        """A human-readable table, one row per result, and a verdict line."""
        width = max([len("type"), *(len(o.type) for o in self.outputs)]) + 2
        lines = [
            f"function @{self.function}, seed {self.seed}: a result passes when "
            f"max abs err <= {self.atol:g} + {self.rtol:g} * max|BEFORE|",
            f"{'result':<8}{'type':<{width}}{'max|BEFORE|':>12}{'max abs err':>13}"
            f"{'max rel err':>13}  status",
        ]
        for o in self.outputs:
            lines.append(
                f"{'#' + str(o.index):<8}{o.type:<{width}}{o.max_abs_before:>12.3g}"
                f"{o.max_abs_error:>13.3g}{o.max_rel_error:>13.3g}  "
                f"{'ok' if o.ok else 'MISMATCH'}"
            )
        failed = sum(not o.ok for o in self.outputs)
        lines.append(
            "equivalent"
            if self.equivalent
            else f"NOT equivalent: {failed} of {len(self.outputs)} results differ"
        )
        return "\n".join(lines)


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def check_equivalent(
    before_text: str,
    after_text: str,
    function: str | None = None,
    seed: int = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    before_source: str = "BEFORE",
    after_source: str = "AFTER",
) -> CheckReport:
    """Evaluate public function ``function`` (default: BEFORE's only public one) of both
    modules on the same random inputs (seeded by ``seed``) and compare their results.

    The entry function must take static-shaped tensors and have the same type in both
    modules; ``before_source``/``after_source`` name the modules in messages. Raises
    :class:`EvalError` (a ``ValueError``, as are the workload model's input-type errors)
    when either module cannot be evaluated or the two function types differ.
    """
    name, signature = _signature(before_text, function, before_source)
    _, after_signature = _signature(after_text, name, after_source)
    if signature != after_signature:
        raise EvalError(
            f"@{name} has type {signature} in {before_source} "
            f"but {after_signature} in {after_source}"
        )
    inputs = random_inputs(Workload(before_source, before_text, name), seed)
    expected = evaluate(before_text, name, inputs, before_source)
    actual = evaluate(after_text, name, inputs, after_source)
    outputs = tuple(
        _compare(i, str(t), want, got, rtol, atol)
        for i, (t, want, got) in enumerate(zip(signature.results, expected, actual, strict=True))
    )
    return CheckReport(name, seed, rtol, atol, outputs)


def check_files(
    before: Path,
    after: Path,
    function: str | None = None,
    seed: int = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
) -> CheckReport:
    """:func:`check_equivalent` on two ``.mlir`` files; errors name the files."""
    texts = []
    for path in (before, after):
        try:
            texts.append(path.read_text())
        except OSError as exc:
            raise EvalError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise EvalError(f"{path}: not UTF-8 text; give an .mlir file") from None
    before_text, after_text = texts
    return check_equivalent(
        before_text, after_text, function, seed, rtol, atol, str(before), str(after)
    )


@dataclass(frozen=True)
class _FunctionType:
    """A function type as text (MLIR types do not outlive their context)."""

    inputs: tuple[str, ...]
    results: tuple[str, ...]

    def __str__(self) -> str:
        return f"({', '.join(self.inputs)}) -> ({', '.join(self.results)})"


def _signature(text: str, function: str | None, source: str) -> tuple[str, _FunctionType]:
    """The entry function's name and type."""
    with ir.Context():
        fn = entry_function(parse_module(text, source), function, source)
        t = fn.type
        return fn.name.value, _FunctionType(tuple(map(str, t.inputs)), tuple(map(str, t.results)))


def _compare(
    index: int,
    result_type: str,
    want: np.ndarray[Any, Any],
    got: np.ndarray[Any, Any],
    rtol: float,
    atol: float,
) -> OutputCheck:
    a, b = want.astype(np.float64), got.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    diff = np.where(same, 0.0, np.abs(a - b))
    max_abs = float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0))
    finite = np.abs(a[np.isfinite(a)])
    scale = float(finite.max(initial=0.0))
    rel = max_abs / scale if scale > 0 else (math.inf if max_abs else 0.0)
    return OutputCheck(index, result_type, scale, max_abs, rel, max_abs <= atol + rtol * scale)
