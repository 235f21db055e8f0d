"""Which kernel match keys tell an op apart from others with its name and loop bounds.

Kernel matchers see an op's structure only: its name (or kind), its static loop bounds
and its element type. Ops of different dispatches often share them (the same projection
matmul with and without an epilogue). Two keys that kernel matchers can test tell such
ops apart, read from the census (``transform_lib.census``):

* ``inputs``: the op's number of input operands;
* ``used_by``: the name of the one op that uses its result (an epilogue
  ``linalg.generic``, or ``iree_tensor_ext.dispatch.tensor.store`` when the result is
  stored), and where that is not enough, that op's input count too
  (``used_by: {op: linalg.generic, inputs: 2}``: a residual add rather than a
  transpose). An op whose result has several uses has no ``used_by``;
* ``body``: a ``linalg.generic``'s body as MLIR text (``transform_lib.op_body``), the
  last resort: an exp-once softmax's row max and row sum agree on everything else.

:func:`telling_keys` finds the fewest that do, used by ``tdsched tune``'s task matches
(``tune.task_match``, written as a recipe's match by :func:`recipe_keys`) and by kernel
matches that select layers (``layers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tdsched.transform_lib.census import StructuredOp

DISCRIMINATORS = ("inputs", "used_by", "used_by_inputs", "body")
"""The census fields a match may add, as :class:`StructuredOp` names them."""
WAYS = (
    (),
    ("inputs",),
    ("used_by",),
    ("inputs", "used_by"),
    ("used_by", "used_by_inputs"),
    ("inputs", "used_by", "used_by_inputs"),
    ("body",),
    ("inputs", "body"),
    ("used_by", "body"),
    ("inputs", "used_by", "used_by_inputs", "body"),
)
"""The combinations tried, fewest first (the user's inputs only with its name)."""


def telling_keys(
    mine: Sequence[StructuredOp], others: Sequence[StructuredOp]
) -> tuple[dict[str, Any] | None, list[StructuredOp]]:
    """The fewest keys (module docstring) on which every op of ``mine`` agrees and every
    op of ``others`` differs from them, by their :data:`DISCRIMINATORS` names (those of
    ``MatchSpec`` too); ``None`` with the ``others`` that no keys tell apart when there
    are none."""
    agreed = {name: _agreed(mine, name) for name in DISCRIMINATORS}
    usable = [way for way in WAYS if all(agreed[n] is not None for n in way)]
    for way in usable:
        if all(any(getattr(op, n) != agreed[n] for n in way) for op in others):
            return {n: agreed[n] for n in way}, []
    known = [name for name in DISCRIMINATORS if agreed[name] is not None]
    return None, [op for op in others if all(getattr(op, n) == agreed[n] for n in known)]


def recipe_keys(keys: dict[str, Any]) -> dict[str, Any]:
    """``keys`` (from :func:`telling_keys`) as a recipe's match writes them:
    ``used_by: NAME``, or ``used_by: {op: NAME, inputs: N}`` with the user's inputs."""
    written = {k: v for k, v in keys.items() if k != "used_by_inputs"}
    if "used_by_inputs" in keys:
        written["used_by"] = {"op": keys["used_by"], "inputs": keys["used_by_inputs"]}
    return written


def _agreed(ops: Sequence[StructuredOp], name: str) -> Any:
    """The value of discriminator ``name`` every one of ``ops`` has (``None``: they differ,
    or it is unknown)."""
    values = {getattr(op, name) for op in ops}
    return values.pop() if len(values) == 1 else None
