"""Reading fields of a resolved recipe (no ``${...}`` left) as transform_lib values.

Emission only accepts resolved recipes, but a parameter may have been given a value of
the wrong type (``--param TM=abc``): every read checks and names the recipe field.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Collection, Sequence

from tdsched.transform_lib.errors import ScheduleError
from tdsched.transform_lib.match import OpCriteria, is_registered_op
from tdsched.transform_lib.op_body import check_body

from ..base.errors import RecipeError, Where
from .values import MatchSpec


def as_int(value: object, where: Where) -> int:
    """``value`` as an integer, or a RecipeError at ``where``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecipeError(where, f"expected an integer, got {value!r}")
    return value


def as_ints(values: Sequence[object] | None, where: Where) -> list[int]:
    return [as_int(v, where) for v in values or ()]


def criteria_of(spec: MatchSpec, where: Where, present: Collection[str] = ()) -> OpCriteria:
    """The transform_lib criteria for a resolved match spec. An ``op`` that names no
    operation at all (a typo) is refused before anything is compiled, listing the ops
    ``present`` in the workload."""
    if spec.op is not None and not is_registered_op(spec.op):
        close = difflib.get_close_matches(spec.op, sorted(present), n=3)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        listed = f"ops in the workload: {', '.join(sorted(present))}" if present else ""
        raise RecipeError(
            where.child("op"), f"no operation is called {spec.op!r}; {hint}{listed}".rstrip("; ")
        )
    if spec.inputs is not None and spec.inputs < 0:
        raise RecipeError(
            where.child("inputs"), f"inputs counts input operands (>= 0), got {spec.inputs}"
        )
    if spec.used_by is not None and not is_registered_op(spec.used_by):
        raise RecipeError(
            where.child("used_by"),
            f"no operation is called {spec.used_by!r}; used_by names the op that uses the "
            "matched op's result, e.g. linalg.generic or iree_tensor_ext.dispatch.tensor.store",
        )
    if spec.used_by_inputs is not None and spec.used_by_inputs < 0:
        raise RecipeError(
            where.child("used_by").child("inputs"),
            f"inputs counts input operands (>= 0), got {spec.used_by_inputs}",
        )
    if spec.body is not None:
        try:
            check_body(spec.body)
        except ScheduleError as exc:
            raise RecipeError(where.child("body"), str(exc).removeprefix("body: ")) from exc
    shape = None
    if spec.shape is not None:
        shape = tuple(as_int(v, where.child("shape")) for v in spec.shape)
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    return OpCriteria(**{**fields, "shape": shape})


def payload_criteria(spec: MatchSpec | None, where: Where, primitive: str) -> OpCriteria | None:
    """Criteria of a graph-level selection, which matches by op name and attributes only."""
    if spec is None:
        return None
    criteria = criteria_of(spec, where)
    if criteria.uses_kernel_keys:
        raise RecipeError(
            where,
            f"{primitive} matches ops by 'op' name, 'layer' and 'attributes' ('kind', "
            "'shape', 'inputs', 'used_by' and 'body' select kernels)",
        )
    return criteria


def region_criteria(spec: MatchSpec | None, where: Where) -> OpCriteria | None:
    """Criteria of a ``dispatch_region`` selection: by 'op' name, 'layer' and
    'attributes', or the way a kernel match selects (an 'op' name or 'kind', with
    'shape', 'dtype', 'inputs', 'used_by', 'body'), on the ops as the workload writes them; not
    both at once."""
    if spec is None:
        return None
    criteria = criteria_of(spec, where)
    if criteria.uses_kernel_keys and (criteria.attributes or criteria.layers):
        raise RecipeError(
            where,
            "dispatch_region selects ops by 'op', 'layer' and 'attributes', or by 'kind', "
            "'shape', 'inputs', 'used_by' and 'body' as a kernel match does, not both at once",
        )
    return criteria
