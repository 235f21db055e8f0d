"""ONNX import cases found on real models: node names kept through the opset upgrade,
nodes refused before import, f64 models.

Models are built here with ``onnx.helper``, plus one of the "light" models the onnx
package ships.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_process import tdsched
from iree.compiler import ir
from iree_numerics import run_module
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from tdsched.recipes.lowering import LoweringError, lower_onnx
from tdsched.recipes.lowering.layer_tags import function_body_ops
from tdsched.targets import make_target
from tdsched.targets.compiler import KEEP_F64, CompileError, CompileRequest, compile_command

LIGHT_MODELS = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _layers(text: str) -> dict[str, set[str]]:
    """For each ``tdsched.layer`` in the module: its ``tdsched.onnx_op`` values (one per
    layer when the import is right)."""
    found: dict[str, set[str]] = {}
    with ir.Context():
        for op in function_body_ops(ir.Module.parse(text)):
            attrs = op.attributes
            if "tdsched.layer" in attrs:
                layer = ir.StringAttr(attrs["tdsched.layer"]).value
                found.setdefault(layer, set()).add(ir.StringAttr(attrs["tdsched.onnx_op"]).value)
    return found


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, list[int]]],
    outputs: dict[str, tuple[int, list[int]]],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    """A one-graph model named ``g``; inputs and outputs as name -> (element type, shape)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


# -- node names through the opset upgrade ---------------------------------------------------


def _opset9_model() -> onnx.ModelProto:
    """Opset-9 nodes the version converter to 17 changes: Clip's min/max become constant
    inputs, Upsample is replaced by a new Resize node, and Softmax(axis=1) on 4-D gets a
    new Flatten before it and a new Reshape after it."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="act"),
        helper.make_node("Clip", ["r"], ["c"], name="clip6", min=0.0, max=6.0),
        helper.make_node("Upsample", ["c", "scales"], ["u"], name="up", mode="nearest"),
        helper.make_node("Softmax", ["u"], ["y"], name="prob", axis=1),
    ]
    scales = np.array([1, 1, 2, 2], dtype=np.float32)
    return _model(
        nodes, {"x": (f, [1, 2, 3, 3])}, {"y": (f, [1, 2, 6, 6])}, {"scales": scales}, opset=9
    )


@pytest.mark.process
def test_onnx_upgrade_keeps_node_names_of_replaced_nodes() -> None:
    layers = _layers(lower_onnx(_opset9_model(), "old.onnx"))
    # Every op belongs to a node of the model, with the model's op type; none is named
    # after a node the converter made (Resize, Flatten, Reshape).
    assert layers == {
        "act": {"Relu"},
        "clip6": {"Clip"},
        "up": {"Upsample"},
        "prob": {"Softmax"},
    }


@pytest.mark.process
def test_onnx_light_squeezenet_layers_are_its_node_names() -> None:
    path = LIGHT_MODELS / "light_squeezenet.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not in this onnx package")
    model = onnx.load(path)
    named = {node.name: node.op_type for node in model.graph.node if node.name}
    layers = _layers(lower_onnx(path, path.name))
    # Opset 9 -> 17 wraps the last Softmax (n65) in new Flatten/Shape/Reshape nodes.
    assert {layer: named.get(layer) for layer in layers} == {
        layer: next(iter(ops)) for layer, ops in layers.items() if len(ops) == 1
    }
    assert layers["n65"] == {"Softmax"}
    assert set(layers) == {name for name, op in named.items() if op != "Dropout"}


# -- nodes refused before import --------------------------------------------------------------


def _pad_model(mode: str, opset: int = 17) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], dtype=np.int64)
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="rpad", mode=mode)
    return _model([node], {"x": (f, [1, 2, 5, 6])}, {"y": (f, [1, 2, 8, 9])}, {"pads": pads}, opset)


def _prelu_model(slope: np.ndarray) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    node = helper.make_node("PRelu", ["x", "slope"], ["y"], name="act")
    return _model([node], {"x": (f, [1, 4, 5, 5])}, {"y": (f, [1, 4, 5, 5])}, {"slope": slope})


@pytest.mark.parametrize(
    ("mode", "opset", "why"),
    [
        (
            "reflect",
            17,
            "IREE cannot compile the lowering of reflect padding (LLVM translation fails)",
        ),
        ("wrap", 19, "torch-mlir's lowering of wrap padding does not terminate"),
    ],
)
def test_onnx_pad_modes_iree_cannot_build_are_refused_naming_the_node(
    mode: str, opset: int, why: str
) -> None:
    with pytest.raises(LoweringError) as error:
        lower_onnx(_pad_model(mode, opset), "pad.onnx")
    assert str(error.value) == (
        f"pad.onnx: node 'rpad' (op Pad): mode '{mode}' is not supported: {why}; "
        "pad with mode 'constant' or 'edge', or outside the model"
    )


def test_onnx_prelu_slope_that_does_not_broadcast_is_refused_with_the_fix() -> None:
    slope = np.linspace(0.1, 0.4, 4, dtype=np.float32)  # [C] on NCHW: aligned with W
    with pytest.raises(LoweringError) as error:
        lower_onnx(_prelu_model(slope), "prelu.onnx")
    assert str(error.value) == (
        "prelu.onnx: node 'act' (op PRelu): slope of shape [4] does not broadcast to the "
        "input's [1, 4, 5, 5]: ONNX aligns the slope's dims with the input's last dims, so "
        "a per-channel slope of an NCHW input has shape [C, 1, 1]; reshape the slope in "
        "the model"
    )


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(
            _prelu_model(np.linspace(0.1, 0.4, 4, dtype=np.float32).reshape(4, 1, 1)),
            id="prelu-per-channel",
        ),
        pytest.param(_pad_model("edge"), id="pad-edge"),
        pytest.param(_pad_model("constant"), id="pad-constant"),
    ],
)
def test_onnx_what_is_not_refused_matches_the_reference(
    model: onnx.ModelProto, target: str
) -> None:
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    (got,) = run_module(lower_onnx(model, "m.onnx"), "g", [x], target)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# -- f64 models -----------------------------------------------------------------------------------


def _f64_model() -> onnx.ModelProto:
    d = TensorProto.DOUBLE
    weights = np.linspace(-1.0, 1.0, 48).reshape(16, 3) / 7  # not exact in f32
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        helper.make_node("Relu", ["m"], ["y"], name="act"),
    ]
    return _model(nodes, {"x": (d, [8, 16])}, {"y": (d, [8, 3])}, {"w": weights})


@pytest.mark.usefixtures("iree")
def test_onnx_f64_model_computes_in_f64_on_x86() -> None:
    model = _f64_model()
    x = np.random.default_rng(0).uniform(-1, 1, (8, 16))
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    (got,) = run_module(lower_onnx(model, "f64.onnx"), "g", [x], "x86")
    assert got.dtype == np.float64
    # f32 arithmetic would be off by ~1e-7; the build keeps f64 (no demotion to f32).
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.process
def test_f64_workload_on_vulkan_is_refused_before_compiling(tmp_path: Path) -> None:
    source = tmp_path / "m.mlir"
    source.write_text(lower_onnx(_f64_model(), "f64.onnx"))
    request = CompileRequest(source, make_target("vulkan"), tmp_path / "m.vmfb")
    with pytest.raises(CompileError) as error:
        compile_command(request)
    assert str(error.value) == (
        "the workload computes in f64, which IREE's vulkan target cannot compile (its SPIR-V "
        "environment has no Float64 capability): build it for x86, which computes f64 as "
        "written, or make the workload f32"
    )
    x86 = CompileRequest(source, make_target("x86"), tmp_path / "m.vmfb")
    assert KEEP_F64 in compile_command(x86)


@pytest.mark.process
def test_an_op_that_crashes_irees_import_is_a_one_line_error_naming_the_node(
    tmp_path: Path,
) -> None:
    """IREE 3.13's ONNX-to-torch conversion segfaults on Unique: the import runs in a
    child, so the command says which node (exit status 2), as lower, tasks and tune do."""
    model = _model(
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu0"),
            helper.make_node("Unique", ["x"], ["y"], name="uniq0", sorted=1),
        ],
        {"x": (TensorProto.FLOAT, [8])},
        {"r": (TensorProto.FLOAT, [8]), "y": (TensorProto.FLOAT, ["u"])},  # type: ignore[list-item]
    )
    with pytest.raises(
        LoweringError,
        match=r"^m: node 'uniq0' \(op Unique\): IREE's ONNX import crashed on it \(SIGSEGV\)",
    ):
        lower_onnx(model, "m")
    path = tmp_path / "uniq.onnx"
    onnx.save(model, path)
    for command in (["lower", str(path)], ["tasks", str(path)]):
        proc = tdsched(*command)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f"tdsched: error: {path}: node 'uniq0' (op Unique): IREE's ONNX import crashed on "
            "it (SIGSEGV); tdsched cannot lower this model: remove or replace the node"
        ]
