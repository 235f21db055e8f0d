"""What every graph rewrite returns, raises, and how it is run on module text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from iree.compiler import ir

from ..errors import ScheduleError
from ..match import LAYER_ATTR, OpCriteria, attribute


class GraphRewriteError(ScheduleError):
    """A graph rewrite's precondition does not hold; the message names the op and why."""


@dataclass(frozen=True)
class RewriteReport:
    """The outcome of one graph rewrite.

    ``summary`` is one line ("fused 3 generics into 1", "collapsed 4→2 dims"), or says
    that nothing changed and why; ``details`` lists per-op notes for ``tdsched apply``;
    ``scripts`` holds the transform scripts the rewrite ran, if it ran any (printed by
    ``tdsched show``).
    """

    primitive: str
    summary: str
    changed: bool
    details: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [f"{self.primitive}: {self.summary}", *(f"  {d}" for d in self.details)]


def describe_op(op: ir.Operation | ir.OpView) -> str:
    """How reports and errors name a payload op: its name and its layer
    (``loc("block1.conv1")``) or else its source location. The layer, an attribute,
    survives the text between graph rewrites, which does not keep locations."""
    operation = op.operation
    layer = layer_of(operation)
    where = f'loc("{layer}")' if layer is not None else str(operation.location)
    return f"{operation.name} at {where}"


def selected(op: ir.Operation | ir.OpView, criteria: OpCriteria | None) -> bool:
    """Whether a graph rewrite limited to ``criteria`` (op name, attributes, layers) acts
    on ``op``.

    ``None`` selects every op. Graph rewrites select by name, attributes and layer only:
    kinds and shapes select kernels. A required attribute without a value only has to be
    present.
    """
    if criteria is None:
        return True
    operation = op.operation
    if criteria.op is not None and operation.name != criteria.op:
        return False
    attrs = operation.attributes
    for name, value in criteria.attributes:
        if name not in attrs or (value is not None and attrs[name] != attribute(value)):
            return False
    return not criteria.layers or layer_of(operation) in criteria.layers


_CONV_INHERENT = {"dilations", "strides", "linalg.memoized_indexing_maps", "operandSegmentSizes"}
"""Attributes of a convolution or pooling that belong to the op, not to its layer."""


def keep_layer_attributes(old: ir.Operation, new: ir.Operation) -> None:
    """Copy the discardable attributes of the convolution or pooling ``old`` (its
    ``tdsched.layer``, its ONNX op) to ``new``, the op a rewrite replaces it by, so kernel
    matches and graph steps by layer still select it."""
    for name in old.attributes:
        if name not in _CONV_INHERENT:
            new.attributes[name] = old.attributes[name]


def layer_of(op: ir.Operation) -> str | None:
    """The layer ``op`` belongs to (its ``tdsched.layer`` string), if any."""
    attrs = op.attributes
    if LAYER_ATTR in attrs and isinstance(attrs[LAYER_ATTR], ir.StringAttr):
        name: str = ir.StringAttr(attrs[LAYER_ATTR]).value
        return name
    return None


Plan = TypeVar("Plan")


def plan_each(
    ops: list[ir.Operation],
    plan: Callable[[ir.Operation], Plan | str],
    explicit: bool,
    *,
    refusal: str,
    fix: str,
    left: str,
) -> tuple[list[Plan], list[str]]:
    """Plan a rewrite of each of ``ops``: ``plan`` returns how, or why it cannot be done.

    With ``explicit`` (the user selected the ops with ``ops``), an op that cannot be
    rewritten raises :class:`GraphRewriteError` (``"{refusal} <op>: <why>; {fix}"``)
    before anything is rewritten; otherwise it gets a detail line ``"<op>: {left}:
    <why>"``. Returns the plans and those lines.
    """
    plans: list[Plan] = []
    lines: list[str] = []
    for op in ops:
        how = plan(op)
        if not isinstance(how, str):
            plans.append(how)
        elif explicit:
            raise GraphRewriteError(f"{refusal} {describe_op(op)}: {how}; {fix}")
        else:
            lines.append(f"{describe_op(op)}: {left}: {how}")
    return plans, lines


Rewrite = Callable[[ir.Module], RewriteReport]


def rewrite_text(module_text: str, rewrite: Rewrite) -> tuple[str, RewriteReport]:
    """Parse ``module_text``, apply ``rewrite`` in place, verify, and print the result.

    A module that no longer verifies is a bug in the rewrite, reported as an error rather
    than handed to IREE.
    """
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(module_text)
        except ir.MLIRError as exc:
            raise GraphRewriteError(f"cannot parse the module: {exc}") from exc
        report = rewrite(module)
        try:
            module.operation.verify()
        except ir.MLIRError as exc:
            raise GraphRewriteError(
                f"{report.primitive} produced an invalid module (a tdsched bug): {exc}"
            ) from exc
        return str(module), report
