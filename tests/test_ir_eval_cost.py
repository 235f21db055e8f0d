"""What evaluating a module in numpy would cost (``targets.ir_eval.cost``): the work of
its generics, counted before running it, and the op it cannot run."""

from __future__ import annotations

import re

import pytest
from tdsched.recipes.workloads import generate
from tdsched.targets.ir_eval import EvalError
from tdsched.targets.ir_eval.cost import EvalCost, evaluation_cost


def test_a_matmul_costs_its_iteration_space_and_one_step_per_reduction_point() -> None:
    workload = generate("matmul", {"M": 64, "N": 32, "K": 16})
    cost = evaluation_cost(workload.mlir, workload.function)
    # The matmul's 64x32x16 points in 16 steps, the fill's 64x32 points in one.
    assert cost == EvalCost(element_ops=64 * 32 * 16 + 64 * 32, steps=16 + 1)
    assert cost.within(EvalCost(40_000, 20)) and not cost.within(EvalCost(40_000, 16))


def test_an_op_the_evaluator_lacks_is_named() -> None:
    text = """
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = math.cbrt %a : f32
    linalg.yield %c : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
}
"""
    with pytest.raises(
        EvalError, match=re.escape("cube.mlir: the numpy IR evaluator does not run 'math.cbrt'")
    ):
        evaluation_cost(text, None, "cube.mlir")
