"""The kernel match of one op of a model's task: what a tuned kernel schedule or config
selects in the model, and nothing else.

Kernel matchers see an op's structure only: its name (on Vulkan, its kind) and static
loop bounds. A transformer has several dispatches whose ops share them: the same
projection matmul with and without an epilogue, a softmax's sum beside the generic that
scales the scores, a layer norm's reduction beside a bias add. Where name and bounds
alone would also select such an op in another dispatch (or another op of the task's own
dispatch), the match adds the fewest keys that tell them apart (``match_keys``:
``inputs``, ``used_by``). A key is used only where every dispatch of the task agrees on
it. When none tells the op apart, :class:`Ambiguous` names the task the match would also
take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tdsched.transform_lib.census import StructuredOp

from ..dsl.match_keys import recipe_keys, telling_keys
from .tasks import Task


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

    def count(self, name: str) -> int:
        """How many ops named ``name`` the model's dispatches hold."""
        return sum(op.op == name for ops in self.dispatches.values() for op in ops)


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
    keys, untold = telling_keys(mine, [op for _, op in others])
    if keys is None:
        raise Ambiguous(model.owner[untold[0].function])
    return match | recipe_keys(keys)


def kernel_match(task: Task, model: ModelOps, by_kind: bool) -> dict[str, Any]:
    """The match of a kernel schedule (or config) written for ``task``: its IREE root
    alone, in every dispatch of the task and nowhere else (:func:`op_match`). Raises
    :class:`Ambiguous`."""
    return op_match(task, task.iree_root_position, model, by_kind)
