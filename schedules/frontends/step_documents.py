"""Steps and kernel schedules as recipe documents: the inverse of the YAML front end.

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
from ..dsl.recipe import KernelSchedule, LoweringConfig
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


def kernel_document(kernel: KernelSchedule) -> dict[str, Any]:
    """A kernel schedule as a recipe's ``kernels`` lists it: name, match, its steps or
    its config, and the fields it sets."""
    found: dict[str, Any] = {"name": kernel.name, "match": match_document(kernel.match)}
    if kernel.targets is not None:
        found["targets"] = list(kernel.targets)
    if kernel.when is not None:
        found["when"] = kernel.when
    if kernel.workgroup_size is not None:
        found["workgroup_size"] = list(kernel.workgroup_size)
    if kernel.config is not None:
        found["config"] = config_document(kernel.config)
    else:
        found["schedule"] = [step_document(step) for step in kernel.steps]
    return found


def config_document(config: LoweringConfig) -> dict[str, Any]:
    """A kernel's lowering ``config`` as a recipe writes it."""
    found: dict[str, Any] = {
        "tile_sizes": {level: list(sizes) for level, sizes in config.tile_sizes}
    }
    if config.workgroup_size is not None:
        found["workgroup_size"] = list(config.workgroup_size)
    if config.pipeline is not None:
        found["pipeline"] = config.pipeline
    if not config.root:
        found["root"] = False
    return found


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
        found["layer"] = list(spec.layers)
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
