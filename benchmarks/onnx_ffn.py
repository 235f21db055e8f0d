"""Write a transformer feed-forward block as an ONNX model, for ``tdsched tune`` benchmarks.

``y = relu(x @ W1 + b1) @ W2 + b2`` on ``x: [tokens, hidden]``, ``W1: [hidden, inner]``,
``W2: [inner, hidden]``, built with ``onnx.helper`` at opset 17. The weights and biases
are seeded random initializers (He-scaled weights, biases uniform in [-0.1, 0.1)), so
IREE treats them as constants as it would a trained model's, and the output is not
trivially uniform (a numerics check against onnx's reference evaluator means something).

    .venv/bin/python benchmarks/onnx_ffn.py ffn.onnx [--tokens 128] [--hidden 768]
        [--inner 3072] [--seed 0]

The default shape is BERT-base's FFN at 128 tokens (the issue's 128x768x3072 and
128x3072x768 matmuls).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def ffn_model(tokens: int, hidden: int, inner: int, seed: int) -> onnx.ModelProto:
    """The FFN block as a checked ONNX model (see the module docstring)."""
    rng = np.random.default_rng(seed)

    def weight(name: str, rows: int, cols: int) -> onnx.TensorProto:
        values = rng.standard_normal((rows, cols)) * np.sqrt(2.0 / rows)
        return numpy_helper.from_array(values.astype(np.float32), name)

    def bias(name: str, size: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.uniform(-0.1, 0.1, size).astype(np.float32), name)

    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="ffn.up"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="ffn.up_bias"),
        helper.make_node("Relu", ["h1"], ["h2"], name="ffn.act"),
        helper.make_node("MatMul", ["h2", "w2"], ["y0"], name="ffn.down"),
        helper.make_node("Add", ["y0", "b2"], ["y"], name="ffn.down_bias"),
    ]
    weights = [weight("w1", hidden, inner), bias("b1", inner)]
    weights += [weight("w2", inner, hidden), bias("b2", hidden)]
    return token_model("ffn", nodes, weights, (tokens, hidden), "y")


def token_model(
    name: str,
    nodes: list[onnx.NodeProto],
    weights: list[onnx.TensorProto],
    shape: tuple[int, int],
    output: str,
) -> onnx.ModelProto:
    """A checked opset-17 model of ``nodes`` from input ``x`` to ``output``, both f32
    tensors of ``shape`` (tokens, hidden), with ``weights`` as initializers."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, list(shape))],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the .onnx file to write")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--inner", type=int, default=3072)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    onnx.save(ffn_model(args.tokens, args.hidden, args.inner, args.seed), args.out)
    print(f"wrote {args.out}: FFN {args.tokens}x{args.hidden}, inner {args.inner}")


if __name__ == "__main__":
    main()
