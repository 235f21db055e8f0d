"""Test helper: small ONNX models written with ``onnx.helper``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp_model(path: Path) -> None:
    """Two identical dense+relu layers (different weights) and a wider third one."""
    rng = np.random.default_rng(0)
    f = TensorProto.FLOAT
    weights = {
        "w1": rng.standard_normal((64, 64)),
        "w2": rng.standard_normal((64, 64)),
        "w3": rng.standard_normal((64, 128)),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1"),
        helper.make_node("Relu", ["m1"], ["a1"], name="act1"),
        helper.make_node("MatMul", ["a1", "w2"], ["m2"], name="fc2"),
        helper.make_node("Relu", ["m2"], ["a2"], name="act2"),
        helper.make_node("MatMul", ["a2", "w3"], ["y"], name="fc3"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", f, [32, 64])],
        [helper.make_tensor_value_info("y", f, [32, 128])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def matmul_model(path: Path, m: int, k: int, n: int) -> None:
    """One MatMul of an ``m x k`` input by a constant ``k x n`` weight."""
    weight = np.random.default_rng(0).standard_normal((k, n)).astype(np.float32)
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")],
        "matmul",
        [helper.make_tensor_value_info("x", f, [m, k])],
        [helper.make_tensor_value_info("y", f, [m, n])],
        [numpy_helper.from_array(weight, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def relu_model(path: Path, shape: list[int], name: str = "relu", opset: int = 17) -> None:
    """One Relu of an input of ``shape``, in a graph called ``name``."""
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="act")],
        name,
        [helper.make_tensor_value_info("x", f, shape)],
        [helper.make_tensor_value_info("y", f, shape)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)


def identity_graph(path: Path) -> None:
    """A graph without nodes: its output is its input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    graph = helper.make_graph([], "nothing", [x], [x])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def encoder_block_model(path: Path) -> None:
    """Scores, softmax and a layer norm: the row reductions of an encoder block."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 64).astype(np.float32), "g"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, 64).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores"),
        helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "x"], ["c"], name="context"),
        helper.make_node("LayerNormalization", ["c", "g", "b"], ["y"], name="norm", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64]),
            helper.make_tensor_value_info("xt", TensorProto.FLOAT, [64, 32]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
