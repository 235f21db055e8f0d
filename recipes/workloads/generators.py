"""Generated linalg-on-tensors workloads with numpy references.

Each generator returns a :class:`Workload` whose MLIR is the payload (linalg on tensors,
as a frontend would produce it) and whose reference computes the same function in numpy
(in float64 for floats, cast back, so the reference is the more accurate side).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from tdsched.targets.random_data import NUMPY_DTYPES
from tdsched.targets.workload import Reference, Workload, WorkloadError

_FLOAT_TYPES = ("f32", "f16", "f64")


def _check(name: str, dtype: str, **dims: int) -> None:
    if dtype not in _FLOAT_TYPES:
        raise WorkloadError(f"{name}: dtype {dtype!r} is not supported; use one of {_FLOAT_TYPES}")
    for dim, value in dims.items():
        if not isinstance(value, int) or value <= 0:
            raise WorkloadError(f"{name}: {dim} must be a positive integer, got {value!r}")


WEIGHTS = ("input", "constant")
"""How a generator's weights (a matmul's B, its bias) reach the function: as ``input``
arguments, or as ``constant`` tensors inside it, as in an inference graph whose weights
are known when it is compiled (IREE then evaluates work on them once, at compile time:
a pack of B for data tiling or an mmt4d schedule leaves the timed call)."""

WEIGHT_SEED = 1234
"""The seed of constant weights: uniform in [-1, 1), like the inputs, but fixed, so every
build, reference and peer sees the same weights."""


@dataclass(frozen=True)
class _Arguments:
    """A generated function's tensor arguments (name -> shape, in order), those in
    ``constants`` defined in its body instead."""

    name: str
    shapes: dict[str, tuple[int, ...]]
    dtype: str
    constants: dict[str, np.ndarray]

    @staticmethod
    def of(
        name: str,
        weights: str,
        dtype: str,
        shapes: dict[str, tuple[int, ...]],
        weight_names: set[str],
    ) -> _Arguments:
        """``weights == "constant"``: the ``weight_names`` become seeded constants."""
        if weights not in WEIGHTS:
            raise WorkloadError(f"{name}: weights must be one of {WEIGHTS}, got {weights!r}")
        rng = np.random.default_rng(WEIGHT_SEED)
        constants = {
            arg: rng.uniform(-1.0, 1.0, size=shape).astype(NUMPY_DTYPES[dtype])
            for arg, shape in shapes.items()
            if weights == "constant" and arg in weight_names
        }
        return _Arguments(name, shapes, dtype, constants)

    def type(self, arg: str) -> str:
        return f"tensor<{'x'.join(map(str, self.shapes[arg]))}x{self.dtype}>"

    def header(self, result: str) -> str:
        """``func.func @NAME(arguments) -> result {`` and the constants' definitions."""
        given = ", ".join(f"%{n}: {self.type(n)}" for n in self.shapes if n not in self.constants)
        defined = "".join(
            f'  %{n} = arith.constant dense<"0x{a.tobytes().hex().upper()}"> : {self.type(n)}\n'
            for n, a in self.constants.items()
        )
        return f"func.func @{self.name}({given}) -> {result} {{\n{defined}"

    def workload(
        self, label: str, mlir: str, reference: Reference, peer: Reference | None
    ) -> Workload:
        """The workload, named ``NAME_label`` (``_constant_weights`` added with constants);
        its reference and peer take every argument and are called with the inputs only."""
        suffix = "_constant_weights" * bool(self.constants)
        return Workload(
            f"{self.name}_{label}{suffix}",
            mlir,
            self.name,
            self._with_constants(reference),
            self._with_constants(peer) if peer is not None else None,
        )

    def _with_constants(self, fn: Reference) -> Reference:
        if not self.constants:
            return fn

        def call(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            given = iter(inputs)
            return fn(
                [self.constants[n] if n in self.constants else next(given) for n in self.shapes]
            )

        return call


def matmul(M: int, N: int, K: int, dtype: str = "f32", weights: str = "input") -> Workload:
    """C = A @ B with A: MxK, B: KxN (fill + linalg.matmul); ``weights``: B is an
    argument (``input``) or a constant."""
    _check("matmul", dtype, M=M, N=N, K=K)
    t = dtype
    args = _Arguments.of("matmul", weights, t, {"a": (M, K), "b": (K, N)}, {"b"})
    mlir = f"""{args.header(f"tensor<{M}x{N}x{t}>")}  %zero = arith.constant 0.0 : {t}
  %empty = tensor.empty() : tensor<{M}x{N}x{t}>
  %init = linalg.fill ins(%zero : {t}) outs(%empty : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  %c = linalg.matmul ins(%a, %b : tensor<{M}x{K}x{t}>, tensor<{K}x{N}x{t}>) outs(%init : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  return %c : tensor<{M}x{N}x{t}>
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b = args
        return [(a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)]

    def peer(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b = args
        return [a @ b]

    return args.workload(f"{M}x{N}x{K}_{t}", mlir, reference, peer)


ACTIVATIONS: dict[str, str] = {
    "relu": "%r = arith.maximumf %s, %zero : {t}",
    "gelu": (
        "%half = arith.constant 0.5 : {t}\n    %one = arith.constant 1.0 : {t}\n"
        "    %isqrt2 = arith.constant 0.70710678118654752 : {t}\n"
        "    %u = arith.mulf %s, %isqrt2 : {t}\n    %erf = math.erf %u : {t}\n"
        "    %e1 = arith.addf %erf, %one : {t}\n    %hs = arith.mulf %s, %half : {t}\n"
        "    %r = arith.mulf %hs, %e1 : {t}"
    ),
    "silu": (
        "%one = arith.constant 1.0 : {t}\n    %ns = arith.negf %s : {t}\n"
        "    %ex = math.exp %ns : {t}\n    %den = arith.addf %ex, %one : {t}\n"
        "    %r = arith.divf %s, %den : {t}"
    ),
}
"""The epilogue activations of :func:`matmul_bias_act`, as the generic's body lines from
the biased value ``%s`` to the result ``%r``: ``relu`` max(s, 0); ``gelu`` the exact
(erf) GELU, 0.5 s (1 + erf(s / sqrt 2)), as ONNX's Gelu and BERT compute it; ``silu``
s * sigmoid(s) (also called swish)."""


def _activation_reference(act: str, s: np.ndarray) -> np.ndarray:
    """numpy (float64) of :data:`ACTIVATIONS` ``[act]``."""
    if act == "relu":
        result: np.ndarray = np.maximum(s, 0.0)
    elif act == "gelu":
        erf = np.vectorize(math.erf, otypes=[np.float64])
        result = 0.5 * s * (1.0 + erf(s / math.sqrt(2.0)))
    else:
        result = s / (1.0 + np.exp(-s))
    return result


def matmul_bias_act(
    M: int, N: int, K: int, act: str = "gelu", dtype: str = "f32", weights: str = "input"
) -> Workload:
    """act(A @ B + bias) with bias: N broadcast along rows, as one elementwise generic
    (``act``: ``relu``, ``gelu``, the exact GELU with erf, or ``silu``, x * sigmoid(x)); ``weights``: B and
    bias are arguments (``input``) or constants. A transformer FFN's first layer with
    ``gelu`` (BERT) or ``silu`` (the gated FFNs of recent LLMs). ``relu`` builds the
    very workload of the ``matmul_bias_relu`` generator, its name and function included."""
    if act not in ACTIVATIONS:
        raise WorkloadError(
            f"matmul_bias_act: act must be one of {tuple(ACTIVATIONS)}, got {act!r}"
        )
    if act == "relu":
        return matmul_bias_relu(M, N, K, dtype, weights)
    return _matmul_bias("matmul_bias_act", act, M, N, K, dtype, weights, f"_{act}")


def matmul_bias_relu(
    M: int, N: int, K: int, dtype: str = "f32", weights: str = "input"
) -> Workload:
    """relu(A @ B + bias) with bias: N broadcast along rows, as one elementwise generic;
    ``weights``: B and bias are arguments (``input``) or constants."""
    return _matmul_bias("matmul_bias_relu", "relu", M, N, K, dtype, weights, "")


def _matmul_bias(
    name: str, act: str, M: int, N: int, K: int, dtype: str, weights: str, label: str
) -> Workload:
    """``act(A @ B + bias)``: the function ``@name``, the workload ``name_MxNxK{label}``."""
    _check(name, dtype, M=M, N=N, K=K)
    t = dtype
    shapes = {"a": (M, K), "b": (K, N), "bias": (N,)}
    args = _Arguments.of(name, weights, t, shapes, {"b", "bias"})
    mlir = f"""#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
{args.header(f"tensor<{M}x{N}x{t}>")}  %zero = arith.constant 0.0 : {t}
  %empty = tensor.empty() : tensor<{M}x{N}x{t}>
  %init = linalg.fill ins(%zero : {t}) outs(%empty : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  %mm = linalg.matmul ins(%a, %b : tensor<{M}x{K}x{t}>, tensor<{K}x{N}x{t}>) outs(%init : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  %out = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%mm, %bias : tensor<{M}x{N}x{t}>, tensor<{N}x{t}>) outs(%empty : tensor<{M}x{N}x{t}>) {{
  ^bb0(%x: {t}, %bv: {t}, %o: {t}):
    %s = arith.addf %x, %bv : {t}
    {ACTIVATIONS[act].format(t=t)}
    linalg.yield %r : {t}
  }} -> tensor<{M}x{N}x{t}>
  return %out : tensor<{M}x{N}x{t}>
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b, bias = args
        acc = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
        return [_activation_reference(act, acc).astype(a.dtype)]

    def peer(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b, bias = args
        out = a @ b
        out += bias
        if act == "relu":
            return [np.maximum(out, 0, out=out)]
        return [out / (1 + np.exp(-out))]

    # numpy has no erf: GELU's peer would time a Python loop, not what a user runs
    return args.workload(
        f"{M}x{N}x{K}{label}_{t}", mlir, reference, None if act == "gelu" else peer
    )


def softmax(M: int, N: int, dtype: str = "f32") -> Workload:
    """Softmax over the last axis of an MxN input (``linalg.softmax dimension(1)``), a row
    reduction as attention and classifiers use it. IREE decomposes it into one dispatch
    of three ops: the row max, the row sum of ``exp(x - max)`` (IREE's root), and the
    normalization ``exp(x - max) / sum``."""
    _check("softmax", dtype, M=M, N=N)
    t = dtype
    args = _Arguments.of("softmax", "input", t, {"x": (M, N)}, set())
    mat = f"tensor<{M}x{N}x{t}>"
    mlir = f"""{args.header(mat)}  %empty = tensor.empty() : {mat}
  %out = linalg.softmax dimension(1) ins(%x : {mat}) outs(%empty : {mat}) -> {mat}
  return %out : {mat}
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        (x,) = args
        wide = x.astype(np.float64)
        e = np.exp(wide - wide.max(axis=1, keepdims=True))
        return [(e / e.sum(axis=1, keepdims=True)).astype(x.dtype)]

    def peer(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        (x,) = args
        e = np.exp(x - x.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)
        return [e]

    return args.workload(f"{M}x{N}_{t}", mlir, reference, peer)


def conv2d_nhwc(
    N: int,
    H: int,
    W: int,
    C: int,
    F: int,
    KH: int = 3,
    KW: int = 3,
    pad: int = 1,
    dtype: str = "f32",
    stride: int = 1,
    weights: str = "input",
) -> Workload:
    """2-D convolution, NHWC input, HWCF filter, zero padding ``pad`` on H and W, the same
    ``stride`` on both; ``weights``: the filter is an argument (``input``) or a constant."""
    _check("conv2d_nhwc", dtype, N=N, H=H, W=W, C=C, F=F, KH=KH, KW=KW, stride=stride)
    window = _Window.of("conv2d_nhwc", H, W, KH, KW, pad, stride)

    def tap(patch: np.ndarray, w: np.ndarray) -> np.ndarray:
        products: np.ndarray = np.einsum("nhwc,cf->nhwf", patch, w)
        return products

    conv = _WindowConv("conv2d_nhwc", "linalg.conv_2d_nhwc_hwcf", (KH, KW, C, F), F, tap)
    return conv.workload(window, (N, H, W, C), dtype, weights, f"_{F}")


def depthwise_conv2d_nhwc(
    N: int,
    H: int,
    W: int,
    C: int,
    KH: int = 3,
    KW: int = 3,
    pad: int = 1,
    stride: int = 1,
    dtype: str = "f32",
    weights: str = "input",
) -> Workload:
    """Depthwise 2-D convolution (``linalg.depthwise_conv_2d_nhwc_hwc``): each of the C
    channels of an NHWC input convolved with its own KHxKW filter (HWC), zero padding
    ``pad`` on H and W, the same ``stride`` on both; MobileNet's and EfficientNet's
    depthwise layers. ``weights``: the filter is an argument (``input``) or a constant."""
    name = "depthwise_conv2d_nhwc"
    _check(name, dtype, N=N, H=H, W=W, C=C, KH=KH, KW=KW, stride=stride)
    window = _Window.of(name, H, W, KH, KW, pad, stride)

    def tap(patch: np.ndarray, w: np.ndarray) -> np.ndarray:
        products: np.ndarray = patch * w
        return products

    conv = _WindowConv(name, "linalg.depthwise_conv_2d_nhwc_hwc", (KH, KW, C), C, tap)
    return conv.workload(window, (N, H, W, C), dtype, weights, "")


@dataclass(frozen=True)
class _WindowConv:
    """A convolution generator's fixed part: the function ``name``, its linalg ``op``, the
    filter's shape, the output channels, and ``tap(patch, filter[kh, kw])``, one filter
    tap's contribution to the output (float64)."""

    name: str
    op: str
    filter_shape: tuple[int, ...]
    out_channels: int
    tap: Callable[[np.ndarray, np.ndarray], np.ndarray]

    def workload(
        self,
        window: _Window,
        image: tuple[int, int, int, int],
        dtype: str,
        weights: str,
        label: str,
    ) -> Workload:
        """The workload on an NHWC ``image`` of ``dtype``, named ``NAME_NxHxWxC{label}``
        (and the stride); ``weights``: the filter an argument or a constant."""
        N, H, W, C = image
        shapes = {"x": image, "w": self.filter_shape}
        args = _Arguments.of(self.name, weights, dtype, shapes, {"w"})
        out = f"tensor<{N}x{window.OH}x{window.OW}x{self.out_channels}x{dtype}>"
        body = window.body(self.op, args.type("x"), args.type("w"), out, (N, C))

        def reference(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
            x, w = arrays
            y = np.zeros((N, window.OH, window.OW, self.out_channels))
            for kh, kw, patch in window.patches(x):
                y += self.tap(patch, w[kh, kw])
            return [y.astype(x.dtype)]

        name = f"{N}x{H}x{W}x{C}{label}{window.label}_{dtype}"
        return args.workload(name, f"{args.header(out)}{body}", reference, None)


@dataclass(frozen=True)
class _Window:
    """A 2-D sliding window over an NHWC input: zero padding ``pad`` on H and W, a
    ``KH`` x ``KW`` filter moved ``stride`` at a time, giving an ``OH`` x ``OW`` output."""

    H: int
    W: int
    KH: int
    KW: int
    pad: int
    stride: int
    OH: int
    OW: int

    @staticmethod
    def of(name: str, H: int, W: int, KH: int, KW: int, pad: int, stride: int) -> _Window:
        """The window; WorkloadError naming ``name`` when it does not fit the input."""
        if not isinstance(pad, int) or pad < 0:
            raise WorkloadError(f"{name}: pad must be >= 0, got {pad!r}")
        PH, PW = H + 2 * pad, W + 2 * pad
        if PH < KH or PW < KW:
            raise WorkloadError(f"{name}: the filter is larger than the padded input")
        OH, OW = (PH - KH) // stride + 1, (PW - KW) // stride + 1
        return _Window(H, W, KH, KW, pad, stride, OH, OW)

    @property
    def label(self) -> str:
        """``_sS`` in a workload's name when the stride is not 1."""
        return f"_s{self.stride}" if self.stride != 1 else ""

    def body(self, conv: str, inp: str, flt: str, out: str, nc: tuple[int, int]) -> str:
        """The function body after its header: pad ``%x``, fill, ``conv`` of the padded
        input with ``%w`` into ``out``, return. ``nc``: the input's batch and channels."""
        p, s, t = self.pad, self.stride, out.rsplit("x", 1)[1].rstrip(">")
        padded = f"tensor<{nc[0]}x{self.H + 2 * p}x{self.W + 2 * p}x{nc[1]}x{t}>"
        return f"""  %zero = arith.constant 0.0 : {t}
  %padded = tensor.pad %x low[0, {p}, {p}, 0] high[0, {p}, {p}, 0] {{
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : {t}
  }} : {inp} to {padded}
  %empty = tensor.empty() : {out}
  %init = linalg.fill ins(%zero : {t}) outs(%empty : {out}) -> {out}
  %y = {conv} {{dilations = dense<1> : tensor<2xi64>, strides = dense<{s}> : tensor<2xi64>}}
      ins(%padded, %w : {padded}, {flt}) outs(%init : {out}) -> {out}
  return %y : {out}
}}
"""

    def patches(self, x: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
        """For each filter tap (kh, kw), the float64 input values it multiplies at every
        output pixel (N x OH x OW x C), zero padding included."""
        p, s = self.pad, self.stride
        xp = np.pad(x.astype(np.float64), ((0, 0), (p, p), (p, p), (0, 0)))
        rows, cols = (self.OH - 1) * s + 1, (self.OW - 1) * s + 1
        for kh in range(self.KH):
            for kw in range(self.KW):
                yield kh, kw, xp[:, kh : kh + rows : s, kw : kw + cols : s, :]


def matmul_chain(M: int, N: int, K: int, P: int, dtype: str = "f32") -> Workload:
    """(A @ B) @ C with A: MxK, B: KxN, C: NxP: two chained matmuls (two layers)."""
    _check("matmul_chain", dtype, M=M, N=N, K=K, P=P)
    t = dtype
    ab, out = f"tensor<{M}x{N}x{t}>", f"tensor<{M}x{P}x{t}>"
    mlir = f"""func.func @matmul_chain(%a: tensor<{M}x{K}x{t}>, %b: tensor<{K}x{N}x{t}>, %c: tensor<{N}x{P}x{t}>) -> {out} {{
  %zero = arith.constant 0.0 : {t}
  %e1 = tensor.empty() : {ab}
  %i1 = linalg.fill ins(%zero : {t}) outs(%e1 : {ab}) -> {ab}
  %ab = linalg.matmul ins(%a, %b : tensor<{M}x{K}x{t}>, tensor<{K}x{N}x{t}>) outs(%i1 : {ab}) -> {ab}
  %e2 = tensor.empty() : {out}
  %i2 = linalg.fill ins(%zero : {t}) outs(%e2 : {out}) -> {out}
  %abc = linalg.matmul ins(%ab, %c : {ab}, tensor<{N}x{P}x{t}>) outs(%i2 : {out}) -> {out}
  return %abc : {out}
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b, c = (x.astype(np.float64) for x in args)
        return [(a @ b @ c).astype(args[0].dtype)]

    return Workload(f"matmul_chain_{M}x{N}x{K}x{P}_{t}", mlir, "matmul_chain", reference)


def _conv(name: str, operands: str, out: str, t: str) -> list[str]:
    """fill + stride-1 ``linalg.conv_2d_nhwc_hwcf`` defining ``%name``."""
    return [
        f"%{name}_init = linalg.fill ins(%zero : {t}) outs(%e_{name} : {out}) -> {out}",
        f"%{name} = linalg.conv_2d_nhwc_hwcf {{dilations = dense<1> : tensor<2xi64>, "
        f"strides = dense<1> : tensor<2xi64>}} ins({operands}) "
        f"outs(%{name}_init : {out}) -> {out}",
    ]


def _elementwise(name: str, ins: Sequence[tuple[str, str, str]], body: str, out: str) -> str:
    """A 4-D elementwise generic defining ``%name``; ``ins`` are (value, map, type) and
    ``body`` names its block arguments ``%a0``, ``%a1``, ... (element type from ``out``)."""
    t = out.rsplit("x", 1)[1].rstrip(">")
    maps = ", ".join([m for _, m, _ in ins] + ["#nhwc"])
    args = ", ".join(f"%a{i}: {t}" for i in range(len(ins)))
    lines = "\n    ".join(body.format(t=t).split(";"))
    return (
        f"%{name} = linalg.generic {{indexing_maps = [{maps}], iterator_types = "
        '["parallel", "parallel", "parallel", "parallel"]} '
        f"ins({', '.join(v for v, _, _ in ins)} : {', '.join(ty for _, _, ty in ins)}) "
        f"outs(%e_{name} : {out}) {{\n  ^bb0({args}, %o: {t}):\n    {lines}\n  }} -> {out}"
    )


_ADD = "%s = arith.addf %a0, %a1 : {t};linalg.yield %s : {t}"
_ADD_RELU = (
    "%s = arith.addf %a0, %a1 : {t};%r = arith.maximumf %s, %zero : {t};linalg.yield %r : {t}"
)
_RELU = "%r = arith.maximumf %a0, %zero : {t};linalg.yield %r : {t}"


def reduce_pad_conv(
    x_t: str, mid_t: str, pad_t: str, w1_t: str, w2_t: str, b_t: str, t: str
) -> list[str]:
    """Body lines from ``%x``: 1x1 conv (``%w1``) + bias (``%b1``) + relu, zero pad 1 on
    H and W, 3x3 conv (``%w2``) defining ``%c2``. Needs ``%zero`` and ``%e_c1``, ``%e_r1``,
    ``%e_c2``; the ``#nhwc`` and ``#chan`` maps."""
    lines = _conv("c1", f"%x, %w1 : {x_t}, {w1_t}", mid_t, t)
    lines.append(
        _elementwise("r1", [("%c1", "#nhwc", mid_t), ("%b1", "#chan", b_t)], _ADD_RELU, mid_t)
    )
    lines.append(
        f"%p = tensor.pad %r1 low[0, 1, 1, 0] high[0, 1, 1, 0] {{\n  ^bb0(%i0: index, "
        f"%i1: index, %i2: index, %i3: index):\n    tensor.yield %zero : {t}\n  }} : "
        f"{mid_t} to {pad_t}"
    )
    return lines + _conv("c2", f"%p, %w2 : {pad_t}, {w2_t}", mid_t, t)


def reduce_pad_conv_reference(
    x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray
) -> np.ndarray:
    """numpy (float64) of :func:`reduce_pad_conv`: ``%c2`` from NHWC ``x``."""
    _, H, W, _ = x.shape
    r1 = np.maximum(np.einsum("nhwc,cm->nhwm", x, w1[0, 0]) + b1, 0)
    rp = np.pad(r1, ((0, 0), (1, 1), (1, 1), (0, 0)))
    c2: np.ndarray = sum(
        np.einsum("nhwc,cm->nhwm", rp[:, kh : kh + H, kw : kw + W, :], w2[kh, kw])
        for kh in range(3)
        for kw in range(3)
    )
    return c2


def resnet_block(
    N: int = 1, H: int = 56, W: int = 56, C: int = 256, M: int = 64, dtype: str = "f32"
) -> Workload:
    """A ResNet bottleneck block, NHWC, as a frontend lowers it to linalg on tensors.

    1x1 conv C→M + bias + relu, zero pad 1, 3x3 conv M→M + bias + relu, 1x1 conv M→C,
    bias, residual add with the input, relu (one generic each). Filters are HWCF.
    """
    _check("resnet_block", dtype, N=N, H=H, W=W, C=C, M=M)
    t = dtype
    x_t = f"tensor<{N}x{H}x{W}x{C}x{t}>"
    mid_t = f"tensor<{N}x{H}x{W}x{M}x{t}>"
    pad_t = f"tensor<{N}x{H + 2}x{W + 2}x{M}x{t}>"
    w1_t, w2_t, w3_t = (
        f"tensor<1x1x{C}x{M}x{t}>",
        f"tensor<3x3x{M}x{M}x{t}>",
        f"tensor<1x1x{M}x{C}x{t}>",
    )
    bm_t, bc_t = f"tensor<{M}x{t}>", f"tensor<{C}x{t}>"
    empties = {
        "c1": mid_t,
        "r1": mid_t,
        "c2": mid_t,
        "r2": mid_t,
        "c3": x_t,
        "biased": x_t,
        "sum": x_t,
        "out": x_t,
    }
    body = [f"%zero = arith.constant 0.0 : {t}"]
    body += [f"%e_{n} = tensor.empty() : {ty}" for n, ty in empties.items()]
    body += reduce_pad_conv(x_t, mid_t, pad_t, w1_t, w2_t, bm_t, t)
    body.append(
        _elementwise("r2", [("%c2", "#nhwc", mid_t), ("%b2", "#chan", bm_t)], _ADD_RELU, mid_t)
    )
    body += _conv("c3", f"%r2, %w3 : {mid_t}, {w3_t}", x_t, t)
    body.append(_elementwise("biased", [("%c3", "#nhwc", x_t), ("%b3", "#chan", bc_t)], _ADD, x_t))
    body.append(_elementwise("sum", [("%biased", "#nhwc", x_t), ("%x", "#nhwc", x_t)], _ADD, x_t))
    body.append(_elementwise("out", [("%sum", "#nhwc", x_t)], _RELU, x_t))
    body.append(f"return %out : {x_t}")
    args = (
        f"%x: {x_t}, %w1: {w1_t}, %b1: {bm_t}, %w2: {w2_t}, %b2: {bm_t}, %w3: {w3_t}, %b3: {bc_t}"
    )
    mlir = (
        "#nhwc = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>\n"
        "#chan = affine_map<(d0, d1, d2, d3) -> (d3)>\n"
        f"func.func @resnet_block({args}) -> {x_t} {{\n  " + "\n  ".join(body) + "\n}\n"
    )

    def reference(a: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, w1, b1, w2, b2, w3, b3 = (v.astype(np.float64) for v in a)
        r2 = np.maximum(reduce_pad_conv_reference(x, w1, b1, w2) + b2, 0)
        out = np.maximum(np.einsum("nhwm,mc->nhwc", r2, w3[0, 0]) + b3 + x, 0)
        return [out.astype(a[0].dtype)]

    return Workload(f"resnet_block_{N}x{H}x{W}x{C}_{M}_{t}", mlir, "resnet_block", reference)
