"""``tdsched tune --target vulkan``: IREE's SPIR-V configuration read back, the lowering
config template for matmul tasks (workgroup size derived from its tiles), the model
recipe it writes, and a real tune on Vulkan checked against onnx's reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from onnx_models import matmul_model, mlp_model
from tdsched.schedules.cli.main import main
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.sweep.database import Result
from tdsched.schedules.tune.model_recipe import ModelSpec, write_model_recipe
from tdsched.schedules.tune.prepare import _task_recipe, prepare
from tdsched.schedules.tune.task_match import ModelOps, op_match
from tdsched.schedules.tune.tasks import OpSignature, Task
from tdsched.schedules.tune.templates import NoTemplate
from tdsched.schedules.tune.templates_vulkan import vulkan_template
from tdsched.schedules.tune.tuning import TaskTuning, TuneOptions
from tdsched.transform_lib.census import StructuredOp
from tdsched.transform_lib.constant_operands import ModelConstants
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, ConfiguredOp, read_configured
from tdsched.transform_lib.errors import ScheduleError
from tdsched.transform_lib.lowering_config import (
    Codegen,
    compilation_info,
    derived_workgroup_size,
)

CONFIG = "#iree_codegen.lowering_config<tile_sizes = [[16, 64], [4, 8], [0, 0, 4]]>"


def _configured(body: str, args: str, result: str, attributes: str = "") -> ConfiguredDispatch:
    """One dispatch as a Vulkan ``executable-configurations`` compile prints it (its
    function's ``attributes`` included, when given)."""
    text = f"""
func.func @t0_dispatch_0({args}) -> {result} {attributes} {{
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : {result}
  %f = linalg.fill ins(%cst : f32) outs(%e : {result}) -> {result}
  {body}
  return %m : {result}
}}
"""
    (dispatch,) = read_configured(text, "t0_dispatch_")
    return dispatch


def _matmul() -> ConfiguredDispatch:
    """A 64x128x32 matmul, as IREE's SPIR-V configuration leaves it: configured."""
    a, b, c = "tensor<64x32xf32>", "tensor<32x128xf32>", "tensor<64x128xf32>"
    body = (
        f"%m = linalg.matmul {{lowering_config = {CONFIG}}} ins(%a, %b : {a}, {b}) "
        f"outs(%f : {c}) -> {c}"
    )
    return _configured(body, f"%a: {a}, %b: {b}", c)


MAC = """  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32"""
"""A contraction's body: multiply, accumulate."""


def _generic(maps: str, lhs: str = "tensor<8x8xf32>") -> ConfiguredDispatch:
    """A three-loop contraction generic over 8x8 matrices whose two inputs are indexed
    by ``maps`` (the first of type ``lhs``)."""
    rhs = out = "tensor<8x8xf32>"
    body = f"""%m = linalg.generic {{indexing_maps = [{maps}, affine_map<(i, j, k) -> (i, j)>],
      iterator_types = ["parallel", "parallel", "reduction"], lowering_config = {CONFIG}}}
      ins(%a, %b : {lhs}, {rhs}) outs(%f : {out}) {{
{MAC}
  }} -> {out}"""
    return _configured(body, f"%a: {lhs}, %b: {rhs}", out)


def _distributed(m: int, n: int, tiles: str) -> ConfiguredDispatch:
    """An ``m x 32`` by ``32 x n`` matmul IREE did not vectorize: configured with
    ``tiles`` for its ``BaseDistribute`` pipeline, as for a loop no vector width divides."""
    a, b, c = f"tensor<{m}x32xf32>", f"tensor<32x{n}xf32>", f"tensor<{m}x{n}xf32>"
    config = f"#iree_codegen.lowering_config<tile_sizes = {tiles}>"
    body = (
        f"%m = linalg.matmul {{lowering_config = {config}}} ins(%a, %b : {a}, {b}) "
        f"outs(%f : {c}) -> {c}"
    )
    info = (
        "attributes {translation_info = #iree_codegen.translation_info<pipeline = "
        "#iree_gpu.spirv_pipeline<BaseDistribute> workgroup_size = [1, 64, 1]>}"
    )
    return _configured(body, f"%a: {a}, %b: {b}", c, info)


MATMUL = OpSignature("linalg.generic", (64, 128, 32), "contraction", "f32")
TASK = Task("t0", (MATMUL,), dispatches=["d0"])


def test_a_vulkan_configuration_is_read_as_the_levels_a_config_names() -> None:
    dispatch = _matmul()
    assert dispatch.root_op.levels == {
        "workgroup": (16, 64, 0),  # padded to one size per loop
        "thread": (4, 8, 0),
        "reduction": (0, 0, 4),
    }
    assert dispatch.init_is_fill and dispatch.root_op.input_loops == ((0, 2), (2, 1))


def test_the_workgroup_size_follows_from_the_tiles_as_iree_derives_it() -> None:
    # IREE's own choices (see the module docstring): x along the innermost loop.
    assert derived_workgroup_size([16, 256], [8, 8]) == [32, 2, 1]
    assert derived_workgroup_size([1, 32, 128], [1, 8, 8]) == [16, 4, 1]
    assert derived_workgroup_size([0, 256], [0, 4]) == [64, 1, 1]
    info = compilation_info(Codegen.SPIRV, {"workgroup": [16, 64], "thread": [4, 8]})
    assert "workgroup_size = [8, 4, 1]" in info
    with pytest.raises(ScheduleError, match="thread tile 3 does not divide the workgroup tile 64"):
        derived_workgroup_size([16, 64], [4, 3])
    with pytest.raises(ScheduleError, match="MatmulPromoteVectorize needs workgroup_size"):
        compilation_info(
            Codegen.SPIRV, {"workgroup": [16, 64], "thread": [4, 8]}, None, "MatmulPromoteVectorize"
        )


def test_the_vulkan_template_is_a_config_centred_on_iree_s_tiles() -> None:
    template = vulkan_template(TASK, _matmul())
    assert template.parameters == {"WM": 16, "RM": 4, "WN": 64, "RN": 8, "TK": 4}
    assert template.space["WM"] == [4, 8, 16, 32, 64]  # a quarter to four times IREE's 16
    assert template.space["WN"] == [16, 32, 64, 128]
    assert template.space["TK"] == [1, 2, 4, 8, 16, 32]
    assert template.schedule == [] and template.kernel_body() == {
        "config": {
            "pipeline": "BaseVectorize",
            "tile_sizes": {
                "workgroup": ["${WM}", "${WN}"],
                "thread": ["${RM}", "${RN}"],
                "reduction": [0, 0, "${TK}"],
            },
        }
    }
    assert "WM * WN <= 128 * RM * RN" in template.constraints


def test_where_iree_did_not_vectorize_the_space_centres_on_a_vectorized_kernel() -> None:
    # ResNet-50's 7x7 stage: 49 output pixels, which IREE's SPIR-V matmul config cannot
    # vectorize, so it falls back to BaseDistribute (one output per thread, minutes on
    # lavapipe). The template tiles the 49 whole or by 7.
    dispatch = _distributed(512, 49, "[[64, 1], [1, 1]]")
    assert dispatch.pipeline == "BaseDistribute"
    task = Task("t0", (OpSignature("linalg.generic", (512, 49, 32), "contraction", "f32"),))
    template = vulkan_template(task, dispatch)
    assert template.space["WN"] == [1, 7, 49] and template.space["RN"] == [1, 7]
    assert template.space["WM"] == [16, 32, 64, 128, 256]  # around 64, not IREE's 64x1
    assert template.parameters == {"WM": 64, "RM": 8, "WN": 49, "RN": 7, "TK": 4}
    assert _matmul().pipeline is None  # no translation_info: IREE's tiles are the centre


def test_the_template_s_defaults_meet_its_constraints() -> None:
    # 255 = 3 x 5 x 17: the tiles nearest 64 are 51 by 3, i.e. 17 x 17 = 289 threads,
    # over the 128 allowed; the defaults step to the nearest valid workgroup instead.
    # (Every tile from 17 up takes 17 threads or more: the small divisors must be there.)
    dispatch = _distributed(255, 255, "[[1, 1], [1, 1]]")
    task = Task("t0", (OpSignature("linalg.generic", (255, 255, 32), "contraction", "f32"),))
    values = vulkan_template(task, dispatch).parameters
    wm, rm, wn, rn = (int(values[name]) for name in ("WM", "RM", "WN", "RN"))
    assert wm % rm == 0 and wn % rn == 0 and rm * rn <= 64
    assert (wm // rm) * (wn // rn) <= 128, values


@pytest.mark.parametrize(
    ("maps", "lhs", "matmul"),
    [
        ("affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>", "", True),  # B^T
        ("affine_map<(i, j, k) -> (k, i)>, affine_map<(i, j, k) -> (k, j)>", "", True),  # A^T
        # The lhs reads N: IREE's matcher would read the loops as [N, M, K].
        ("affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (k, i)>", "", False),
        # The lhs reads every loop: no matmul, still a contraction nest.
        (
            "affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (k, j)>",
            "tensor<8x8x8xf32>",
            False,
        ),
    ],
)
def test_a_matmul_in_loop_order_is_matched_by_kind_any_other_contraction_by_name(
    maps: str, lhs: str, matmul: bool
) -> None:
    dispatch = _generic(maps, lhs or "tensor<8x8xf32>")
    task = Task("t0", (OpSignature("linalg.generic", (8, 8, 8), "contraction", "f32"),))
    template = vulkan_template(task, dispatch)
    assert template.config is not None and template.match_by_kind == matmul
    tiles = template.config["tile_sizes"]
    if matmul:
        assert tiles["workgroup"] == ["${WM}", "${WN}"]
    else:
        # IREE's contraction matcher would read its loops in another order: its
        # parallel loops are named by position, and the kernel matches its name.
        assert tiles["workgroup"] == ["${W0}", "${W1}"] and tiles["thread"] == ["${R0}", "${R1}"]
    assert tiles["reduction"] == [0, 0, "${TK}"]


def _strided_1x1() -> ConfiguredDispatch:
    """A 1x1 convolution of stride 2 (NCHW, 16 -> 32 channels, 8x8 output pixels) as IREE
    forms it: a contraction over (F, OH, OW, C), its input read as (C, OH, OW) through a
    strided load IREE keeps out of the op, so the pixel loops stay two."""
    x, w, out = "tensor<16x8x8xf32>", "tensor<32x16xf32>", "tensor<32x8x8xf32>"
    config = "#iree_codegen.lowering_config<tile_sizes = [[8, 2, 8], [2, 1, 4], [0, 0, 0, 4]]>"
    body = f"""%m = linalg.generic {{indexing_maps = [affine_map<(f, h, w, c) -> (c, h, w)>,
      affine_map<(f, h, w, c) -> (f, c)>, affine_map<(f, h, w, c) -> (f, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"],
      lowering_config = {config}}} ins(%a, %b : {x}, {w}) outs(%f : {out}) {{
{MAC}
  }} -> {out}"""
    return _configured(body, f"%a: {x}, %b: {w}", out)


def test_a_contraction_with_two_pixel_loops_gets_a_tile_per_loop_around_iree_s() -> None:
    task = Task("t0", (OpSignature("linalg.generic", (32, 8, 8, 16), "contraction", "f32"),))
    template = vulkan_template(task, _strided_1x1())
    assert not template.match_by_kind
    assert template.config is not None
    assert template.config["tile_sizes"] == {
        "workgroup": ["${W0}", "${W1}", "${W2}"],
        "thread": ["${R0}", "${R1}", "${R2}"],
        "reduction": [0, 0, 0, "${TK}"],
    }
    # Centred on IREE's own tiles (8, 2, 8 a workgroup; 2, 1, 4 a thread).
    assert template.space["W0"] == [2, 4, 8, 16, 32] and template.space["W1"] == [1, 2, 4, 8]
    assert {k: template.parameters[k] for k in ("W0", "W1", "W2", "R0", "R1", "R2")} == {
        "W0": 8,
        "W1": 2,
        "W2": 8,
        "R0": 2,
        "R1": 1,
        "R2": 4,
    }
    assert "W0 * W1 * W2 <= 128 * R0 * R1 * R2" in template.constraints
    assert "R0 * R1 * R2 <= 64" in template.constraints
    pooling = Task("t0", (OpSignature("linalg.generic", (32, 8, 8, 16), "pooling", "f32"),))
    with pytest.raises(NoTemplate, match="pooling: on vulkan the template takes"):
        vulkan_template(pooling, _strided_1x1())


def test_on_vulkan_a_task_clashes_with_any_contraction_of_its_loop_bounds(tmp_path: Path) -> None:
    # A named matmul elsewhere is a generic contraction to a Vulkan kind match.
    named = OpSignature("linalg.matmul", (64, 128, 32), "contraction", "f32")
    other = Task("t1", (named,), dispatches=["d1"])
    store = "iree_tensor_ext.dispatch.tensor.store"
    census = [
        StructuredOp(d, s.op, None, s.loop_ranges, s.kind, s.dtype, 2, store)
        for d, s in (("d0", MATMUL), ("d1", named))
    ]
    options = TuneOptions(BuildTarget("vulkan", threads=1), budget_s=60)
    tuning = prepare(
        TASK, ModelOps.of(census, [TASK, other]), {}, ModelConstants(""), tmp_path, options
    )
    assert tuning.recipe is None and tuning.reason is not None
    assert "the kind and loop bounds of its linalg.generic 64x128x32 also occur in task t1" in (
        tuning.reason
    )


def test_a_vulkan_winner_is_a_config_matched_by_kind_and_loop_bounds(tmp_path: Path) -> None:
    recipe = tmp_path / "t0.yaml"
    template = vulkan_template(TASK, _matmul())
    census = [StructuredOp("d0", MATMUL.op, None, MATMUL.loop_ranges, "contraction", "f32", 2)]
    match = op_match(TASK, 0, ModelOps.of(census, [TASK]), by_kind=True)
    options = TuneOptions(BuildTarget("vulkan", threads=1), budget_s=60)
    recipe.write_text(_task_recipe(TASK, template, [match], options))
    best = Result(
        "k", "t0.yaml", "vulkan", {"WM": 32, "WN": 64, "RM": 4, "RN": 4}, "ok", speedup=1.3
    )
    won = TaskTuning(TASK, recipe=recipe, rounds=1, best=best)
    write_model_recipe(tmp_path / "m.yaml", ModelSpec("m", {"model": "m"}, ()), [won], options)
    written = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert written["targets"] == ["vulkan"]
    assert written["kernels"] == [
        {
            "name": "t0",
            "match": {"kind": "contraction", "shape": [64, 128, 32]},
            "config": {
                "pipeline": "BaseVectorize",
                "tile_sizes": {
                    "workgroup": [32, 64],
                    "thread": [4, 4],
                    "reduction": [0, 0, 4],  # TK: the template's own value
                },
            },
        }
    ]


def vulkan_tune(model: Path, out: Path, budget: str) -> list[str]:
    """The command line of a short Vulkan tune of ``model`` into ``out``: rounds of 4,
    compiled 4 at a time (a budget the graph race, profile and checks use up still gives
    each task one wave: 4 candidates), every task tuned, the model recipe timed in 3
    rounds."""
    return ["tune", str(model), "--target", "vulkan", "--budget", budget, "--out", str(out),
            "--round-size", "4", "--jobs", "4", "--min-share", "0", "--repeats", "3"]  # fmt: skip


def test_tune_on_vulkan_sweeps_configs_and_the_model_recipe_is_correct(
    vulkan: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlp_model(tmp_path / "mlp.onnx")
    out = tmp_path / "mlp.tune"
    args = vulkan_tune(tmp_path / "mlp.onnx", out, "0.25")
    assert main([*args, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["target"] == "vulkan"
    assert found["run"]["status"] == "ok" and found["run"]["reference"] == "onnx-reference"
    tuned = [t for t in found["tasks"] if t["recipe"]]
    assert tuned, found["tasks"]
    first = yaml.safe_load(Path(tuned[0]["recipe"]).read_text())
    assert first["targets"] == ["vulkan"] and "config" in first["kernels"][0]
    assert first["kernels"][0]["match"]["kind"] == "contraction"
    assert all(t["candidates"] >= 4 for t in tuned), "a task got no whole round"
    recipe = yaml.safe_load(Path(found["recipe"]).read_text())
    for kernel in recipe["kernels"]:
        assert "config" in kernel and "${" not in json.dumps(kernel)


def test_tune_on_vulkan_tiles_a_49_wide_matmul_iree_does_not_vectorize(
    vulkan: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # N = 49 (a 7x7 stage's pixels): IREE's own config is BaseDistribute; the template
    # tiles the 49 by 1, 7 or 49, and its candidates are checked against IREE's x86 build
    # of the task (IREE's Vulkan build is not the reference).
    matmul_model(tmp_path / "mm.onnx", 16, 64, 49)
    out = tmp_path / "mm.tune"
    # IREE default's unvectorized build of a 64x256 input took 2-3.5 s a call on
    # lavapipe (its profile 20 s or more, the test 75 s); 16x64 keeps the 49 and takes
    # a twelfth of it.
    args = vulkan_tune(tmp_path / "mm.onnx", out, "0.3")
    assert main([*args, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["run"]["status"] == "ok" and found["run"]["reference"] == "onnx-reference"
    (task,) = [t for t in found["tasks"] if t["recipe"]]
    template = yaml.safe_load(Path(task["recipe"]).read_text())
    assert template["space"]["WN"] == [1, 7, 49], template["space"]
    assert task["candidates"] >= 4 and task["failed"] < task["candidates"], task


STRIDED_1X1 = f"""
func.func @proj(%input: tensor<16x16x16xf32>, %weights: tensor<32x16xf32>) -> tensor<32x8x8xf32> {{
  %strided = tensor.extract_slice %input[0, 0, 0] [16, 8, 8] [1, 2, 2]
      : tensor<16x16x16xf32> to tensor<16x8x8xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x8x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<32x8x8xf32>) -> tensor<32x8x8xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(f, h, w, c) -> (c, h, w)>,
      affine_map<(f, h, w, c) -> (f, c)>, affine_map<(f, h, w, c) -> (f, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%strided, %weights : tensor<16x8x8xf32>, tensor<32x16xf32>)
      outs(%f : tensor<32x8x8xf32>) {{
{MAC}
  }} -> tensor<32x8x8xf32>
  return %r : tensor<32x8x8xf32>
}}
"""


def test_tune_on_vulkan_tiles_a_strided_1x1_convolution_loop_by_loop(
    vulkan: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The small CNN's projection as IREE forms it: output channels, rows and columns
    # stay three loops (the stride keeps the pixels apart), the input comes first.
    model = tmp_path / "proj.mlir"
    model.write_text(STRIDED_1X1)
    out = tmp_path / "proj.tune"
    args = vulkan_tune(model, out, "0.3")
    assert main([*args, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["run"]["status"] == "ok"
    (task,) = [t for t in found["tasks"] if t["recipe"]]
    template = yaml.safe_load(Path(task["recipe"]).read_text())
    kernel = template["kernels"][0]
    assert kernel["match"] == {"op": "linalg.generic", "shape": [32, 8, 8, 16], "dtype": "f32"}
    assert {"W0", "W1", "W2", "R0", "R1", "R2", "TK"} == set(template["space"])
    assert task["candidates"] >= 4 and task["failed"] < task["candidates"], task


@pytest.mark.parametrize(
    ("kind", "iterators", "why"),
    [
        ("elementwise", ("parallel",) * 3, "elementwise: no reduction loop"),
        ("convolution", ("parallel",) * 4 + ("reduction",) * 3, "im2col rewrites"),
        ("pooling", ("parallel",) * 4 + ("reduction",) * 2, "pooling: on vulkan the template"),
    ],
)
def test_a_root_that_is_no_matmul_keeps_iree_s_pipeline_with_its_reason(
    kind: str, iterators: tuple[str, ...], why: str
) -> None:
    ranges = (2,) * len(iterators)
    root = ConfiguredOp("linalg.generic", ranges, iterators, None, {"workgroup": ranges})
    dispatch = ConfiguredDispatch("t0", (root,), 0, {}, init_is_fill=False, root_inputs=1)
    task = Task("t0", (OpSignature("linalg.generic", ranges, kind, "f32"),))
    with pytest.raises(NoTemplate, match=why):
        vulkan_template(task, dispatch)


def test_tune_builds_for_the_gpu_given_and_keeps_its_state_apart(
    vulkan: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an ampere build runs on lavapipe too: the tasks, their candidates and the model
    # recipe are built for it and checked against the model's reference
    matmul_model(tmp_path / "mm.onnx", 64, 128, 64)
    out = tmp_path / "mm.tune"
    args = vulkan_tune(tmp_path / "mm.onnx", out, "0.2")
    assert main([*args, "--gpu", "ampere", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["gpu"] == "ampere" and found["run"]["status"] == "ok", found["run"]
    state = json.loads((out / "tune-state.json").read_text())
    assert state["identity"]["gpu"] == "ampere"
    # the same folder for the generic target: the ampere numbers are set aside
    assert main([*args, "--budget", "0.01"]) == 0
    text = capsys.readouterr()
    assert "written for" in text.err and "'gpu': 'ampere'" in text.err
    run_it = next(line for line in text.out.splitlines() if line.startswith("run it"))
    assert run_it.startswith(f"run it   tdsched run {out}") and "--gpu" not in run_it
