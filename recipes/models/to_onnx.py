"""Export of an NCHW :class:`Model` to ONNX (opset 17) with the ``onnx`` package.

Node names are layer names, weights are initializers ``<layer>.weight`` / ``<layer>.bias``, the
graph input is ``input`` and the outputs ``output`` (or ``output_<i>`` for several). ``onnx``
is imported only here, so the rest of the builder works without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .graph import Layer, ModelGraph, Tensor, fail

OPSET = 17
_IR_VERSION = 8
"""The ONNX IR version that introduced opset 17: readable by every consumer of that opset."""

NodeSpec = tuple[str, dict[str, Any]]


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


_NODES: dict[str, Callable[[Layer], NodeSpec]] = {
    "conv2d": _conv,
    "relu": lambda layer: ("Relu", {}),
    "add": lambda layer: ("Add", {}),
    "max_pool": lambda layer: ("MaxPool", _window_attributes(layer)),
    "avg_pool": _avg_pool,
    "adaptive_avg_pool": _adaptive_avg_pool,
    "flatten": lambda layer: ("Flatten", {"axis": 1}),
    "linear": lambda layer: ("Gemm", {"transB": 1}),
}
