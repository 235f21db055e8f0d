"""The body of a ``linalg.generic`` as kernel matches read and write it.

Ops of different dispatches can agree on everything a kernel matcher tests by their
structure (name, loop bounds, input count, the op using their result) and still compute
different things: the exp-once softmax's row max and row sum are both a one-input
reduction over the same rows, used by a ``linalg.generic`` of two inputs. Only their
bodies differ (``arith.maximumf`` against ``arith.addf``). A match's ``body`` names the
op's body as MLIR text, the block as ``tdsched apply`` prints it::

    ^bb0(%in: f32, %out: f32):
      %0 = arith.maximumf %in, %out : f32
      linalg.yield %0 : f32

The kernel matcher compares it with the payload op's body structurally (IREE's
``transform.iree.match.regions``): the same ops with the same attributes and block
argument types, wired the same way; value names do not matter.
"""

from __future__ import annotations

import re

from iree.compiler import ir

from .errors import ScheduleError

_HEADER = re.compile(r"^\s*\^bb\d*\((?P<args>[^)]*)\)\s*:")
_ARGUMENT = re.compile(r"%[\w$.-]+\s*:\s*(?P<type>[^,]+)")
_YIELD = re.compile(r"linalg\.yield\b(?P<values>[^:\n]*)")
_VALUE = re.compile(r"%(\d+)\b")
_USED = re.compile(r"%[\w$.-]+")
_RESULT = re.compile(r"(%[\w$.-]+)(?::\d+)?\s*=")
EXAMPLE = (
    "^bb0(%in: f32, %out: f32):\n  %0 = arith.maximumf %in, %out : f32\n  linalg.yield %0 : f32"
)


def body_of(op: ir.Operation) -> str | None:
    """The body of ``op`` where it is a ``linalg.generic`` (named ops are matched by
    name), as printed, its numbered values renumbered from 0 in order of appearance so
    that equal bodies print equal. ``None`` also where the body uses a value from outside
    it (a constant IREE hoisted out of the op): a match's body cannot name that value."""
    if op.name != "linalg.generic":
        return None
    printed = str(op.regions[0].blocks[0]).strip()
    header = _HEADER.match(printed)
    arguments = _USED.findall(header.group("args")) if header else []
    if set(_USED.findall(printed)) - {*arguments, *_RESULT.findall(printed)}:
        return None
    numbers: dict[str, str] = {}

    def renumber(found: re.Match[str]) -> str:
        return "%" + numbers.setdefault(found.group(1), str(len(numbers)))

    return _VALUE.sub(renumber, printed)


def body_module(text: str) -> ir.Module:
    """A module (parsed in the active context) of one function holding one
    ``linalg.generic`` over 0-d tensors whose body is ``text`` (see the module
    docstring): what ``transform.iree.match.regions`` compares a payload op's body with
    (:func:`wrapped_generic`). Raises ScheduleError saying what is wrong with ``text``."""
    header = _HEADER.match(text)
    lines = text.strip().splitlines()
    yielded = _YIELD.search(lines[-1]) if lines else None
    if header is None or yielded is None:
        raise ScheduleError(
            "body: expected a linalg.generic's block as 'tdsched apply' prints it, from its "
            f"'^bb0(...):' line to its linalg.yield, e.g.\n{EXAMPLE}"
        )
    types = [m.group("type").strip() for m in _ARGUMENT.finditer(header.group("args"))]
    results = len([v for v in yielded.group("values").split(",") if v.strip()])
    if not 0 < results <= len(types):
        raise ScheduleError(
            f"body: its linalg.yield gives {results} values for {len(types)} block "
            "arguments; a linalg.generic's block takes one per input and output and yields "
            "one per output"
        )
    tensors = [f"tensor<{t}>" for t in types]
    names = [f"%a{i}" for i in range(len(types))]
    split = len(types) - results
    ins = f" ins({', '.join(names[:split])} : {', '.join(tensors[:split])})" if split else ""
    outs = f" outs({', '.join(names[split:])} : {', '.join(tensors[split:])})"
    maps = ", ".join(["affine_map<() -> ()>"] * len(types))
    arguments = ", ".join(f"{n}: {t}" for n, t in zip(names, tensors, strict=True))
    source = (
        f"func.func @body({arguments}) {{\n"
        f"  linalg.generic {{indexing_maps = [{maps}], iterator_types = []}}{ins}{outs} "
        f"{{\n{text}\n  }} -> {', '.join(tensors[split:])}\n  return\n}}"
    )
    try:
        return ir.Module.parse(source)
    except ir.MLIRError as exc:
        details = "; ".join(str(d.message) for d in exc.error_diagnostics) or str(exc)
        raise ScheduleError(f"body: not a valid linalg.generic body: {details}") from exc


def wrapped_generic(module: ir.Module) -> ir.Operation:
    """The ``linalg.generic`` of a :func:`body_module`."""
    function = module.body.operations[0]
    return function.regions[0].blocks[0].operations[0].operation


def check_body(text: str) -> None:
    """Raise ScheduleError where ``text`` is no ``linalg.generic`` body."""
    with ir.Context():
        body_module(text)
