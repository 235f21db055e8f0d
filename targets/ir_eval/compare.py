"""Checking that a transformed module (AFTER) computes what the original (BEFORE) does.

Both modules are evaluated by the numpy interpreter on the same seeded random inputs
(:func:`tdsched.targets.workload.random_inputs`: floats uniform in [-1, 1), small
integers), and each result of AFTER is compared with BEFORE's by tdsched's one rule
(:func:`tdsched.targets.result_check.compare_result`: elementwise ``|AFTER - BEFORE| <=
atol + rtol * |BEFORE|``). Floats are evaluated in float64 for both, so differences come
from what the schedule changed, not from rounding. BEFORE is evaluated twice, with two
fills of uninitialized data: its elements that depend on such data (a ``tensor.empty``
read before it is written) are undefined, and a result with undefined elements does not
pass: that is a finding about BEFORE, not a comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import ir

from ..result_check import compare_result
from ..workload import DynamicShapeError, Workload, random_inputs
from .errors import EvalError
from .evaluator import entry_function, evaluate, evaluate_reference, parse_module

DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9


@dataclass(frozen=True)
class OutputCheck:
    """The comparison of one result of the entry function."""

    index: int
    type: str
    """The result's MLIR type, e.g. ``tensor<8x12xf32>``."""
    max_abs_before: float
    """Largest finite magnitude in BEFORE's compared elements: the scale of the relative
    error."""
    max_abs_error: float
    max_rel_error: float
    ok: bool
    size: int = 0
    compared: int = 0
    """Elements compared: those BEFORE defines (not NaN, not from uninitialized data)."""
    undefined: int = 0
    """Elements of BEFORE's result that are NaN or depend on uninitialized data."""
    problem: str | None = None
    """Why the result does not pass (None when it does)."""


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
                    "size": o.size,
                    "compared": o.compared,
                    "undefined": o.undefined,
                    "problem": o.problem,
                }
                for o in self.outputs
            ],
        }

    def format_table(self) -> str:
        """A human-readable table, one row per result, and a verdict line."""
        width = max([len("type"), *(len(o.type) for o in self.outputs)]) + 2
        lines = [
            f"function @{self.function}, seed {self.seed}: an element passes when "
            f"|AFTER - BEFORE| <= {self.atol:g} + {self.rtol:g} * |BEFORE|",
            f"{'result':<8}{'type':<{width}}{'compared':>12}{'max|BEFORE|':>12}"
            f"{'max abs err':>13}{'max rel err':>13}  status",
        ]
        for o in self.outputs:
            status = "ok" if o.ok else ("UNDEFINED" if o.undefined else "MISMATCH")
            lines.append(
                f"{'#' + str(o.index):<8}{o.type:<{width}}{f'{o.compared}/{o.size}':>12}"
                f"{o.max_abs_before:>12.3g}{o.max_abs_error:>13.3g}{o.max_rel_error:>13.3g}"
                f"  {status}"
            )
        lines += [f"#{o.index}: {o.problem}" for o in self.outputs if o.problem]
        if any(o.undefined for o in self.outputs):
            lines.append(
                "BEFORE reads uninitialized data (or computes NaN) where marked undefined: "
                "fix BEFORE (e.g. fill the tensor.empty it accumulates into) and check again"
            )
        failed = sum(not o.ok for o in self.outputs)
        lines.append(
            "equivalent"
            if self.equivalent
            else f"NOT equivalent: {failed} of {len(self.outputs)} results do not pass"
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
    dynamic_size: int | None = None,
) -> CheckReport:
    """Evaluate public function ``function`` (default: BEFORE's only public one) of both
    modules on the same random inputs (seeded by ``seed``) and compare their results.

    The entry function must take ranked tensors and have the same type in both modules;
    a dynamic dim of an argument takes the extent ``dynamic_size`` (without it, it is an
    error). ``before_source``/``after_source`` name the modules in messages. Raises
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
    try:
        inputs = random_inputs(Workload(before_source, before_text, name), seed, dynamic_size)
    except DynamicShapeError:
        raise EvalError(
            f"{before_source}: @{name} has dynamic dims, {signature}; give --dynamic-size N "
            "to evaluate it with N for every dynamic dim of its arguments"
        ) from None
    expected, undefined = evaluate_reference(before_text, name, inputs, before_source)
    actual = evaluate(after_text, name, inputs, after_source)
    outputs = tuple(
        _compare(i, str(t), want, got, mask, rtol, atol)
        for i, (t, want, got, mask) in enumerate(
            zip(signature.results, expected, actual, undefined, strict=True)
        )
    )
    return CheckReport(name, seed, rtol, atol, outputs)


def check_files(
    before: Path,
    after: Path,
    function: str | None = None,
    seed: int = 0,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    dynamic_size: int | None = None,
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
        before_text, after_text, function, seed, rtol, atol, str(before), str(after), dynamic_size
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
    undefined: np.ndarray[Any, Any],
    rtol: float,
    atol: float,
) -> OutputCheck:
    c = compare_result(got, want, atol, rtol, undefined)
    scale = c.max_abs_reference
    rel = c.max_abs_error / scale if scale > 0 else (math.inf if c.max_abs_error else 0.0)
    return OutputCheck(
        index,
        result_type,
        scale,
        c.max_abs_error,
        rel,
        c.ok,
        c.size,
        c.compared,
        c.undefined,
        c.problem(atol, rtol),
    )
