"""The model graph API: a small, eagerly validated builder of CNN/MLP layers (pure Python + numpy).

A :class:`Model` records layers in call order. Each layer method checks its arguments, infers
the output shape in the model's layout, draws its weights from the model's seeded RNG and
returns the output :class:`Tensor`. Nothing is lowered until ``to_linalg``, ``reference``,
``to_onnx`` or ``workload`` is called; any mistake is reported at the call that made it, as a
:class:`ModelError` naming the user's source line, the layer, the problem and the fix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
from tdsched.targets.workload import Workload

from .graph import (
    LAYOUTS,
    RESERVED_ATTRS,
    AttrValue,
    Layer,
    LayerType,
    Layout,
    Tensor,
    Window,
    channel_axis,
    fail,
    image_shape,
    spatial_axes,
)
from .reference import forward
from .to_linalg import lower_model
from .to_onnx import export

if TYPE_CHECKING:
    pass

IntPair = int | tuple[int, int]
Padding = int | tuple[int, int] | tuple[int, int, int, int]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""Model names (MLIR symbols without dots) and user attribute names."""
_LAYER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_ONNX_NAMES = re.compile(r"input|output(_\d+)?|.*\.(weight|bias)")
_INT64 = range(-(2**63), 2**63)


class Model:
    """A graph of layers on one input, built call by call (see the module docstring)."""

    def __init__(
        self,
        name: str,
        input_shape: Sequence[int],
        layout: str = "NCHW",
        seed: int = 0,
        dtype: str = "f32",
    ) -> None:
        subject = f"model {name!r}"
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
            raise fail(subject, "model names are MLIR symbols: [A-Za-z_][A-Za-z0-9_]* (no dots)")
        if layout not in LAYOUTS:
            raise fail(subject, f'unknown layout {layout!r}; use "NCHW" or "NHWC"')
        if dtype != "f32":
            raise fail(subject, f"dtype {dtype!r} is not supported; models are f32 only")
        shape = tuple(input_shape)
        if len(shape) not in (2, 4) or not all(_is_int(d) and d >= 1 for d in shape):
            raise fail(
                subject,
                f"input_shape must be 4 positive ints (an image in {layout} order) "
                f"or 2 (a batch of vectors), got {list(shape)}",
            )
        self.name = name
        self.layout: Layout = "NCHW" if layout == "NCHW" else "NHWC"
        self.input = Tensor(shape, self, "input")
        self.outputs: list[Tensor] = []
        self._layers: list[Layer] = []
        self._rng = np.random.default_rng(seed)

    def __repr__(self) -> str:
        return f"Model({self.name!r}, input_shape={list(self.input.shape)}, {self.layout})"

    @property
    def layers(self) -> list[Layer]:
        """The layer records, in the order they were added."""
        return list(self._layers)

    # -- layers ---------------------------------------------------------------------------

    def conv2d(
        self,
        x: Tensor,
        out_channels: int,
        kernel: IntPair = 3,
        stride: IntPair = 1,
        padding: Padding = 0,
        dilation: IntPair = 1,
        bias: bool = True,
        groups: int = 1,
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """2-D convolution with a ``[F, C / groups, KH, KW]`` weight and an optional bias
        ``[F]``. ``groups`` splits the input and output channels into that many groups,
        each convolved with its own filters; ``groups`` = C = F is a depthwise
        convolution."""
        name, checked = self._begin("conv2d", name, attrs)
        n, c, h, w = self._image(name, x)
        if not _is_int(out_channels) or out_channels < 1:
            raise fail(f"layer {name!r}", f"out_channels must be an int >= 1, got {out_channels!r}")
        if not _is_int(groups) or groups < 1 or c % groups or out_channels % groups:
            raise fail(
                f"layer {name!r}",
                f"groups must be an int >= 1 that divides both the input channels ({c}) and "
                f"out_channels ({out_channels}), got {groups!r}",
            )
        window = self._window(name, kernel, stride, padding, dilation)
        oh, ow = self._output_size(name, window, h, w)
        fan_in = c // groups * window.kernel[0] * window.kernel[1]
        weight_shape = (out_channels, c // groups, *window.kernel)
        weight = self._uniform(weight_shape, math.sqrt(6.0 / fan_in))
        b = self._uniform((out_channels,), 1.0 / math.sqrt(fan_in)) if bias else None
        shape = image_shape(self.layout, n, out_channels, oh, ow)
        return self._record(
            name, "conv2d", (x,), shape, checked, window, weight, b, groups=int(groups)
        )

    def relu(
        self, x: Tensor, *, name: str | None = None, attrs: Mapping[str, AttrValue] | None = None
    ) -> Tensor:
        """``max(x, 0)`` elementwise."""
        name, checked = self._begin("relu", name, attrs)
        self._own(name, x)
        return self._record(name, "relu", (x,), x.shape, checked)

    def add(
        self,
        a: Tensor,
        b: Tensor,
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """``a + b`` elementwise; both must have the same shape."""
        name, checked = self._begin("add", name, attrs)
        self._own(name, a)
        self._own(name, b)
        if a.shape != b.shape:
            raise fail(
                f"layer {name!r}",
                f"add needs equal shapes, got {list(a.shape)} and {list(b.shape)}; "
                "match them first (e.g. a strided 1x1 projection conv on the shortcut)",
            )
        return self._record(name, "add", (a, b), a.shape, checked)

    def max_pool(
        self,
        x: Tensor,
        kernel: IntPair,
        stride: IntPair | None = None,
        padding: Padding = 0,
        ceil_mode: bool = False,
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """Max pooling (stride defaults to the kernel); padding never wins (it is -inf)."""
        name, checked = self._begin("max_pool", name, attrs)
        return self._pool(name, "max_pool", x, kernel, stride, padding, ceil_mode, checked, True)

    def avg_pool(
        self,
        x: Tensor,
        kernel: IntPair,
        stride: IntPair | None = None,
        padding: Padding = 0,
        count_include_pad: bool = True,
        ceil_mode: bool = False,
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """Average pooling; with ``count_include_pad=False`` padding is left out of the count."""
        name, checked = self._begin("avg_pool", name, attrs)
        return self._pool(
            name, "avg_pool", x, kernel, stride, padding, ceil_mode, checked, count_include_pad
        )

    def adaptive_avg_pool(
        self,
        x: Tensor,
        output_size: IntPair = (1, 1),
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """Average pooling to ``output_size``; the input H, W must be multiples of it."""
        name, checked = self._begin("adaptive_avg_pool", name, attrs)
        n, c, h, w = self._image(name, x)
        oh, ow = _pair(name, "output_size", output_size, 1)
        if h % oh or w % ow:
            raise fail(
                f"layer {name!r}",
                f"adaptive_avg_pool needs input H, W ({h}x{w}) divisible by output_size "
                f"({oh}x{ow}); choose an output size that divides them or use avg_pool",
            )
        window = Window((h // oh, w // ow), (h // oh, w // ow), (0, 0, 0, 0))
        shape = image_shape(self.layout, n, c, oh, ow)
        return self._record(name, "adaptive_avg_pool", (x,), shape, checked, window)

    def flatten(
        self, x: Tensor, *, name: str | None = None, attrs: Mapping[str, AttrValue] | None = None
    ) -> Tensor:
        """Collapse an image to ``[N, rest]`` in the layout's element order."""
        name, checked = self._begin("flatten", name, attrs)
        n, c, h, w = self._image(name, x)
        return self._record(name, "flatten", (x,), (n, c * h * w), checked)

    def linear(
        self,
        x: Tensor,
        out_features: int,
        bias: bool = True,
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """``x @ weight.T + bias`` with a ``[out, in]`` weight (PyTorch convention)."""
        name, checked = self._begin("linear", name, attrs)
        self._own(name, x)
        if len(x.shape) != 2:
            raise fail(
                f"layer {name!r}",
                f"linear needs a rank-2 input [N, features], got {list(x.shape)}; "
                "flatten the image first",
            )
        if not _is_int(out_features) or out_features < 1:
            raise fail(f"layer {name!r}", f"out_features must be an int >= 1, got {out_features!r}")
        n, fan_in = x.shape
        weight = self._uniform((out_features, fan_in), math.sqrt(6.0 / fan_in))
        b = self._uniform((out_features,), 1.0 / math.sqrt(fan_in)) if bias else None
        return self._record(name, "linear", (x,), (n, out_features), checked, None, weight, b)

    def layer_norm(
        self,
        x: Tensor,
        epsilon: float = 1e-5,
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """Normalize each row of a ``[N, D]`` input over its D features, then scale by
        ``gamma`` and shift by ``beta`` (``[D]`` each, the layer's weight and bias):
        ``(x - mean) / sqrt(var + epsilon) * gamma + beta``, as a transformer's norms."""
        name, checked = self._begin("layer_norm", name, attrs)
        n, d = self._rows(name, x)
        if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or epsilon <= 0:
            raise fail(f"layer {name!r}", f"epsilon must be a number > 0, got {epsilon!r}")
        gamma = 1.0 + self._uniform((d,), 0.25)
        beta = self._uniform((d,), 0.25)
        return self._record(
            name, "layer_norm", (x,), (n, d), checked, None, gamma, beta, epsilon=float(epsilon)
        )

    def gelu(
        self, x: Tensor, *, name: str | None = None, attrs: Mapping[str, AttrValue] | None = None
    ) -> Tensor:
        """The exact GELU elementwise, ``0.5 x (1 + erf(x / sqrt 2))``, as BERT's FFN."""
        name, checked = self._begin("gelu", name, attrs)
        self._own(name, x)
        return self._record(name, "gelu", (x,), x.shape, checked)

    def softmax(
        self, x: Tensor, *, name: str | None = None, attrs: Mapping[str, AttrValue] | None = None
    ) -> Tensor:
        """Softmax over the last axis of a ``[N, D]`` input (each row sums to 1)."""
        name, checked = self._begin("softmax", name, attrs)
        shape = self._rows(name, x)
        return self._record(name, "softmax", (x,), shape, checked)

    def attention(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        heads: int = 1,
        *,
        name: str | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
    ) -> Tensor:
        """Multi-head scaled dot-product attention, ``softmax(Q Kᵀ / sqrt(D / heads)) V``
        per head: queries ``q`` ``[S, D]``, keys ``k`` and values ``v`` ``[T, D]``, the D
        features split into ``heads`` heads of ``D / heads``; the output is ``[S, D]``,
        the heads side by side again. No weights: project q, k, v (and the output) with
        ``linear`` layers."""
        name, checked = self._begin("attention", name, attrs)
        s, d = self._rows(name, q)
        t, _ = self._rows(name, k)
        if k.shape != (t, d) or v.shape != k.shape:
            raise fail(
                f"layer {name!r}",
                f"attention needs k and v of one shape [T, {d}] (the features of q), got "
                f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}",
            )
        if not _is_int(heads) or heads < 1 or d % heads:
            raise fail(
                f"layer {name!r}",
                f"heads must be an int >= 1 that divides the features ({d}), got {heads!r}",
            )
        return self._record(name, "attention", (q, k, v), (s, d), checked, heads=int(heads))

    def output(self, *tensors: Tensor) -> None:
        """Mark one or more tensors as the model's outputs (in call order)."""
        subject = f"model {self.name!r}"
        for t in tensors:
            self._own(None, t)
            if t is self.input:
                raise fail(subject, "the model input cannot be an output; add a layer first")
            if any(t is o for o in self.outputs):
                raise fail(subject, f"the output of {t.source!r} is already an output")
            self.outputs.append(t)

    # -- lowering and references ----------------------------------------------------------

    def to_linalg(self) -> str:
        """The model as linalg on tensors: ``func.func @<name>(input) -> outputs`` (text)."""
        self._require_outputs()
        return lower_model(self)

    def reference(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The expected outputs for ``inputs`` (one array, the model input), computed in numpy."""
        self._require_outputs()
        if len(inputs) != 1 or tuple(np.shape(inputs[0])) != self.input.shape:
            got = [list(np.shape(a)) for a in inputs]
            raise fail(
                f"model {self.name!r}",
                f"reference needs one input of shape {list(self.input.shape)}, got {got}",
            )
        return forward(self, np.asarray(inputs[0]))

    def to_onnx(self) -> Any:
        """The model as an ``onnx.ModelProto`` (opset 17); NCHW models only."""
        self._require_outputs()
        if self.layout != "NCHW":
            raise fail(
                f"model {self.name!r}",
                "ONNX export needs layout='NCHW' (ONNX Conv and pools are NCHW); "
                "build the model with layout='NCHW'",
            )
        return export(self)

    def workload(self) -> Workload:
        """A tdsched :class:`Workload` of the lowered model with the numpy reference."""
        return Workload(self.name, self.to_linalg(), self.name, self.reference)

    # -- helpers --------------------------------------------------------------------------

    def _require_outputs(self) -> None:
        if not self.outputs:
            raise fail(f"model {self.name!r}", "has no output; call model.output(tensor) first")

    def _begin(
        self, kind: LayerType, name: str | None, attrs: Mapping[str, object] | None
    ) -> tuple[str, dict[str, AttrValue]]:
        """The layer's name and checked attributes, before anything else (weights) happens."""
        name = self._new_name(kind, name)
        return name, _attrs(name, attrs or {})

    def _new_name(self, kind: LayerType, name: str | None) -> str:
        """``name`` checked for syntax and uniqueness, or the first free ``<kind>_<n>``."""
        taken = {layer.name for layer in self._layers}
        if name is None:
            index = sum(layer.type == kind for layer in self._layers)
            while f"{kind}_{index}" in taken:
                index += 1
            return f"{kind}_{index}"
        if not isinstance(name, str) or not _LAYER_NAME.fullmatch(name):
            raise fail(f"layer {name!r}", "layer names must match [A-Za-z_][A-Za-z0-9_.]*")
        if _ONNX_NAMES.fullmatch(name):
            raise fail(
                f"layer {name!r}",
                "names 'input', 'output', 'output_<i>' and '*.weight'/'*.bias' are reserved "
                "for ONNX export; pick another name",
            )
        if name in taken:
            raise fail(f"layer {name!r}", "a layer with this name exists; names must be unique")
        return name

    def _own(self, layer: str | None, x: object) -> None:
        subject = f"model {self.name!r}" if layer is None else f"layer {layer!r}"
        if not isinstance(x, Tensor):
            raise fail(subject, f"expected a Tensor of this model, got {type(x).__name__}")
        if x.model is not self:
            raise fail(
                subject,
                f"tensor {x.source!r} belongs to model {x.model.name!r}, not {self.name!r}; "
                "build each model from its own tensors",
            )

    def _image(self, layer: str, x: Tensor) -> tuple[int, int, int, int]:
        """``(N, C, H, W)`` of a rank-4 tensor of this model."""
        self._own(layer, x)
        if len(x.shape) != 4:
            raise fail(
                f"layer {layer!r}",
                f"needs a rank-4 image in {self.layout} order, got shape {list(x.shape)}",
            )
        c_axis, (h_axis, w_axis) = channel_axis(self.layout), spatial_axes(self.layout)
        return x.shape[0], x.shape[c_axis], x.shape[h_axis], x.shape[w_axis]

    def _rows(self, layer: str, x: Tensor) -> tuple[int, int]:
        """``(N, D)`` of a rank-2 tensor of this model (rows of features: tokens)."""
        self._own(layer, x)
        if len(x.shape) != 2:
            raise fail(
                f"layer {layer!r}",
                f"needs a rank-2 input [N, features] (e.g. tokens x hidden), got {list(x.shape)}",
            )
        return x.shape[0], x.shape[1]

    def _window(
        self, layer: str, kernel: IntPair, stride: IntPair, padding: Padding, dilation: IntPair
    ) -> Window:
        return Window(
            _pair(layer, "kernel", kernel, 1),
            _pair(layer, "stride", stride, 1),
            _padding(layer, padding),
            _pair(layer, "dilation", dilation, 1),
        )

    def _output_size(self, layer: str, window: Window, h: int, w: int) -> tuple[int, int]:
        oh, ow = window.output_size(h, w)
        if oh < 1 or ow < 1:
            raise fail(
                f"layer {layer!r}",
                f"output size {oh}x{ow} < 1: the {h}x{w} input is smaller than the "
                f"{window.kernel[0]}x{window.kernel[1]} kernel (dilation {window.dilation}) "
                f"with padding {window.padding}; use a smaller kernel or more padding",
            )
        return oh, ow

    def _pool(
        self,
        name: str,
        kind: LayerType,
        x: Tensor,
        kernel: IntPair,
        stride: IntPair | None,
        padding: Padding,
        ceil_mode: bool,
        attrs: dict[str, AttrValue],
        count_include_pad: bool,
    ) -> Tensor:
        n, c, h, w = self._image(name, x)
        if ceil_mode:
            raise fail(f"layer {name!r}", "ceil_mode is not supported; pad explicitly instead")
        window = self._window(name, kernel, kernel if stride is None else stride, padding, 1)
        pads = window.padding
        if any(p >= k for p, k in zip(pads, window.kernel * 2, strict=True)):
            raise fail(
                f"layer {name!r}",
                f"padding {pads} must be smaller than the kernel {window.kernel} on each side "
                "(else a window sees only padding)",
            )
        oh, ow = self._output_size(name, window, h, w)
        shape = image_shape(self.layout, n, c, oh, ow)
        return self._record(
            name, kind, (x,), shape, attrs, window, count_include_pad=count_include_pad
        )

    def _uniform(self, shape: tuple[int, ...], bound: float) -> np.ndarray:
        return self._rng.uniform(-bound, bound, size=shape).astype(np.float32)

    def _record(
        self,
        name: str,
        kind: LayerType,
        inputs: tuple[Tensor, ...],
        shape: tuple[int, ...],
        attrs: dict[str, AttrValue],
        window: Window | None = None,
        weight: np.ndarray | None = None,
        bias: np.ndarray | None = None,
        count_include_pad: bool = True,
        groups: int = 1,
        heads: int = 1,
        epsilon: float = 1e-5,
    ) -> Tensor:
        """Append the layer and return its output tensor."""
        out = Tensor(shape, self, name)
        layer = Layer(
            name,
            kind,
            inputs,
            out,
            attrs,
            window,
            weight,
            bias,
            count_include_pad,
            groups,
            heads,
            epsilon,
        )
        self._layers.append(layer)
        return out


def _is_int(value: object) -> TypeGuard[int | np.integer[Any]]:
    """An int (Python or numpy), but not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _pair(layer: str, what: str, value: object, minimum: int) -> tuple[int, int]:
    """An int or an ``(h, w)`` pair of ints ``>= minimum``, as a pair."""
    ints = _ints(value, minimum)
    if len(ints) not in (1, 2):
        raise fail(
            f"layer {layer!r}",
            f"{what} must be an int or a pair (h, w) of ints >= {minimum}, got {value!r}",
        )
    return ints[0], ints[-1]


def _padding(layer: str, value: object) -> tuple[int, int, int, int]:
    """Padding as ``(top, left, bottom, right)`` from an int, an (h, w) pair or a 4-tuple."""
    ints = _ints(value, 0)
    if len(ints) not in (1, 2, 4):
        raise fail(
            f"layer {layer!r}",
            "padding must be an int, a pair (h, w) or a 4-tuple (top, left, bottom, right) "
            f"of ints >= 0, got {value!r}",
        )
    top, left, bottom, right = ints * (4 // len(ints))
    return top, left, bottom, right


def _ints(value: object, minimum: int) -> list[int]:
    """``value`` (an int, tuple or list) as a list of ints ``>= minimum``; ``[]`` if it is not."""
    items = list(value) if isinstance(value, tuple | list) else [value]
    ints = [int(v) for v in items if _is_int(v) and v >= minimum]
    return ints if len(ints) == len(items) else []


def _attrs(layer: str, attrs: Mapping[str, object]) -> dict[str, AttrValue]:
    """User attributes checked: identifier keys not used by the ops, str/int/float/bool values."""
    checked: dict[str, AttrValue] = {}
    for key, value in attrs.items():
        if not isinstance(key, str) or not _IDENTIFIER.fullmatch(key) or key in RESERVED_ATTRS:
            raise fail(
                f"layer {layer!r}",
                f"attribute name {key!r} must match [A-Za-z_][A-Za-z0-9_]* and not be one of "
                f"the ops' own attributes ({', '.join(sorted(RESERVED_ATTRS))}); rename it",
            )
        checked[key] = _attr_value(layer, key, value)
    return checked


def _attr_value(layer: str, key: str, value: object) -> AttrValue:
    if isinstance(value, bool | str | float):
        return value
    if _is_int(value) and int(value) in _INT64:
        return int(value)
    raise fail(
        f"layer {layer!r}",
        f"attribute {key!r} = {value!r}: values must be str, bool, float or an int that fits "
        "in 64 bits",
    )
