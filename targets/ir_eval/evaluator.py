"""Parsing a module, generalizing its named linalg ops, and evaluating its entry function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from iree.compiler import ir
from iree.compiler.passmanager import PassManager

from . import affine_ops, arith_math_ops, linalg_ops, scf_ops, tensor_ops
from .errors import EvalError, OpFailure
from .interpreter import CORE_HANDLERS, Handler, Interpreter
from .values import (
    FILLS,
    Value,
    is_float,
    round_to,
    shape_matches,
    storage_dtype,
    uninitialized_fill,
)

HANDLERS: Mapping[str, Handler] = {
    **CORE_HANDLERS,
    **arith_math_ops.HANDLERS,
    **affine_ops.HANDLERS,
    **tensor_ops.HANDLERS,
    **linalg_ops.HANDLERS,
    **scf_ops.HANDLERS,
}
"""Every op the evaluator runs, by name (terminators are read by their parent ops)."""

_GENERALIZE = "builtin.module(func.func(linalg-generalize-named-ops))"


def supported_ops() -> list[str]:
    """The names of the ops the evaluator runs, sorted."""
    return sorted(HANDLERS)


def parse_module(text: str, source: str) -> ir.Module:
    """Parse ``text`` in the current context and generalize its named linalg ops (matmul,
    conv, fill, transpose, reduce, ...) to ``linalg.generic``."""
    try:
        module = ir.Module.parse(text)
        PassManager.parse(_GENERALIZE).run(module.operation)
    except ir.MLIRError as exc:
        message = str(exc).replace('"-":', f"{source}:")
        raise EvalError(f"{source}: not valid MLIR: {message}") from None
    return module


def entry_function(module: ir.Module, function: str | None, source: str) -> Any:
    """The public ``func.func`` to run: the one called ``function``, or the only one."""
    public = {
        ir.StringAttr(op.attributes["sym_name"]).value: op
        for op in module.body.operations
        if op.operation.name == "func.func"
        and (
            "sym_visibility" not in op.attributes
            or ir.StringAttr(op.attributes["sym_visibility"]).value == "public"
        )
    }
    found = ", ".join(f"@{n}" for n in public) or "none"
    if function is None:
        if len(public) != 1:
            raise EvalError(
                f"{source}: {len(public)} public functions ({found}); name the entry function"
            )
        (fn,) = public.values()
        return fn
    if function not in public:
        raise EvalError(f"{source}: no public function @{function} (found: {found})")
    return public[function]


def evaluate(
    module_text: str,
    function: str | None,
    inputs: Sequence[np.ndarray[Any, Any]],
    source: str = "<input>",
) -> list[np.ndarray[Any, Any]]:
    """Evaluate public function ``function`` (default: the only public one) of the module
    in ``module_text`` on ``inputs``, one array per argument, and return its results.

    Float results are float64 (the evaluation precision, see :mod:`.values`); integer
    results keep their width. ``source`` names the module in error messages. Raises
    :class:`EvalError` for invalid IR, unsupported ops or types, and out-of-bounds
    accesses.
    """
    with ir.Context(), np.errstate(all="ignore"):
        module = parse_module(module_text, source)
        fn = entry_function(module, function, source)
        name = fn.name.value
        args = _arguments(fn, inputs, f"{source}: @{name}")
        try:
            results = Interpreter(module, HANDLERS, source).call(name, args)
        except OpFailure as exc:  # raised outside any op, e.g. binding the arguments
            raise EvalError(f"{source}: @{name}: {exc}") from None
        return [np.array(result) for result in results]


def evaluate_fills(
    module_text: str,
    function: str | None,
    inputs: Sequence[np.ndarray[Any, Any]],
    source: str = "<input>",
) -> list[list[np.ndarray[Any, Any]]]:
    """:func:`evaluate` once under each of :data:`~.values.FILLS` of uninitialized data
    (``tensor.empty`` read before it is written), in that order: the results of a
    correct module are the same under every fill."""
    runs = []
    for fill in FILLS:
        with uninitialized_fill(fill):
            runs.append(evaluate(module_text, function, inputs, source))
    return runs


def evaluate_reference(
    module_text: str,
    function: str | None,
    inputs: Sequence[np.ndarray[Any, Any]],
    source: str = "<input>",
) -> tuple[list[np.ndarray[Any, Any]], list[np.ndarray[Any, Any]]]:
    """:func:`evaluate`, for a module whose results are a reference: its results under
    the first fill, and per result a boolean mask of the elements that are undefined
    because they depend on uninitialized data: they differ between the runs of
    :func:`evaluate_fills` (NaN counting as equal to NaN).
    """
    first, *others = evaluate_fills(module_text, function, inputs, source)
    masks = [np.zeros(a.shape, dtype=bool) for a in first]
    for other in others:
        for mask, a, b in zip(masks, first, other, strict=True):
            mask |= ~((a == b) | (_nan(a) & _nan(b)))
    return first, masks


def _nan(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.isnan(array) if array.dtype.kind == "f" else np.zeros(array.shape, dtype=bool)


def _arguments(fn: Any, inputs: Sequence[np.ndarray[Any, Any]], where: str) -> list[Value]:
    """``inputs`` checked against ``fn``'s argument types and held as runtime values."""
    types = fn.type.inputs
    if len(types) != len(inputs):
        raise EvalError(f"{where} takes {len(types)} arguments, {len(inputs)} given")
    args: list[Value] = []
    for i, (t, given) in enumerate(zip(types, inputs, strict=True)):
        array = np.asarray(given)
        if not shape_matches(t, array.shape):
            raise EvalError(f"{where}: argument #{i} has type {t}, given shape {array.shape}")
        try:
            value = array.astype(storage_dtype(t))
        except OpFailure as exc:
            raise EvalError(f"{where}: argument #{i}: {exc}") from None
        args.append(round_to(value, t) if is_float(t) else value[()])
    return args
