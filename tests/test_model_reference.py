"""A model workload is checked against the model's own reference, not only against IREE
default's build of its lowering (which shares an import bug): onnx's reference evaluator
for an ONNX file, with IREE default's results checked against it too."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tdsched.recipes.lowering import ONNX_REFERENCE, OnnxReference
from tdsched.schedules.cli.main import main
from tdsched.schedules.cli.run_command import print_report
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import run
from tdsched.targets.workload import random_inputs

RNG = np.random.default_rng(7)
WEIGHT = RNG.standard_normal((32, 8)).astype(np.float32)
BIAS = RNG.standard_normal(8).astype(np.float32)


def _mlp(bias: np.ndarray) -> onnx.ModelProto:
    """relu(x @ W + bias) on a [16, 32] input, as an opset-17 model with graph ``mlp``."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="proj"),
        helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
        helper.make_node("Relu", ["a"], ["y"], name="act"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", f, [16, 32])],
        [helper.make_tensor_value_info("y", f, [16, 8])],
        [numpy_helper.from_array(WEIGHT, "w"), numpy_helper.from_array(bias, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _recipe(folder: Path, target: str = "x86") -> Path:
    """A recipe on ``mlp.onnx`` for ``target``: on x86 with a kernel schedule (the matmul
    layer's dispatch tiled at its last op, the matmul and bias fused in), on Vulkan
    IREE's own."""
    onnx.save(_mlp(BIAS), folder / "mlp.onnx")
    recipe = folder / "mlp.yaml"
    kernels = (
        "kernels:\n"
        "  - name: proj\n"
        "    match: {layer: proj}\n"
        "    schedule:\n"
        "      - fuse_ext: {root: {op: linalg.generic}, tile_sizes: [8, 8]}\n"
        "      - vectorize: {}\n"
    )
    recipe.write_text(
        f"name: mlp_onnx\nworkload: {{file: mlp.onnx}}\ntargets: [{target}]\n"
        + (kernels if target == "x86" else "")
    )
    return recipe


@pytest.mark.usefixtures("iree")
def test_onnx_file_reference_is_the_model_itself(tmp_path: Path) -> None:
    p = plan(load(str(_recipe(tmp_path))))
    assert p.workload.reference_kind == ONNX_REFERENCE
    assert p.workload.reference is not None
    inputs = random_inputs(p.workload, 0)
    (want,) = p.workload.reference(inputs)
    np.testing.assert_allclose(want, np.maximum(inputs[0] @ WEIGHT + BIAS, 0), rtol=1e-5)


def test_onnx_file_run_names_its_reference_and_checks_iree_default(
    tmp_path: Path, target: str
) -> None:
    report = run(plan(load(str(_recipe(tmp_path, target)))), time_it=False)
    assert report.status == "ok", report.error
    assert report.reference == ONNX_REFERENCE
    assert report.baseline_check is not None and report.baseline_check["status"] == "ok"
    assert report.to_json()["baseline_check"]["max_abs_error"] < 1e-4


@pytest.mark.usefixtures("iree")
def test_a_lowering_that_differs_from_the_model_is_caught(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Stand-in for an import bug: the built module computes the model with BIAS, the
    # reference is a model whose bias differs. IREE default, built from the same lowered
    # module, would agree with the scheduled build; the model's own reference does not.
    p = plan(load(str(_recipe(tmp_path))))
    other = OnnxReference.of(_mlp(BIAS + 1), 17, "other.onnx")
    p = dataclasses.replace(p, workload=dataclasses.replace(p.workload, reference=other))
    report = run(p, time_it=False)
    assert report.status == "wrong"
    assert report.baseline_check is not None and report.baseline_check["status"] == "wrong"

    print_report(report)
    assert (
        "checked  IREE default vs onnx-reference: wrong (max abs error 1); both builds are "
        "wrong: the lowering or IREE is the likely cause"
    ) in capsys.readouterr().out


@pytest.mark.usefixtures("iree")
def test_cli_run_prints_the_reference_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(_recipe(tmp_path)), "--no-time"]) == 0
    out = capsys.readouterr().out
    assert "vs onnx-reference)" in out
    assert "checked  IREE default vs onnx-reference: ok (max abs error " in out


@pytest.mark.usefixtures("iree")
def test_onnx_reference_takes_the_arguments_in_the_modules_order(tmp_path: Path) -> None:
    # y = a - b @ w: swapping the two same-shaped inputs changes every element, so a
    # reference fed in another order than the lowered function's would be `wrong`.
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("MatMul", ["b", "w"], ["m"], name="proj"),
        helper.make_node("Sub", ["a", "m"], ["y"], name="diff"),
    ]
    graph = helper.make_graph(
        nodes,
        "two",
        [helper.make_tensor_value_info(n, f, [8, 8]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", f, [8, 8])],
        [numpy_helper.from_array(WEIGHT[:8], "w")],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "two.onnx"
    )
    (tmp_path / "two.yaml").write_text("name: two\nworkload: {file: two.onnx}\ntargets: [x86]\n")
    report = run(plan(load(str(tmp_path / "two.yaml"))), time_it=False)
    assert report.status == "ok" and report.reference == ONNX_REFERENCE, report.error
