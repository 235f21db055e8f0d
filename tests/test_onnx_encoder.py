"""benchmarks/onnx_encoder.py: the encoder block ``tdsched tune`` is benchmarked on."""

from __future__ import annotations

import numpy as np
from benchmark_scripts import benchmark_script
from onnx.reference import ReferenceEvaluator


def test_the_encoder_block_is_a_valid_model_whose_output_rows_are_layer_normed() -> None:
    model = benchmark_script("onnx_encoder").encoder_model(
        tokens=8, hidden=16, heads=2, inner=32, seed=0
    )
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("Softmax") == 1 and ops.count("LayerNormalization") == 2
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    (y,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert y.shape == (8, 16) and np.isfinite(y).all()
    gamma, beta = (
        np.frombuffer(init.raw_data, np.float32)
        for name in ("norm2.gamma", "norm2.beta")
        for init in model.graph.initializer
        if init.name == name
    )
    normed = (y - beta) / gamma  # each row: mean 0, variance 1
    assert np.allclose(normed.mean(axis=1), 0.0, atol=1e-4)
    assert np.allclose(normed.var(axis=1), 1.0, atol=1e-2)
