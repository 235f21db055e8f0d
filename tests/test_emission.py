"""Script emission: front-end equivalence, parsing with iree-opt, precondition errors."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.emit import ScriptStage
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.python_api import Match, P, RecipeBuilder, generator

SHIPPED = [
    "matmul_x86",
    "matmul_bias_relu_x86",
    "matmul_vulkan",
    "matmul_vulkan_config",
    "matmul_bias_relu_vulkan",
    "matmul_x86_py",
]


ROWMAJOR = {"LAYOUT": "rowmajor"}
"""matmul_x86's kernel schedule (its shape table packs the default 1024^3 shape)."""


def _parses(iree_opt: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "script.mlir"
    path.write_text(text)
    proc = subprocess.run([iree_opt, str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr


def _without_locations(script: str | None) -> str:
    """The script without its recipe locations (they name each front end's own file)."""
    assert script is not None
    lines = [ln for ln in script.splitlines() if not ln.startswith("#loc")]
    return re.sub(r" loc\((#loc\d*|unknown)\)", "", "\n".join(lines))


def test_python_and_yaml_recipes_emit_identical_scripts() -> None:
    yaml_plan = plan(load("matmul_x86"), overrides=ROWMAJOR)
    py_plan = plan(load("matmul_x86_py"), overrides=ROWMAJOR)
    yaml_text = _without_locations(yaml_plan.scripts.kernel_library)
    assert yaml_text == _without_locations(py_plan.scripts.kernel_library)
    assert "loc(" not in yaml_text and "tile_using_forall" in yaml_text


def test_every_transform_op_carries_its_recipe_step_location() -> None:
    library = plan(load("matmul_x86"), overrides=ROWMAJOR).scripts.kernel_library
    assert library is not None
    lines = library.splitlines()
    tile = next(ln for ln in lines if "tile_using_forall" in ln)
    alias = re.search(r"loc\((#loc\d+)\)", tile)
    assert alias is not None
    named = next(ln for ln in lines if ln.startswith(alias.group(1) + " = "))
    assert named.startswith(f'{alias.group(1)} = loc("tile"(#loc')
    file_alias = re.search(r'"tile"\((#loc\d+)\)', named)
    assert file_alias is not None
    file_loc = next(ln for ln in lines if ln.startswith(file_alias.group(1) + " = "))
    assert file_loc.endswith('matmul_x86.yaml":50:1)')  # the tile step's line in the recipe


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.process
def test_shipped_scripts_parse_with_iree_opt(name: str, iree_opt: str, tmp_path: Path) -> None:
    p = plan(load(name))
    scripts = [s.script for s in p.scripts.graph if isinstance(s, ScriptStage)]
    for script in (*scripts, p.scripts.kernel_library):
        if script is not None:
            _parses(iree_opt, script, tmp_path)


def test_kernel_library_structure() -> None:
    p = plan(load("matmul_x86"), overrides=ROWMAJOR)
    library, tk = p.scripts.kernel_library, p.recipe.parameter_dict["TK"]
    assert library is not None
    assert "transform.named_sequence @__kernel_config" in library
    assert "transform.foreach_match in" in library
    assert "transform.iree.match.contraction" in library
    assert "codegen_spec = @tdsched_strategy_matmul" in library
    # the reduction is tiled with scf.for after the fill was fused over the workgroup forall
    fuse = library.index("fuse_into_containing_op")
    assert library.index(f"tile_sizes [0, 0, {tk}]") > fuse
    assert "transform.iree.bufferize" in library and "#iree_codegen.no_pipeline" in library


def test_tile_parameter_changes_the_script() -> None:
    small = plan(load("matmul_x86"), overrides={**ROWMAJOR, "TM": 32}).scripts.kernel_library
    large = plan(load("matmul_x86"), overrides={**ROWMAJOR, "TM": 128}).scripts.kernel_library
    assert small is not None and large is not None
    assert "tile_sizes [32, 128, 0]" in small and "tile_sizes [128, 128, 0]" in large


def _builder() -> RecipeBuilder:
    return RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))


def test_tile_rank_mismatch_names_op_loops_and_line() -> None:
    r = _builder()
    k = r.kernel("mm", match=Match(op="linalg.matmul"))
    k.root.tile([16, 16])  # the matmul has 3 loops
    with pytest.raises(RecipeError) as info:
        plan(r.build())
    message = str(info.value)
    assert "test_emission.py:" in message
    assert "2 tile sizes given for linalg.matmul, which has 3 loops" in message


def test_bad_interchange_is_rejected() -> None:
    r = _builder()
    r.kernel("mm", match=Match(op="linalg.matmul")).root.tile([8, 8, 8], interchange=[0, 0, 1])
    with pytest.raises(RecipeError, match="not a permutation of the 3 loops"):
        plan(r.build())


def test_graph_level_tiling_is_refused() -> None:
    r = _builder()
    r.graph.match("linalg.matmul").tile([8, 8, 8])
    with pytest.raises(RecipeError, match="host-level loops, which IREE cannot compile"):
        plan(r.build())


def test_handles_are_invalidated_by_whole_kernel_vectorize() -> None:
    r = _builder()
    k = r.kernel("mm", match=Match(op="linalg.matmul"))
    k.vectorize()
    k.root.tile([8, 8, 0])
    with pytest.raises(RecipeError, match="handle 'root' was invalidated by the vectorize step"):
        plan(r.build())


def test_unknown_handle_lists_bound_ones() -> None:
    r = _builder()
    k = r.kernel("mm", match=Match(op="linalg.matmul"))
    k.root.tile([8, 8, 0], loops="wg")
    k.match("linalg.fill", name="fill")
    from tdsched.schedules.frontends.python_api import LoopRef

    k.root.fuse_into(LoopRef(k.root.schedule, "nope"))
    with pytest.raises(RecipeError, match="unknown handle 'nope'; bound so far: fill, root, wg"):
        plan(r.build())


def test_vulkan_strategy_requires_workgroup_size() -> None:
    r = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64), targets=["vulkan"])
    r.kernel("mm", match=Match(kind="contraction")).root.tile(
        [8, 8, 0], loop="forall", mapping="workgroup"
    )
    with pytest.raises(RecipeError, match="needs 'workgroup_size'"):
        plan(r.build())


def test_target_not_in_recipe_is_refused() -> None:
    with pytest.raises(RecipeError, match="written for x86, not vulkan"):
        plan(load("matmul_x86"), "vulkan")


def test_parameters_reach_workload() -> None:
    p = plan(load("matmul_x86"), overrides={"M": 128, "N": 64, "K": 32})
    assert "tensor<128x32xf32>" in p.workload.mlir and p.workload.name == "matmul_128x64x32_f32"


def test_python_api_parameter_helper() -> None:
    assert P("TM") == "${TM}"


def test_kernel_names_must_be_unique_identifiers() -> None:
    for names, message in (
        (["a-b"], "kernel name 'a-b' is not allowed"),
        (["k", "k"], "defined twice"),
    ):
        r = _builder()
        for name in names:
            k = r.kernel(name, match=Match(op="linalg.matmul"))
            k.root.tile([8, 8, 0], loop="forall", mapping="workgroup")
        with pytest.raises(RecipeError, match=message):
            plan(r.build())


def test_loop_counts_allow_the_dispatch_view_of_ops_with_unit_loops() -> None:
    from tdsched.transform_lib.payload import loop_counts

    conv = """\
func.func @f(%i: tensor<1x16x16x8xf32>, %w: tensor<3x3x8x4xf32>, %o: tensor<1x14x14x4xf32>) -> tensor<1x14x14x4xf32> {
  %0 = linalg.conv_2d_nhwc_hwcf ins(%i, %w : tensor<1x16x16x8xf32>, tensor<3x3x8x4xf32>) outs(%o : tensor<1x14x14x4xf32>) -> tensor<1x14x14x4xf32>
  return %0 : tensor<1x14x14x4xf32>
}
"""
    counts = loop_counts(conv)
    assert counts == {"linalg.conv_2d_nhwc_hwcf": {6, 7}}  # as written, and without n = 1
    r = _builder()
    r.kernel("mm", match=Match(op="linalg.matmul")).root.tile([8, 8], loop="forall")
    with pytest.raises(
        RecipeError, match="which has 3 loops \\(counted on the op as the workload writes it"
    ):
        plan(r.build())


def test_a_kernel_schedule_without_a_workgroup_forall_is_refused_before_compiling() -> None:
    # iree-compile segfaults on such a strategy (its workgroup distribution finds no
    # forall); tdsched names the step and the fix instead.
    r = _builder()
    r.kernel("k", match=Match(op="linalg.matmul")).root.tile([8, 8, 0])  # the step named
    with pytest.raises(RecipeError, match="must distribute its work to workgroups") as caught:
        plan(r.build())
    assert "loop: forall, mapping: workgroup" in str(caught.value)
    line = caught.value.where.line
    assert caught.value.where.field == "tile" and line is not None
    assert "# the step named" in Path(__file__).read_text().splitlines()[line - 1]
