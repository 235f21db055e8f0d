"""Every workload generator, by the name recipes use, with what each argument means
(``docs/generators.md`` is written from this table by :mod:`.generator_docs`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tdsched.targets.workload import Workload, WorkloadError

from .generators import (
    conv2d_nhwc,
    depthwise_conv2d_nhwc,
    matmul,
    matmul_bias_act,
    matmul_bias_relu,
    matmul_chain,
    resnet_block,
    softmax,
)
from .graph_generators import channel_affine, conv_pad_conv, elementwise_chain
from .layer_generators import attention, batch_matmul, row_norm

DOCS = "docs/generators.md"

_DTYPE = "element type: `f32`, `f16` or `f64`"
_WEIGHTS = (
    "how the weights ({}) reach the function: as arguments (`input`, like the data) or as "
    "constants inside it (`constant`, as an inference graph's weights are known when it "
    "is compiled: IREE then works on them once, at compile time, so a pack of B leaves "
    "the timed call)"
)

_IMAGE = {"N": "batch size", "H": "input height", "W": "input width"}
_WINDOW = {
    "KH": "filter height",
    "KW": "filter width",
    "pad": "zero padding on each side of H and of W",
    "dtype": _DTYPE,
    "stride": "the stride on H and on W",
    "weights": _WEIGHTS.format("the filter"),
}
"""What the convolutions' arguments after their channels mean (in signature order)."""


@dataclass(frozen=True)
class Generator:
    """A workload generator: ``build(**args)`` returns the :class:`Workload`;
    ``arguments`` says what each of its keyword arguments means, in signature order."""

    build: Callable[..., Workload]
    arguments: Mapping[str, str]

    @property
    def summary(self) -> str:
        """The first paragraph of the generator's docstring, on one line."""
        text = inspect.getdoc(self.build) or ""
        return " ".join(text.split("\n\n")[0].split())

    def parameters(self) -> list[inspect.Parameter]:
        """The keyword arguments it takes, in order, with their defaults."""
        return list(inspect.signature(self.build).parameters.values())


GENERATORS: dict[str, Generator] = {
    "matmul": Generator(
        matmul,
        {
            "M": "rows of A and of C",
            "N": "columns of B and of C",
            "K": "the reduction: columns of A, rows of B",
            "dtype": _DTYPE,
            "weights": _WEIGHTS.format("B"),
        },
    ),
    "matmul_bias_relu": Generator(
        matmul_bias_relu,
        {
            "M": "rows of A and of the result",
            "N": "columns of B, length of the bias, columns of the result",
            "K": "the reduction: columns of A, rows of B",
            "dtype": _DTYPE,
            "weights": _WEIGHTS.format("B and the bias"),
        },
    ),
    "matmul_bias_act": Generator(
        matmul_bias_act,
        {
            "M": "rows of A and of the result",
            "N": "columns of B, length of the bias, columns of the result",
            "K": "the reduction: columns of A, rows of B",
            "act": "the activation after the bias: `relu`, `gelu` (exact, with erf) or `silu`",
            "dtype": _DTYPE,
            "weights": _WEIGHTS.format("B and the bias"),
        },
    ),
    "batch_matmul": Generator(
        batch_matmul,
        {
            "B": "the batch: how many independent matmuls",
            "M": "rows of each A and C",
            "N": "columns of each B and C",
            "K": "the reduction: columns of each A, rows of each B",
            "dtype": _DTYPE,
        },
    ),
    "matmul_chain": Generator(
        matmul_chain,
        {
            "M": "rows of A and of the result",
            "N": "columns of B, rows of C (the second matmul's reduction)",
            "K": "the first matmul's reduction: columns of A, rows of B",
            "P": "columns of C and of the result",
            "dtype": _DTYPE,
        },
    ),
    "conv2d_nhwc": Generator(
        conv2d_nhwc,
        {
            **_IMAGE,
            "C": "input channels",
            "F": "output channels (filters)",
            **_WINDOW,
        },
    ),
    "depthwise_conv2d_nhwc": Generator(
        depthwise_conv2d_nhwc,
        {
            **_IMAGE,
            "C": "channels, of the input and of the output (one filter each)",
            **{name: _WINDOW[name] for name in ("KH", "KW", "pad", "stride", "dtype", "weights")},
        },
    ),
    "resnet_block": Generator(
        resnet_block,
        {
            "N": "batch size",
            "H": "height of the input and of every layer",
            "W": "width of the input and of every layer",
            "C": "channels of the input and of the output (the residual adds them)",
            "M": "the bottleneck's channels: outputs of the first 1x1 and of the 3x3 conv",
            "dtype": _DTYPE,
        },
    ),
    "elementwise_chain": Generator(
        elementwise_chain,
        {"M": "rows", "N": "columns (the scale's length)", "dtype": _DTYPE},
    ),
    "channel_affine": Generator(
        channel_affine,
        {
            "N": "batch size",
            "C": "channels (the length of the scale and of the bias)",
            "H": "height",
            "W": "width",
            "dtype": _DTYPE,
        },
    ),
    "conv_pad_conv": Generator(
        conv_pad_conv,
        {
            "N": "batch size",
            "H": "height of the input and of both convs' outputs",
            "W": "width of the input and of both convs' outputs",
            "C": "input channels",
            "M": "output channels of both convs",
            "dtype": _DTYPE,
        },
    ),
    "softmax": Generator(
        softmax,
        {"M": "rows", "N": "columns: the axis the softmax normalizes", "dtype": _DTYPE},
    ),
    "row_norm": Generator(
        row_norm,
        {
            "M": "rows (tokens)",
            "N": "columns: the axis each row is normalized over (the hidden size)",
            "norm": "`layernorm` (mean and variance, gamma and beta) or `rmsnorm` (root mean "
            "square, gamma only)",
            "dtype": _DTYPE,
        },
    ),
    "attention": Generator(
        attention,
        {
            "H": "heads: independent attentions, the batch of every op",
            "S": "tokens: rows of Q, K and V, and both sides of each head's score matrix",
            "D": "the head dimension: columns of Q, K and V (scores are scaled by 1/sqrt(D))",
            "dtype": _DTYPE,
        },
    ),
}


def generate(name: str, args: Mapping[str, int | str]) -> Workload:
    """Build the generator ``name`` with keyword ``args``. Raises WorkloadError naming an
    unknown generator, an argument it does not take or one it needs, with what it takes."""
    if name not in GENERATORS:
        raise WorkloadError(f"unknown generator {name!r}; available: {', '.join(GENERATORS)}")
    generator = GENERATORS[name]
    parameters = generator.parameters()
    unknown = sorted(set(args) - {p.name for p in parameters})
    missing = [p.name for p in parameters if p.default is p.empty and p.name not in args]
    if unknown or missing:
        problems = [f"unknown argument {a!r}" for a in unknown]
        problems += [f"argument {a!r} is required" for a in missing]
        raise WorkloadError(
            f"generator {name}: {'; '.join(problems)}. It takes {_signature(parameters)} "
            f"({DOCS}#{name})"
        )
    return generator.build(**args)


def _signature(parameters: list[inspect.Parameter]) -> str:
    """``M, N, K, dtype=f32, ...``: each argument, with its default where it has one."""
    return ", ".join(
        p.name if p.default is p.empty else f"{p.name}={p.default}" for p in parameters
    )
