"""The numpy forward pass of a :class:`Model`, the reference its lowerings are checked against.

Computed in float64 with images held internally as NCHW whatever the model's layout (only
the input, ``flatten`` and the returned outputs see the layout), independently of the linalg
lowering: pooling counts come from pooling a mask, not from ``Window.valid_counts``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from .graph import Layer, Layout, ModelGraph, Tensor, Window

_TO_NCHW = (0, 3, 1, 2)
_TO_NHWC = (0, 2, 3, 1)


def forward(model: ModelGraph, x: np.ndarray) -> list[np.ndarray]:
    """The model's outputs (float32) for input ``x`` (precondition: ``x`` has the input shape)."""
    values: dict[Tensor, np.ndarray] = {model.input: _canonical(x.astype(np.float64), model.layout)}
    for layer in model.layers:
        args = [values[t] for t in layer.inputs]
        values[layer.output] = _LAYERS[layer.type](layer, args, model.layout)
    return [_in_layout(values[t], model.layout).astype(np.float32) for t in model.outputs]


def _canonical(x: np.ndarray, layout: Layout) -> np.ndarray:
    return x.transpose(_TO_NCHW) if x.ndim == 4 and layout == "NHWC" else x


def _in_layout(x: np.ndarray, layout: Layout) -> np.ndarray:
    return x.transpose(_TO_NHWC) if x.ndim == 4 and layout == "NHWC" else x


def _patches(x: np.ndarray, window: Window, fill: float) -> Iterator[tuple[int, int, np.ndarray]]:
    """For each kernel offset ``(i, j)``, the ``[N, C, OH, OW]`` input values it reads."""
    top, left, bottom, right = window.padding
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    oh, ow = window.output_size(x.shape[2], x.shape[3])
    (sh, sw), (dh, dw) = window.stride, window.dilation
    for i in range(window.kernel[0]):
        for j in range(window.kernel[1]):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            yield i, j, padded[:, :, rows, cols]


def _conv2d(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    weight, bias = layer.weights()
    g = layer.groups
    f, cg = weight.shape[:2]
    # Group gi's output channels [gi * f/g, (gi + 1) * f/g) read its input channels
    # [gi * cg, (gi + 1) * cg).
    w = weight.astype(np.float64).reshape(g, f // g, cg, *weight.shape[2:])
    grouped = [
        np.einsum("ngchw,gfc->ngfhw", _split(patch, g), w[..., i, j])
        for i, j, patch in _patches(args[0], layer.sliding_window(), 0.0)
    ]
    total = np.add.reduce(grouped)
    out: np.ndarray = total.reshape(total.shape[0], f, *total.shape[3:])
    return out if bias is None else out + bias.astype(np.float64)[None, :, None, None]


def _split(patch: np.ndarray, groups: int) -> np.ndarray:
    """An NCHW patch with its channels split into ``groups``: ``[N, G, C / G, H, W]``."""
    n, c, h, w = patch.shape
    return patch.reshape(n, groups, c // groups, h, w)


def _max_pool(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    patches = [p for _, _, p in _patches(args[0], layer.sliding_window(), -np.inf)]
    out: np.ndarray = np.maximum.reduce(patches)
    return out


def _avg_pool(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    window = layer.sliding_window()
    total = _sum_pool(args[0], window)
    if layer.count_include_pad:
        divisor: np.ndarray | float = float(window.kernel[0] * window.kernel[1])
    else:
        divisor = _sum_pool(np.ones((1, 1, *args[0].shape[2:])), window)
    out: np.ndarray = total / divisor
    return out


def _sum_pool(x: np.ndarray, window: Window) -> np.ndarray:
    out: np.ndarray = np.add.reduce([p for _, _, p in _patches(x, window, 0.0)])
    return out


def _flatten(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    image = _in_layout(args[0], layout)
    return image.reshape(image.shape[0], -1)


def _linear(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    weight, bias = layer.weights()
    out = args[0] @ weight.astype(np.float64).T
    return out if bias is None else out + bias.astype(np.float64)


def _layer_norm(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    gamma, beta = layer.weights()
    centred = args[0] - args[0].mean(axis=1, keepdims=True)
    scaled = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + layer.epsilon)
    out: np.ndarray = scaled * gamma.astype(np.float64)
    return out if beta is None else out + beta.astype(np.float64)


_ERF = np.vectorize(math.erf, otypes=[np.float64])
"""numpy has no erf; math.erf, elementwise (a reference, not a peer: speed is no concern)."""


def _gelu(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    x = args[0]
    out: np.ndarray = 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return out


def _attention(layer: Layer, args: list[np.ndarray], layout: Layout) -> np.ndarray:
    """Per head h: softmax(Q_h K_hᵀ / sqrt(D / heads)) V_h, the heads side by side."""
    q, k, v = (a.reshape(a.shape[0], layer.heads, -1).transpose(1, 0, 2) for a in args)
    scores = np.matmul(q, k.transpose(0, 2, 1)) / math.sqrt(q.shape[2])
    context = np.matmul(_softmax(scores), v)  # [heads, S, D / heads]
    out: np.ndarray = context.transpose(1, 0, 2).reshape(args[0].shape)
    return out


_LAYERS: dict[str, Callable[[Layer, list[np.ndarray], Layout], np.ndarray]] = {
    "conv2d": _conv2d,
    "relu": lambda layer, args, layout: np.maximum(args[0], 0.0),
    "add": lambda layer, args, layout: args[0] + args[1],
    "max_pool": _max_pool,
    "avg_pool": _avg_pool,
    "adaptive_avg_pool": _avg_pool,
    "flatten": _flatten,
    "linear": _linear,
    "layer_norm": _layer_norm,
    "gelu": _gelu,
    "softmax": lambda layer, args, layout: _softmax(args[0]),
    "attention": _attention,
}
