"""Checking that a transformed module (AFTER) computes what the original (BEFORE) does.

Both modules are evaluated by the numpy interpreter on the same seeded random inputs
(:func:`tdsched.targets.workload.random_inputs`: floats uniform in [-1, 1), small
integers), and each result of AFTER is compared with BEFORE's by tdsched's one rule
(:func:`tdsched.targets.result_check.compare_result`: elementwise ``|AFTER - BEFORE| <=
atol + rtol * |BEFORE|``). Floats are evaluated in float64 for both, so differences come
from what the schedule changed, not from rounding. Both are evaluated under each fill of
uninitialized data (:data:`.values.FILLS`): BEFORE's elements that depend on such data (a
``tensor.empty`` read before it is written) are undefined, and a result with undefined
elements does not pass: that is a finding about BEFORE, not a comparison. AFTER passes
only when it matches BEFORE under every fill, so an uninitialized read that one fill
hides (NaN through ``maxnumf``) fails under another. Each dynamic dim of the arguments
gets its own extent (:mod:`.dynamic_dims`), so a dim read from the wrong dimension shows.
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
from .dynamic_dims import argument_shapes
from .errors import EvalError
from .evaluator import entry_function, evaluate_fills, evaluate_reference, parse_module
from .values import FILLS

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
    arguments: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """Each argument's type and the shape it was evaluated at."""
    dynamic: bool = False
    """Whether the arguments have dynamic dims (each was given its own extent)."""

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
            "arguments": [{"type": t, "shape": list(shape)} for t, shape in self.arguments],
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
        if self.dynamic:
            shapes = ", ".join(
                f"#{i} {t} as {'x'.join(map(str, shape))}"
                for i, (t, shape) in enumerate(self.arguments)
            )
            lines.insert(
                1,
                f"arguments {shapes}: each dynamic dim its own size, except dims "
                "BEFORE's ops make equal",
            )
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
    name, signature, shapes = _entry(before_text, function, before_source, dynamic_size)
    _, after_signature, _ = _entry(after_text, name, after_source, None)
    if signature != after_signature:
        raise EvalError(
            f"@{name} has type {signature} in {before_source} "
            f"but {after_signature} in {after_source}"
        )
    try:
        inputs = random_inputs(Workload(before_source, before_text, name), seed, shapes)
    except DynamicShapeError:
        raise EvalError(
            f"{before_source}: @{name} has dynamic dims, {signature}; give --dynamic-size N "
            "to evaluate it with N, N+1, ... for its dynamic dims"
        ) from None
    expected, undefined = evaluate_reference(before_text, name, inputs, before_source)
    actual = zip(*evaluate_fills(after_text, name, inputs, after_source), strict=True)
    outputs = tuple(
        _compare(i, str(t), want, list(got), mask, rtol, atol)
        for i, (t, want, got, mask) in enumerate(
            zip(signature.results, expected, actual, undefined, strict=True)
        )
    )
    arguments = tuple((t, a.shape) for t, a in zip(signature.inputs, inputs, strict=True))
    return CheckReport(name, seed, rtol, atol, outputs, arguments, shapes is not None)


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


def _entry(
    text: str, function: str | None, source: str, dynamic_size: int | None
) -> tuple[str, _FunctionType, list[tuple[int, ...]] | None]:
    """The entry function's name and type, and when its arguments have dynamic dims and
    ``dynamic_size`` is given, their shapes (:func:`.dynamic_dims.argument_shapes` from
    that size)."""
    with ir.Context():
        module = parse_module(text, source)  # kept alive while fn is read
        fn = entry_function(module, function, source)
        t = fn.type
        signature = _FunctionType(tuple(map(str, t.inputs)), tuple(map(str, t.results)))
        dynamic = any(isinstance(i, ir.ShapedType) and not i.has_static_shape for i in t.inputs)
        shapes = argument_shapes(fn, dynamic_size) if dynamic and dynamic_size else None
        return fn.name.value, signature, shapes


def _compare(
    index: int,
    result_type: str,
    want: np.ndarray[Any, Any],
    got: list[np.ndarray[Any, Any]],
    undefined: np.ndarray[Any, Any],
    rtol: float,
    atol: float,
) -> OutputCheck:
    """BEFORE's result ``want`` against AFTER's under each fill (``got``, in the order
    of :data:`.values.FILLS`): the first that fails is reported."""
    comparisons = [compare_result(g, want, atol, rtol, undefined) for g in got]
    failing = next((k for k, c in enumerate(comparisons) if not c.ok), 0)
    c = comparisons[failing]
    problem = c.problem(atol, rtol)
    if problem and failing:
        problem = (
            "AFTER reads uninitialized data: with tensor.empty filled with "
            f"{FILLS[failing].description} (other fills hide it), {problem}"
        )
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
        problem,
    )
