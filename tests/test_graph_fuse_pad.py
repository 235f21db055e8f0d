"""fuse_pad: IR structure, report and refusals; numerics through IREE (x86, Vulkan)."""

from __future__ import annotations

import pytest
from iree.compiler import ir
from iree_numerics import assert_same_results
from tdsched.transform_lib.graph.fuse_pad import FusePadOptions, fuse_pad
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

# A piece of a ResNet bottleneck (NHWC): relu(conv1x1(x) + bias), padded by 1 on H and W,
# then a 3x3 conv.
BOTTLENECK = """
#id = affine_map<(n, h, w, c) -> (n, h, w, c)>
#ch = affine_map<(n, h, w, c) -> (c)>
func.func @f(%x: tensor<1x14x14x32xf32>, %w1: tensor<1x1x32x32xf32>, %b: tensor<32xf32>, %w3: tensor<3x3x32x32xf32>) -> tensor<1x14x14x32xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14x14x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x14x14x32xf32>) -> tensor<1x14x14x32xf32>
  %c1 = linalg.conv_2d_nhwc_hwcf ins(%x, %w1 : tensor<1x14x14x32xf32>, tensor<1x1x32x32xf32>) outs(%f : tensor<1x14x14x32xf32>) -> tensor<1x14x14x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #ch, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c1, %b : tensor<1x14x14x32xf32>, tensor<32xf32>) outs(%e : tensor<1x14x14x32xf32>) {
  ^bb0(%ci: f32, %bi: f32, %o: f32):
    %a = arith.addf %ci, %bi : f32
    %y = arith.maximumf %a, %z : f32
    linalg.yield %y : f32
  } -> tensor<1x14x14x32xf32>
  %p = tensor.pad %r low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } : tensor<1x14x14x32xf32> to tensor<1x16x16x32xf32>
  %c3 = linalg.conv_2d_nhwc_hwcf ins(%p, %w3 : tensor<1x16x16x32xf32>, tensor<3x3x32x32xf32>) outs(%f : tensor<1x14x14x32xf32>) -> tensor<1x14x14x32xf32>
  return %c3 : tensor<1x14x14x32xf32>
}
"""

# Matmuls whose results are padded: one accumulates into a fill (the pad value differs
# from the fill's, so a wrong interior shows), one into a function argument.
MATMULS = """
func.func @mm(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %acc: tensor<4x6xf32>) -> (tensor<6x9xf32>, tensor<5x7xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = tensor.pad %m low[2, 0] high[0, 3] {
  ^bb0(%i: index, %j: index):
    %c = arith.constant 1.5 : f32
    tensor.yield %c : f32
  } : tensor<4x6xf32> to tensor<6x9xf32>
  %m2 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%acc : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p2 = tensor.pad %m2 low[1, 1] high[0, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {from_argument} : tensor<4x6xf32> to tensor<5x7xf32>
  return %p, %p2 : tensor<6x9xf32>, tensor<5x7xf32>
}
"""

# A named elementwise op and a conv whose results are padded (the conv by -1).
ELEMENTWISE_AND_CONV = """
func.func @ec(%x: tensor<1x6x6x4xf32>, %y: tensor<1x6x6x4xf32>, %w: tensor<3x3x4x4xf32>) -> (tensor<1x8x8x4xf32>, tensor<1x6x6x4xf32>) {
  %z = arith.constant 0.0 : f32
  %m1 = arith.constant -1.0 : f32
  %e = tensor.empty() : tensor<1x6x6x4xf32>
  %s = linalg.elementwise <add> ins(%x, %y : tensor<1x6x6x4xf32>, tensor<1x6x6x4xf32>) outs(%e : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  %p = tensor.pad %s low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } : tensor<1x6x6x4xf32> to tensor<1x8x8x4xf32>
  %e4 = tensor.empty() : tensor<1x4x4x4xf32>
  %f4 = linalg.fill ins(%z : f32) outs(%e4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %c = linalg.conv_2d_nhwc_hwcf ins(%x, %w : tensor<1x6x6x4xf32>, tensor<3x3x4x4xf32>) outs(%f4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %q = tensor.pad %c low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %m1 : f32
  } : tensor<1x4x4x4xf32> to tensor<1x6x6x4xf32>
  return %p, %q : tensor<1x8x8x4xf32>, tensor<1x6x6x4xf32>
}
"""


def _run(text: str, ops: OpCriteria | None = None) -> tuple[str, RewriteReport]:
    return rewrite_text(text, lambda m: fuse_pad(m, FusePadOptions(ops)))


def _ops(text: str) -> list[tuple[str, list[str], list[str]]]:
    """(name, operand types, operand producers' names) of every op in ``text``'s functions."""
    found: list[tuple[str, list[str], list[str]]] = []
    with ir.Context():

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.parent is not None and op.parent.name == "func.func":
                producers = [
                    "arg" if isinstance(v.owner, ir.Block) else v.owner.name for v in op.operands
                ]
                found.append((op.name, [str(v.type) for v in op.operands], producers))
            return ir.WalkResult.ADVANCE

        ir.Module.parse(text).operation.walk(visit)
    return found


def _named(text: str, name: str) -> list[tuple[list[str], list[str]]]:
    return [(types, producers) for n, types, producers in _ops(text) if n == name]


@pytest.mark.usefixtures("iree")
def test_bottleneck_pad_becomes_one_fill_and_the_generic_writes_its_interior_on_x86() -> None:
    after, report = _run(BOTTLENECK)
    assert report.summary == "fused 1 pad into its producer (1 linalg.generic)"
    assert "(writes the interior of the padded tensor)" in report.details[0]
    assert not _named(after, "tensor.pad")
    padded_fills = [t for t, _ in _named(after, "linalg.fill") if t[1] == "tensor<1x16x16x32xf32>"]
    assert len(padded_fills) == 1
    ((types, producers),) = _named(after, "linalg.generic")
    assert producers[-1] == "tensor.extract_slice" and types[-1] == "tensor<1x14x14x32xf32>"
    ((_, producers),) = _named(after, "tensor.insert_slice")
    assert producers == ["linalg.generic", "linalg.fill"]
    conv3 = _named(after, "linalg.conv_2d_nhwc_hwcf")[1]
    assert conv3[1][0] == "tensor.insert_slice"
    assert_same_results(BOTTLENECK, after, "f", "x86")


def test_fused_pads_match_on_vulkan(vulkan: None) -> None:
    for text, function in ((BOTTLENECK, "f"), (MATMULS, "mm")):
        after, report = _run(text)
        assert report.changed
        assert_same_results(text, after, function, "vulkan")


@pytest.mark.usefixtures("iree")
def test_matmuls_get_their_init_in_the_interior_before_writing_it_on_x86() -> None:
    after, report = _run(MATMULS)
    assert report.summary == "fused 2 pads into their producers (2 linalg.matmul)"
    assert "(interior first filled with its init's value)" in report.details[0]
    assert "(its init first copied into the interior)" in report.details[1]
    assert not _named(after, "tensor.pad")
    first, second = _named(after, "linalg.matmul")
    # a fill init is re-filled into the slice; an argument init is inserted, then sliced
    assert first[1][-1] == "linalg.fill" and first[0][-1] == "tensor<4x6xf32>"
    assert second[1][-1] == "tensor.extract_slice"
    assert ["arg", "linalg.fill"] in [p for _, p in _named(after, "tensor.insert_slice")]
    assert_same_results(MATMULS, after, "mm", "x86")


@pytest.mark.usefixtures("iree")
def test_named_elementwise_and_conv_producers_on_x86() -> None:
    after, report = _run(ELEMENTWISE_AND_CONV)
    assert report.summary == (
        "fused 2 pads into their producers (1 linalg.elementwise, 1 linalg.conv_2d_nhwc_hwcf)"
    )
    assert not _named(after, "tensor.pad")
    ((_, producers),) = _named(after, "linalg.elementwise")
    assert producers[-1] == "tensor.extract_slice"
    ((_, producers),) = _named(after, "linalg.conv_2d_nhwc_hwcf")
    assert producers[-1] == "linalg.fill"
    assert_same_results(ELEMENTWISE_AND_CONV, after, "ec", "x86")


# One pad per refusal, each tagged with a unit attribute to select it alone.
UNFUSABLE = """
func.func @bad(%x: tensor<4x6xf32>, %n: index) -> (tensor<5x7xf32>, tensor<4x6xf32>, tensor<5x7xf32>, tensor<?x7xf32>, tensor<5x7xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %g = linalg.elementwise <exp> ins(%x : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p1 = tensor.pad %g low[1, 1] high[0, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {other_uses} : tensor<4x6xf32> to tensor<5x7xf32>
  %h = linalg.elementwise <abs> ins(%x : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p2 = tensor.pad %h low[1, 1] high[0, 0] {
  ^bb0(%i: index, %j: index):
    %ii = arith.index_cast %i : index to i32
    %v = arith.sitofp %ii : i32 to f32
    tensor.yield %v : f32
  } {from_indices} : tensor<4x6xf32> to tensor<5x7xf32>
  %k = linalg.elementwise <negf> ins(%x : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p3 = tensor.pad %k low[%n, 1] high[0, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {dynamic} : tensor<4x6xf32> to tensor<?x7xf32>
  %p4 = tensor.pad %x low[1, 1] high[0, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {from_argument} : tensor<4x6xf32> to tensor<5x7xf32>
  return %p1, %g, %p2, %p3, %p4 : tensor<5x7xf32>, tensor<4x6xf32>, tensor<5x7xf32>, tensor<?x7xf32>, tensor<5x7xf32>
}
"""


@pytest.mark.parametrize(
    ("tag", "condition"),
    [
        ("other_uses", 'its producer linalg.elementwise at loc("-":5:8) has other uses'),
        ("from_indices", "the pad value is not a constant"),
        ("dynamic", "dynamic padding"),
        ("from_argument", "its source is a block argument, not the result of a linalg op"),
    ],
)
def test_explicitly_selected_pads_that_cannot_be_fused_are_refused(
    tag: str, condition: str
) -> None:
    with pytest.raises(GraphRewriteError) as error:
        _run(UNFUSABLE, OpCriteria(op="tensor.pad", attributes=((tag, None),)))
    assert "fuse_pad: cannot fuse tensor.pad at loc(" in str(error.value)
    assert condition in str(error.value)


def test_without_selection_unfusable_pads_are_skipped_with_reasons() -> None:
    after, report = _run(UNFUSABLE)
    assert not report.changed
    assert report.summary == "changed nothing: no pad could be fused (see details)"
    assert len(report.details) == 4
    assert all(": skipped: " in d for d in report.details)
    assert len(_named(after, "tensor.pad")) == 4
