"""Typed options of schedule steps: what each field of a step is, said once.

A step is a keyword-only dataclass (see :mod:`.steps`) whose fields are declared with
:func:`option`. The metadata it records (a doc line, a :class:`Kind`, choices, the YAML
key, a value check) is read by the YAML front end to parse a step, by :func:`check_options`
to validate a step however it was built (YAML, Python, parameter substitution), by the
docs' option tables and by the JSON Schema. Nothing about an option is written twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, field
from enum import Enum
from typing import Any

from tdsched.transform_lib.match import Criteria

from ..base.errors import RecipeError, Where
from .values import IntOrParam


class Kind(Enum):
    """How an option's value is written and what it may hold."""

    HANDLE = "handle name"
    INT = "integer"
    INTS = "list of integers"
    INT_GROUPS = "auto, or list of lists of integers"
    FLAG = "true or false"
    CHOICE = "one of"
    MATCH = "op selection"
    OPS = "op selection by op, attributes, layer"
    CONDITION = "condition on the parameters"


ValueCheck = Callable[[Any], str | None]
"""A check of a value beyond its kind: a message when it is wrong. It runs on creation
and again after parameter substitution, so it skips ``${...}`` entries it cannot judge."""


@dataclass(frozen=True)
class Option:
    """What one step field is: ``doc`` (one line), ``kind``, ``choices`` (``CHOICE``),
    ``key`` (its YAML key when the Python name differs, e.g. ``as``), ``inline`` (a
    ``MATCH`` whose keys sit in the step's own mapping) and ``check`` (see :data:`ValueCheck`)."""

    doc: str
    kind: Kind
    choices: tuple[str, ...] = ()
    key: str | None = None
    inline: bool = False
    check: ValueCheck | None = None


def option(
    doc: str,
    kind: Kind,
    *,
    default: Any = MISSING,
    choices: tuple[str, ...] = (),
    key: str | None = None,
    inline: bool = False,
    check: ValueCheck | None = None,
) -> Any:
    """Declare a step field (a dataclass ``field``) with its :class:`Option` metadata.
    Without ``default`` the option is required."""
    meta = {"option": Option(doc, kind, choices, key, inline, check)}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class StepOption:
    """One option of a step class: the dataclass field name, its YAML key, whether it is
    required, its default, and its :class:`Option`."""

    name: str
    key: str
    required: bool
    default: Any
    spec: Option


def step_options(cls: type) -> Iterator[StepOption]:
    """The options of a step dataclass, in declaration order, except that the condition
    every step inherits (``when``) comes last."""
    fields = dataclasses.fields(cls)
    for f in sorted(fields, key=lambda f: _is_condition(f.metadata.get("option"))):
        spec = f.metadata.get("option")
        if spec is not None:
            required = f.default is MISSING
            yield StepOption(f.name, spec.key or f.name, required, f.default, spec)


def _is_condition(spec: Option | None) -> bool:
    return spec is not None and spec.kind is Kind.CONDITION


def is_param(value: object) -> bool:
    """Whether ``value`` is a ``"${NAME}"`` reference (checked again once substituted)."""
    return isinstance(value, str) and value.startswith("${")


def check_options(step: Any, where: Where) -> None:
    """Validate and normalise (lists become tuples) every option of ``step`` in place.

    Runs when a step is made and again when parameters are substituted, so both front
    ends and every parameter value get the same checks; errors name ``where.key``.
    """
    for opt in step_options(type(step)):
        value = getattr(step, opt.name)
        if value is None and opt.default is None:
            continue
        here = where.child(opt.key)
        normal = _normalise(opt.spec, value, here)
        if normal is not value:
            object.__setattr__(step, opt.name, normal)
        if opt.spec.check is not None:
            problem = opt.spec.check(normal)
            if problem:
                raise RecipeError(here, problem)


def _normalise(spec: Option, value: Any, where: Where) -> Any:
    kind = spec.kind
    if kind is Kind.HANDLE:
        if not isinstance(value, str) or not value:
            raise RecipeError(where, f"expected a handle name (a non-empty string), got {value!r}")
        return value
    if kind is Kind.INT:
        return _int_or_param(value, where)
    if kind is Kind.INTS:
        return _ints(value, where)
    if kind is Kind.INT_GROUPS:
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise RecipeError(
                where,
                f"expected 'auto' or a list of loop groups, e.g. [[0], [1, 2]], got {value!r}",
            )
        return tuple(_ints(group, where) for group in value)
    if kind is Kind.FLAG:
        if not isinstance(value, bool):
            raise RecipeError(where, f"expected true or false, got {value!r}")
        return value
    if kind is Kind.CONDITION:
        if not isinstance(value, str) or not value.strip():
            raise RecipeError(
                where,
                "expected a condition on the parameters, e.g. \"LAYOUT == 'packed'\", "
                f"got {value!r}",
            )
        return value
    if kind is Kind.CHOICE:
        if value not in spec.choices:
            raise RecipeError(where, f"got {value!r}; allowed: {', '.join(spec.choices)}")
        return value
    if not isinstance(value, Criteria):
        raise RecipeError(where, f"expected an op selection (Match(...)), got {value!r}")
    if kind is Kind.OPS and (value.kind is not None or value.shape is not None):
        raise RecipeError(
            where,
            "selects ops by 'op', 'attributes' and 'layer' only ('kind' and 'shape' "
            "select kernels)",
        )
    return value


def _int_or_param(value: object, where: Where) -> IntOrParam:
    if isinstance(value, bool) or not (isinstance(value, int) or is_param(value)):
        raise RecipeError(where, f'expected an integer or a "${{PARAM}}" reference, got {value!r}')
    return value  # type: ignore[return-value]


def _ints(value: object, where: Where) -> tuple[IntOrParam, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise RecipeError(where, f"expected a list of integers, got {value!r}")
    return tuple(_int_or_param(v, where) for v in value)
