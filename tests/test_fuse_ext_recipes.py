"""fuse_ext in recipes: graph level (numpy IR evaluation), kernel level on x86 and Vulkan
(real IREE, real runtime, checked against numpy), cross-layer dispatch regions, and the
errors recipe authors see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.cli.main import main
from tdsched.schedules.compile.pipeline import build, plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, generator
from tdsched.schedules.measure.run_report import run

MBR_SMALL = {"M": 256, "N": 256, "K": 256}


def _ok(report: dict[str, object]) -> None:
    assert report.status == "ok", report
    assert isinstance(report.max_abs_error, float) and report.max_abs_error < 1e-3


def _graph_recipe(tmp_path: Path, step: str) -> Path:
    path = tmp_path / "graph_fuse.yaml"
    path.write_text(
        "name: graph_fuse\n"
        "workload: {generator: matmul_bias_relu, args: {M: 32, N: 48, K: 24}}\n"
        "targets: [x86]\n"
        f"graph:\n  - {step}\n"
    )
    return path


def test_graph_level_fuse_ext_is_checked_by_the_numpy_evaluator(tmp_path: Path) -> None:
    step = "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16], loop: for}"
    report = run(plan(load(str(_graph_recipe(tmp_path, step)))), time_it=False)
    _ok(report)
    assert "numpy IR evaluator" in str(report.evaluated_by)
    assert report.time_ms is None


@pytest.mark.parametrize(
    "step",
    [
        "fuse_ext: {root: {op: linalg.matmul}, tile_sizes: [0, 0, 8]}",
        "fuse_ext: {root: {op: linalg.matmul}, tile_nums: [2, 3]}",
        "fuse_ext: {root: {op: linalg.matmul}, tile_sizes: [8, 16, 8], interchange: [2, 0, 1]}",
        "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16], interchange: [1, 0], "
        "loop: for}",
    ],
)
def test_graph_fuse_ext_forms_are_checked_by_the_numpy_evaluator(tmp_path: Path, step: str) -> None:
    report = run(plan(load(str(_graph_recipe(tmp_path, step)))), time_it=False)
    _ok(report)


def test_apply_prints_what_graph_level_fuse_ext_fused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    step = "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16]}"
    assert main(["apply", str(_graph_recipe(tmp_path, step))]) == 0
    out = capsys.readouterr().out
    assert "// fuse_ext: tiled 1 root(s): linalg.generic" in out
    assert "//   fused linalg.matmul" in out and "//   fused linalg.fill" in out
    assert "scf.forall" in out


def test_show_lists_the_loop_for_rewrite_after_the_forall_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """loop: for tiles with a forall script, then rewrites it: show says both, in order."""
    step = "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16], interchange: [1, 0], loop: for}"
    assert main(["show", str(_graph_recipe(tmp_path, step))]) == 0
    out = capsys.readouterr().out
    forall = out.index("transform.structured.tile_using_forall")
    rewrite = out.index(
        "// fuse_ext: loop: for: the scf.forall became an scf.for nest over loops [1, 0]"
    )
    assert forall < rewrite


def test_graph_level_fuse_ext_refuses_to_compile(tmp_path: Path) -> None:
    step = "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16]}"
    p = plan(load(str(_graph_recipe(tmp_path, step))))
    from tdsched.schedules.compile.pipeline import compile_plan

    files = build(p, tmp_path / "out")
    with pytest.raises(RecipeError, match="host-level loops, which IREE cannot compile"):
        compile_plan(p, files, tmp_path / "x.vmfb")


@pytest.mark.usefixtures("iree")
def test_kernel_fuse_ext_x86_matches_numpy() -> None:
    _ok(run(plan(load("matmul_bias_relu_fuse_ext_x86"), None, MBR_SMALL), time_it=False))


def test_kernel_fuse_ext_vulkan_matches_numpy(vulkan: None) -> None:
    _ok(run(plan(load("matmul_bias_relu_fuse_ext_vulkan"), None, MBR_SMALL), time_it=False))


@pytest.mark.usefixtures("iree")
def test_kernel_fuse_ext_strategy_fuses_by_position_not_attribute(tmp_path: Path) -> None:
    """The final strategy picks ops by name and position, read from the probe."""
    files = build(plan(load("matmul_bias_relu_fuse_ext_x86"), None, MBR_SMALL), tmp_path)
    assert files.kernel_library is not None
    library = files.kernel_library.read_text()
    assert "transform.split_handle" in library
    assert library.count("transform.structured.fuse_into_containing_op") == 2
    assert "populate_workgroup_count_region_using_num_threads_slice" in library
    assert any("fused linalg.matmul" in r for r in files.reports)


def test_kernel_fuse_ext_tile_nums_build_the_tile_sizes_strategy(
    target: str, tmp_path: Path
) -> None:
    """tile_nums inside IREE: 256 / TM and 256 / TN tiles are the shipped recipe's
    tile_sizes (x86 64 x 128, Vulkan 32 x 64), so the strategy is the same, and it runs
    right on the target."""
    shipped = Path(load(f"matmul_bias_relu_fuse_ext_{target}").source)
    nums = {"x86": "[4, 2]", "vulkan": "[8, 4]"}[target]
    by_nums = tmp_path / "by_nums.yaml"
    by_nums.write_text(
        shipped.read_text().replace('tile_sizes: ["${TM}", "${TN}"]', f"tile_nums: {nums}")
    )
    p_sizes = plan(load(str(shipped)), None, MBR_SMALL)
    p_nums = plan(load(str(by_nums)), None, MBR_SMALL)
    sizes_files = build(p_sizes, tmp_path / "sizes")
    nums_files = build(p_nums, tmp_path / "nums")
    assert sizes_files.kernel_library is not None and nums_files.kernel_library is not None
    nums_text = nums_files.kernel_library.read_text().replace(str(by_nums), "RECIPE")
    assert nums_text == sizes_files.kernel_library.read_text().replace(str(shipped), "RECIPE")
    _ok(run(p_nums, time_it=False))


def test_resnet_block_recipes_match_numpy(target: str) -> None:
    _ok(run(plan(load(f"resnet_block_{target}")), time_it=False))


@pytest.mark.usefixtures("iree")
def test_resnet_block_x86_expand_kernel_matches_by_computed_shape(tmp_path: Path) -> None:
    """The expand kernel's match is computed from the block's size (``${H * W}``
    pixels): at a shape outside the table it applies, with its epilogue, correctly."""
    params = {"H": 8, "W": 8, "C": 64, "M": 32, "WH": 2, "RW": 4, "RF": 16, "TC": 8}
    params |= {"EXPAND": "schedule", "EP": 16, "EC": 32}
    p = plan(load("resnet_block_x86"), "x86", params)
    files = build(p, tmp_path)
    assert files.kernel_library is not None
    assert "@tdsched_strategy_conv1x1_expand(" in files.kernel_library.read_text()
    _ok(run(p, time_it=False))


@pytest.mark.usefixtures("iree")
def test_cross_layer_region_compiles_one_dispatch(tmp_path: Path) -> None:
    p = plan(load("matmul_chain_cross_layer_x86"), None, {"M": 64, "N": 96, "K": 32, "P": 128})
    files = build(p, tmp_path)
    module = files.input_file.read_text()
    assert module.count("flow.dispatch.region") == 1
    assert any("grouped 4 ops into one dispatch region" in r for r in files.reports)
    _ok(run(p, time_it=False))


@pytest.mark.usefixtures("iree")
def test_per_layer_chain_matches_numpy() -> None:
    p = plan(load("matmul_chain_x86"), None, {"M": 64, "N": 64, "K": 64, "P": 64})
    _ok(run(p, time_it=False))


def _kernel(**fuse: object) -> RecipeBuilder:
    r = RecipeBuilder("k", workload=generator("matmul", M=64, N=64, K=64))
    k = r.kernel("mm", match=Match(kind="contraction"))
    k.fuse_ext(None, [16, 16, 0], **fuse)  # type: ignore[arg-type]
    k.vectorize()
    return r


def test_kernel_fuse_ext_needs_forall() -> None:
    with pytest.raises(RecipeError, match="loop must be forall"):
        plan(_kernel(loop="for").build())


def test_one_fuse_ext_per_kernel() -> None:
    r = RecipeBuilder("k", workload=generator("matmul", M=64, N=64, K=64))
    k = r.kernel("mm", match=Match(kind="contraction"))
    k.fuse_ext(None, [16, 16, 0])
    k.fuse_ext(None, [8, 8, 0])
    with pytest.raises(RecipeError, match="takes one fuse_ext step"):
        plan(r.build())


def test_graph_fuse_ext_needs_a_root(tmp_path: Path) -> None:
    path = _graph_recipe(tmp_path, "fuse_ext: {tile_sizes: [8, 16]}")
    with pytest.raises(
        RecipeError, match=r"graph_fuse.yaml:5: graph\[0\]\.fuse_ext: .*needs 'root'"
    ):
        plan(load(str(path)))


def test_fuse_ext_yaml_field_errors_name_the_line(tmp_path: Path) -> None:
    path = _graph_recipe(
        tmp_path, "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16], loop: while}"
    )
    with pytest.raises(RecipeError, match=r"graph_fuse.yaml:5: .*loop.*'while'"):
        load(str(path))


def test_fuse_ext_tile_size_mismatch_is_reported_at_the_step(tmp_path: Path) -> None:
    path = _graph_recipe(tmp_path, "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16, 4]}")
    with pytest.raises(RecipeError, match=r"graph_fuse.yaml:5: .*3 tile_sizes for root"):
        build(plan(load(str(path))), tmp_path / "out")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("tile_sizes: [8, 16], tile_nums: [2, 2]", "not both"),
        ("stop: {op: linalg.matmul}", "got neither"),
    ],
)
def test_fuse_ext_takes_tile_sizes_or_tile_nums(tmp_path: Path, options: str, message: str) -> None:
    path = _graph_recipe(tmp_path, f"fuse_ext: {{root: {{op: linalg.generic}}, {options}}}")
    with pytest.raises(
        RecipeError,
        match=rf"graph_fuse.yaml:5: graph\[0\]\.fuse_ext: fuse_ext needs one of 'tile_sizes'.*{message}",
    ):
        load(str(path))


def test_yaml_and_python_fuse_ext_steps_emit_the_same_graph(tmp_path: Path) -> None:
    path = _graph_recipe(
        tmp_path,
        "fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 16], stop: {op: linalg.fill}}",
    )
    r = RecipeBuilder("graph_fuse", workload=generator("matmul_bias_relu", M=32, N=48, K=24))
    r.graph.fuse_ext(Match(op="linalg.generic"), [8, 16], stop=Match(op="linalg.fill"))
    from_yaml = build(plan(load(str(path))), tmp_path / "yaml")
    from_python = build(plan(r.build()), tmp_path / "py")
    assert from_yaml.input_file.read_text() == from_python.input_file.read_text()
    assert "linalg.fill" in from_yaml.input_file.read_text().split("scf.forall")[0]


@pytest.mark.parametrize(
    ("step", "build_it"),
    [
        (
            "tile_ext: {root: {op: linalg.matmul}, tile_sizes: [8, 16, 8]}",
            lambda g: g.tile_ext(Match(op="linalg.matmul"), [8, 16, 8]),
        ),
        (
            "fuse_operands: {tile_nums: [4, 3], loop: for}",
            lambda g: g.fuse_operands(tile_nums=[4, 3], loop="for"),
        ),
    ],
)
def test_tile_ext_and_fuse_operands_from_yaml_and_python_match_numpy(
    tmp_path: Path, step: str, build_it: object
) -> None:
    path = _graph_recipe(tmp_path, step)
    r = RecipeBuilder("graph_fuse", workload=generator("matmul_bias_relu", M=32, N=48, K=24))
    build_it(r.graph)  # type: ignore[operator]
    from_yaml = build(plan(load(str(path))), tmp_path / "yaml")
    from_python = build(plan(r.build()), tmp_path / "py")
    assert from_yaml.input_file.read_text() == from_python.input_file.read_text()
    primitive = step.split(":")[0]
    assert from_yaml.reports[0].startswith(f"{primitive}: tiled 1 root(s)")
    report = run(plan(load(str(path))), time_it=False)
    _ok(report)
    assert "numpy IR evaluator" in str(report.evaluated_by)


@pytest.mark.parametrize("primitive", ["tile_ext", "fuse_operands"])
def test_tile_ext_and_fuse_operands_are_graph_steps(tmp_path: Path, primitive: str) -> None:
    root = "root: {op: linalg.matmul}, " if primitive == "tile_ext" else ""
    path = tmp_path / "k.yaml"
    path.write_text(
        "name: k\n"
        "workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}\n"
        "targets: [x86]\n"
        "kernels:\n"
        "  - name: mm\n"
        "    match: {op: linalg.matmul}\n"
        "    schedule:\n"
        f"      - {primitive}: {{{root}tile_sizes: [8, 8]}}\n"
    )
    with pytest.raises(RecipeError, match=rf"k.yaml:8: .*{primitive}.*put it under 'graph'"):
        load(str(path))


def test_dispatch_region_keeps_stopped_ops_outside(tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(
        "name: chain\n"
        "workload: {generator: matmul_chain, args: {M: 16, N: 16, K: 16, P: 16}}\n"
        "targets: [x86]\n"
        "graph:\n"
        "  - dispatch_region: {root: {op: linalg.matmul}, stop: {op: linalg.fill}}\n"
    )
    p = plan(load(str(path)))
    files = build(p, tmp_path / "out")
    text = files.input_file.read_text()
    # Both fills stay outside (stop), both matmuls are grouped into one region.
    assert text.count("flow.dispatch.region") == 1
    region = text.split("flow.dispatch.region")[1]
    assert (
        region.count("linalg.matmul") == 2 and "linalg.fill" not in region.split("flow.return")[0]
    )


_USER_INSIDE_GROUP = """
func.func @f(%a: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32>
  %copy = tensor.insert_slice %neg into %e[0, 0] [8, 8] [1, 1] : tensor<8x8xf32> into tensor<8x8xf32>
  %exp = linalg.generic {tdsched.region_root, indexing_maps = [affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%neg : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %x = math.exp %v : f32
    linalg.yield %x : f32
  } -> tensor<8x8xf32>
  return %exp, %copy : tensor<8x8xf32>, tensor<8x8xf32>
}
"""


def test_dispatch_region_refuses_a_user_before_the_end_of_the_group() -> None:
    from tdsched.transform_lib.dispatch_region import form_dispatch_region
    from tdsched.transform_lib.fuse_ext import FuseExtError
    from tdsched.transform_lib.match import OpCriteria

    with pytest.raises(FuseExtError, match=r"tensor.insert_slice at .* uses linalg.generic"):
        form_dispatch_region(
            _USER_INSIDE_GROUP, OpCriteria(attributes=(("tdsched.region_root", None),))
        )


_PAD_BETWEEN = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @parts(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x10xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1 : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %p = tensor.pad %r1 low[1, 0] high[1, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<8x8xf32> to tensor<10x8xf32>
  %ef = tensor.empty() : tensor<8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%ef : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m2 = linalg.matmul ins(%c, %p : tensor<8x10xf32>, tensor<10x8xf32>) outs(%f2 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2 : tensor<8x8xf32>) outs(%ef : tensor<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  return %r2 : tensor<8x8xf32>
}
"""


def test_dispatch_region_makes_a_region_of_each_part_the_stop_set_separates() -> None:
    """The generics are both roots; the pad between them is in the stop set, so the
    grouped ops form two parts, each a region of its own (before, grouping them as one
    was refused: the pad sat inside the group)."""
    from tdsched.transform_lib.dispatch_region import form_dispatch_region
    from tdsched.transform_lib.match import OpCriteria

    module, report = form_dispatch_region(
        _PAD_BETWEEN, OpCriteria("linalg.generic"), OpCriteria("tensor.pad")
    )
    assert module.count("flow.dispatch.region") == 2
    lines = report.lines()
    heads = [line for line in lines if line.startswith("dispatch_region:")]
    assert heads == [
        "dispatch_region: grouped 3 ops into one dispatch region (1 result(s))",
        "dispatch_region: grouped 3 ops into one dispatch region (1 result(s))",
    ]
    # the pad sits between the two regions, outside both
    first, pad, second = (
        module.index("flow.dispatch.region"),
        module.index("tensor.pad"),
        module.rindex("flow.dispatch.region"),
    )
    assert first < pad < second


def test_dispatch_region_selects_its_root_by_loop_bounds() -> None:
    """Both generics are 8x8; the root chosen by shape and used_by (the one whose result
    is returned) is the second: only its part becomes a region."""
    from tdsched.transform_lib.dispatch_region import form_dispatch_region
    from tdsched.transform_lib.match import OpCriteria

    root = OpCriteria("linalg.generic", shape=(8, 8), used_by="func.return")
    module, report = form_dispatch_region(_PAD_BETWEEN, root, OpCriteria("tensor.pad"))
    assert module.count("flow.dispatch.region") == 1
    (head, *ops) = report.lines()
    assert head == "dispatch_region: grouped 3 ops into one dispatch region (1 result(s))"
    assert [op.split()[0] for op in ops] == ["linalg.fill", "linalg.matmul", "linalg.generic"]
    assert module.index("tensor.pad") < module.index("flow.dispatch.region")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"op": "linalg.generic", "shape": [8, 8], "attributes": {"a": 1}}, "not both at once"),
        ({"shape": [8, 8]}, "give at least one of 'op', 'kind'"),
    ],
)
def test_dispatch_region_refuses_mixed_or_nameless_kernel_selections(
    tmp_path: Path, spec: dict[str, object], message: str
) -> None:
    (tmp_path / "m.mlir").write_text(_PAD_BETWEEN)
    recipe = tmp_path / "r.yaml"
    root = json.dumps(spec)
    recipe.write_text(
        f"name: r\nworkload: {{file: m.mlir}}\ntargets: [x86]\n"
        f"graph:\n  - dispatch_region: {{root: {root}}}\n"
    )
    with pytest.raises(RecipeError, match=message) as error:
        plan(load(str(recipe)))
    assert "r.yaml:5" in str(error.value) and "dispatch_region.root" in str(error.value)


_TWO_MATMULS = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @two(%a: tensor<64x32xf32>, %b: tensor<32x64xf32>, %c: tensor<64x32xf32>,
               %bias: tensor<64xf32>, %res: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1, %bias : tensor<64x64xf32>, tensor<64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%x: f32, %bb: f32, %o: f32):
    %s = arith.addf %x, %bb : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<64x64xf32>
  %m2 = linalg.matmul ins(%c, %b : tensor<64x32xf32>, tensor<32x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2, %bias, %res : tensor<64x64xf32>, tensor<64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%x: f32, %bb: f32, %rr: f32, %o: f32):
    %s = arith.addf %x, %bb : f32
    %t = arith.addf %s, %rr : f32
    %r = arith.maximumf %t, %zero : f32
    linalg.yield %r : f32
  } -> tensor<64x64xf32>
  return %y1, %y2 : tensor<64x64xf32>, tensor<64x64xf32>
}
"""


def test_one_kernel_fuse_ext_takes_dispatches_that_differ_only_in_epilogue_reads(
    target: str, tmp_path: Path
) -> None:
    """Two matmul dispatches, the second adding a residual in its epilogue: it loads one
    more operand, so its ops are numbered differently, but fuse_ext fuses both the same
    way, and one kernel schedule serves both."""
    (tmp_path / "two.mlir").write_text(_TWO_MATMULS)
    recipe = tmp_path / "two.yaml"
    recipe.write_text(
        f"name: two\nworkload: {{file: two.mlir}}\ntargets: [{target}]\n"
        "kernels:\n  - name: mm\n"
        # On Vulkan the matmul is a linalg.generic by the time kernels are matched.
        f"    match: {{{'kind: contraction' if target == 'vulkan' else 'op: linalg.matmul'}"
        ", shape: [64, 64, 32]}\n"
        + ("    workgroup_size: [4, 4, 1]\n" if target == "vulkan" else "")
        + "    schedule:\n"
        "      - fuse_ext: {root: {op: linalg.generic}, tile_sizes: [16, 32]}\n"
        "      - producer: {of: root, operand: 0, as: matmul}\n"
        + (
            "      - tile: {sizes: [4, 8], loop: forall, mapping: thread, loops: threads}\n"
            "      - fuse_into: {producer: matmul, loop: threads}\n"
            if target == "vulkan"
            else "      - tile: {target: matmul, sizes: [4, 16, 0]}\n"
        )
        + "      - cleanup: {}\n      - vectorize: {}\n"
    )
    report = run(plan(load(str(recipe))), time_it=False)
    _ok(report)  # before plans were compared by position, this was an error
