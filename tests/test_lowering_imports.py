"""TOSA and ONNX lowering to linalg on tensors (tdsched.recipes.lowering).

Inputs are built here: TOSA as MLIR text, ONNX models with ``onnx.helper``. Lowered
modules are compiled by IREE and checked against numpy; errors are checked word for word.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from iree.compiler import ir
from iree_numerics import run_module
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper
from tdsched.recipes.lowering import (
    LoweringError,
    looks_like_tosa,
    lower_onnx,
    lower_tosa,
    tag_layers,
)
from tdsched.targets.workload import WorkloadError

LOWERED_DIALECTS = {"linalg", "tensor", "arith", "func"}

# conv 3x3 pad 1 (loc "conv1") -> clamp (relu) -> max_pool 2x2/2 (loc "pool1")
# -> reshape -> matmul -> add. Weights are arguments: random inputs exercise them.
TOSA_NET = """
func.func @net(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %fw: tensor<1x64x5xf32>, %fb: tensor<1x1x5xf32>) -> tensor<1x1x5xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = "tosa.conv2d"(%x, %w, %b, %zp, %zp) <{acc_type = f32, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>}> : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32> loc("conv1")
  %r = "tosa.clamp"(%c) <{min_val = 0.0 : f32, max_val = 3.4e38 : f32}> : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %p = "tosa.max_pool2d"(%r) <{kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}> : (tensor<1x8x8x4xf32>) -> tensor<1x4x4x4xf32> loc("pool1")
  %s = "tosa.const_shape"() <{values = dense<[1, 1, 64]> : tensor<3xindex>}> : () -> !tosa.shape<3>
  %f = "tosa.reshape"(%p, %s) : (tensor<1x4x4x4xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %m = "tosa.matmul"(%f, %fw, %zp, %zp) : (tensor<1x1x64xf32>, tensor<1x64x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x5xf32>
  %y = "tosa.add"(%m, %fb) : (tensor<1x1x5xf32>, tensor<1x1x5xf32>) -> tensor<1x1x5xf32>
  return %y : tensor<1x1x5xf32>
}
"""


# -- numpy references (NCHW) --------------------------------------------------------------


def _windows(x: np.ndarray, k: int, stride: int, dilation: int = 1) -> np.ndarray:
    """N,C,H,W -> N,C,OH,OW,K,K sliding windows."""
    span = (k - 1) * dilation + 1
    win = sliding_window_view(x, (span, span), axis=(2, 3))[..., ::dilation, ::dilation]
    return win[:, :, ::stride, ::stride]


def _pad(x: np.ndarray, pads: tuple[int, int, int, int], value: float = 0.0) -> np.ndarray:
    """ONNX pads order: top, left, bottom, right."""
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _conv(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int, dilation: int
) -> np.ndarray:
    win = _windows(_pad(x, (pad,) * 4), w.shape[2], stride, dilation)
    return np.einsum("nchwij,fcij->nfhw", win, w) + b[None, :, None, None]


def _max_pool(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    return _windows(_pad(x, (pad,) * 4, -np.inf), k, stride).max(axis=(4, 5))


def _avg_pool(x: np.ndarray, k: int, stride: int, pads: tuple[int, int, int, int]) -> np.ndarray:
    """Average over the window's real elements (ONNX count_include_pad=0)."""
    sums = _windows(_pad(x, pads), k, stride).sum(axis=(4, 5))
    counts = _windows(_pad(np.ones_like(x), pads), k, stride).sum(axis=(4, 5))
    return sums / counts


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


# -- the ONNX CNN ----------------------------------------------------------------------------


def _cnn_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    shapes = {
        "w1": (4, 3, 3, 3),
        "b1": (4,),
        "w2": (4, 4, 3, 3),
        "b2": (4,),
        "fw": (5, 4),
        "fb": (5,),
    }
    return {k: rng.uniform(-1, 1, size=s).astype(np.float32) for k, s in shapes.items()}


def _cnn_model(weights: dict[str, np.ndarray], opset: int = 17) -> onnx.ModelProto:
    node = helper.make_node
    nodes = [
        node(
            "Conv",
            ["x", "w1", "b1"],
            ["c1"],
            name="stem",
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            kernel_shape=[3, 3],
        ),
        node("Relu", ["c1"], ["r1"], name="stem_relu"),
        node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[2, 2, 2, 2], dilations=[2, 2]),
        node("Add", ["c2", "r1"], ["a"], name="residual"),
        node(
            "MaxPool",
            ["a"],
            ["mp"],
            name="pool",
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
        ),
        node("AveragePool", ["mp"], ["ap"], name="avg", kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
        node("GlobalAveragePool", ["ap"], ["g"], name="gap"),
        node("Flatten", ["g"], ["f"], name="flatten"),
        node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _cnn_reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    r1 = _relu(_conv(x, p["w1"], p["b1"], stride=2, pad=1, dilation=1))
    a = _conv(r1, p["w2"], p["b2"], stride=1, pad=2, dilation=2) + r1
    ap = _avg_pool(_max_pool(a, 3, 2, 1), 2, 1, (0, 0, 1, 1))
    return ap.mean(axis=(2, 3)) @ p["fw"].T + p["fb"]


@pytest.fixture(scope="module")
def cnn() -> tuple[str, np.ndarray, np.ndarray]:
    """The lowered ONNX CNN, an input and the numpy result."""
    weights = _cnn_weights()
    x = np.random.default_rng(0).uniform(-1, 1, size=(1, 3, 16, 16)).astype(np.float32)
    return lower_onnx(_cnn_model(weights), "cnn.onnx"), x, _cnn_reference(x, weights)


# -- IR helpers ----------------------------------------------------------------------------------


def _body_ops(text: str) -> list[tuple[str, dict[str, str]]]:
    """(op name, tdsched.* attributes) of each op in the first function's body."""
    with ir.Context():
        module = ir.Module.parse(text)
        func = module.body.operations[0]
        ops = []
        for op in func.regions[0].blocks[0].operations:
            attrs = {
                n: ir.StringAttr(op.attributes[n]).value
                for n in op.attributes
                if n.startswith("tdsched.")
            }
            ops.append((op.operation.name, attrs))
        return ops


def _pad_values(text: str) -> dict[str, float]:
    """The padding value of each tensor.pad, keyed by its tdsched.layer."""
    with ir.Context():
        module = ir.Module.parse(text)
        values = {}
        for op in module.body.operations[0].regions[0].blocks[0].operations:
            if op.operation.name == "tensor.pad":
                constant = op.regions[0].blocks[0].operations[0].operands[0].owner
                values[ir.StringAttr(op.attributes["tdsched.layer"]).value] = ir.FloatAttr(
                    constant.attributes["value"]
                ).value
        return values


def _assert_plain_linalg(text: str) -> None:
    dialects = {name.split(".")[0] for name, _ in _body_ops(text)}
    assert dialects <= LOWERED_DIALECTS, dialects
    assert "tosa" not in text and "torch" not in text and "util." not in text


# -- TOSA -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("iree")
def test_tosa_net_lowers_to_linalg_and_matches_numpy_on_x86() -> None:
    lowered = lower_tosa(TOSA_NET, "net.mlir")
    _assert_plain_linalg(lowered)
    names = [name for name, _ in _body_ops(lowered)]
    assert names.count("linalg.conv_2d_nhwc_hwcf") == 1
    assert names.count("linalg.pooling_nhwc_max") == 1
    assert names.count("linalg.batch_matmul") == 1

    rng = np.random.default_rng(1)
    shapes = [(1, 8, 8, 3), (4, 3, 3, 3), (4,), (1, 64, 5), (1, 1, 5)]
    x, w, b, fw, fb = (rng.uniform(-1, 1, size=s).astype(np.float32) for s in shapes)
    (got,) = run_module(lowered, "net", [x, w, b, fw, fb], "x86")

    nchw = _conv(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), b, stride=1, pad=1, dilation=1)
    pooled = _max_pool(_relu(nchw), 2, 2, 0).transpose(0, 2, 3, 1)  # back to NHWC
    want = pooled.reshape(1, 1, 64) @ fw + fb
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_tosa_named_locations_become_layer_attributes() -> None:
    ops = _body_ops(lower_tosa(TOSA_NET, "net.mlir"))
    conv1 = [name for name, attrs in ops if attrs.get("tdsched.layer") == "conv1"]
    # pad, bias init (generic), weight OHWI -> HWIO (transpose), convolution
    assert sorted(conv1) == [
        "linalg.conv_2d_nhwc_hwcf",
        "linalg.generic",
        "linalg.transpose",
        "tensor.pad",
    ]
    pool1 = [name for name, attrs in ops if attrs.get("tdsched.layer") == "pool1"]
    assert sorted(pool1) == ["linalg.fill", "linalg.pooling_nhwc_max"]
    # Ops from unnamed locations (file:line:col) are not layers; constants are never tagged.
    assert not any(
        "tdsched.layer" in attrs
        for name, attrs in ops
        if name in ("linalg.batch_matmul", "arith.constant")
    )


def test_tosa_syntax_error_names_file_line_col() -> None:
    text = 'func.func @net(%x: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = "tosa.abs"(%x : (tensor<2xf32>) -> tensor<2xf32>\n}\n'
    with pytest.raises(LoweringError) as err:
        lower_tosa(text, "net.mlir")
    assert str(err.value) == "net.mlir:2:21: expected ')' to end operand list"
    assert isinstance(err.value, WorkloadError)


def test_tosa_unsupported_op_is_named_with_its_location() -> None:
    text = """func.func @net(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %0 = "tosa.abs"(%x) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %1 = "tosa.custom"(%0) <{domain_name = "ex", implementation_attrs = "", operator_name = "mystery"}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  return %1 : tensor<1x8xf32>
}"""
    with pytest.raises(LoweringError) as err:
        lower_tosa(text, "net.mlir")
    assert str(err.value) == (
        "net.mlir:3:8: unsupported TOSA op 'tosa.custom': IREE's TOSA input conversion has no lowering for it"
    )


def test_tosa_leftover_and_dynamic_ops_are_rejected() -> None:
    # tosa.variable lowers to ml_program ops, which are not linalg on tensors.
    stateful = """module {
  "tosa.variable"() <{sym_name = "st", initial_value = dense<0.0> : tensor<2xf32>, var_shape = dense<2> : tensor<1xindex>, type = f32}> : () -> ()
  func.func @net(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "tosa.variable_read"() <{name = "st"}> : () -> tensor<2xf32>
    %1 = "tosa.add"(%x, %0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}"""
    with pytest.raises(LoweringError) as err:
        lower_tosa(stateful, "state.mlir")
    assert str(err.value).splitlines() == [
        "state.mlir:2:3: unsupported op 'ml_program.global' after IREE's TOSA input conversion: tdsched takes linalg, tensor, arith and math ops only",
        "state.mlir:4:10: unsupported op 'ml_program.global_load' after IREE's TOSA input conversion: tdsched takes linalg, tensor, arith and math ops only",
    ]
    dynamic = """func.func @net(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = "tosa.abs"(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}"""
    with pytest.raises(
        LoweringError,
        match=r"^dyn\.mlir:1:1: function @net argument 0 has type tensor<\?x8xf32>: tdsched needs static-shaped ranked tensors",
    ):
        lower_tosa(dynamic, "dyn.mlir")


def test_looks_like_tosa() -> None:
    assert looks_like_tosa(TOSA_NET)
    assert looks_like_tosa(
        "func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = tosa.abs %x : (tensor<2xf32>) -> tensor<2xf32>\n"
    )
    linalg_only = lower_tosa(TOSA_NET, "net.mlir")
    assert not looks_like_tosa(linalg_only)
    assert not looks_like_tosa(
        'module attributes {tosa.target_env = #tosa.target_env<level = none>} {}\n// "tosa.conv2d" in a comment'
    )


def test_tag_layers_reads_nested_name_locations() -> None:
    text = """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant dense<1.0> : tensor<4xf32> loc("weights")
  %e = tensor.empty() : tensor<4xf32> loc("init")
  %0 = linalg.copy ins(%c : tensor<4xf32>) outs(%a : tensor<4xf32>) -> tensor<4xf32> loc(fused["x.mlir":2:3, "w1", "stem"])
  %1 = linalg.copy ins(%0 : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32> loc(callsite("act" at "block1"))
  %2 = linalg.copy {tdsched.layer = "kept"} ins(%1 : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32> loc("renamed")
  %3 = linalg.copy ins(%2 : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32> loc("x.mlir":6:3)
  return %3 : tensor<4xf32> loc("ret")
}"""

    def layers(**kwargs: set[str]) -> list[str | None]:
        with ir.Context():
            module = ir.Module.parse(text)
            tag_layers(module, **kwargs)
            return [attrs.get("tdsched.layer") for _, attrs in _body_ops(str(module))]

    assert layers() == [None, None, "w1", "act", "kept", None, None]
    assert layers(layers={"stem", "block1"}) == [None, None, "stem", "block1", "kept", None, None]


# -- ONNX ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("iree")
def test_onnx_cnn_matches_numpy_on_x86(cnn: tuple[str, np.ndarray, np.ndarray]) -> None:
    lowered, x, want = cnn
    _assert_plain_linalg(lowered)
    (got,) = run_module(lowered, "cnn", [x], "x86")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_onnx_cnn_matches_numpy_on_vulkan(
    vulkan: None, cnn: tuple[str, np.ndarray, np.ndarray]
) -> None:
    lowered, x, want = cnn
    (got,) = run_module(lowered, "cnn", [x], "vulkan")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.process
def test_onnx_ops_carry_node_names_and_op_types(cnn: tuple[str, np.ndarray, np.ndarray]) -> None:
    ops = _body_ops(cnn[0])
    op_types = {node.name: node.op_type for node in _cnn_model(_cnn_weights()).graph.node}
    by_layer: dict[str, list[str]] = {}
    for name, attrs in ops:
        if name in ("arith.constant", "tensor.empty", "func.return"):
            continue
        layer = attrs["tdsched.layer"]  # every computing op belongs to a node
        by_layer.setdefault(layer, []).append(name)
        assert attrs["tdsched.onnx_op"] == op_types[layer]
    assert set(by_layer) == set(op_types)
    # The bias becomes a linalg.broadcast init of the convolution.
    assert by_layer["stem"] == ["tensor.pad", "linalg.broadcast", "linalg.conv_2d_nchw_fchw"]
    assert by_layer["pool"] == ["tensor.pad", "linalg.fill", "linalg.pooling_nchw_max"]
    assert by_layer["flatten"] == ["tensor.collapse_shape"]
    assert by_layer["fc"] == ["linalg.transpose", "linalg.fill", "linalg.matmul", "linalg.generic"]
    # Max pooling pads with -inf; convolution and average pooling with 0.
    assert _pad_values(cnn[0]) == {"stem": 0.0, "conv2": 0.0, "pool": -np.inf, "avg": 0.0}


@pytest.mark.process
def test_onnx_old_opset_is_upgraded() -> None:
    # torch-mlir lowers MaxPool only from opset 12; the model is upgraded to opset 17 first.
    lowered = lower_onnx(_cnn_model(_cnn_weights(), opset=11), "old.onnx")
    assert "linalg.pooling_nchw_max" in lowered


def test_onnx_invalid_files_are_rejected(tmp_path: Path) -> None:
    garbage = tmp_path / "net.onnx"
    garbage.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(
        LoweringError, match=r"^net\.onnx: not a valid ONNX model: Error parsing message"
    ):
        lower_onnx(garbage, "net.onnx")
    with pytest.raises(
        LoweringError, match=r"^gone\.onnx: not a valid ONNX model: cannot read it \(No such file"
    ):
        lower_onnx(str(tmp_path / "gone.onnx"), "gone.onnx")


@pytest.mark.process
def test_onnx_unsupported_nodes_are_listed_together() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Foo", ["a"], ["b"], name="mystery", domain="com.example"),
        helper.make_node("Bar", ["b"], ["y"], name="enigma", domain="com.example"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
    )
    with pytest.raises(LoweringError) as err:
        lower_onnx(model, "net.onnx")
    assert str(err.value).splitlines() == [
        "net.onnx: node 'mystery' (op Foo, domain com.example): not supported by IREE's ONNX import (torch-mlir has no lowering for it)",
        "net.onnx: node 'enigma' (op Bar, domain com.example): not supported by IREE's ONNX import (torch-mlir has no lowering for it)",
    ]


def test_onnx_dynamic_input_dim_is_rejected() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(
        LoweringError,
        match=r"^dyn\.onnx: input 'x' has dynamic shape \[batch, 3\]: tdsched needs static shapes",
    ):
        lower_onnx(model, "dyn.onnx")


def test_onnx_without_the_onnx_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    with pytest.raises(
        LoweringError, match=r"^ONNX import needs the onnx package: pip install 'tdsched\[onnx\]'$"
    ):
        lower_onnx("net.onnx", "net.onnx")


@pytest.mark.process
def test_onnx_ops_lowered_outside_linalg_are_rejected() -> None:
    # torch-mlir lowers ScatterElements to tm_tensor.scatter, which is not linalg on tensors.
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2]),
        helper.make_tensor_value_info("i", TensorProto.INT64, [1, 2]),
        helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, 2]),
    ]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
    scatter = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="sc")
    model = helper.make_model(
        helper.make_graph([scatter], "g", inputs, [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    with pytest.raises(LoweringError) as err:
        lower_onnx(model, "sc.onnx")
    assert str(err.value) == (
        "sc.onnx at 'sc': unsupported op 'tm_tensor.scatter' after IREE's ONNX import and "
        "torch-mlir's lowering: tdsched takes linalg, tensor, arith and math ops only"
    )
