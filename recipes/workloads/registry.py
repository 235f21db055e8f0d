"""Every workload generator, by the name recipes use."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from tdsched.targets.workload import Workload, WorkloadError

from .generators import (
    conv2d_nhwc,
    matmul,
    matmul_bias_relu,
    matmul_chain,
    resnet_block,
    softmax,
)
from .graph_generators import channel_affine, conv_pad_conv, elementwise_chain

GENERATORS: dict[str, Callable[..., Workload]] = {
    "matmul": matmul,
    "matmul_bias_relu": matmul_bias_relu,
    "matmul_chain": matmul_chain,
    "conv2d_nhwc": conv2d_nhwc,
    "resnet_block": resnet_block,
    "elementwise_chain": elementwise_chain,
    "channel_affine": channel_affine,
    "conv_pad_conv": conv_pad_conv,
    "softmax": softmax,
}


def generate(name: str, args: dict[str, int | str]) -> Workload:
    """Build the generator ``name`` with keyword ``args``; errors say what is expected."""
    if name not in GENERATORS:
        raise WorkloadError(f"unknown generator {name!r}; available: {', '.join(GENERATORS)}")
    gen = GENERATORS[name]
    try:
        return gen(**args)
    except TypeError as exc:
        expected = ", ".join(inspect.signature(gen).parameters)
        raise WorkloadError(
            f"generator {name}: bad arguments {sorted(args)}; expected {expected}"
        ) from exc
