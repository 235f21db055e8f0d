"""Write a transformer encoder block as an ONNX model, for ``tdsched tune`` benchmarks of
row reductions (softmax, layer norm) beside matmuls.

On ``x: [tokens, hidden]`` with ``heads`` attention heads of ``hidden / heads`` each:

    q, k, v = x @ Wq, x @ Wk, x @ Wv             split into heads: [heads, tokens, d]
    a = softmax(q @ k^T / sqrt(d)) @ v            merged back: [tokens, hidden]
    h = LayerNorm(x + a @ Wo)
    y = LayerNorm(h + relu(h @ W1 + b1) @ W2 + b2)

built with ``onnx.helper`` at opset 17 (``LayerNormalization`` over the last axis,
``Softmax`` over the last axis). Weights are seeded random initializers as in
``onnx_ffn.py`` (beside it: the model is built by its ``token_model``); the layer
norms' scales are uniform in [0.5, 1.5), their biases in [-0.1, 0.1).

    .venv/bin/python benchmarks/onnx_encoder.py encoder.onnx [--tokens 128] [--hidden 256]
        [--heads 4] [--inner 1024] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx_ffn import token_model


def encoder_model(tokens: int, hidden: int, heads: int, inner: int, seed: int) -> onnx.ModelProto:
    """The encoder block as a checked ONNX model (see the module docstring)."""
    if hidden % heads:
        raise SystemExit(f"--hidden {hidden} is not a multiple of --heads {heads}")
    rng = np.random.default_rng(seed)
    d = hidden // heads
    inits: list[onnx.TensorProto] = []

    def const(name: str, values: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(values, name))
        return name

    def weight(name: str, rows: int, cols: int) -> str:
        values = rng.standard_normal((rows, cols)) * np.sqrt(2.0 / rows)
        return const(name, values.astype(np.float32))

    def uniform(name: str, size: int, low: float, high: float) -> str:
        return const(name, rng.uniform(low, high, size).astype(np.float32))

    nodes: list[onnx.NodeProto] = []

    def node(op: str, inputs: list[str], name: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    split = const("split_shape", np.array([tokens, heads, d], np.int64))
    merged = const("merged_shape", np.array([tokens, hidden], np.int64))

    def heads_of(x: str, w: str, name: str, perm: list[int]) -> str:
        projected = node("MatMul", [x, weight(w, hidden, hidden)], f"{name}.proj")
        shaped = node("Reshape", [projected, split], f"{name}.split")
        return node("Transpose", [shaped], f"{name}.heads", perm=perm)

    q = heads_of("x", "wq", "attn.q", [1, 0, 2])
    k = heads_of("x", "wk", "attn.k", [1, 2, 0])
    v = heads_of("x", "wv", "attn.v", [1, 0, 2])
    scores = node("MatMul", [q, k], "attn.scores")
    scale = const("scale", np.array(1.0 / np.sqrt(d), np.float32))
    scaled = node("Mul", [scores, scale], "attn.scale")
    probs = node("Softmax", [scaled], "attn.softmax", axis=-1)
    context = node("MatMul", [probs, v], "attn.context")
    merged_heads = node("Transpose", [context], "attn.merge", perm=[1, 0, 2])
    flat = node("Reshape", [merged_heads, merged], "attn.flat")
    out = node("MatMul", [flat, weight("wo", hidden, hidden)], "attn.out")
    res1 = node("Add", ["x", out], "attn.residual")

    def layer_norm(x: str, name: str) -> str:
        scale = uniform(f"{name}.gamma", hidden, 0.5, 1.5)
        bias = uniform(f"{name}.beta", hidden, -0.1, 0.1)
        return node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-5)

    h = layer_norm(res1, "norm1")
    up = node("MatMul", [h, weight("w1", hidden, inner)], "ffn.up")
    up_bias = node("Add", [up, uniform("b1", inner, -0.1, 0.1)], "ffn.up_bias")
    act = node("Relu", [up_bias], "ffn.act")
    down = node("MatMul", [act, weight("w2", inner, hidden)], "ffn.down")
    down_bias = node("Add", [down, uniform("b2", hidden, -0.1, 0.1)], "ffn.down_bias")
    res2 = node("Add", [h, down_bias], "ffn.residual")
    y = layer_norm(res2, "norm2")
    return token_model("encoder", nodes, inits, (tokens, hidden), y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the .onnx file to write")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--inner", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = encoder_model(args.tokens, args.hidden, args.heads, args.inner, args.seed)
    onnx.save(model, args.out)
    print(
        f"wrote {args.out}: encoder block, {args.tokens} tokens x {args.hidden}, "
        f"{args.heads} heads, FFN inner {args.inner}"
    )


if __name__ == "__main__":
    main()
