"""fuse_ext on payload modules: each semantic is checked on the IR structure *and* on
numerics (numpy IR evaluator, transformed vs untransformed module, random inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from iree.compiler import ir
from tdsched.targets.ir_eval import check_equivalent
from tdsched.transform_lib.fuse_ext import FuseExtError, FuseExtOptions, fuse_ext
from tdsched.transform_lib.interpreter import apply_script
from tdsched.transform_lib.match import OpCriteria

PAYLOADS = Path(__file__).parent / "payloads"
TEST_ROOT = OpCriteria(attributes=(("tdsched.test_root", None),))


def _payload(name: str) -> str:
    return (PAYLOADS / name).read_text()


def _run(name: str, **options: object) -> tuple[str, str, list[str]]:
    before = _payload(name)
    after, report = fuse_ext(before, FuseExtOptions(**options))  # type: ignore[arg-type]
    assert check_equivalent(before, after).equivalent, report.lines()
    return before, after, report.lines()


def _ops(module_text: str) -> list[tuple[str, list[str], ir.Operation]]:
    """(op name, enclosing op names innermost first) for every op in the module."""
    found: list[tuple[str, list[str], ir.Operation]] = []
    context = ir.Context()
    module = ir.Module.parse(module_text, context)

    def visit(op: ir.Operation) -> ir.WalkResult:
        parents = []
        parent = op.parent
        while parent is not None:
            parents.append(parent.name)
            parent = parent.parent
        found.append((op.name, parents, op))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    _ops.keep = (context, module)  # type: ignore[attr-defined]
    return found


def _contractions(module_text: str) -> list[list[str]]:
    """Enclosing ops of every op with a reduction loop (matmuls, convs)."""
    return [
        parents
        for name, parents, op in _ops(module_text)
        if name in ("linalg.matmul", "linalg.conv_2d_nhwc_hwcf")
        or (name == "linalg.generic" and "reduction" in str(op.attributes["iterator_types"]))
    ]


def test_reduction_tiling_keeps_the_initializer_outside_the_reduction_loop() -> None:
    _, after, _ = _run(
        "matmul_bias_relu_both.mlir", root=OpCriteria(op="linalg.matmul"), tile_sizes=(8, 8, 4)
    )
    fills = [parents for name, parents, _ in _ops(after) if name == "linalg.fill"]
    assert fills == [["scf.forall", "func.func", "builtin.module"]]
    (matmul,) = _contractions(after)
    assert matmul[:2] == ["scf.for", "scf.forall"]


def test_upstream_fuse_puts_the_fill_in_the_reduction_loop_and_the_checker_sees_it() -> None:
    """The miscompile fuse_ext exists to avoid (llvm-project issue 58398)."""
    before = _payload("matmul_bias_relu_both.mlir")
    script = """module attributes {transform.with_named_sequence} {
      transform.named_sequence @main(%m: !transform.any_op {transform.consumed}) {
        %mm = transform.structured.match ops{["linalg.matmul"]} in %m
          : (!transform.any_op) -> !transform.any_op
        %t, %l:3 = transform.structured.fuse %mm tile_sizes [8, 8, 4]
          : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op,
             !transform.any_op)
        transform.yield
      }
    }"""
    after, _ = apply_script(before, script, "main")
    assert not check_equivalent(before, after).equivalent


def test_intermediate_used_outside_is_yielded_not_recomputed() -> None:
    _, after, lines = _run(
        "matmul_bias_relu_both.mlir", root=OpCriteria(op="linalg.generic"), tile_sizes=(8, 8)
    )
    assert _contractions(after) == [["scf.forall", "func.func", "builtin.module"]]
    forall = next(op for name, _, op in _ops(after) if name == "scf.forall")
    assert len(forall.results) == 2
    assert any("yielded by the loop nest" in line for line in lines)


def test_recompute_policy_keeps_the_full_size_producer_too() -> None:
    _, after, lines = _run(
        "matmul_bias_relu_both.mlir",
        root=OpCriteria(op="linalg.generic"),
        tile_sizes=(8, 8),
        intermediates="recompute",
    )
    assert sorted(p[0] for p in _contractions(after)) == ["func.func", "scf.forall"]
    assert any("intermediates: recompute" in line for line in lines)


def test_shared_producer_is_computed_once_on_the_union_of_its_slices() -> None:
    """relu(x) feeds the padded 3x3 conv (halo slice) and the residual add (tile slice)."""
    _, after, lines = _run(
        "conv_pad_residual.mlir", root=OpCriteria(op="linalg.generic"), tile_sizes=(1, 4, 4, 8)
    )
    relus = [
        parents
        for name, parents, op in _ops(after)
        if name == "linalg.generic" and "arith.maximumf" in str(op)
    ]
    assert relus == [["scf.forall", "func.func", "builtin.module"]]
    names = [name for name, _, _ in _ops(after)]
    assert "scf.if" not in names and "tensor.generate" not in names
    assert sum("fused" in line for line in lines) == 4  # conv, fill, pad, relu


def test_stop_set_ops_stay_outside_at_full_size() -> None:
    _, after, lines = _run(
        "matmul_bias_relu_both.mlir",
        root=OpCriteria(op="linalg.generic"),
        tile_sizes=(8, 8),
        stop=OpCriteria(op="linalg.matmul"),
    )
    assert _contractions(after) == [["func.func", "builtin.module"]]
    assert any("in the stop set" in line for line in lines)


def test_fusion_through_expand_shape_and_multi_result_producer() -> None:
    _, after, _ = _run("reshape_multi_result.mlir", root=TEST_ROOT, tile_sizes=(4, 2, 8))
    ops = _ops(after)
    reshapes = [parents[0] for name, parents, _ in ops if name == "tensor.expand_shape"]
    assert reshapes == ["scf.forall", "scf.forall"]
    multi = [
        parents for name, parents, op in ops if name == "linalg.generic" and len(op.results) == 2
    ]
    assert multi == [["scf.forall", "func.func", "builtin.module"]]


def test_a_unit_then_partial_slice_of_an_expand_shape_is_contiguous_and_fused() -> None:
    # Tiles 4 x 1 x 4 of tensor<16x4x8> (dims 1, 2 split from one source dim of 32): the
    # slice starts at d1*8 + d2 in the source and is 4 long, so it fuses (ByteIR's 1x1xN).
    _, after, lines = _run("reshape_multi_result.mlir", root=TEST_ROOT, tile_sizes=(4, 1, 4))
    reshapes = [parents[0] for name, parents, _ in _ops(after) if name == "tensor.expand_shape"]
    assert reshapes == ["scf.forall", "scf.forall"]
    assert not any("not contiguous" in line for line in lines)


def test_a_slice_cut_along_two_dims_of_a_group_is_refused_with_the_reason() -> None:
    # 2 x 4 of a 4 x 8 group: two rows of 4, with a gap between them in the source.
    _, after, lines = _run("reshape_multi_result.mlir", root=TEST_ROOT, tile_sizes=(4, 2, 4))
    reshapes = [parents[0] for name, parents, _ in _ops(after) if name == "tensor.expand_shape"]
    assert reshapes == ["func.func", "func.func"]
    reason = next(line for line in lines if "not contiguous" in line)
    assert "its slice [2, 4] of result dims [1, 2] (shape [4, 8], split from one source dim)" in (
        reason
    )
    assert "is cut along dim 1 and also along dim 2" in reason


def test_a_partial_tile_of_a_reshape_is_reported_as_the_cause() -> None:
    # Rows tiled by 3 of 16: the last tile is partial, so the slice's size is an
    # affine.min; the slice is contiguous, and the report says what does break it.
    _, after, lines = _run("reshape_multi_result.mlir", root=TEST_ROOT, tile_sizes=(3, 1, 8))
    reshapes = [parents[0] for name, parents, _ in _ops(after) if name == "tensor.expand_shape"]
    assert reshapes == ["func.func", "func.func"]
    reason = next(line for line in lines if "kept outside: tensor.expand_shape" in line)
    assert "the loop's slice of it has a partial last tile: tiles of 3 do not divide result " in (
        reason
    )
    assert "dim 0 (16), so the slice's size is dynamic there" in reason
    assert "not contiguous" not in reason


def test_a_collapse_shape_tiled_in_whole_rows_fuses_and_a_part_row_is_refused() -> None:
    _, after, lines = _run("collapse_rows.mlir", root=TEST_ROOT, tile_sizes=(4, 16))
    negs = [p[0] for name, p, op in _ops(after) if name == "linalg.generic" and "negf" in str(op)]
    assert negs == ["scf.forall"]
    assert any(line.startswith("  fused tensor.collapse_shape") for line in lines)
    _, after, lines = _run("collapse_rows.mlir", root=TEST_ROOT, tile_sizes=(4, 4))
    assert any(
        "is not contiguous in its source: its slice of result dim 1 (size 4) does not cover "
        "whole rows of the 8 elements its source dims [2] hold" in line
        for line in lines
    ), lines


def test_every_used_result_of_a_multi_result_producer_is_yielded_once() -> None:
    # add/sub in one generic: the root reads add (fused), sub is returned. Upstream fusion
    # yields only add; fuse_ext also yields sub from the tile, so the generic runs once.
    before = _payload("two_results_one_returned.mlir")
    after, report = fuse_ext(before, FuseExtOptions(root=TEST_ROOT, tile_sizes=(4, 8)))
    assert check_equivalent(before, after).equivalent
    lines = report.lines()
    assert any("the loop also yields the results of linalg.generic" in s for s in report.scripts)
    multi = [
        parents[0]
        for name, parents, op in _ops(after)
        if name == "linalg.generic" and len(op.results) == 2
    ]
    assert multi == ["scf.forall"]  # only its tile: no full-size copy outside
    forall = next(op for name, _, op in _ops(after) if name == "scf.forall")
    assert "tensor.parallel_insert_slice %5#1" in str(forall)
    assert forall.attributes["tdsched.loop"] == ir.StringAttr.get("parallel", forall.context)
    fused = next(line for line in lines if line.lstrip().startswith("fused"))
    assert fused.endswith("(yielded by the loop nest)")


@pytest.mark.parametrize("loop", ["forall", "for"])
def test_both_results_returned_are_yielded_and_the_loop_keeps_its_label(loop: str) -> None:
    # Upstream yields add by rebuilding the forall (dropping its attributes); fuse_ext
    # yields sub, and the rebuilt loop is labelled again.
    _, after, lines = _run(
        "two_results_both_returned.mlir", root=TEST_ROOT, tile_sizes=(4, 8), loop=loop
    )
    ops = _ops(after)
    multi = [
        parents[0] for name, parents, op in ops if name == "linalg.generic" and len(op.results) == 2
    ]
    assert multi == ["scf.forall" if loop == "forall" else "scf.for"]
    outer = next(
        op for name, parents, op in ops if name == f"scf.{loop}" and parents[0] == "func.func"
    )
    assert len(outer.results) == 3
    assert "parallel" in str(outer.attributes["tdsched.loop"])
    assert any(line.endswith("(yielded by the loop nest)") for line in lines)


@pytest.mark.parametrize("payload", ["elementwise_returned.mlir", "two_results_both_returned.mlir"])
def test_recompute_keeps_a_generic_producer_in_full_outside_as_reported(payload: str) -> None:
    # Upstream fusion would yield a generic used after the loop; with recompute it stays
    # outside in full (the report's "kept outside" is true) and the loop yields the root.
    _, after, lines = _run(payload, root=TEST_ROOT, tile_sizes=(4, 8), intermediates="recompute")
    ops = _ops(after)
    producers = [
        p[0]
        for name, p, op in ops
        if name == "linalg.generic" and "tdsched.test_root" not in op.attributes
    ]
    assert sorted(producers) == ["func.func", "scf.forall"]
    forall = next(op for name, _, op in ops if name == "scf.forall")
    assert len(forall.results) == 1
    assert any("intermediates: recompute" in line for line in lines)


def test_several_roots_share_one_loop_nest_and_the_shared_producer() -> None:
    _, after, _ = _run("diamond_two_roots.mlir", root=TEST_ROOT, tile_sizes=(8, 16))
    ops = _ops(after)
    assert [name for name, _, _ in ops].count("scf.forall") == 1
    exps = [parents for name, parents, op in ops if name == "linalg.generic" and "exp" in str(op)]
    assert exps == [["scf.forall", "func.func", "builtin.module"]]


def test_loop_for_gives_an_scf_for_nest_in_interchange_order() -> None:
    _, after, _ = _run(
        "matmul_bias_relu_both.mlir",
        root=OpCriteria(op="linalg.generic"),
        tile_sizes=(8, 8),
        interchange=(1, 0),
        loop="for",
    )
    names = [name for name, _, _ in _ops(after)]
    assert "scf.forall" not in names and names.count("scf.for") == 2
    (matmul,) = _contractions(after)
    assert matmul[:2] == ["scf.for", "scf.for"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"root": OpCriteria(op="linalg.matmul"), "tile_sizes": (8, 8, 4, 2)},
            r"4 tile_sizes for root linalg.matmul at .*, which has 3 loops \(parallel, "
            r"parallel, reduction\); give at most one per loop",
        ),
        (
            {"root": OpCriteria(op="linalg.matmul"), "tile_nums": (2, -1)},
            r"tile_nums must be >= 0, got \[2, -1\]",
        ),
        (
            {"root": OpCriteria(op="linalg.matmul"), "tile_sizes": (8,), "tile_nums": (2,)},
            "give one of tile_sizes",
        ),
        (
            {"root": OpCriteria(op="linalg.conv_2d_nhwc_hwcf"), "tile_sizes": (8,)},
            "the root match selected no op",
        ),
        (
            {"root": OpCriteria(op="linalg.matmul"), "tile_sizes": (0, 0, 0)},
            r"no loop of root linalg.matmul at .* is tiled \(sizes \[0, 0, 0\]",
        ),
        (
            {
                "root": OpCriteria(op="linalg.matmul"),
                "tile_sizes": (8, 8, 4),
                "interchange": (0, 2, 1),
            },
            r"orders the tiled loops of root linalg.matmul at .* as 0 \(parallel\), 2 "
            r"\(reduction\), 1 \(parallel\); the tiled loops must be the parallel ones then",
        ),
        (
            {
                "root": OpCriteria(op="linalg.matmul"),
                "tile_sizes": (8, 8, 4),
                "interchange": (1, 0, 2),
            },
            r"reorders the parallel loops \[1, 0\] .* an scf.forall has no order among its "
            "dims .*use loop: for",
        ),
    ],
)
def test_precondition_errors_name_the_op_and_the_reason(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(FuseExtError, match=message):
        fuse_ext(_payload("matmul_bias_relu_both.mlir"), FuseExtOptions(**options))  # type: ignore[arg-type]


def test_reduction_only_tiling_fuses_input_producers_into_the_reduction_loop() -> None:
    """ByteIR's producer-into-reduction-loop form: the first matmul (and relu, and its own
    fill) is computed per k-tile of the second; the second's fill stays before the loop."""
    _, after, lines = _run("matmul_chain_k.mlir", root=TEST_ROOT, tile_sizes=(0, 0, 8))
    ops = _ops(after)
    top = [name for name, parents, _ in ops if parents == ["func.func", "builtin.module"]]
    assert [n for n in top if n.startswith(("linalg.", "scf."))] == ["linalg.fill", "scf.for"]
    in_loop = [name for name, parents, _ in ops if parents[:1] == ["scf.for"]]
    assert [n for n in in_loop if n.startswith("linalg.")] == [
        "linalg.fill",
        "linalg.generic",
        "linalg.matmul",
        "linalg.matmul",
    ]
    assert "to %c32 step %c8 iter_args(" in after  # the K of 32, 8 at a time
    assert lines[1:4] == [
        '  fused linalg.matmul at loc("-":15:9)',
        '  fused linalg.fill at loc("-":14:9)',
        '  fused linalg.generic at loc("-":8:9) (recomputed whole in every step of the '
        "reduction loop, which does not slice it; put it in stop to compute it once before "
        "the loop)",
    ]
    assert lines[4] == (
        '  kept outside: linalg.fill at loc("-":17:9): the accumulator\'s initializer: it '
        "stays before the reduction loop, which carries its value"
    )


_CHAIN_RETURNING_THE_FIRST_MATMUL = (
    _payload("matmul_chain_k.mlir")
    .replace(
        "return %m2 : tensor<16x20xf32>",
        "return %m2, %m1 : tensor<16x20xf32>, tensor<16x32xf32>",
    )
    .replace("-> tensor<16x20xf32> {", "-> (tensor<16x20xf32>, tensor<16x32xf32>) {")
)


@pytest.mark.parametrize(
    ("tiles", "nest"),
    [
        ({"tile_sizes": (0, 0, 8)}, ["scf.for"]),  # (f): reduction loops only
        ({"tile_sizes": (8, 10, 8), "interchange": (2, 0, 1)}, ["scf.forall", "scf.for"]),  # (g)
        (
            {"tile_sizes": (8, 10, 8), "interchange": (2, 0, 1), "loop": "for"},
            ["scf.for", "scf.for", "scf.for"],
        ),
    ],
)
def test_reduction_outer_loops_compute_an_intermediate_used_after_them_in_full_as_well(
    tiles: dict[str, object], nest: list[str]
) -> None:
    """The first matmul is also returned: the reduction loop (with or without parallel
    loops inside it) yields only the root, so the first matmul and its fill are also
    computed in full before it, and each fused line says so and why. With the reductions
    outermost this was a raw "could not find next producer to fuse" error: the full-size
    copy, numbered like the tile in the loop, was picked for fusion too."""
    before = _CHAIN_RETURNING_THE_FIRST_MATMUL
    after, report = fuse_ext(before, FuseExtOptions(root=TEST_ROOT, **tiles))  # type: ignore[arg-type]
    assert check_equivalent(before, after).equivalent
    matmuls = [parents[: len(nest)] for name, parents, _ in _ops(after) if name == "linalg.matmul"]
    assert sorted(matmuls) == sorted([["func.func", "builtin.module"][: len(nest)], nest, nest])
    lines = report.lines()
    assert lines[1] == (
        '  fused linalg.matmul at loc("-":15:9) (and also computed in full outside the loop '
        "nest, so this op runs twice: its result is used after the reduction loop, which "
        "yields only the root; parallel loops outside it would yield it)"
    )
    assert lines[2] == (
        '  fused linalg.fill at loc("-":14:9) (and also computed in full outside the loop '
        'nest, so this op runs twice: the full-size linalg.matmul at loc("-":15:9) outside '
        "reads it)"
    )
    assert not any(
        "multi-result" in line or "kept outside: linalg.matmul" in line for line in lines
    )


def test_short_tile_size_lists_leave_the_trailing_loops_untiled() -> None:
    root = OpCriteria(op="linalg.matmul")
    _, short, _ = _run("matmul_bias_relu_both.mlir", root=root, tile_sizes=(8, 8))
    _, full, _ = _run("matmul_bias_relu_both.mlir", root=root, tile_sizes=(8, 8, 0))
    assert short == full
    (matmul,) = _contractions(short)
    assert matmul[0] == "scf.forall"  # no reduction loop: K is not tiled


@pytest.mark.parametrize(
    ("nums", "sizes"),
    [((4, 5, 6), (8, 8, 4)), ((3, 1), (11, 40)), ((0, 2), (0, 20))],
)
def test_tile_nums_divide_each_static_range_rounding_up(
    nums: tuple[int, ...], sizes: tuple[int, ...]
) -> None:
    """The matmul is 32 x 40 x 24: 3 tiles of 32 rows are 11 wide (the last one 10)."""
    root = OpCriteria(op="linalg.matmul")
    _, by_nums, _ = _run("matmul_bias_relu_both.mlir", root=root, tile_nums=nums)
    _, by_sizes, _ = _run("matmul_bias_relu_both.mlir", root=root, tile_sizes=sizes)
    assert by_nums == by_sizes


def test_tile_nums_follow_the_interchanged_loop_order() -> None:
    """As in ByteIR's tile_with_interchange test: with interchange [1, 0, 2] the first
    number is the outer loop's, over N (40: 4 tiles of 10), the second M's (32: 5 of 7)."""
    root = OpCriteria(op="linalg.matmul")
    common = {"root": root, "interchange": (1, 0, 2), "loop": "for"}
    _, by_nums, _ = _run("matmul_bias_relu_both.mlir", tile_nums=(4, 5), **common)
    _, by_sizes, _ = _run("matmul_bias_relu_both.mlir", tile_sizes=(7, 10), **common)
    assert by_nums == by_sizes
    (outer,) = [op for name, p, op in _ops(by_nums) if name == "scf.for" and p[0] == "func.func"]
    assert "to %c4 step %c1" in str(outer).splitlines()[0]


_DYNAMIC_ROWS = """
func.func @f(%a: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%n) : tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x16xf32>) outs(%e : tensor<?x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.mulf %v, %v : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}
"""


def test_tile_nums_need_static_loop_ranges() -> None:
    options = FuseExtOptions(root=OpCriteria(op="linalg.generic"), tile_nums=(4, 2))
    with pytest.raises(FuseExtError, match=r"loop ranges are not all static; give tile_sizes"):
        fuse_ext(_DYNAMIC_ROWS, options)


def test_loop_for_on_dynamic_shapes_is_refused_as_the_docs_list() -> None:
    options = FuseExtOptions(root=OpCriteria(op="linalg.generic"), tile_sizes=(4, 8), loop="for")
    with pytest.raises(
        FuseExtError, match=r"static tile counts, .*dynamic bounds.*use loop: forall"
    ):
        fuse_ext(_DYNAMIC_ROWS, options)
    refusals = (Path(__file__).parents[1] / "docs/primitives/fuse_ext.md").read_text()
    refusals = refusals.split("Preconditions that fail are errors")[1].split("## Limitations")[0]
    assert "* `loop: for` where the tiled parallel loops have dynamic bounds" in refusals


_TWO_SPACES = """
func.func @f(%x: tensor<8x8xf32>, %y: tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) {
  %e2 = tensor.empty() : tensor<8x8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {tdsched.test_root, indexing_maps = [affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e2 : tensor<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32>
  %b = linalg.generic {tdsched.test_root, indexing_maps = [affine_map<(i) -> (i)>,
      affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  return %a, %b : tensor<8x8xf32>, tensor<8xf32>
}
"""


def test_roots_with_different_loops_are_refused() -> None:
    with pytest.raises(FuseExtError, match="do not share one iteration space"):
        fuse_ext(_TWO_SPACES, FuseExtOptions(root=TEST_ROOT, tile_sizes=(4, 4)))


def test_a_kernel_fuse_ext_must_tile_a_parallel_loop() -> None:
    """Inside IREE the parallel forall forms the workgroups: reduction-only is payload-only."""
    from tdsched.transform_lib.fuse_ext.plan import FusionPlan, PayloadOp, split_tile_sizes

    matmul = PayloadOp(0, "linalg.matmul", "loc(here)")
    plan = FusionPlan((matmul,), ("parallel", "parallel", "reduction"), (), (), (), ())
    with pytest.raises(FuseExtError, match="in a kernel schedule fuse_ext's parallel loops form"):
        split_tile_sizes(plan, [0, 0, 8], None)
    assert split_tile_sizes(plan, [0, 0, 8], None, payload=True) == (
        [0, 0, 0],
        [0, 0, 8],
        [0, 1, 2],
        False,
    )
    with pytest.raises(FuseExtError, match="in a kernel the parallel forall forms the workgroups"):
        split_tile_sizes(plan, [8, 8, 8], [2, 0, 1])
    assert split_tile_sizes(plan, [8, 8, 8], [2, 0, 1], payload=True).reductions_outside


@pytest.mark.parametrize("loop", ["forall", "for"])
def test_every_loop_fuse_ext_makes_is_labelled_parallel_or_reduction(loop: str) -> None:
    _, after, _ = _run(
        "matmul_bias_relu_both.mlir",
        root=OpCriteria(op="linalg.matmul"),
        tile_sizes=(8, 8, 4),
        loop=loop,
    )
    labels = {
        (name, str(op.attributes["tdsched.loop"]))
        for name, _, op in _ops(after)
        if name in ("scf.for", "scf.forall")
    }
    parallel = "scf.forall" if loop == "forall" else "scf.for"
    assert labels == {("scf.for", '"reduction"'), (parallel, '"parallel"')}
    _, after, _ = _run("matmul_chain_k.mlir", root=TEST_ROOT, tile_sizes=(0, 0, 8))
    (k_loop,) = [op for name, _, op in _ops(after) if name == "scf.for"]
    assert str(k_loop.attributes["tdsched.loop"]) == '"reduction"'


@pytest.mark.parametrize("loop", ["forall", "for"])
def test_interchange_puts_the_reduction_loop_outside_the_parallel_nest(loop: str) -> None:
    """ByteIR's reduction-outermost interchange: the k-loop carries the accumulator (its
    fill stays before it), and inside it the parallel nest computes, per (k, i, j) tile,
    the relu and the first matmul slice that the second matmul reads."""
    _, after, lines = _run(
        "matmul_chain_k.mlir",
        root=TEST_ROOT,
        tile_sizes=(8, 10, 8),
        interchange=(2, 0, 1),
        loop=loop,
    )
    ops = _ops(after)
    top = [name for name, parents, _ in ops if parents == ["func.func", "builtin.module"]]
    assert [n for n in top if n.startswith(("linalg.", "scf."))] == ["linalg.fill", "scf.for"]
    nest = ["scf.forall"] if loop == "forall" else ["scf.for", "scf.for"]
    inner = [*nest, "scf.for", "func.func", "builtin.module"]
    computed = [name for name, parents, _ in ops if name.startswith("linalg.") and parents == inner]
    assert computed == ["linalg.generic", "linalg.fill", "linalg.matmul", "linalg.matmul"]
    labels = [
        str(op.attributes["tdsched.loop"])
        for name, _, op in ops
        if name in ("scf.for", "scf.forall")
    ]
    assert labels == [*['"parallel"'] * len(nest), '"reduction"']  # innermost first
    assert lines[-2].startswith("  kept outside: linalg.fill") and "initializer" in lines[-2]


def test_tile_ext_tiles_the_root_alone_with_its_initializer_outside() -> None:
    """tile_ext: the same loops as fuse_ext (reductions around the root inside the
    parallel nest), nothing fused: the fill and the producers stay at full size."""
    _, after, lines = _run(
        "matmul_chain_k.mlir", root=TEST_ROOT, tile_sizes=(8, 10, 8), primitive="tile_ext"
    )
    ops = _ops(after)
    inner = ["scf.for", "scf.forall", "func.func", "builtin.module"]
    assert [n for n, parents, _ in ops if n.startswith("linalg.") and parents == inner] == [
        "linalg.matmul"
    ]
    top = [n for n, p, _ in ops if p == ["func.func", "builtin.module"] and n.startswith("linalg")]
    assert top == ["linalg.generic", "linalg.fill", "linalg.matmul", "linalg.fill"]
    assert lines[0].startswith("tile_ext: tiled 1 root(s): linalg.matmul")
    assert not any("fused" in line for line in lines)


def test_tile_ext_refuses_roots_that_feed_each_other() -> None:
    with pytest.raises(FuseExtError, match=r"^tile_ext: root linalg.matmul .* feeds root"):
        fuse_ext(
            _payload("matmul_chain_k.mlir"),
            FuseExtOptions(
                root=OpCriteria(op="linalg.matmul"), tile_sizes=(8, 10), primitive="tile_ext"
            ),
        )


def test_fuse_operands_takes_the_returned_values_ops_as_roots() -> None:
    # The diamond: both returned generics become roots of one nest, exp fused once.
    _, after, lines = _run(
        "diamond_two_roots.mlir", root=None, tile_sizes=(8, 16), primitive="fuse_operands"
    )
    ops = _ops(after)
    assert [name for name, _, _ in ops].count("scf.forall") == 1
    generics = [p[0] for name, p, _ in ops if name == "linalg.generic"]
    assert generics == ["scf.forall"] * 3
    assert lines[0].startswith("fuse_operands: tiled 2 root(s)")


_RETURNS_A_RESHAPE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<16x4x8xf32>) {
  %e = tensor.empty() : tensor<16x32xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %r = tensor.expand_shape %n [[0], [1, 2]] output_shape [16, 4, 8]
      : tensor<16x32xf32> into tensor<16x4x8xf32>
  return %n, %r : tensor<16x32xf32>, tensor<16x4x8xf32>
}
"""


def test_fuse_operands_names_a_returned_value_that_no_linalg_op_computes() -> None:
    with pytest.raises(
        FuseExtError,
        match=r"^fuse_operands: returned value #1 comes from tensor.expand_shape at .*not "
        "from a linalg op",
    ):
        fuse_ext(
            _RETURNS_A_RESHAPE,
            FuseExtOptions(root=None, tile_sizes=(4,), primitive="fuse_operands"),
        )
