"""The kernel match of one op of a model's task: what a tuned kernel schedule or config
selects in the model, and nothing else.

Kernel matchers see an op's structure only: its name (on Vulkan, its kind) and static
loop bounds. A transformer has several dispatches whose ops share them: the same
projection matmul with and without an epilogue, a softmax's row max beside the generic
that scales the scores before it, a layer norm's reduction beside a bias add. Where
name and bounds alone would also select such an op in another dispatch (or another op
of the task's own dispatch), the match adds the fewest of two discriminators that tell
them apart, read from the census (every dispatch as kernel configs see it):

* ``inputs``: the op's number of input operands;
* ``used_by``: the name of the one op that uses its result (an epilogue
  ``linalg.generic``, or ``iree_tensor_ext.dispatch.tensor.store`` when the result is
  stored), and where that is not enough, that op's input count too
  (``used_by: {op: linalg.generic, inputs: 2}``: a residual add rather than a
  transpose). An op whose result has several uses has no ``used_by``.

A discriminator is used only where every dispatch of the task agrees on it. When none
tells the op apart, :class:`Ambiguous` names the task the match would also take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tdsched.transform_lib.census import StructuredOp

from .model_tasks import Task

DISCRIMINATORS = ("inputs", "used_by", "used_by_inputs")
"""The census fields a match may add, as :class:`StructuredOp` names them."""
WAYS = (
    (),
    ("inputs",),
    ("used_by",),
    ("inputs", "used_by"),
    ("used_by", "used_by_inputs"),
    ("inputs", "used_by", "used_by_inputs"),
)
"""The combinations tried, fewest first (the user's inputs only with its name)."""


class Ambiguous(Exception):
    """No match selects the op alone; ``other`` is the task holding an op it would take."""

    def __init__(self, other: str) -> None:
        super().__init__(other)
        self.other = other


@dataclass(frozen=True)
class ModelOps:
    """The census of a model: its dispatches' structured ops, per dispatch function."""

    dispatches: dict[str, tuple[StructuredOp, ...]]
    owner: dict[str, str]
    """The task each dispatch function belongs to."""

    @staticmethod
    def of(census: Sequence[StructuredOp], tasks: Sequence[Task]) -> ModelOps:
        owner = {d: t.name for t in tasks for d in t.dispatches}
        dispatches: dict[str, list[StructuredOp]] = {}
        for op in census:
            if op.function in owner:
                dispatches.setdefault(op.function, []).append(op)
        return ModelOps({d: tuple(ops) for d, ops in dispatches.items()}, owner)


def op_match(task: Task, position: int, model: ModelOps, by_kind: bool) -> dict[str, Any]:
    """The kernel match of the op at ``position`` in ``task``'s ops: its name (with
    ``by_kind``: its kind, as Vulkan matches contractions), loop bounds and dtype, plus the
    discriminators it needs (module docstring). Raises :class:`Ambiguous`."""
    signature = task.ops[position]
    mine = [model.dispatches[d][position] for d in task.dispatches if d in model.dispatches]
    own = {(d, position) for d in task.dispatches}

    def alike(op: StructuredOp) -> bool:
        same = op.kind == signature.kind if by_kind else op.op == signature.op
        return same and op.loop_ranges == signature.loop_ranges and op.dtype == signature.dtype

    others = [
        (function, op)
        for function, ops in model.dispatches.items()
        for index, op in enumerate(ops)
        if (function, index) not in own and alike(op)
    ]
    match: dict[str, Any] = ({"kind": signature.kind} if by_kind else {"op": signature.op}) | {
        "shape": list(signature.loop_ranges or ()),
        "dtype": signature.dtype or "f32",
    }
    agreed = {name: _agreed(mine, name) for name in DISCRIMINATORS}
    usable = [way for way in WAYS if all(agreed[n] is not None for n in way)]
    for way in usable:
        if all(any(getattr(op, n) != agreed[n] for n in way) for _, op in others):
            return match | _keys(way, agreed)
    left = [f for f, op in others if all(getattr(op, n) == agreed[n] for n in usable[-1])]
    raise Ambiguous(model.owner[left[0]])


def _keys(way: tuple[str, ...], agreed: dict[str, Any]) -> dict[str, Any]:
    """The match keys of the discriminators ``way`` (module docstring)."""
    keys: dict[str, Any] = {"inputs": agreed["inputs"]} if "inputs" in way else {}
    if "used_by_inputs" in way:
        keys["used_by"] = {"op": agreed["used_by"], "inputs": agreed["used_by_inputs"]}
    elif "used_by" in way:
        keys["used_by"] = agreed["used_by"]
    return keys


def _agreed(ops: Sequence[StructuredOp], name: str) -> Any:
    """The value of discriminator ``name`` every one of ``ops`` has (``None``: they differ,
    or it is unknown)."""
    values = {getattr(op, name) for op in ops}
    return values.pop() if len(values) == 1 else None
