"""The parts of a model graph: tensors, layers, sliding windows, layouts, and the error
that names the user's line.

:class:`~.builder.Model` builds graphs of these parts; the lowering (:mod:`.to_linalg`),
the numpy reference (:mod:`.reference`) and the ONNX export (:mod:`.to_onnx`) read them
through :class:`ModelGraph`, so none of them depends on the builder.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, get_args

import numpy as np
from tdsched.targets.workload import WorkloadError

if TYPE_CHECKING:
    from types import FrameType

Layout = Literal["NCHW", "NHWC"]
LayerType = Literal[
    "conv2d",
    "relu",
    "add",
    "max_pool",
    "avg_pool",
    "adaptive_avg_pool",
    "flatten",
    "linear",
    "layer_norm",
    "gelu",
    "softmax",
    "attention",
]
AttrValue = str | int | float | bool

LAYOUTS: tuple[Layout, ...] = get_args(Layout)
RESERVED_ATTRS = frozenset(
    {
        "value",
        "static_low",
        "static_high",
        "nofold",
        "operandSegmentSizes",
        "strides",
        "dilations",
        "indexing_maps",
        "iterator_types",
        "doc",
        "library_call",
        "cast",
        "reassociation",
    }
)
"""Inherent attribute names of the ops a layer lowers to; user attributes may not reuse them."""

_PACKAGE = __name__.rpartition(".")[0]


class ModelError(WorkloadError):
    """A model or layer is invalid; the message names the user's line, the layer and the fix."""


def _in_package(module: str) -> bool:
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")


def _user_site() -> str | None:
    """``file:line`` of the first stack frame outside this package (where the user called
    us); ``None`` when that frame is tdsched's own (a shipped model built for a recipe)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _in_package(str(frame.f_globals.get("__name__", ""))):
        frame = frame.f_back
    if frame is None or str(frame.f_globals.get("__name__", "")).startswith("tdsched."):
        return None
    path = frame.f_code.co_filename
    relative = os.path.relpath(path) if os.path.isabs(path) else path
    return f"{path if relative.startswith('..') else relative}:{frame.f_lineno}"


def fail(subject: str, problem: str) -> ModelError:
    """A :class:`ModelError` for ``subject`` (e.g. ``layer 'fc'``), prefixed with the
    user's line when the call came from user code."""
    site = _user_site()
    return ModelError(f"{site + ': ' if site else ''}{subject}: {problem}")


def channel_axis(layout: Layout) -> int:
    """Axis of the channels in a rank-4 tensor of ``layout``."""
    return 1 if layout == "NCHW" else 3


def spatial_axes(layout: Layout) -> tuple[int, int]:
    """Axes of H and W in a rank-4 tensor of ``layout``."""
    return (2, 3) if layout == "NCHW" else (1, 2)


def image_shape(layout: Layout, n: int, c: int, h: int, w: int) -> tuple[int, int, int, int]:
    """The rank-4 shape of an ``n x c x h x w`` image in ``layout`` order."""
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


@dataclass(frozen=True)
class Window:
    """A 2-D sliding window: kernel, stride, padding (top, left, bottom, right) and dilation."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]
    dilation: tuple[int, int] = (1, 1)

    @property
    def padded(self) -> bool:
        """Whether any side is padded."""
        return any(self.padding)

    def output_size(self, h: int, w: int) -> tuple[int, int]:
        """Output H, W for an ``h x w`` input (floor mode); may be < 1 for a too-small input."""
        top, left, bottom, right = self.padding
        return (
            (h + top + bottom - self.dilation[0] * (self.kernel[0] - 1) - 1) // self.stride[0] + 1,
            (w + left + right - self.dilation[1] * (self.kernel[1] - 1) - 1) // self.stride[1] + 1,
        )

    def valid_counts(self, h: int, w: int) -> np.ndarray:
        """``[OH, OW]`` float32 counts of window elements inside the unpadded ``h x w`` input.

        Precondition: dilation 1 (pooling windows).
        """
        oh, ow = self.output_size(h, w)
        rows = _covered(oh, self.stride[0], self.padding[0], self.kernel[0], h)
        cols = _covered(ow, self.stride[1], self.padding[1], self.kernel[1], w)
        return np.outer(rows, cols).astype(np.float32)


def _covered(count: int, stride: int, pad: int, kernel: int, size: int) -> np.ndarray:
    """How many of each window's ``kernel`` positions along one axis fall inside ``[0, size)``."""
    start = np.arange(count) * stride - pad
    return np.minimum(start + kernel, size) - np.maximum(start, 0)


@dataclass(frozen=True, eq=False)
class Tensor:
    """A value of a model: the model input or a layer's output (``source`` names which)."""

    shape: tuple[int, ...]
    model: ModelGraph = field(repr=False)
    source: str


@dataclass(frozen=True, eq=False)
class Layer:
    """One layer: its inputs and output, user attributes and parameters.

    Weights are canonical: conv ``[F, C / groups, KH, KW]`` (as ONNX and PyTorch hold
    them: output channel ``f`` belongs to group ``f // (F / groups)``), linear
    ``[out, in]``, biases ``[F]``; a layer_norm's scale (gamma) is its weight and its
    shift (beta) its bias, both ``[D]``.
    """

    name: str
    type: LayerType
    inputs: tuple[Tensor, ...]
    output: Tensor
    attrs: Mapping[str, AttrValue]
    window: Window | None = None
    weight: np.ndarray | None = field(default=None, repr=False)
    bias: np.ndarray | None = field(default=None, repr=False)
    count_include_pad: bool = True
    groups: int = 1
    """A conv2d's groups: input and output channels split into that many groups, each
    convolved with its own filters (``groups`` = channels: a depthwise convolution)."""
    heads: int = 1
    """An attention layer's heads: the features split into that many, each attending alone."""
    epsilon: float = 1e-5
    """A layer_norm's epsilon, added to the variance before its square root."""

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the inputs, in the model's layout."""
        return [t.shape for t in self.inputs]

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of the output, in the model's layout."""
        return self.output.shape

    @property
    def params(self) -> dict[str, object]:
        """The layer's parameters for display (window fields, weight shapes, pool options)."""
        params: dict[str, object] = {}
        if self.window is not None:
            params.update(vars(self.window))
        if self.weight is not None:
            params["weight"] = list(self.weight.shape)
            params["bias"] = self.bias is not None
        if self.type == "avg_pool":
            params["count_include_pad"] = self.count_include_pad
        if self.groups != 1:
            params["groups"] = self.groups
        if self.type == "attention":
            params["heads"] = self.heads
        if self.type == "layer_norm":
            params["epsilon"] = self.epsilon
        return params

    def sliding_window(self) -> Window:
        """The window of a conv2d or pooling layer (precondition: the layer has one)."""
        if self.window is None:
            raise ValueError(f"layer {self.name!r} ({self.type}) has no window")
        return self.window

    def weights(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Weight and optional bias of a conv2d, linear or layer_norm layer (precondition:
        it has them)."""
        if self.weight is None:
            raise ValueError(f"layer {self.name!r} ({self.type}) has no weights")
        return self.weight, self.bias


class ModelGraph(Protocol):
    """What a built model is to the code that lowers, runs or exports it: its name,
    layout, input, outputs and layers in the order they were added."""

    name: str
    layout: Layout
    input: Tensor
    outputs: list[Tensor]

    @property
    def layers(self) -> list[Layer]: ...
