"""collapse_dims: IR structure, report and refusals; numerics through IREE (x86, Vulkan)."""

from __future__ import annotations

import pytest
from iree.compiler import ir
from iree_numerics import assert_same_results
from tdsched.transform_lib.graph.collapse_dims import (
    CollapseDimsOptions,
    collapse_dims,
)
from tdsched.transform_lib.graph.report import GraphRewriteError, RewriteReport, rewrite_text
from tdsched.transform_lib.match import OpCriteria

# out[n,c,h,w] = max(x[n,c,h,w] * s[c] + b[c], 0): the recipe's workload, small.
NCHW_BIAS_RELU = """
#id = affine_map<(n, c, h, w) -> (n, c, h, w)>
#ch = affine_map<(n, c, h, w) -> (c)>
func.func @f(%x: tensor<2x8x6x6xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8x6x6xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x6x6xf32>
  %r = linalg.generic {indexing_maps = [#id, #ch, #ch, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s, %b : tensor<2x8x6x6xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<2x8x6x6xf32>) {
  ^bb0(%xi: f32, %si: f32, %bi: f32, %o: f32):
    %m = arith.mulf %xi, %si : f32
    %a = arith.addf %m, %bi : f32
    %y = arith.maximumf %a, %z : f32
    linalg.yield %y : f32
  } -> tensor<2x8x6x6xf32>
  return %r : tensor<2x8x6x6xf32>
}
"""

# out[a,b] = sum_{c,d} x[a,b,c,d] * w[c,d]: two parallel and two reduction loops, and an
# operand that broadcasts over the parallel ones.
REDUCE_WEIGHTED = """
#x = affine_map<(a, b, c, d) -> (a, b, c, d)>
#w = affine_map<(a, b, c, d) -> (c, d)>
#o = affine_map<(a, b, c, d) -> (a, b)>
func.func @r(%x: tensor<2x3x4x5xf32>, %w: tensor<4x5xf32>) -> tensor<2x3xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#x, #w, #o], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : tensor<2x3x4x5xf32>, tensor<4x5xf32>) outs(%f : tensor<2x3xf32>) {
  ^bb0(%xi: f32, %wi: f32, %o: f32):
    %m = arith.mulf %xi, %wi : f32
    %a = arith.addf %m, %o : f32
    linalg.yield %a : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
"""


def _generic(maps: str, iterators: str, ins: str, out: str, body: str = "", tag: str = "") -> str:
    """A module with one function @g running one linalg.generic on its arguments.

    ``ins`` lists the input types separated by ";"; the body runs ``body`` and yields the
    first input; ``tag`` is a unit attribute put on the generic.
    """
    types = ins.split(";")
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    names = ", ".join(f"%a{i}" for i in range(len(types)))
    scalars = ", ".join(f"%s{i}: f32" for i in range(len(types)))
    attrs = f" attrs = {{{tag}}}" if tag else ""
    return f"""
func.func @g({args}) -> {out} {{
  %e = tensor.empty() : {out}
  %r = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iterators}]}}
      ins({names} : {", ".join(types)}) outs(%e : {out}){attrs} {{
  ^bb0({scalars}, %o: f32):
    {body}
    linalg.yield %s0 : f32
  }} -> {out}
  return %r : {out}
}}
"""


P3 = '"parallel", "parallel", "parallel"'
ID3 = "affine_map<(d0, d1, d2) -> (d0, d1, d2)>"
T3 = "tensor<2x3x4xf32>"


def _run(text: str, **options: object) -> tuple[str, RewriteReport]:
    opts = CollapseDimsOptions(**options)  # type: ignore[arg-type]
    return rewrite_text(text, lambda m: collapse_dims(m, opts))


def _ops(text: str, name: str) -> list[dict[str, str]]:
    """Attributes (printed) and operand/result types of every ``name`` op in ``text``."""
    with ir.Context():
        found: list[dict[str, str]] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == name:
                info = {k: str(op.attributes[k]) for k in op.attributes}
                info["types"] = " ".join(str(v.type) for v in [*op.operands, *op.results])
                found.append(info)
            return ir.WalkResult.ADVANCE

        ir.Module.parse(text).operation.walk(visit)
        return found


@pytest.mark.usefixtures("iree")
def test_auto_collapses_nchw_bias_relu_to_three_dims_on_x86() -> None:
    after, report = _run(NCHW_BIAS_RELU)
    assert report.summary == "collapsed 4→3 dims on 1 op"
    assert report.changed and "[[0], [1], [2, 3]] (4→3 dims)" in report.details[0]
    (generic,) = _ops(after, "linalg.generic")
    assert generic["iterator_types"].count("parallel") == 3
    assert "affine_map<(d0, d1, d2) -> (d1)>" in generic["indexing_maps"]
    # x and the init collapse to 2x8x36; the per-channel operands stay as they are
    assert (
        generic["types"].split()
        == ["tensor<2x8x36xf32>", "tensor<8xf32>", "tensor<8xf32>"] + ["tensor<2x8x36xf32>"] * 2
    )
    assert len(_ops(after, "tensor.collapse_shape")) == 2
    (expand,) = _ops(after, "tensor.expand_shape")
    assert expand["reassociation"] == "[[0], [1], [2, 3]]"
    assert_same_results(NCHW_BIAS_RELU, after, "f", "x86")


@pytest.mark.usefixtures("iree")
def test_explicit_groups_collapse_reductions_and_broadcast_operands_on_x86() -> None:
    after, report = _run(REDUCE_WEIGHTED, reassociation=((0, 1), (2, 3)))
    assert report.summary == "collapsed 4→2 dims on 1 op"
    (generic,) = _ops(after, "linalg.generic")
    assert generic["iterator_types"] == (
        "[#linalg.iterator_type<parallel>, #linalg.iterator_type<reduction>]"
    )
    assert generic["types"].split() == [
        "tensor<6x20xf32>",
        "tensor<20xf32>",
        "tensor<6xf32>",
        "tensor<6xf32>",
    ]
    assert_same_results(REDUCE_WEIGHTED, after, "r", "x86")


def test_collapsed_modules_match_on_vulkan(vulkan: None) -> None:
    for text, function, groups in (
        (NCHW_BIAS_RELU, "f", None),
        (REDUCE_WEIGHTED, "r", ((0, 1), (2, 3))),
    ):
        after, report = _run(text, reassociation=groups)
        assert report.changed
        assert_same_results(text, after, function, "vulkan")


def test_report_counts_ops_per_collapse_and_ops_selects_by_attribute() -> None:
    elementwise = _generic(", ".join([ID3] * 2), P3, T3, T3, tag="tdsched.keep")
    module = NCHW_BIAS_RELU + elementwise + elementwise.replace("@g", "@h")
    _, report = _run(module)
    assert report.summary == "collapsed 4→3 dims on 1 op, 3→1 on 2 ops"
    _, report = _run(module, ops=OpCriteria(attributes=(("tdsched.keep", None),)))
    assert report.summary == "collapsed 3→1 dims on 2 ops"


TRANSPOSE = _generic(
    "affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>",
    '"parallel", "parallel"',
    "tensor<3x2xf32>",
    "tensor<2x3xf32>",
)
WITH_INDEX = _generic(", ".join([ID3] * 2), P3, T3, T3, body="%i = linalg.index 0 : index")


def test_auto_leaves_incompatible_ops_alone_and_says_why() -> None:
    module = TRANSPOSE + WITH_INDEX.replace("@g", "@h")
    after, report = _run(module)
    assert not report.changed
    assert report.summary == "changed nothing: no dims to collapse (see details)"
    assert "operand 0's map (d1, d0) reads d0, d1 out of order" in report.details[0]
    assert "linalg.index" in report.details[1]
    assert not _ops(after, "tensor.collapse_shape")


OUT_OF_ORDER = _generic(
    f"{ID3}, {ID3}, affine_map<(d0, d1, d2) -> (d0, d2, d1)>",
    P3,
    f"{T3};{T3}",
    "tensor<2x4x3xf32>",
)
MIXED = _generic(
    f"{ID3}, affine_map<(d0, d1, d2) -> (d0, d1)>",
    '"parallel", "parallel", "reduction"',
    T3,
    "tensor<2x3xf32>",
)
DYNAMIC = (
    _generic(", ".join([ID3] * 2), P3, "tensor<?x3x4xf32>", "tensor<?x3x4xf32>")
    .replace("tensor.empty()", "tensor.empty(%c2)")
    .replace("{\n  %e", "{\n  %c2 = arith.constant 2 : index\n  %e")
)


@pytest.mark.parametrize(
    ("module", "groups", "condition"),
    [
        (
            OUT_OF_ORDER,
            ((0,), (1, 2)),
            "group [1, 2]: operand 2's map (d0, d2, d1) reads d1, d2 out of order",
        ),
        (MIXED, ((0,), (1, 2)), "group [1, 2]: d1 is parallel but d2 is reduction"),
        (MIXED, ((0, 1),), "reassociation [[0, 1]] must list its loops 0..2 in order"),
        (WITH_INDEX, ((0, 1, 2),), "its body uses linalg.index"),
        (DYNAMIC, ((0, 1, 2),), "tensors of static shape"),
    ],
)
def test_explicit_groups_that_do_not_fit_are_refused_naming_op_and_condition(
    module: str, groups: tuple[tuple[int, ...], ...], condition: str
) -> None:
    with ir.Context(), ir.Location.unknown():
        parsed = ir.Module.parse(module)
        before = str(parsed)
        with pytest.raises(GraphRewriteError) as error:
            collapse_dims(parsed, CollapseDimsOptions(reassociation=groups))
        assert str(parsed) == before  # refused before rewriting anything
    assert 'cannot collapse linalg.generic at loc("-"' in str(error.value)
    assert condition in str(error.value)


def test_selecting_a_named_op_is_refused() -> None:
    with pytest.raises(GraphRewriteError, match=r"not linalg\.matmul; generalize it first"):
        _run(NCHW_BIAS_RELU, ops=OpCriteria(op="linalg.matmul"))
