"""Shipped models. ``MODELS`` maps a name to a function returning a :class:`Model`; its keyword
arguments are ints or strings, so recipes can pass them from YAML."""

from __future__ import annotations

from collections.abc import Callable

from .builder import Model
from .graph import Tensor


def small_cnn(
    layout: str = "NCHW", size: int = 32, channels: int = 16, classes: int = 10, seed: int = 0
) -> Model:
    """A small residual CNN on a ``[1, 3, size, size]`` image (in ``layout`` order).

    stem (3x3 conv + relu) -> pool (3x3/2 max) -> block1 (``channels``) -> block2
    (``2 * channels``, stride 2, 1x1 projection shortcut) -> gap -> flatten -> fc (``classes``).
    """
    shape = (1, 3, size, size) if layout == "NCHW" else (1, size, size, 3)
    m = Model("small_cnn", shape, layout=layout, seed=seed)
    x = m.relu(m.conv2d(m.input, channels, 3, padding=1, name="stem"), name="stem.relu")
    x = m.max_pool(x, 3, stride=2, padding=1, name="pool")
    x = _residual_block(m, x, "block1", channels, stride=1)
    x = _residual_block(m, x, "block2", 2 * channels, stride=2)
    x = m.flatten(m.adaptive_avg_pool(x, (1, 1), name="gap"), name="flatten")
    m.output(m.linear(x, classes, name="fc"))
    return m


def _residual_block(m: Model, x: Tensor, name: str, channels: int, stride: int) -> Tensor:
    """conv1 (3x3, ``stride``) + relu1, conv2 (3x3), add the shortcut, relu2.

    The shortcut is ``x`` itself, or a 1x1 conv "<name>.proj" when the stride is not 1.
    """
    y = m.conv2d(x, channels, 3, stride=stride, padding=1, name=f"{name}.conv1")
    y = m.relu(y, name=f"{name}.relu1")
    y = m.conv2d(y, channels, 3, padding=1, name=f"{name}.conv2")
    shortcut = x if stride == 1 else m.conv2d(x, channels, 1, stride=stride, name=f"{name}.proj")
    return m.relu(m.add(y, shortcut, name=f"{name}.add"), name=f"{name}.relu2")


def encoder_layer(
    tokens: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072, seed: int = 0
) -> Model:
    """A transformer encoder layer as BERT's (post-norm) on ``[tokens, hidden]``; the
    defaults are BERT-base's at 128 tokens.

    q, k, v (``linear``, hidden -> hidden) -> attn (``heads`` heads) -> attn.out
    (``linear``) -> attn.add (the input) -> attn.norm (``layer_norm``) -> ffn.up
    (``linear``, hidden -> ``ffn``) -> ffn.gelu -> ffn.down (``linear``, ``ffn`` -> hidden)
    -> ffn.add (attn.norm's output) -> ffn.norm.
    """
    m = Model("encoder_layer", (tokens, hidden), seed=seed)
    x = m.input
    q, k, v = (m.linear(x, hidden, name=n) for n in ("attn.q", "attn.k", "attn.v"))
    context = m.attention(q, k, v, heads, name="attn")
    attended = m.add(x, m.linear(context, hidden, name="attn.out"), name="attn.add")
    x = m.layer_norm(attended, name="attn.norm")
    up = m.gelu(m.linear(x, ffn, name="ffn.up"), name="ffn.gelu")
    y = m.add(x, m.linear(up, hidden, name="ffn.down"), name="ffn.add")
    m.output(m.layer_norm(y, name="ffn.norm"))
    return m


_MOBILENET_BLOCKS = (
    (2, 1),
    (4, 2),
    (4, 1),
    (8, 2),
    (8, 1),
    (16, 2),
    *((16, 1),) * 5,
    (32, 2),
    (32, 1),
)
"""MobileNet v1's depthwise-separable blocks: (output channels in units of the stem's,
stride of the depthwise conv)."""


def mobilenet(
    layout: str = "NCHW", size: int = 224, width: int = 32, classes: int = 1000, seed: int = 0
) -> Model:
    """A MobileNet (v1) style network on a ``[1, 3, size, size]`` image (in ``layout``
    order): a 3x3 stride-2 stem conv of ``width`` channels + relu, then 13
    depthwise-separable blocks, each a 3x3 depthwise conv (``groups`` = its channels,
    stride 1 or 2) + relu and a 1x1 conv + relu, the channels growing to ``32 * width``
    (MobileNet v1's plan: ``width`` 32 is the original's 1.0 multiplier, about 1.1 GFLOP
    at 224), then a global average pool, flatten and a ``classes``-way linear layer. Every conv
    has a bias; batch normalization is left out (at inference it folds into the convs).
    """
    shape = (1, 3, size, size) if layout == "NCHW" else (1, size, size, 3)
    m = Model("mobilenet", shape, layout=layout, seed=seed)
    x = m.relu(m.conv2d(m.input, width, 3, stride=2, padding=1, name="stem"), name="stem.relu")
    channels = width
    for i, (units, stride) in enumerate(_MOBILENET_BLOCKS, start=1):
        x = m.conv2d(x, channels, 3, stride=stride, padding=1, groups=channels, name=f"dw{i}")
        x = m.relu(x, name=f"dw{i}.relu")
        channels = units * width
        x = m.relu(m.conv2d(x, channels, 1, name=f"pw{i}"), name=f"pw{i}.relu")
    x = m.flatten(m.adaptive_avg_pool(x, (1, 1), name="gap"), name="flatten")
    m.output(m.linear(x, classes, name="fc"))
    return m


MODELS: dict[str, Callable[..., Model]] = {
    "small_cnn": small_cnn,
    "encoder_layer": encoder_layer,
    "mobilenet": mobilenet,
}
"""Shipped models by name."""
