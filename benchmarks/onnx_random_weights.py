"""Give an ONNX model seeded random weights, for benchmarks on models shipped without real
ones.

The "light" models in the onnx package (``onnx/backend/test/data/light/*.onnx``) hold
their weights as ``ConstantOfShape`` nodes that fill every tensor with one value (0.02).
IREE folds such splat weights into the kernels, so the dispatches it forms, and their
times, are not a real network's, and every output element comes out equal (a numerics
check against any reference passes trivially). This script replaces every
``ConstantOfShape`` node whose shape is an initializer, and every float initializer of
more than one element, by a random initializer of the same shape:

* tensors of rank >= 2 (conv and dense weights): normal with variance 2 / fan-in (He), so
  activations keep their scale through a deep ReLU network;
* 1-D tensors a normalization reads as a scale or a variance (``BatchNormalization``'s
  ``scale`` and ``input_var``, ``InstanceNormalization``'s and ``LayerNormalization``'s
  ``scale``), found by where they are used, not by their names: uniform in [0.5, 1.5);
  other 1-D tensors (biases, means): uniform in [-0.1, 0.1).

    .venv/bin/python benchmarks/onnx_random_weights.py MODEL.onnx OUT.onnx [--seed 0]

Used for docs/commands/tasks.md (ResNet-50).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

POSITIVE_OPERANDS = {
    "BatchNormalization": (1, 4),
    "InstanceNormalization": (1,),
    "LayerNormalization": (1,),
}
"""Operand positions, per op type, that must stay positive (a scale, a variance)."""


def positive_names(graph: onnx.GraphProto) -> set[str]:
    """The tensors some node reads at a :data:`POSITIVE_OPERANDS` position."""
    return {
        node.input[i]
        for node in graph.node
        for i in POSITIVE_OPERANDS.get(node.op_type, ())
        if i < len(node.input)
    }


def random_tensor(shape: tuple[int, ...], positive: bool, rng: np.random.Generator) -> np.ndarray:
    """A random f32 tensor of ``shape`` (see the module docstring); ``positive`` for a
    1-D scale or variance."""
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:]))
        values = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    elif positive:
        values = rng.uniform(0.5, 1.5, shape)
    else:
        values = rng.uniform(-0.1, 0.1, shape)
    return values.astype(np.float32)


def randomize(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """A copy of ``model`` with random weights; it passes ``onnx.checker``."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rng = np.random.default_rng(seed)
    graph = out.graph
    shapes = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    positive = positive_names(graph)
    for index, init in enumerate(graph.initializer):
        array = shapes[init.name]
        if array.dtype == np.float32 and array.size > 1:
            fresh = random_tensor(array.shape, init.name in positive, rng)
            graph.initializer[index].CopyFrom(numpy_helper.from_array(fresh, init.name))
    declare = out.ir_version < 4  # IR version < 4 lists every initializer as an input
    kept = []
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            kept.append(node)
            continue
        name = node.output[0]
        shape = tuple(int(d) for d in shapes[node.input[0]])
        graph.initializer.append(
            numpy_helper.from_array(random_tensor(shape, name in positive, rng), name)
        )
        if declare:
            graph.input.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape))
    del graph.node[:]
    graph.node.extend(kept)
    onnx.checker.check_model(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="the ONNX model")
    parser.add_argument("out", type=Path, help="where to write the model with random weights")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args()
    onnx.save(randomize(onnx.load(args.model), args.seed), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
