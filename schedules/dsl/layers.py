"""Selecting ops of lowered models by layer name and attributes.

A model lowered by tdsched (the builder, ONNX, TOSA) tags each op with the layer it came
from (``tdsched.layer``) and gives it the location ``loc("<layer>")``. Recipes select
such ops with ``layer:`` (names or ``*``/``?`` patterns) and ``attributes:``.

* :func:`expand_layers` turns patterns into the exact layer names of the workload, so a
  misspelt layer is an error rather than a schedule that silently matches nothing.
* Graph schedules then match by attribute directly (``transform.structured.match``
  with ``op_attrs``, or the Python graph rewrites).
* Kernel matchers cannot see attributes, and IREE drops them before kernel configuration;
  :func:`resolve_kernel_layers` finds, in a *census* of the dispatches (see
  ``transform_lib.census``), the op each selected layer became — through locations,
  which survive — and rewrites the kernel's match to that op's name and loop bounds.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from iree.compiler import ir
from tdsched.transform_lib.census import StructuredOp
from tdsched.transform_lib.graph.report import layer_of, selected
from tdsched.transform_lib.match import Criteria, OpCriteria
from tdsched.transform_lib.payload import ops_under

from ..base.errors import RecipeError, Where
from .match_keys import telling_keys
from .recipe import KernelSchedule, Recipe
from .values import MatchSpec

T = TypeVar("T")


def workload_layers(module_text: str, criteria: OpCriteria | None = None) -> list[str]:
    """The layer names of the module's ops (selected by ``criteria``), in program order."""
    if criteria is None:
        return list(_all_layers(module_text))
    return _layers(module_text, criteria)


@functools.lru_cache(maxsize=16)
def _all_layers(module_text: str) -> tuple[str, ...]:
    return tuple(_layers(module_text, None))


def _layers(module_text: str, criteria: OpCriteria | None) -> list[str]:
    with ir.Context():
        module = ir.Module.parse(module_text)
        ops = ops_under(module.operation, lambda op: layer_of(op) is not None)
        names = [layer_of(op) for op in ops if criteria is None or selected(op, criteria)]
    return list(dict.fromkeys(n for n in names if n is not None))


def expand_layers(recipe: Recipe, layers: Sequence[str]) -> Recipe:
    """``recipe`` with every ``layer`` pattern replaced by the matching names in ``layers``.

    Raises RecipeError at the step naming a pattern no layer matches.
    """

    def expand(spec: MatchSpec, where: Where) -> MatchSpec:
        if not spec.layers:
            return spec
        names: list[str] = []
        for pattern in spec.layers:
            found = [name for name in layers if fnmatch.fnmatchcase(name, pattern)]
            if not found:
                raise RecipeError(where.child("layer"), _no_layer(pattern, layers))
            names.extend(found)
        return dataclasses.replace(spec, layers=tuple(dict.fromkeys(names)))

    return _map_specs(recipe, expand, Where(recipe.source))


def _no_layer(pattern: str, layers: Sequence[str]) -> str:
    if not layers:
        return (
            f"no layer matches {pattern!r}: this workload has no layers (only models lowered "
            'by tdsched, or ops with a loc("name") location, carry tdsched.layer)'
        )
    shown = ", ".join(layers[:30]) + (", ..." if len(layers) > 30 else "")
    return f"no layer matches {pattern!r}; the workload's layers: {shown}"


def _map_specs(value: T, fn: Callable[[MatchSpec, Where], MatchSpec], where: Where) -> T:
    """``value`` with ``fn`` applied to every MatchSpec in it (steps, kernels, nested)."""
    if isinstance(value, Criteria):
        return fn(value, where)  # type: ignore[return-value]
    if isinstance(value, tuple):
        return tuple(_map_specs(v, fn, where) for v in value)  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        here = getattr(value, "where", where)
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            field_where = here.child(f.name) if isinstance(value, KernelSchedule) else here
            new = _map_specs(old, fn, field_where)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def kernels_by_layer(recipe: Recipe) -> list[KernelSchedule]:
    """The kernel schedules whose ``match`` selects by layer or attributes."""
    return [k for k in recipe.kernels if k.match.layers or k.match.attributes]


def resolve_kernel_layers(
    recipe: Recipe, workload_text: str, census: Sequence[StructuredOp]
) -> tuple[Recipe, list[str]]:
    """Rewrite each layer-selecting kernel match into the op name and loop bounds that
    its layers' main op (the one with the most loops) has in the ``census``.

    Returns the recipe and one line per resolved kernel. Raises RecipeError when a layer
    reaches no dispatch, when the layers become different ops, or when an op of another
    layer looks the same to a kernel matcher (it would be scheduled too).
    """
    kernels = []
    notes = []
    for kernel in recipe.kernels:
        if kernel in kernels_by_layer(recipe):
            kernel, note = _resolve(kernel, workload_text, census)
            notes.append(note)
        kernels.append(kernel)
    return dataclasses.replace(recipe, kernels=tuple(kernels)), notes


def _resolve(
    kernel: KernelSchedule, workload_text: str, census: Sequence[StructuredOp]
) -> tuple[KernelSchedule, str]:
    spec, where = kernel.match, kernel.where.child("match")
    if spec.op is not None or spec.kind is not None or spec.shape is not None:
        raise RecipeError(
            where,
            "a kernel match by 'layer' or 'attributes' selects the layer's main op (the one "
            "with the most loops) and matches its dispatch by structure; drop 'op', 'kind' "
            "and 'shape' here",
        )
    selected = spec.layers or tuple(_attribute_layers(spec, workload_text, where))
    mains = _main_ops(selected, census, where)
    layers = tuple(mains)
    signatures = {(m.op, m.loop_ranges) for m in mains.values()}
    if len(signatures) > 1:
        shown = "; ".join(f"{layer}: {m.describe()}" for layer, m in mains.items())
        raise RecipeError(
            where,
            "these layers reach kernel configuration as different ops, and one kernel "
            f"schedule has one set of tile sizes: {shown}. Write one kernel schedule per shape",
        )
    op, ranges = signatures.pop()
    keys = _telling_keys(op, ranges, mains, census, where)
    resolved = MatchSpec(op=op, shape=ranges, dtype=spec.dtype, **keys)
    told = f", told apart by {_keys_text(keys)}" if keys else ""
    note = (
        f"kernel '{kernel.name}': layer {', '.join(layers)} -> {op} with loop bounds "
        f"{list(ranges or ())}{told} in "
        f"{', '.join(sorted({m.function for m in mains.values()}))}"
    )
    return dataclasses.replace(kernel, match=resolved), note


def _keys_text(keys: dict[str, Any]) -> str:
    """The keys :func:`_telling_keys` added, as a note says them."""
    parts = [f"inputs {keys['inputs']}"] if "inputs" in keys else []
    if "used_by" in keys:
        count = keys.get("used_by_inputs")
        inputs = f" ({count} inputs)" if count is not None else ""
        parts.append(f"used_by {keys['used_by']}{inputs}")
    if "body" in keys:
        parts.append("its body")
    return " and ".join(parts)


def _attribute_layers(spec: MatchSpec, workload_text: str, where: Where) -> list[str]:
    criteria = OpCriteria(attributes=spec.attributes)
    layers = workload_layers(workload_text, criteria)
    if not layers:
        raise RecipeError(
            where,
            f"no op of a layer carries {criteria.describe()}; kernel matches by attributes "
            "select the layers whose ops carry them",
        )
    return layers


def _main_ops(
    layers: Sequence[str], census: Sequence[StructuredOp], where: Where
) -> dict[str, StructuredOp]:
    """Each selected layer's op with the most loops; layers without a structured op of
    their own in any dispatch (IREE fused them into another layer's op) are skipped."""
    mains: dict[str, StructuredOp] = {}
    for layer in layers:
        ops = [op for op in census if op.layer == layer and op.loop_ranges is not None]
        if ops:
            mains[layer] = max(ops, key=lambda op: len(op.loop_ranges or ()))
    if not mains:
        raise RecipeError(
            where,
            f"no structured op of layer {', '.join(layers)} with static loop bounds reaches "
            "kernel configuration (IREE or a graph rewrite fused it into another layer's "
            "op); select the layer that owns the dispatch ('tdsched apply' lists them)",
        )
    return mains


def _telling_keys(
    op: str,
    ranges: tuple[int, ...] | None,
    mains: dict[str, StructuredOp],
    census: Sequence[StructuredOp],
    where: Where,
) -> dict[str, Any]:
    """The MatchSpec fields (``inputs``, ``used_by``, ``used_by_inputs``, ``body``) that tell the
    layers' ops (``mains``) apart from every other op with their name and loop bounds
    (none needed: ``{}``). Raises RecipeError naming the layers of the ops no key tells
    apart: the schedule would apply there too."""
    layers = set(mains)
    others = [c for c in census if (c.op, c.loop_ranges) == (op, ranges) and c.layer not in layers]
    keys, untold = telling_keys(list(mains.values()), others)
    if keys is None:
        names = sorted({c.layer or f"an op without a layer in @{c.function}" for c in untold})
        raise RecipeError(
            where,
            f"kernel matchers see structure only, and {op} {list(ranges or ())} is also what "
            f"{', '.join(names)} reaches kernel configuration as, with the same input count, "
            "the same op using its result and the same body: this schedule would apply there "
            "too. Select "
            "those layers as well, or tell the shapes apart",
        )
    return keys
