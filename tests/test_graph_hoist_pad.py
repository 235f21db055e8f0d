"""hoist_pad: IR structure, report and refusals; numerics through IREE against numpy and
the unrewritten module (x86, Vulkan); the one-dispatch bottleneck recipe built on it."""

from __future__ import annotations

import pytest
from iree.compiler import ir
from iree_numerics import assert_matches_numpy, assert_same_results
from tdsched.recipes.workloads.generators import resnet_block
from tdsched.transform_lib.graph.hoist_pad import HoistPadOptions, hoist_pad
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

BLOCK = resnet_block(H=6, W=6, C=16, M=8)

# A 2-d chain under a pad by 1.5, low on dim 0 only, high on dim 1 only: a generic with
# an operand broadcast along dim 0 (read along the padded dim 1), then a generic that
# reads its init (accumulates into a fill).
CHAIN = """
func.func @chain(%x: tensor<4x6xf32>, %b: tensor<6xf32>) -> tensor<6x9xf32> {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x6xf32>, tensor<6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%xi: f32, %bi: f32, %o: f32):
    %s = arith.mulf %xi, %bi : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %h = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<4x6xf32>) outs(%f : tensor<4x6xf32>) {
  ^bb0(%gi: f32, %acc: f32):
    %s = arith.addf %gi, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %p = tensor.pad %h low[2, 0] high[0, 3] {
  ^bb0(%i: index, %j: index):
    %c = arith.constant 1.5 : f32
    tensor.yield %c : f32
  } : tensor<4x6xf32> to tensor<6x9xf32>
  return %p : tensor<6x9xf32>
}
"""


def _run(text: str, ops: OpCriteria | None = None) -> tuple[str, RewriteReport]:
    return rewrite_text(text, lambda m: hoist_pad(m, HoistPadOptions(ops)))


def _ops(text: str) -> list[tuple[str, list[str], list[str]]]:
    """(name, operand types, attribute names) of every op in ``text``'s functions."""
    found: list[tuple[str, list[str], list[str]]] = []
    with ir.Context():

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.parent is not None and op.parent.name == "func.func":
                attrs = [str(a) for a in op.attributes]
                found.append((op.name, [str(v.type) for v in op.operands], attrs))
            return ir.WalkResult.ADVANCE

        ir.Module.parse(text).operation.walk(visit)
    return found


def test_bottleneck_border_is_computed_by_the_reduce_and_masked() -> None:
    after, report = _run(BLOCK.mlir)
    assert report.summary == "hoisted 1 pad above 2 producer op(s), each masked back to its value"
    assert (
        "(linalg.generic, linalg.conv_2d_nhwc_hwcf); padded inputs: argument 0"
        in (report.details[0])
    )
    ops = _ops(after)
    # the only pad left pads the block's input x, marked; the reduce and its epilogue run
    # on the padded 8x8 domain; the mask feeds the 3x3 conv
    ((types, attrs),) = [(types, attrs) for name, types, attrs in ops if name == "tensor.pad"]
    assert types == ["tensor<1x6x6x16xf32>"] and "tdsched.hoisted_pad" in attrs
    convs = [types for name, types, _ in ops if name == "linalg.conv_2d_nhwc_hwcf"]
    assert convs[0] == ["tensor<1x8x8x16xf32>", "tensor<1x1x16x8xf32>", "tensor<1x8x8x8xf32>"]
    assert convs[1][0] == "tensor<1x8x8x8xf32>"
    masks = [attrs for _, _, attrs in ops if "tdsched.pad_mask" in attrs]
    assert len(masks) == 1


@pytest.mark.usefixtures("iree")
def test_hoisted_bottleneck_matches_numpy_on_x86() -> None:
    after, _ = _run(BLOCK.mlir)
    assert BLOCK.reference is not None
    assert_matches_numpy(BLOCK.mlir, after, "resnet_block", "x86", BLOCK.reference, atol=1e-4)


@pytest.mark.usefixtures("iree")
def test_pad_value_and_one_sided_padding_and_read_init_on_x86() -> None:
    after, report = _run(CHAIN)
    assert report.changed
    assert "(linalg.generic, linalg.generic)" in report.details[0]
    ops = _ops(after)
    fills = [types for name, types, _ in ops if name == "linalg.fill"]
    assert fills == [["f32", "tensor<6x9xf32>"]]  # the init, re-filled at the padded shape
    # x, and the bias: it is read along the padded dim 1 (high 3), so it is padded too
    pads = [types for name, types, _ in ops if name == "tensor.pad"]
    assert pads == [["tensor<4x6xf32>"], ["tensor<6xf32>"]]
    assert "argument 0 (a block argument); argument 1 (a block argument)" in report.details[0]
    assert_same_results(CHAIN, after, "chain", "x86")


def test_hoisted_pads_match_on_vulkan(vulkan: None) -> None:
    after, _ = _run(BLOCK.mlir)
    assert BLOCK.reference is not None
    assert_matches_numpy(BLOCK.mlir, after, "resnet_block", "vulkan", BLOCK.reference, atol=1e-4)
    after, _ = _run(CHAIN)
    assert_same_results(CHAIN, after, "chain", "vulkan")


# One pad per refusal, each tagged with a unit attribute to select it alone.
UNHOISTABLE = """
#id = affine_map<(n, h, w, c) -> (n, h, w, c)>
func.func @bad(%x: tensor<1x6x6x4xf32>, %w3: tensor<3x3x4x4xf32>, %w1: tensor<1x1x4x4xf32>) -> (tensor<1x6x6x4xf32>, tensor<1x8x8x4xf32>, tensor<1x5x5x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1x6x6x4xf32>, tensor<1x8x8x4xf32>) {
  %z = arith.constant 0.0 : f32
  %e4 = tensor.empty() : tensor<1x4x4x4xf32>
  %f4 = linalg.fill ins(%z : f32) outs(%e4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %c3 = linalg.conv_2d_nhwc_hwcf ins(%x, %w3 : tensor<1x6x6x4xf32>, tensor<3x3x4x4xf32>) outs(%f4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %p1 = tensor.pad %c3 low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } {window} : tensor<1x4x4x4xf32> to tensor<1x6x6x4xf32>
  %p2 = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } {from_argument} : tensor<1x6x6x4xf32> to tensor<1x8x8x4xf32>
  %e3 = tensor.empty() : tensor<1x3x3x4xf32>
  %f3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<1x3x3x4xf32>) -> tensor<1x3x3x4xf32>
  %s = linalg.conv_2d_nhwc_hwcf {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>} ins(%x, %w1 : tensor<1x6x6x4xf32>, tensor<1x1x4x4xf32>) outs(%f3 : tensor<1x3x3x4xf32>) -> tensor<1x3x3x4xf32>
  %p3 = tensor.pad %s low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } {strided} : tensor<1x3x3x4xf32> to tensor<1x5x5x4xf32>
  %e6 = tensor.empty() : tensor<1x6x6x4xf32>
  %ix = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<1x6x6x4xf32>) outs(%e6 : tensor<1x6x6x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %h = linalg.index 1 : index
    %hi = arith.index_cast %h : index to i32
    %hf = arith.sitofp %hi : i32 to f32
    %v = arith.addf %a, %hf : f32
    linalg.yield %v : f32
  } -> tensor<1x6x6x4xf32>
  %p4 = tensor.pad %ix low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } {indices} : tensor<1x6x6x4xf32> to tensor<1x8x8x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<1x6x6x4xf32>) outs(%e6 : tensor<1x6x6x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %z : f32
    linalg.yield %v : f32
  } -> tensor<1x6x6x4xf32>
  %p5 = tensor.pad %r low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } {other_uses} : tensor<1x6x6x4xf32> to tensor<1x8x8x4xf32>
  %el = linalg.elementwise <exp> ins(%x : tensor<1x6x6x4xf32>) outs(%e6 : tensor<1x6x6x4xf32>) -> tensor<1x6x6x4xf32>
  %p6 = tensor.pad %el low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %z : f32
  } {named} : tensor<1x6x6x4xf32> to tensor<1x8x8x4xf32>
  return %p1, %p2, %p3, %p4, %p5, %r, %p6 : tensor<1x6x6x4xf32>, tensor<1x8x8x4xf32>, tensor<1x5x5x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1x6x6x4xf32>, tensor<1x8x8x4xf32>
}
"""


@pytest.mark.parametrize(
    ("tag", "condition"),
    [
        ("window", "reads operand 0 through d1 + d4: not pointwise in a padded dim"),
        ("from_argument", "its source cannot compute the border: a block argument"),
        ("strided", "reads operand 0 through d1 * 2 + d4: not pointwise"),
        ("indices", "reads loop indices (linalg.index)"),
        ("other_uses", "has other uses"),
        ("named", "linalg.elementwise at loc("),
    ],
)
def test_explicitly_selected_pads_that_cannot_be_hoisted_are_refused(
    tag: str, condition: str
) -> None:
    with pytest.raises(GraphRewriteError) as error:
        _run(UNHOISTABLE, OpCriteria(op="tensor.pad", attributes=((tag, None),)))
    message = str(error.value)
    assert "hoist_pad: cannot hoist tensor.pad at loc(" in message
    assert condition in message
    assert "narrow 'ops' to pads of pointwise producers" in message


def test_without_selection_unhoistable_pads_are_left_with_reasons() -> None:
    after, report = _run(UNHOISTABLE)
    assert not report.changed
    assert report.summary == "changed nothing: no pad could be hoisted (see details)"
    assert len(report.details) == 6
    assert all(": left as it is: " in d for d in report.details)
    assert len([op for op in _ops(after) if op[0] == "tensor.pad"]) == 6
