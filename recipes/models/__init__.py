"""A small Python model builder (conv2d, pools, linear, ...) lowered to linalg on tensors.

``Model`` builds the graph; ``to_linalg`` lowers it the way a hand-written dialect would,
tagging every op with ``tdsched.layer`` so recipes can match layers; ``reference`` is the
numpy forward pass; ``to_onnx`` exports it. ``MODELS`` lists the shipped models.
"""

from .builder import Model
from .graph import Layer, ModelError, Tensor, Window
from .zoo import MODELS, encoder_layer, small_cnn

__all__ = [
    "MODELS",
    "Layer",
    "Model",
    "ModelError",
    "Tensor",
    "Window",
    "encoder_layer",
    "small_cnn",
]
