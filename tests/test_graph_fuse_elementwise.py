"""fuse_elementwise_ext: IR structure and report of each semantic, and IREE numerics
(the module before and after, compiled for x86 or Vulkan, on the same random inputs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from iree.compiler import ir
from iree_numerics import assert_same_results, run_module
from tdsched.recipes.workloads.graph_generators import elementwise_chain
from tdsched.transform_lib.graph.fuse_elementwise import (
    FuseElementwiseOptions,
    fuse_elementwise_ext,
)
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

MAPS = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row0 = affine_map<(d0, d1) -> (d0, 0)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#row = affine_map<(d0, d1) -> (d0)>
"""


def _binary(name: str, op: str, lhs: str, rhs: str, rhs_map: str, attrs: str = "") -> str:
    """A 64x128 elementwise generic ``name = lhs <op> rhs`` (rhs read through ``rhs_map``)."""
    rhs_type = {"#id": "tensor<64x128xf32>", "#col": "tensor<128xf32>"}.get(
        rhs_map, "tensor<64x1xf32>"
    )
    return f"""
  {name} = linalg.generic {{indexing_maps = [#id, {rhs_map}, #id], iterator_types = ["parallel", "parallel"]}}
      ins({lhs}, {rhs} : tensor<64x128xf32>, {rhs_type}) outs(%e : tensor<64x128xf32>) {attrs} {{
  ^bb0(%l: f32, %r: f32, %o: f32):
    %v = {op} %l, %r : f32
    linalg.yield %v : f32
  }} -> tensor<64x128xf32>"""


def _unary(name: str, op: str, operand: str, attrs: str = "") -> str:
    return f"""
  {name} = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
      ins({operand} : tensor<64x128xf32>) outs(%e : tensor<64x128xf32>) {attrs} {{
  ^bb0(%l: f32, %o: f32):
    %v = {op} %l : f32
    linalg.yield %v : f32
  }} -> tensor<64x128xf32>"""


T = "tensor<64x128xf32>"

# The target workload, small: x * scale[d1] + bias[d0, 0] -> relu (linalg.map) -> square
# (linalg.elementwise mul), and abs(x) (linalg.elementwise); returns both.
TARGET = f"""{MAPS}
func.func @main(%x: {T}, %scale: tensor<128xf32>, %bias: tensor<64x1xf32>) -> ({T}, {T}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {T}
  {_binary("%a", "arith.mulf", "%x", "%scale", "#col")}
  {_binary("%b", "arith.addf", "%a", "%bias", "#row0")}
  %c = linalg.map ins(%b : {T}) outs(%e : {T}) (%v: f32, %init: f32) {{
    %m = arith.maximumf %v, %zero : f32
    linalg.yield %m : f32
  }}
  %d = linalg.elementwise <mul> ins(%c, %c : {T}, {T}) outs(%e : {T}) -> {T}
  %abs = linalg.elementwise <abs> ins(%x : {T}) outs(%e : {T}) -> {T}
  return %d, %abs : {T}, {T}
}}
"""

# exp(x) is returned and also read by the multiply.
RETURNED_INTERMEDIATE = f"""{MAPS}
func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}) {{
  %e = tensor.empty() : {T}
  %a = linalg.elementwise <exp> ins(%x : {T}) outs(%e : {T}) -> {T}
  {_binary("%b", "arith.mulf", "%a", "%y", "#id")}
  return %a, %b : {T}, {T}
}}
"""

# Only the {fuse} generics are selected. %u reads %a before the consumer %b, so the fused
# generic must move above it; %c shares %x with the fused generic but depends on it
# through %u, so the two must stay apart.
USER_BEFORE_CONSUMER = f"""{MAPS}
func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}, {T}) {{
  %e = tensor.empty() : {T}
  {_unary("%a", "math.exp", "%x", "attrs = {fuse}")}
  {_unary("%u", "math.sin", "%a")}
  {_binary("%b", "arith.mulf", "%a", "%y", "#id", "attrs = {fuse}")}
  {_binary("%c", "arith.subf", "%x", "%u", "#id", "attrs = {fuse}")}
  return %u, %b, %c : {T}, {T}, {T}
}}
"""


def _reduction(returns_producer: bool) -> str:
    """p = x * d1 (linalg.index), then s[j] = sum_i p[i, j], read through a transpose."""
    results = ("%s, %p", "tensor<128xf32>, " + T) if returns_producer else ("%s", "tensor<128xf32>")
    return f"""{MAPS}
func.func @main(%x: {T}) -> ({results[1]}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {T}
  %p = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x : {T}) outs(%e : {T}) {{
  ^bb0(%l: f32, %o: f32):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    %v = arith.mulf %l, %f : f32
    linalg.yield %v : f32
  }} -> {T}
  %e1 = tensor.empty() : tensor<128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<128xf32>) -> tensor<128xf32>
  %s = linalg.generic {{indexing_maps = [#tr, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%p : {T}) outs(%z : tensor<128xf32>) {{
  ^bb0(%l: f32, %acc: f32):
    %v = arith.addf %l, %acc : f32
    linalg.yield %v : f32
  }} -> tensor<128xf32>
  return {results[0]} : {results[1]}
}}
"""


@dataclass(frozen=True)
class LinalgOp:
    name: str
    inputs: tuple[str, ...]
    num_outputs: int
    maps: tuple[str, ...]
    iterators: str


def _linalg_ops(module_text: str) -> list[LinalgOp]:
    """The linalg ops of ``@main`` (fills left out), with their inputs' SSA names."""
    found = []
    with ir.Context():
        module = ir.Module.parse(module_text)
        for op in module.body.operations[0].regions[0].blocks[0].operations:
            op = op.operation
            if not op.name.startswith("linalg.") or op.name == "linalg.fill":
                continue
            view = op.opview
            maps = (
                ir.ArrayAttr(op.attributes["indexing_maps"]) if op.name == "linalg.generic" else []
            )
            found.append(
                LinalgOp(
                    op.name,
                    tuple(v.get_name() for v in view.inputs),
                    len(view.outputs),
                    tuple(str(ir.AffineMapAttr(m).value) for m in maps),
                    str(op.attributes["iterator_types"])
                    if "iterator_types" in op.attributes
                    else "",
                )
            )
    return found


def _printed(module_text: str) -> str:
    with ir.Context():
        return str(ir.Module.parse(module_text))


def _fuse(module_text: str, **options: object) -> tuple[str, RewriteReport]:
    opts = FuseElementwiseOptions(**options)  # type: ignore[arg-type]
    return rewrite_text(module_text, lambda module: fuse_elementwise_ext(module, opts))


@pytest.mark.usefixtures("iree")
def test_target_workload_becomes_one_generic_reading_x_once() -> None:
    after, report = _fuse(TARGET)
    assert report.summary == "fused 5 generics into 1 (3 producer→consumer, 1 shared-input group)"
    assert report.changed
    [fused] = _linalg_ops(after)
    assert fused.name == "linalg.generic"
    assert fused.inputs == ("%arg0", "%arg1", "%arg2")  # x, scale, bias: each read once
    assert fused.num_outputs == 2
    assert "(d0, d1) -> (d1)" in fused.maps and "(d0, d1) -> (d0, 0)" in fused.maps
    assert sum("generalized" in d for d in report.details) == 3  # map, 2 elementwise
    assert "transform.structured.generalize" in report.scripts[0]
    assert_same_results(TARGET, after, "main", "x86")


def test_shipped_recipe_workload_becomes_one_generic() -> None:
    """The workload recipes/elementwise_chain_x86.yaml runs, at 64x128."""
    after, report = _fuse(elementwise_chain(M=64, N=128).mlir)
    [fused] = _linalg_ops(after)
    assert fused.inputs == ("%arg0", "%arg1", "%arg2") and fused.num_outputs == 2
    assert report.summary.startswith("fused 5 generics into 1")


def test_target_workload_numerics_on_vulkan(vulkan: None) -> None:
    after, _ = _fuse(TARGET)
    assert_same_results(TARGET, after, "main", "vulkan")


@pytest.mark.usefixtures("iree")
def test_returned_intermediate_is_a_result_of_the_fused_generic() -> None:
    after, report = _fuse(RETURNED_INTERMEDIATE)
    [fused] = _linalg_ops(after)
    assert fused.num_outputs == 2 and fused.inputs == ("%arg0", "%arg1")
    assert after.count("math.exp") == 1  # computed once, no full-size copy left
    assert "also yields 1 of its results" in "\n".join(report.details)
    assert_same_results(RETURNED_INTERMEDIATE, after, "main", "x86")


@pytest.mark.usefixtures("iree")
def test_fused_generic_moves_above_an_earlier_user_and_dependent_ops_stay_apart() -> None:
    after, report = _fuse(USER_BEFORE_CONSUMER, ops=OpCriteria(attributes=(("fuse", None),)))
    assert report.summary == "fused 2 generics into 1 (1 producer→consumer)"
    fused, sin, sub = _linalg_ops(after)
    assert fused.num_outputs == 2
    assert sin.inputs == ("%2#1",)  # reads exp(x) from the fused generic, which precedes it
    assert sub.inputs == ("%arg0", "%3")
    # the two outputs shared one tensor.empty; each gets its own (IREE would copy otherwise)
    assert "outs(%0, %1 : " in after
    assert_same_results(USER_BEFORE_CONSUMER, after, "main", "x86")


@pytest.mark.usefixtures("iree")
def test_reduction_consumer_through_a_transpose_remaps_linalg_index() -> None:
    before = _reduction(returns_producer=False)
    after, report = _fuse(before)
    assert report.summary == "fused 2 generics into 1 (1 producer→consumer)"
    [fused] = _linalg_ops(after)
    assert fused.maps[0] == "(d0, d1) -> (d1, d0)"
    assert "reduction" in fused.iterators
    assert "linalg.index 0" in after  # the producer's loop 1 is the consumer's loop 0
    assert_same_results(before, after, "main", "x86", atol=1e-3)


def test_producer_also_returned_is_not_fused_into_a_reduction() -> None:
    before = _reduction(returns_producer=True)
    after, report = _fuse(before)
    assert not report.changed
    assert report.summary.startswith("changed nothing: no fusable elementwise")
    assert "fusing would compute it twice" in "\n".join(report.details)
    assert len(_linalg_ops(after)) == 2


def test_shared_input_off_keeps_two_generics() -> None:
    after, report = _fuse(TARGET, shared_input=False)
    assert report.summary == "fused 4 generics into 1 (3 producer→consumer)"
    chain, abs_op = _linalg_ops(after)
    assert chain.inputs == ("%arg0", "%arg1", "%arg2") and abs_op.inputs == ("%arg0",)


@pytest.mark.parametrize("bound", [3, 4])
def test_max_operands_bounds_every_fused_generic(bound: int) -> None:
    after, report = _fuse(TARGET, max_operands=bound)
    ops = _linalg_ops(after)
    assert len(ops) == 2 if bound == 4 else len(ops) > 2
    assert all(len(op.inputs) + op.num_outputs <= bound for op in ops if op.maps)
    assert f"(max_operands={bound})" in "\n".join(report.details)


def test_nothing_selected_or_nothing_fusable_changes_nothing() -> None:
    after, report = _fuse(TARGET, ops=OpCriteria(attributes=(("nope", None),)))
    assert report.summary == "changed nothing: no op matches attributes=['nope']"
    assert not report.changed and after == _printed(TARGET)
    lone = f"""
func.func @main(%x: {T}) -> {T} {{
  %e = tensor.empty() : {T}
  %a = linalg.elementwise <exp> ins(%x : {T}) outs(%e : {T}) -> {T}
  return %a : {T}
}}"""
    after, report = _fuse(lone)
    assert report.summary == (
        "changed nothing: no fusable elementwise producer/consumer pair or shared input "
        "among 1 selected op(s)"
    )
    assert "linalg.elementwise" in after  # not generalized for nothing


MATMUL = """
func.func @main(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}"""
BUFFERS = """
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>) {
  linalg.elementwise <exp> ins(%a : memref<8xf32>) outs(%b : memref<8xf32>)
  return
}"""


@pytest.mark.parametrize(
    ("module_text", "options", "message"),
    [
        (TARGET, {"max_operands": 1}, "max_operands must be at least 2"),
        (TARGET, {"ops": OpCriteria(kind="contraction")}, "'kind' and 'shape' select kernels"),
        (
            MATMUL,
            {"ops": OpCriteria(op="linalg.matmul")},
            "linalg.matmul at loc(\"-\":3:8) is selected by 'ops', but only linalg.generic",
        ),
        (BUFFERS, {}, 'linalg.elementwise at loc("-":3:3) works on buffers'),
    ],
)
def test_precondition_errors_name_the_op_and_condition(
    module_text: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(GraphRewriteError, match="fuse_elementwise_ext") as error:
        _fuse(module_text, **options)
    assert message in str(error.value)


DYNAMIC = (Path(__file__).parent / "payloads" / "dynamic_shared_input.mlir").read_text()

# Two dynamic generics reading x: their second loops come from y's and z's dims, which
# nothing shows equal, so they must stay apart and the report must say why.
DYNAMIC_UNPROVEN = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<?xf32>, %y: tensor<?x?xf32>, %z: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %a = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?xf32>) outs(%y : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %b = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?xf32>) outs(%z : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = math.sin %v : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  return %a, %b : tensor<?x?xf32>, tensor<?x?xf32>
}
"""


def test_shared_input_fusion_on_dynamic_shapes_with_provably_equal_loops(target: str) -> None:
    """exp(x) and x * y, both ?x?: their loops are x's dims (the init is tensor.empty of
    tensor.dim x), so they become one generic reading x once, and IREE (dynamic shapes,
    5x7 inputs) computes the same results before and after on the target."""
    after, report = _fuse(DYNAMIC)
    assert report.summary == "fused 2 generics into 1 (1 shared-input group)"
    (fused,) = _linalg_ops(after)
    assert fused.inputs == ("%arg0", "%arg1") and fused.num_outputs == 2
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, (5, 7)).astype(np.float32) for _ in range(2)]
    want = run_module(DYNAMIC, "f", inputs, target)
    got = run_module(after, "f", inputs, target)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_dynamic_candidates_whose_loops_cannot_be_shown_equal_are_named_with_the_loop() -> None:
    after, report = _fuse(DYNAMIC_UNPROVEN)
    assert report.summary.startswith("changed nothing")
    assert len(_linalg_ops(after)) == 2
    (note,) = report.details
    assert note.startswith("not fused: linalg.generic at") and "(shared input %arg0)" in note
    assert "loop 1 is dynamic (dim 1 of %arg1) in one and dynamic (dim 1 of %arg2)" in note


@pytest.mark.process
def test_apply_takes_a_dynamic_workload_and_run_says_what_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tdsched.schedules.cli.main import main

    (tmp_path / "dyn.mlir").write_text(DYNAMIC)
    recipe = tmp_path / "dyn.yaml"
    recipe.write_text(
        "name: dyn\nworkload: {file: dyn.mlir}\ntargets: [x86]\n"
        "graph:\n  - fuse_elementwise_ext: {}\n"
    )
    assert main(["apply", str(recipe)]) == 0
    assert "// fuse_elementwise_ext: fused 2 generics into 1 (1 shared-input group)" in (
        capsys.readouterr().out
    )
    main(["run", str(recipe), "--no-time"])
    out = capsys.readouterr().out
    assert "has dynamic dims; running and timing need static shapes" in out
    assert "'tdsched check --dynamic-size N'" in out
