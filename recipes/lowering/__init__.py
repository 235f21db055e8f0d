"""Lowering models to linalg on tensors: TOSA MLIR and ONNX, through IREE's importers.

Every op a named model node lowers to carries ``tdsched.layer = "<node name>"``, which
graph and kernel schedules match on.
"""

from .errors import LoweringError
from .layer_tags import tag_layers
from .onnx_import import LoweredOnnx, import_onnx, lower_onnx
from .onnx_reference import ONNX_REFERENCE, OnnxReference
from .tosa import looks_like_tosa, lower_tosa

__all__ = [
    "ONNX_REFERENCE",
    "LoweredOnnx",
    "LoweringError",
    "OnnxReference",
    "import_onnx",
    "looks_like_tosa",
    "lower_onnx",
    "lower_tosa",
    "tag_layers",
]
