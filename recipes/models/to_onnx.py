"""Export of an NCHW :class:`Model` to ONNX (opset 17) with the ``onnx`` package.

Node names are layer names, weights are initializers ``<layer>.weight`` / ``<layer>.bias``, the
graph input is ``input`` and the outputs ``output`` (or ``output_<i>`` for several). A layer
opset 17 has no single op for (gelu, attention) becomes several nodes, named, with their
values and constants, ``<layer>/<step>`` (a ``/`` no layer name holds). ``onnx`` is imported
only here, so the rest of the builder works without it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from .graph import Layer, ModelGraph, Tensor, fail

OPSET = 17
_IR_VERSION = 8
"""The ONNX IR version that introduced opset 17: readable by every consumer of that opset."""

NodeSpec = tuple[str, dict[str, Any]]
Nodes = tuple[list[Any], list[Any]]
"""A layer's ONNX nodes and the constant initializers they read."""


def export(model: ModelGraph) -> Any:
    """The checked ``onnx.ModelProto`` (preconditions: NCHW layout, at least one output)."""
    onnx = _import_onnx(model)
    names = _value_names(model)
    nodes, initializers = [], []
    for layer in model.layers:
        inputs = [names[t] for t in layer.inputs]
        if layer.weight is not None:
            for suffix, array in zip(("weight", "bias"), layer.weights(), strict=True):
                if array is not None:
                    initializers.append(
                        onnx.numpy_helper.from_array(array, f"{layer.name}.{suffix}")
                    )
                    inputs.append(f"{layer.name}.{suffix}")
        if layer.type in _COMPOSITES:
            added, constants = _COMPOSITES[layer.type](onnx, layer, inputs, names[layer.output])
            nodes += added
            initializers += constants
            continue
        op_type, attributes = _NODES[layer.type](layer)
        nodes.append(
            onnx.helper.make_node(
                op_type, inputs, [names[layer.output]], name=layer.name, **attributes
            )
        )
    graph = onnx.helper.make_graph(
        nodes,
        model.name,
        [_value_info(onnx, "input", model.input)],
        [_value_info(onnx, names[t], t) for t in model.outputs],
        initializer=initializers,
    )
    proto = onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid("", OPSET)],
        producer_name="tdsched",
        ir_version=_IR_VERSION,
    )
    onnx.checker.check_model(proto)
    return proto


def _import_onnx(model: ModelGraph) -> ModuleType:
    try:
        return importlib.import_module("onnx")
    except ImportError as exc:
        raise fail(
            f"model {model.name!r}",
            "exporting to ONNX needs the onnx package: pip install 'tdsched[onnx]'",
        ) from exc


def _value_names(model: ModelGraph) -> dict[Tensor, str]:
    """ONNX value names: ``input``, ``output``/``output_<i>`` for outputs, else the layer name."""
    names = {model.input: "input"} | {layer.output: layer.name for layer in model.layers}
    if len(model.outputs) == 1:
        names[model.outputs[0]] = "output"
    else:
        names |= {t: f"output_{i}" for i, t in enumerate(model.outputs)}
    return names


def _value_info(onnx: ModuleType, name: str, tensor: Tensor) -> Any:
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(tensor.shape))


def _window_attributes(layer: Layer) -> dict[str, Any]:
    window = layer.sliding_window()
    return {
        "kernel_shape": list(window.kernel),
        "strides": list(window.stride),
        "pads": list(window.padding),
    }


def _conv(layer: Layer) -> NodeSpec:
    dilations = list(layer.sliding_window().dilation)
    return "Conv", {**_window_attributes(layer), "dilations": dilations, "group": layer.groups}


def _avg_pool(layer: Layer) -> NodeSpec:
    count_include_pad = int(layer.count_include_pad)
    return "AveragePool", {**_window_attributes(layer), "count_include_pad": count_include_pad}


def _adaptive_avg_pool(layer: Layer) -> NodeSpec:
    if layer.output_shape[2:] == (1, 1):
        return "GlobalAveragePool", {}
    return _avg_pool(layer)


class _Steps:
    """The nodes of one layer that ONNX spells in several: each step named
    ``<layer>/<step>``, its output value too, constants as initializers."""

    def __init__(self, onnx: ModuleType, layer: Layer) -> None:
        self.onnx, self.layer = onnx, layer
        self.nodes: list[Any] = []
        self.constants: list[Any] = []

    def constant(self, step: str, value: float | list[int]) -> str:
        """An f32 scalar or an int64 vector (a shape) as an initializer; its name."""
        name = f"{self.layer.name}/{step}"
        array = np.array(value, np.int64 if isinstance(value, list) else np.float32)
        self.constants.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def node(self, step: str, op_type: str, inputs: list[str], out: str = "", **attrs: Any) -> str:
        """Add a node; its output is ``out`` or, when none is given, ``<layer>/<step>``."""
        name = f"{self.layer.name}/{step}"
        self.nodes.append(
            self.onnx.helper.make_node(op_type, inputs, [out or name], name=name, **attrs)
        )
        return out or name


def _gelu(onnx: ModuleType, layer: Layer, inputs: list[str], out: str) -> Nodes:
    """``0.5 x (1 + erf(x / sqrt 2))`` (Gelu is an op from opset 20 on): Div, Erf, Add, Mul,
    Mul, the pattern onnxruntime fuses into its Gelu kernel."""
    steps = _Steps(onnx, layer)
    (x,) = inputs
    sqrt2 = steps.constant("sqrt2", math.sqrt(2.0))
    erf = steps.node("erf", "Erf", [steps.node("div", "Div", [x, sqrt2])])
    shifted = steps.node("add", "Add", [erf, steps.constant("one", 1.0)])
    product = steps.node("mul", "Mul", [x, shifted])
    steps.node("mul_half", "Mul", [product, steps.constant("half", 0.5)], out)
    return steps.nodes, steps.constants


def _attention(onnx: ModuleType, layer: Layer, inputs: list[str], out: str) -> Nodes:
    """Per head ``softmax(Q Kᵀ / sqrt(d)) V``: Q, K, V reshaped to ``[T, heads, d]`` and
    transposed heads first (K to ``[heads, d, T]``), MatMul, Mul by the scale, Softmax
    over the keys, MatMul with V, transposed back and reshaped to ``[S, D]``."""
    steps = _Steps(onnx, layer)
    heads = layer.heads
    s, d = layer.output_shape
    t = layer.inputs[1].shape[0]
    dh = d // heads

    def split(name: str, value: str, tokens: int, perm: list[int]) -> str:
        shape = steps.constant(f"{name}_shape", [tokens, heads, dh])
        reshaped = steps.node(f"{name}_split", "Reshape", [value, shape])
        return steps.node(f"{name}_heads", "Transpose", [reshaped], perm=perm)

    q = split("q", inputs[0], s, [1, 0, 2])
    k = split("k", inputs[1], t, [1, 2, 0])
    v = split("v", inputs[2], t, [1, 0, 2])
    scale = steps.constant("inverse_sqrt_d", 1.0 / math.sqrt(dh))
    scores = steps.node("scale", "Mul", [steps.node("scores", "MatMul", [q, k]), scale])
    weights = steps.node("softmax", "Softmax", [scores], axis=-1)
    context = steps.node("context", "MatMul", [weights, v])
    tokens_first = steps.node("tokens_first", "Transpose", [context], perm=[1, 0, 2])
    steps.node("join", "Reshape", [tokens_first, steps.constant("joined_shape", [s, d])], out)
    return steps.nodes, steps.constants


_COMPOSITES: dict[str, Callable[[ModuleType, Layer, list[str], str], Nodes]] = {
    "gelu": _gelu,
    "attention": _attention,
}

_NODES: dict[str, Callable[[Layer], NodeSpec]] = {
    "conv2d": _conv,
    "relu": lambda layer: ("Relu", {}),
    "add": lambda layer: ("Add", {}),
    "max_pool": lambda layer: ("MaxPool", _window_attributes(layer)),
    "avg_pool": _avg_pool,
    "adaptive_avg_pool": _adaptive_avg_pool,
    "flatten": lambda layer: ("Flatten", {"axis": 1}),
    "linear": lambda layer: ("Gemm", {"transB": 1}),
    "layer_norm": lambda layer: ("LayerNormalization", {"axis": -1, "epsilon": layer.epsilon}),
    "softmax": lambda layer: ("Softmax", {"axis": -1}),
}
