"""Task extraction (``tdsched tasks``): a model's dispatches grouped by what they compute,
weighed by IREE default's profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from iree.compiler import ir
from onnx_models import encoder_block_model, mlp_model
from tdsched.schedules.cli.main import main
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import run
from tdsched.schedules.tune.tasks import group_tasks, weigh
from tdsched.targets.dispatch_profile import DispatchTime, ModuleProfile
from tdsched.targets.timing import Timing
from tdsched.transform_lib.census import StructuredOp, structured_ops
from tdsched.transform_lib.standalone_dispatch import dispatch_dataflow


def _op(function: str, op: str, layer: str, ranges: tuple[int, ...], kind: str) -> StructuredOp:
    return StructuredOp(function, op, layer, ranges, kind, "f32")


CENSUS = [
    _op("jit_eval_dispatch_0_elementwise_64_f32", "linalg.generic", "w", (64,), "elementwise"),
    _op("net_dispatch_0_matmul", "linalg.fill", "fc1", (8, 16), "elementwise"),
    _op("net_dispatch_0_matmul", "linalg.matmul", "fc1", (8, 16, 32), "contraction"),
    _op("net_dispatch_0_matmul", "linalg.generic", "act1", (8, 16), "elementwise"),
    _op("net_dispatch_1_matmul", "linalg.fill", "fc2", (8, 16), "elementwise"),
    _op("net_dispatch_1_matmul", "linalg.matmul", "fc2", (8, 16, 32), "contraction"),
    _op("net_dispatch_1_matmul", "linalg.generic", "act2", (8, 16), "elementwise"),
    _op("net_dispatch_2_conv", "linalg.fill", "c", (4, 6, 6), "elementwise"),
    _op("net_dispatch_2_conv", "linalg.generic", "c", (4, 6, 6, 3, 3, 3), "convolution"),
]


def test_identical_dispatches_are_one_task_with_all_their_layers() -> None:
    tasks = group_tasks(CENSUS, "net")
    assert [t.name for t in tasks] == ["t0", "t1"]  # jit_eval is compile time, not a task
    matmul, conv = tasks
    assert matmul.dispatches == ["net_dispatch_0_matmul", "net_dispatch_1_matmul"]
    assert matmul.layers == ["fc1", "fc2"] and matmul.fused_layers == ["act1", "act2"]
    assert matmul.runs == 2
    assert (matmul.kind, matmul.root.describe()) == ("contraction", "linalg.matmul 8x16x32")
    assert matmul.epilogue == ("fill", "generic")
    assert (conv.kind, conv.epilogue, conv.runs) == ("convolution", ("fill",), 1)


def test_dispatches_whose_ops_connect_differently_are_different_tasks() -> None:
    same = {"net_dispatch_0_matmul": ("flow a",), "net_dispatch_1_matmul": ("flow a",)}
    assert [len(t.dispatches) for t in group_tasks(CENSUS, "net", same)] == [2, 1]
    # A transposing epilogue and a residual add: the same ops, connected differently.
    differ = {**same, "net_dispatch_1_matmul": ("flow b",)}
    tasks = group_tasks(CENSUS, "net", differ)
    assert [(t.name, t.dispatches) for t in tasks] == [
        ("t0", ["net_dispatch_0_matmul"]),
        ("t1", ["net_dispatch_1_matmul"]),
        ("t2", ["net_dispatch_2_conv"]),
    ]


TRANSPOSED_EPILOGUE = """
func.func @d() {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %a = hal.interface.binding.subspan layout(LAYOUT_) binding(0) alignment(64) offset(%c0) flags(ReadOnly) : !iree_tensor_ext.dispatch.tensor<readonly:tensor<8x8xf32>>
  %o = hal.interface.binding.subspan layout(LAYOUT_) binding(1) alignment(64) offset(%c0) : !iree_tensor_ext.dispatch.tensor<writeonly:tensor<8x8xf32>>
  %x = iree_tensor_ext.dispatch.tensor.load %a, offsets = [0, 0], sizes = [8, 8], strides = [1, 1] : !iree_tensor_ext.dispatch.tensor<readonly:tensor<8x8xf32>> -> tensor<8x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%x, %x : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (MAP_)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %v : f32
  } -> tensor<8x8xf32>
  iree_tensor_ext.dispatch.tensor.store %g, %o, offsets = [0, 0], sizes = [8, 8], strides = [1, 1] : tensor<8x8xf32> -> !iree_tensor_ext.dispatch.tensor<writeonly:tensor<8x8xf32>>
  return
}
"""
LAYOUT = (
    "#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, ReadOnly>, "
    "#hal.pipeline.binding<storage_buffer>]>"
)


def _dispatch(epilogue_map: str) -> str:
    return TRANSPOSED_EPILOGUE.replace("LAYOUT_", LAYOUT).replace("MAP_", epilogue_map)


def test_a_dispatchs_dataflow_tells_a_transposing_epilogue_from_a_copy() -> None:
    copy = dispatch_dataflow(_dispatch("i, j"))
    transposed = dispatch_dataflow(_dispatch("j, i"))
    assert copy is not None and transposed is not None and copy != transposed
    assert dispatch_dataflow("func.func @d() {\n  return\n}\n") is None  # stores nothing


def test_the_census_records_what_a_kernel_match_may_tell_ops_apart_by() -> None:
    with ir.Context():
        fill, matmul, generic = structured_ops(ir.Module.parse(_dispatch("j, i")))
    assert (fill.inputs, fill.used_by, fill.used_by_inputs) == (1, "linalg.matmul", 2)
    assert (matmul.inputs, matmul.used_by, matmul.used_by_inputs) == (2, "linalg.generic", 1)
    store = "iree_tensor_ext.dispatch.tensor.store"
    assert (generic.inputs, generic.used_by, generic.used_by_inputs) == (1, store, None)


def test_tasks_are_weighed_by_the_profile_most_time_first() -> None:
    profile = ModuleProfile(
        Timing.of([10.0]),
        (
            DispatchTime("net_dispatch_0_matmul", 1.0, 1, 3),
            DispatchTime("net_dispatch_1_matmul", 2.0, 2, 3),
            DispatchTime("net_dispatch_2_conv", 6.0, 1, 3),
        ),
    )
    conv, matmul = weigh(group_tasks(CENSUS, "net"), profile)
    assert (conv.name, conv.time_ms, conv.share, conv.runs) == ("t1", 6.0, 0.6, 1)
    assert (matmul.time_ms, matmul.share, matmul.runs) == (3.0, 0.3, 3)


@pytest.mark.usefixtures("iree")
def test_tasks_command_groups_and_weighs_an_onnx_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlp_model(tmp_path / "mlp.onnx")
    assert main(["tasks", str(tmp_path / "mlp.onnx"), "--threads", "1", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["workload"], found["target"], found["threads"]) == ("mlp", "x86", 1)
    by_layer = {layer: task for task in found["tasks"] for layer in task["layers"]}
    twin = by_layer["fc1"]
    assert by_layer["fc2"] is twin and twin["runs"] == 2 and twin["kind"] == "contraction"
    assert twin["root"]["loop_ranges"] == [32, 64, 64] and "generic" in twin["epilogue"]
    assert by_layer["fc3"]["root"]["loop_ranges"] == [32, 128, 64]
    shares = [task["share"] for task in found["tasks"]]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1.0
    assert found["call_ms"]["median"] > 0
    # onnxruntime (the test extra installs it) on the same model, for comparison.
    assert found["onnxruntime_ms"]["median"] > 0


def test_tasks_command_without_timing_on_each_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    mlp_model(tmp_path / "mlp.onnx")
    args = ["tasks", str(tmp_path / "mlp.onnx"), "--target", target, "--no-time", "--match"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"tasks of mlp on {target}")
    assert "(layers: fc1, fc2)" in out and "ms/call" not in out
    selects = "{kind: contraction" if target == "vulkan" else "{op: linalg.matmul"
    assert out.count(f"match: {selects}, shape: [32, 64, 64]") == 1
    assert out.count(f"match: {selects}, shape: [32, 128, 64]") == 1


def _config_recipe(folder: Path, match: dict[str, object]) -> Path:
    """A recipe that configures the ops ``match`` selects in ``block.onnx`` with one
    row-reduction config."""
    document = {
        "name": "norm_config",
        "description": "a row-reduction config on the ops the match selects",
        "workload": {"file": "block.onnx"},
        "targets": ["x86"],
        "kernels": [
            {
                "name": "norm",
                "match": match,
                "config": {
                    "tile_sizes": {"workgroup": [8, 0], "vector": [2, 0], "reduction": [0, 16]}
                },
            }
        ],
    }
    path = folder / "norm_config.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.usefixtures("iree")
def test_each_suggested_match_selects_its_task_alone_and_a_config_on_it_compiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A layer norm lowers to two dispatches of one layer (its mean, then its variance and
    # normalization): a match by layer took both, and a config on it failed in IREE.
    encoder_block_model(tmp_path / "block.onnx")
    args = ["tasks", str(tmp_path / "block.onnx"), "--no-time", "--match", "--json"]
    assert main(args) == 0
    tasks = json.loads(capsys.readouterr().out)["tasks"]
    norms = [task for task in tasks if task["layers"] == ["norm"]]
    assert len(norms) == 2
    matches = [task["match"] for task in norms]
    assert matches[0] != matches[1] and all(m["shape"] == [32, 64] for m in matches)
    assert len({json.dumps(task["match"], sort_keys=True) for task in tasks}) == len(tasks)
    for match in matches:
        report = run(plan(load(str(_config_recipe(tmp_path, match))), None), time_it=False)
        assert report.status == "ok", report
        assert report.max_abs_error is not None and report.max_abs_error < 1e-5


@pytest.mark.usefixtures("iree")
def test_a_config_that_reaches_two_ops_of_a_dispatch_is_explained(tmp_path: Path) -> None:
    encoder_block_model(tmp_path / "block.onnx")
    both = {"op": "linalg.generic", "shape": [32, 64], "dtype": "f32"}  # reduction and map
    report = run(plan(load(str(_config_recipe(tmp_path, both))), None), time_it=False)
    assert report.status == "compile_failed"
    assert "a kernel config reached two ops of one dispatch" in (report.error or "")
    assert "`tdsched tasks MODEL --match`" in (report.error or "")


def test_tasks_command_names_a_missing_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tasks", str(tmp_path / "nope.onnx"), "--no-time"]) == 2
    assert "nope.onnx: not a valid ONNX model: cannot read it" in capsys.readouterr().err
