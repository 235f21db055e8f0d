"""A model's constant operands (weights) carried into a task's standalone function."""

from __future__ import annotations

from iree.compiler import ir
from tdsched.transform_lib.constant_operands import ModelConstants, with_constant_operands

MODEL = """
func.func @net(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %cst = arith.constant dense<1.0> : tensor<16x8xf32>
  %e0 = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%cst : tensor<16x8xf32>) outs(%e0 : tensor<8x16xf32>)
      permutation = [1, 0] {tdsched.layer = "fc.t"}
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.matmul {tdsched.layer = "fc"} ins(%x, %t : tensor<4x8xf32>, tensor<8x16xf32>)
      outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %b = linalg.matmul {tdsched.layer = "fc2"} ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>)
      outs(%a : tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = tensor.pad %b low[0, 0] high[1, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } {tdsched.layer = "fc2"} : tensor<4x16xf32> to tensor<5x16xf32>
  %s = tensor.extract_slice %p[0, 0] [4, 16] [1, 1] : tensor<5x16xf32> to tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}
"""

TASK = """
func.func @t0(%arg0: tensor<4x8xf32>, %arg1: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = linalg.matmul ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8x16xf32>)
      outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %a : tensor<4x16xf32>
}
"""


def test_a_weight_is_an_input_computed_from_constants_alone() -> None:
    # fc's B is a transpose of a constant (a weight); fc2's B is an argument. fc2's pad
    # (ONNX's importer tags pads with their layer too) is not a structured op.
    model = ModelConstants(MODEL)
    assert model.inputs("linalg.matmul", ["fc"]) == {1}
    assert model.inputs("linalg.matmul", ["fc2"]) == frozenset()
    # Over several layers: only the inputs that are constant in every one of them.
    assert model.inputs("linalg.matmul", ["fc", "fc2"]) == frozenset()
    assert model.inputs("linalg.matmul", ["nope"]) == frozenset()
    assert model.inputs("linalg.matmul", []) == frozenset()


def test_the_task_defines_the_weight_as_a_seeded_constant_of_its_type() -> None:
    text = with_constant_operands(TASK, "linalg.matmul", [1])
    assert text == with_constant_operands(TASK, "linalg.matmul", [1])  # the same seed
    with ir.Context():
        module = ir.Module.parse(text)
        function = module.body.operations[0]
        kind = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        assert [str(t) for t in kind.inputs] == ["tensor<4x8xf32>"]
        assert [str(t) for t in kind.results] == ["tensor<4x16xf32>"]
    constant = next(line for line in text.splitlines() if "tensor<8x16xf32>" in line)
    assert "arith.constant dense<" in constant and "splat" not in constant
    # Nothing to replace: the text comes back as it was.
    assert with_constant_operands(TASK, "linalg.matmul", []) == str(_parsed(TASK))
    assert with_constant_operands(TASK, "linalg.conv_2d_nhwc_hwcf", [1]) == TASK


def _parsed(text: str) -> str:
    with ir.Context():
        return str(ir.Module.parse(text))
