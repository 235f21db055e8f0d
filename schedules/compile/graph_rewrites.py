"""Graph rewrite steps → stages that run a tdsched rewrite on the module in Python.

fuse_elementwise_ext, collapse_dims, mmt4d, fuse_pad, hoist_pad, conv1x1_to_matmul, im2col,
decompose_softmax and channels_last have no
(complete) transform op in IREE 3.13; they run between transform-script stages, in recipe
order, each reporting one line of what it changed (see :mod:`tdsched.transform_lib.graph`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tdsched.targets import Target
from tdsched.transform_lib.graph.channels_last import ChannelsLastOptions, channels_last
from tdsched.transform_lib.graph.collapse_dims import CollapseDimsOptions, collapse_dims
from tdsched.transform_lib.graph.conv1x1_to_matmul import (
    Conv1x1ToMatmulOptions,
    conv1x1_to_matmul,
)
from tdsched.transform_lib.graph.decompose_softmax import (
    DecomposeSoftmaxOptions,
    decompose_softmax,
)
from tdsched.transform_lib.graph.fuse_elementwise import (
    FuseElementwiseOptions,
    fuse_elementwise_ext,
)
from tdsched.transform_lib.graph.fuse_pad import FusePadOptions, fuse_pad
from tdsched.transform_lib.graph.hoist_pad import HoistPadOptions, hoist_pad
from tdsched.transform_lib.graph.im2col import Im2colOptions, im2col
from tdsched.transform_lib.graph.mmt4d import Mmt4dOptions, mmt4d
from tdsched.transform_lib.graph.report import Rewrite
from tdsched.transform_lib.match import OpCriteria

from ..base.errors import Where
from ..dsl.resolved import as_int, as_ints, payload_criteria
from ..dsl.steps import (
    ChannelsLastStep,
    CollapseDimsStep,
    Conv1x1ToMatmulStep,
    DecomposeSoftmaxStep,
    FuseElementwiseExtStep,
    FusePadStep,
    GraphRewriteStep,
    HoistPadStep,
    Im2colStep,
    Mmt4dStep,
    Step,
)

NO_BINDING_FUSION = "--iree-scheduling-optimize-bindings=false"
"""Turns off IREE's binding fusion and dispatch-site specialization. IREE 3.13 on Vulkan
gives wrong results with it for lowered packs + mmt4d at some shapes (64x64x128 and
larger; see docs/primitives/mmt4d.md); without it they are right."""


@dataclass(frozen=True)
class RewriteStage:
    """A graph rewrite to run on the module, and the recipe step it came from.

    ``compile_flags``: iree-compile flags the scheduled build needs once this rewrite
    ran, and ``why`` says why (the plan adds them to the recipe's and notes it)."""

    primitive: str
    rewrite: Rewrite
    where: Where
    compile_flags: tuple[str, ...] = ()
    why: str = ""


def rewrite_stage(step: Step, target: Target) -> RewriteStage:
    """The stage for a resolved graph rewrite step (a type in :data:`REWRITES`)."""
    return REWRITES[type(step)](step, target)


def _fuse_elementwise(step: FuseElementwiseExtStep, target: Target) -> RewriteStage:
    limit = None
    if step.max_operands is not None:
        limit = as_int(step.max_operands, step.where.child("max_operands"))
    options = FuseElementwiseOptions(_ops(step), step.shared_input, limit)
    return _stage(step, partial(fuse_elementwise_ext, options=options))


def _collapse_dims(step: CollapseDimsStep, target: Target) -> RewriteStage:
    groups = None
    if step.reassociation is not None:
        where = step.where.child("reassociation")
        groups = tuple(tuple(as_ints(g, where)) for g in step.reassociation)
    options = CollapseDimsOptions(_ops(step), groups)
    return _stage(step, partial(collapse_dims, options=options))


def _mmt4d(step: Mmt4dStep, target: Target) -> RewriteStage:
    m0, n0, k0 = as_ints(step.tile, step.where.child("tile"))
    lower = step.lower_packs if step.lower_packs is not None else target.needs_lowered_packs
    options = Mmt4dOptions((m0, n0, k0), _ops(step), lower, step.fuse_unpack)
    stage = _stage(step, partial(mmt4d, options=options))
    if lower and target.is_gpu:
        why = "IREE 3.13's binding fusion gives wrong results for lowered packs on Vulkan"
        return dataclasses.replace(stage, compile_flags=(NO_BINDING_FUSION,), why=why)
    return stage


def _fuse_pad(step: FusePadStep, target: Target) -> RewriteStage:
    return _stage(step, partial(fuse_pad, options=FusePadOptions(_ops(step))))


def _hoist_pad(step: HoistPadStep, target: Target) -> RewriteStage:
    return _stage(step, partial(hoist_pad, options=HoistPadOptions(_ops(step))))


def _conv1x1_to_matmul(step: Conv1x1ToMatmulStep, target: Target) -> RewriteStage:
    options = Conv1x1ToMatmulOptions(_ops(step))
    return _stage(step, partial(conv1x1_to_matmul, options=options))


def _im2col(step: Im2colStep, target: Target) -> RewriteStage:
    return _stage(step, partial(im2col, options=Im2colOptions(_ops(step))))


def _decompose_softmax(step: DecomposeSoftmaxStep, target: Target) -> RewriteStage:
    options = DecomposeSoftmaxOptions(_ops(step))
    return _stage(step, partial(decompose_softmax, options=options))


def _channels_last(step: ChannelsLastStep, target: Target) -> RewriteStage:
    options = ChannelsLastOptions(_ops(step))
    return _stage(step, partial(channels_last, options=options))


def _stage(step: GraphRewriteStep, rewrite: Rewrite) -> RewriteStage:
    return RewriteStage(step.primitive, rewrite, step.where)


def _ops(step: GraphRewriteStep) -> OpCriteria | None:
    return payload_criteria(step.ops, step.where.child("ops"), step.primitive)


REWRITES: dict[type[Step], Callable[[Any, Target], RewriteStage]] = {
    FuseElementwiseExtStep: _fuse_elementwise,
    CollapseDimsStep: _collapse_dims,
    Mmt4dStep: _mmt4d,
    FusePadStep: _fuse_pad,
    HoistPadStep: _hoist_pad,
    Conv1x1ToMatmulStep: _conv1x1_to_matmul,
    Im2colStep: _im2col,
    DecomposeSoftmaxStep: _decompose_softmax,
    ChannelsLastStep: _channels_last,
}
"""The Python rewrites a graph schedule can run, by step type."""
