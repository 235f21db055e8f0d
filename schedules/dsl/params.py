"""``${NAME}`` parameter substitution over a recipe.

A string that is exactly ``${NAME}`` becomes the parameter's value (keeping its type, so
tile sizes stay integers); ``${NAME}`` inside a longer string is interpolated as text.
A reference may also hold an arithmetic expression over parameters, in the language of
constraints (:mod:`.constraints`): ``"${H * W}"`` is the product, an integer when both
are (``/`` divides to a float, ``//`` stays integral).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from tdsched.targets.target import BuildMachine

from ..base.errors import RecipeError, Where
from .build_names import build_values
from .conditions import apply_conditions
from .constraints import ConstraintError, parse_constraint
from .recipe import Recipe
from .shape_table import ShapeChoice
from .space import ParamValue

_REF = re.compile(r"\$\{([^{}]+)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
T = TypeVar("T")
_NOT_SUBSTITUTED = frozenset(
    (
        "where",
        "parameters",
        "source",
        "space",
        "shapes",
        "shape_choice",
        "skipped",
        "applied",
        "when",
    )
)
"""A recipe's fields (and its parts') that hold no ``${NAME}`` to substitute: the
parameters themselves, what decides them (space, shape table) and what reports on them."""
INT64 = range(-(2**63), 2**63)
"""The integers a parameter may hold: they become sizes and attributes in 64-bit MLIR."""


def parse_override(text: str) -> tuple[str, ParamValue]:
    """Parse a ``NAME=VALUE`` command-line override (VALUE as int, float or string)."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise RecipeError(Where(field="--param"), f"expected NAME=VALUE, got {text!r}")
    value: ParamValue
    try:
        value = int(raw)
    except ValueError:
        try:
            value = float(raw)
        except ValueError:
            value = raw
    if isinstance(value, int) and value not in INT64:
        raise RecipeError(
            Where(field="--param"),
            f"{text}: {name.strip()} does not fit in 64 bits (|value| < 2**63); "
            "give a size the machine can hold",
        )
    return name.strip(), value


def resolve(
    recipe: Recipe,
    overrides: Mapping[str, ParamValue] | None = None,
    threads: int | None = None,
    target: str | None = None,
    machine: BuildMachine | None = None,
) -> Recipe:
    """Return ``recipe`` with every ``${NAME}`` replaced by its value.

    ``overrides`` replace defaults; naming a parameter the recipe does not declare is an
    error (a typo would otherwise silently run the default schedule). A ``shapes`` table
    entry chosen by the shape, the CPU ``threads`` it runs on (None: a GPU target) and
    the ``machine`` it is built for (an x86 CPU or a Vulkan GPU; None: not known; see
    :mod:`.shape_table`) replaces defaults first, overrides win over it; the result's
    ``shape_choice`` says which entry was used (an ``iree_default`` entry is set aside when
    ``overrides`` give a tuned parameter; where no entry fits and the defaults break a
    constraint at this shape, IREE's own pipeline runs unless ``overrides`` give one).
    Steps and kernel schedules whose ``when`` is false for the final values on ``target``
    (default: the recipe's first) are left out, and listed in ``skipped``
    (:mod:`.conditions`).
    """
    target = target or recipe.targets[0]
    params, choice = resolved_values(recipe, overrides, threads, target, machine)
    resolved = _substitute(recipe, params, Where(recipe.source))
    if choice is not None and choice.runs_iree_default:
        resolved = dataclasses.replace(resolved, graph=(), kernels=())
    resolved, skipped, applied = apply_conditions(resolved, params, target, machine)
    return dataclasses.replace(
        resolved,
        parameters=tuple(params.items()),
        shape_choice=choice,
        skipped=skipped,
        applied=applied,
    )


def resolved_values(
    recipe: Recipe,
    overrides: Mapping[str, ParamValue] | None,
    threads: int | None,
    target: str,
    machine: BuildMachine | None,
) -> tuple[dict[str, ParamValue], ShapeChoice | None]:
    """The parameter values :func:`resolve` gives ``recipe`` (its defaults, the shape-table
    entry chosen for ``threads``, ``target`` and ``machine``, then ``overrides``) and that
    choice, without substituting them into the recipe."""
    params = recipe.parameter_dict
    for name in overrides or {}:
        if name not in params:
            known = ", ".join(sorted(params)) or "none"
            raise RecipeError(
                Where(recipe.source, None, "parameters"),
                f"unknown parameter {name!r} (this recipe declares: {known})",
            )
    choice = None
    if recipe.shapes is not None:
        values = {**params, **(overrides or {}), **build_values(target, machine)}
        choice = recipe.shapes.choose(values, recipe.space.constraints, threads, machine)
        tuned = recipe.shapes.tuned_names | {axis.name for axis in recipe.space.axes}
        if choice.entry is None and choice.defaults_break is not None:
            # the defaults would leave partial tiles; values given on purpose still run:
            # a tuned parameter, or one the broken constraint reads besides the shape
            read = {
                name
                for constraint in recipe.space.constraints
                if constraint.text == choice.defaults_break
                for name in constraint.expression.names
            }
            chosen = (tuned | read) - set(recipe.shapes.key)
            asked = any(name in chosen for name in overrides or {})
            choice = dataclasses.replace(choice, falls_back=not asked)
        if choice.entry is not None:
            params.update(choice.entry.params)
            if choice.entry.iree_default:
                # a value the entry itself holds (the PAD=0 a sweep measured it with)
                # asks for nothing else
                own = dict(choice.entry.params)
                given = tuple(
                    name
                    for name, value in (overrides or {}).items()
                    if name in tuned and (name not in own or own[name] != value)
                )
                choice = dataclasses.replace(choice, set_aside_by=given)
    params.update(overrides or {})
    return params, choice


def substitute_plain(value: Any, params: Mapping[str, ParamValue], where: Where) -> Any:
    """``value`` (plain YAML data: mappings, lists, scalars) with every ``${NAME}``
    replaced as in a recipe; an undeclared name is a RecipeError at ``where``."""
    if isinstance(value, dict):
        return {k: substitute_plain(v, params, where) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_plain(v, params, where) for v in value]
    if isinstance(value, str):
        return _substitute_text(value, params, where)
    return value


def _substitute(obj: T, params: Mapping[str, ParamValue], where: Where) -> T:
    result: Any
    if isinstance(obj, str):
        result = _substitute_text(obj, params, where)
    elif isinstance(obj, tuple):
        result = tuple(_substitute(item, params, where) for item in obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        here = getattr(obj, "where", where)
        here = here if isinstance(here, Where) and (here.file or here.field) else where
        changes = {
            f.name: _substitute(getattr(obj, f.name), params, here)
            for f in dataclasses.fields(obj)
            if f.name not in _NOT_SUBSTITUTED
        }
        result = dataclasses.replace(obj, **changes)
    else:
        result = obj
    return result  # type: ignore[no-any-return]


def referenced_parameters(obj: Any) -> frozenset[str]:
    """The parameter names that ``obj`` (a recipe, or a part of one, as dataclasses or as
    the lists and mappings of a recipe document) refers to in its ``${...}`` references,
    expressions included: what its substitution reads."""
    if isinstance(obj, str):
        return frozenset(n for ref in _REF.findall(obj) for n in _NAME.findall(ref))
    if isinstance(obj, tuple | list):
        return frozenset().union(*(referenced_parameters(item) for item in obj))
    if isinstance(obj, Mapping):  # a recipe's parts as a document holds them
        return frozenset().union(*(referenced_parameters(v) for v in obj.values()))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [f.name for f in dataclasses.fields(obj) if f.name not in _NOT_SUBSTITUTED]
        return frozenset().union(*(referenced_parameters(getattr(obj, f)) for f in fields))
    return frozenset()


def _substitute_text(text: str, params: Mapping[str, ParamValue], where: Where) -> ParamValue:
    values = {ref: _reference(ref, params, where) for ref in _REF.findall(text)}
    whole = _REF.fullmatch(text)
    if whole:
        return values[whole.group(1)]
    return _REF.sub(lambda m: str(values[m.group(1)]), text)


def _reference(ref: str, params: Mapping[str, ParamValue], where: Where) -> ParamValue:
    """The value of the reference ``${ref}``: a parameter, or an expression over them."""
    name = ref.strip()
    if _NAME.fullmatch(name) and name not in params:
        known = ", ".join(sorted(params)) or "none"
        raise RecipeError(
            where,
            f"parameter ${{{name}}} is not declared; add it under 'parameters' (declared: {known})",
        )
    if name in params:
        return params[name]
    try:
        value = parse_constraint(name, frozenset(params)).value(params)
    except ConstraintError as exc:
        raise RecipeError(where, f"in ${{{ref}}}: {exc}") from exc
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecipeError(
            where, f"${{{ref}}} is a condition, not a value; write it in a 'when' instead"
        )
    return value
