"""Steps as recipe documents: the inverse of the YAML front end's reading of a step.

A :class:`~..dsl.steps.Step` made in Python (by the typed API, or by code that writes
recipes, such as ``tune``'s templates) becomes the mapping a recipe file holds for it,
``{primitive: {option: value, ...}}``, with the options its registry entry declares
(:func:`~..dsl.options.step_options`): YAML keys, op selections as their fields, lists
for tuples, and nothing for an option left at its default. :func:`step_document` of a
step read from YAML reads back to an equal step (``tests/test_step_documents.py``).
"""

from __future__ import annotations

from typing import Any

from ..dsl.options import Kind, StepOption, step_options
from ..dsl.steps import Step
from ..dsl.values import MatchSpec


def step_document(step: Step) -> dict[str, dict[str, Any]]:
    """``step`` as a recipe's schedule lists it: ``{primitive: {option: value}}``."""
    options: dict[str, Any] = {}
    for opt in step_options(type(step)):
        value = getattr(step, opt.name)
        if opt.spec.inline:
            options.update(match_document(value))
        elif opt.required or value != opt.default:
            options[opt.key] = _option_value(opt, value)
    return {step.primitive: options}


def match_document(spec: MatchSpec) -> dict[str, Any]:
    """An op selection as ``match:`` (or a graph rewrite's ``ops:``) writes it: the
    fields that select something, defaults left out."""
    found: dict[str, Any] = {}
    if spec.op is not None:
        found["op"] = spec.op
    if spec.kind is not None:
        found["kind"] = spec.kind
    if spec.shape is not None:
        found["shape"] = list(spec.shape)
    if spec.dtype != "f32":
        found["dtype"] = spec.dtype
    if spec.inputs is not None:
        found["inputs"] = spec.inputs
    if spec.used_by is not None:
        found["used_by"] = (
            spec.used_by
            if spec.used_by_inputs is None
            else {"op": spec.used_by, "inputs": spec.used_by_inputs}
        )
    if spec.body is not None:
        found["body"] = spec.body
    if spec.attributes:
        units = all(value is None for _, value in spec.attributes)
        found["attributes"] = (
            [name for name, _ in spec.attributes] if units else dict(spec.attributes)
        )
    if spec.layers:
        found["layer"] = spec.layers[0] if len(spec.layers) == 1 else list(spec.layers)
    return found


def _option_value(opt: StepOption, value: Any) -> Any:
    kind = opt.spec.kind
    if kind in (Kind.MATCH, Kind.OPS):
        return match_document(value)
    if kind is Kind.INTS:
        return list(value)
    if kind is Kind.INT_GROUPS:
        return "auto" if value is None else [list(group) for group in value]
    return value
