"""Reading fields of a resolved recipe (no ``${...}`` left) as transform_lib values.

Emission only accepts resolved recipes, but a parameter may have been given a value of
the wrong type (``--param TM=abc``): every read checks and names the recipe field.
"""

from __future__ import annotations

from collections.abc import Sequence

from tdsched.transform_lib.match import OpCriteria

from .errors import RecipeError, Where
from .values import MatchSpec


def as_int(value: object, where: Where) -> int:
    """``value`` as an integer, or a RecipeError at ``where``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecipeError(where, f"expected an integer, got {value!r}")
    return value


def as_ints(values: Sequence[object] | None, where: Where) -> list[int]:
    return [as_int(v, where) for v in values or ()]


def criteria_of(spec: MatchSpec, where: Where) -> OpCriteria:
    """The transform_lib criteria for a resolved match spec."""
    shape = None
    if spec.shape is not None:
        shape = tuple(as_int(v, where.child("shape")) for v in spec.shape)
    return OpCriteria(spec.op, spec.kind, shape, spec.dtype, spec.attributes, spec.layers)


def payload_criteria(spec: MatchSpec | None, where: Where, primitive: str) -> OpCriteria | None:
    """Criteria of a graph-level selection, which matches by op name and attributes only."""
    if spec is None:
        return None
    if spec.kind is not None or spec.shape is not None:
        raise RecipeError(
            where,
            f"{primitive} matches ops by 'op' name, 'layer' and 'attributes' ('kind' and "
            "'shape' select kernels)",
        )
    return criteria_of(spec, where)
