"""What the convolution-to-matmul rewrites share: where each named 2-d convolution keeps
its dims, reading its static shapes, and replacing it by a ``linalg.matmul``.

A convolution becomes ``filter matrix x pixel matrix`` (NCHW) or ``pixel matrix x filter
matrix`` (NHWC); the rewrites differ only in how they form the pixel matrix
(:mod:`.conv1x1_to_matmul` slices the input, :mod:`.im2col` gathers every filter
window). The matmul keeps the convolution's location and discardable attributes (its
layer), so kernel matches and graph steps by layer still select it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ..match import OpCriteria
from ..payload import ops_under
from .report import (
    RewriteReport,
    describe_op,
    keep_layer_attributes,
    layer_of,
    plan_each,
    selected,
)


@dataclass(frozen=True)
class ConvLayout:
    """Where one named convolution keeps its dims, and how its matmul is formed.

    Positions index the 4-d input, filter and output shapes (the batch is dim 0 in all
    three); ``pixels_first`` says the pixels are the matmul's left-hand side (NHWC)
    rather than its right (NCHW); ``filter_fc`` that the filter collapses to ``F x C``
    (then transposed for NHWC).
    """

    channel: int
    spatial: tuple[int, int]
    filter_window: tuple[int, int]
    filter_fc: bool
    pixels_first: bool

    def output_groups(self) -> list[list[int]]:
        """Output (and init) dims collapsed to ``pixels x filters`` (or the reverse)."""
        return [[0, 1, 2], [3]] if self.pixels_first else [[0, 1], [2, 3]]

    def filter_groups(self) -> list[list[int]]:
        """Filter dims collapsed to a matrix, window and channels in the input's order."""
        return [[0], [1, 2, 3]] if self.filter_fc else [[0, 1, 2], [3]]


LAYOUTS = {
    "linalg.conv_2d_nhwc_hwcf": ConvLayout(3, (1, 2), (0, 1), filter_fc=False, pixels_first=True),
    "linalg.conv_2d_nhwc_fhwc": ConvLayout(3, (1, 2), (1, 2), filter_fc=True, pixels_first=True),
    "linalg.conv_2d_nchw_fchw": ConvLayout(1, (2, 3), (2, 3), filter_fc=True, pixels_first=False),
}
"""The convolutions the rewrites take, by op name."""


@dataclass(frozen=True)
class ConvShapes:
    """A convolution's static operand shapes, strides and dilations."""

    image: list[int]
    weights: list[int]
    output: list[int]
    strides: tuple[int, int]
    dilations: tuple[int, int]

    def window(self, layout: ConvLayout) -> tuple[int, int]:
        kh, kw = (self.weights[d] for d in layout.filter_window)
        return kh, kw


@dataclass(frozen=True)
class ConvPlan:
    """A convolution a rewrite can take: the op, its layout and its shapes."""

    op: ir.Operation
    layout: ConvLayout
    shapes: ConvShapes

    def describe(self) -> str:
        """``linalg.conv_2d_nchw_fchw at loc: input 1x3x230x230, filter 7x7, stride 2x2
        -> linalg.matmul 64x12544x147`` (filter and dilation only when not 1x1)."""
        return f"{describe_op(self.op)}: {self.signature()}"

    def signature(self) -> str:
        """What the convolution is, without where: ``input 1x3x230x230, filter 7x7,
        stride 2x2 -> linalg.matmul 64x12544x147``. Equal for identical layers."""
        layout, shapes = self.layout, self.shapes
        kh, kw = shapes.window(layout)
        m, n, k = self.matmul()
        extras = [f"filter {kh}x{kw}"] if (kh, kw) != (1, 1) else []
        if shapes.strides != (1, 1):
            extras.append(f"stride {shapes.strides[0]}x{shapes.strides[1]}")
        if shapes.dilations != (1, 1) and (kh, kw) != (1, 1):
            extras.append(f"dilation {shapes.dilations[0]}x{shapes.dilations[1]}")
        what = ", ".join([f"input {dims(shapes.image)}", *extras])
        return f"{what} -> linalg.matmul {m}x{n}x{k}"

    def matmul(self) -> tuple[int, int, int]:
        """The ``M, N, K`` of the matmul the convolution becomes."""
        layout, shapes = self.layout, self.shapes
        kh, kw = shapes.window(layout)
        return matmul_sizes(layout, shapes, kh * kw * shapes.image[layout.channel])


@dataclass(frozen=True)
class ConvRewrite:
    """One convolution-to-matmul rewrite: its name, which convolutions it refuses
    (``refuse`` returns why, or ``None``; it is told whether the selection was explicit),
    how it rewrites one, and its report's words."""

    primitive: str
    refuse: Callable[[ConvPlan, bool], str | None]
    rewrite: Callable[[ConvPlan], None]
    fix: str
    """How to avoid an explicit selection's refusal."""
    into: str
    """What the convolutions became, for the summary."""
    none_taken: str
    """Why nothing changed when every selected convolution was refused."""


def rewrite_convs(
    module: ir.Module, criteria: OpCriteria | None, how: ConvRewrite
) -> RewriteReport:
    """Rewrite every convolution of ``module`` selected by ``criteria`` (``None``:
    every one) that ``how`` takes, in place.

    When ``criteria`` selects convolutions explicitly, one that cannot be rewritten
    raises :class:`GraphRewriteError` before anything is rewritten; otherwise it is left
    as it is and the report's details say why.
    """
    plans, left = _plans(module, criteria, how)
    details = tuple([p.describe() for p in plans] + left)
    names = [p.op.name for p in plans]
    for taken in plans:
        with ir.InsertionPoint(taken.op), taken.op.location:
            how.rewrite(taken)
    if not names:
        why = how.none_taken if details else "no convolution selected"
        return RewriteReport(how.primitive, f"changed nothing: {why}", False, details)
    kinds = ", ".join(f"{n} {name}" for name, n in Counter(names).items())
    return RewriteReport(how.primitive, f"rewrote {kinds} into {how.into}", True, details)


@dataclass(frozen=True)
class ConvGroup:
    """Identical convolutions that a rewrite takes (one :meth:`ConvPlan.signature`):
    their layers (``tdsched.layer``; ``None`` for one without a layer) and the FLOP of
    their matmuls together."""

    signature: str
    layers: tuple[str | None, ...]
    flop: int


def convs_taken(module: ir.Module, how: ConvRewrite) -> list[ConvGroup]:
    """The convolutions of ``module`` that ``how`` rewrites without a selection, grouped
    by what they are, the group with the most FLOP first. Reads ``module`` only."""
    plans, _ = _plans(module, None, how)
    groups: dict[str, list[ConvPlan]] = {}
    for plan in plans:
        groups.setdefault(plan.signature(), []).append(plan)
    found = [
        ConvGroup(
            signature,
            tuple(layer_of(p.op) for p in members),
            sum(2 * prod(p.matmul()) for p in members),
        )
        for signature, members in groups.items()
    ]
    return sorted(found, key=lambda group: -group.flop)


def _plans(
    module: ir.Module, criteria: OpCriteria | None, how: ConvRewrite
) -> tuple[list[ConvPlan], list[str]]:
    """How ``how`` rewrites each selected convolution, and a line for each it leaves
    (raising for those it refuses when ``criteria`` selects them explicitly)."""
    explicit = criteria is not None

    def plan(op: ir.Operation) -> ConvPlan | str:
        layout = LAYOUTS[op.name]
        shapes = conv_shapes(op, layout)
        if isinstance(shapes, str):
            return shapes
        taken = ConvPlan(op, layout, shapes)
        return how.refuse(taken, explicit) or taken

    convs = ops_under(module.operation, lambda op: op.name in LAYOUTS and selected(op, criteria))
    return plan_each(
        convs,
        plan,
        explicit,
        refusal=f"{how.primitive}: cannot rewrite",
        fix=how.fix,
        left="left as it is",
    )


def conv_shapes(op: ir.Operation, layout: ConvLayout) -> ConvShapes | str:
    """``op``'s shapes, or why a rewrite to a matmul cannot take it (buffers, dynamic
    shapes, an NCHW batch above 1)."""
    types = [v.type for v in (*op.operands, *op.results)]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        return "it works on buffers; the rewrite needs tensors"
    shapes = [ir.RankedTensorType(t) for t in types]
    if not all(s.has_static_shape for s in shapes):
        return "its shapes are dynamic; make them static first"
    image, weights, output = (list(s.shape) for s in shapes[:3])
    if not layout.pixels_first and image[0] != 1:
        return (
            f"it is NCHW with batch {image[0]}: its images' pixels are not one "
            "matrix (batch 1, or an NHWC convolution, can be rewritten)"
        )
    return ConvShapes(image, weights, output, conv_pair(op, "strides"), conv_pair(op, "dilations"))


def conv_pair(op: ir.Operation, name: str) -> tuple[int, int]:
    """A 2-d convolution's ``strides`` or ``dilations`` (``(1, 1)`` when the op does not
    carry the attribute: its default)."""
    if name not in op.attributes:
        return (1, 1)
    first, second = (int(v) for v in ir.DenseIntElementsAttr(op.attributes[name]))
    return (first, second)


def replace_by_matmul(plan: ConvPlan, pixels: ir.Value) -> None:
    """Replace the planned convolution by a ``linalg.matmul`` of its filter and
    ``pixels`` (``pixels x K`` for NHWC, ``K x pixels`` for NCHW, ``K`` ordered as the
    filter's collapsed dims), accumulating into its collapsed init, expanded back to
    its output's shape. Call inside ``ir.InsertionPoint(op)`` and ``op.location``."""
    op, layout = plan.op, plan.layout
    _, weights, init = op.operands
    matrix = collapsed(weights, layout.filter_groups())
    if layout.filter_fc and layout.pixels_first:
        matrix = _transposed(matrix)
    acc = collapsed(init, layout.output_groups())
    lhs, rhs = (pixels, matrix) if layout.pixels_first else (matrix, pixels)
    product = linalg.matmul(lhs, rhs, outs=[acc])
    keep_layer_attributes(op, product.owner)
    result = tensor.ExpandShapeOp(
        op.results[0].type, product, layout.output_groups(), [], plan.shapes.output
    ).result
    op.results[0].replace_all_uses_with(result)
    op.erase()


def matmul_sizes(layout: ConvLayout, shapes: ConvShapes, depth: int) -> tuple[int, int, int]:
    """The matmul's ``M, N, K`` for a convolution of ``shapes`` reducing over ``depth``
    (its channels times its window)."""
    out = shapes.output
    pixels = prod(out[d] for d in (0, *layout.spatial))
    filters = out[layout.channel]  # the output keeps its channels where the input does
    return (pixels, filters, depth) if layout.pixels_first else (filters, pixels, depth)


def collapsed(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    """``value`` with each group of its dims collapsed into one."""
    source = ir.RankedTensorType(value.type)
    shape = [prod(source.shape[d] for d in group) for group in groups]
    target = ir.RankedTensorType.get(shape, source.element_type)
    return tensor.CollapseShapeOp(target, value, groups).result


def _transposed(matrix: ir.Value) -> ir.Value:
    source = ir.RankedTensorType(matrix.type)
    rows, cols = source.shape
    empty = tensor.EmptyOp([cols, rows], source.element_type).result
    result: ir.Value = linalg.transpose(matrix, outs=[empty], permutation=[1, 0])
    return result


def dims(sizes: list[int]) -> str:
    """``1x256x56x56``."""
    return "x".join(str(s) for s in sizes)
