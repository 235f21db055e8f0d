"""Graph rewrite steps → stages that run a tdsched rewrite on the module in Python.

fuse_elementwise_ext, collapse_dims, mmt4d and fuse_pad have no (complete) transform op in
IREE 3.13; they run between transform-script stages, in recipe order, each reporting one
line of what it changed (see :mod:`tdsched.transform_lib.graph`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from tdsched.transform_lib.graph.collapse_dims import CollapseDimsOptions, collapse_dims
from tdsched.transform_lib.graph.fuse_elementwise import (
    FuseElementwiseOptions,
    fuse_elementwise_ext,
)
from tdsched.transform_lib.graph.fuse_pad import FusePadOptions, fuse_pad
from tdsched.transform_lib.graph.mmt4d import Mmt4dOptions, mmt4d
from tdsched.transform_lib.graph.report import Rewrite
from tdsched.transform_lib.match import OpCriteria

from .errors import RecipeError, Where
from .recipe import (
    CollapseDimsStep,
    FuseElementwiseExtStep,
    GraphRewriteStep,
    Mmt4dStep,
)
from .resolved import as_int, as_ints, payload_criteria


@dataclass(frozen=True)
class RewriteStage:
    """A graph rewrite to run on the module, and the recipe step it came from."""

    primitive: str
    rewrite: Rewrite
    where: Where


def rewrite_stage(step: GraphRewriteStep, target: str) -> RewriteStage:
    """The stage for a resolved graph rewrite step, with its options checked."""
    if isinstance(step, FuseElementwiseExtStep):
        return _fuse_elementwise(step)
    if isinstance(step, CollapseDimsStep):
        groups = None
        if step.reassociation is not None:
            where = step.where.child("reassociation")
            groups = tuple(tuple(as_ints(g, where)) for g in step.reassociation)
        collapse = CollapseDimsOptions(_ops(step, "collapse_dims"), groups)
        return RewriteStage("collapse_dims", partial(collapse_dims, options=collapse), step.where)
    if isinstance(step, Mmt4dStep):
        return _mmt4d(step, target)
    pads = FusePadOptions(_ops(step, "fuse_pad"))
    return RewriteStage("fuse_pad", partial(fuse_pad, options=pads), step.where)


def _fuse_elementwise(step: FuseElementwiseExtStep) -> RewriteStage:
    limit = None
    if step.max_operands is not None:
        limit = as_int(step.max_operands, step.where.child("max_operands"))
        if limit < 2:
            raise RecipeError(
                step.where.child("max_operands"),
                f"a fused op has at least 2 operands (an input and an output), got {limit}",
            )
    ops = _ops(step, "fuse_elementwise_ext")
    options = FuseElementwiseOptions(ops, step.shared_input, limit)
    rewrite = partial(fuse_elementwise_ext, options=options)
    return RewriteStage("fuse_elementwise_ext", rewrite, step.where)


def _mmt4d(step: Mmt4dStep, target: str) -> RewriteStage:
    m0, n0, k0 = as_ints(step.tile, step.where.child("tile"))
    if min(m0, n0, k0) < 1:
        raise RecipeError(
            step.where.child("tile"), f"inner tile sizes must be >= 1, got {[m0, n0, k0]}"
        )
    lower = step.lower_packs if step.lower_packs is not None else target == "vulkan"
    options = Mmt4dOptions((m0, n0, k0), _ops(step, "mmt4d"), lower)
    return RewriteStage("mmt4d", partial(mmt4d, options=options), step.where)


def _ops(step: GraphRewriteStep, primitive: str) -> OpCriteria | None:
    return payload_criteria(step.ops, step.where.child("ops"), primitive)
