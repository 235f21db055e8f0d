"""benchmarks/onnx_random_weights.py: a light model's splat weights become random ones."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
from benchmark_scripts import benchmark_script
from onnx.reference import ReferenceEvaluator

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _script() -> ModuleType:
    return benchmark_script("onnx_random_weights")


def _opset17(model: onnx.ModelProto) -> onnx.ModelProto:
    converted: onnx.ModelProto = onnx.version_converter.convert_version(model, 17)
    return converted


def test_light_model_gets_random_weights_and_a_non_trivial_output() -> None:
    model = onnx.load(LIGHT / "light_squeezenet.onnx")
    assert any(node.op_type == "ConstantOfShape" for node in model.graph.node)
    randomized = _script().randomize(model, seed=0)
    assert not any(node.op_type == "ConstantOfShape" for node in randomized.graph.node)
    initializers = {init.name for init in randomized.graph.initializer}
    (data,) = [v for v in randomized.graph.input if v.name not in initializers]
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    # At opset 17, as tdsched prepares it: onnx's evaluator gives opset-9 Softmax the new
    # single-axis meaning (over the [1, 1000, 1, 1] output's last dim: all 1). With the
    # model's splat weights every class gets the same probability (measured: ptp 0; not
    # evaluated here, which takes seconds); random weights tell the classes apart.
    (after,) = ReferenceEvaluator(_opset17(randomized)).run(None, {data.name: x})
    assert np.ptp(after) > 1e-4 and np.isfinite(after).all()


def test_batch_norm_variances_stay_positive_whatever_their_names() -> None:
    # light_resnet50 names its running variances ``..._bn_riv_0``: found by their use.
    model = onnx.load(LIGHT / "light_resnet50.onnx")
    randomized = _script().randomize(model, seed=0)
    arrays = {i.name: onnx.numpy_helper.to_array(i) for i in randomized.graph.initializer}
    norms = [n for n in randomized.graph.node if n.op_type == "BatchNormalization"]
    assert norms
    for node in norms:
        assert arrays[node.input[1]].min() > 0 and arrays[node.input[4]].min() > 0
        assert arrays[node.input[2]].min() < 0  # a bias may be negative
