"""The model's own reference for an ONNX workload: onnx's ``ReferenceEvaluator``.

An ONNX file lowered by IREE's importer and torch-mlir could be lowered wrongly, and IREE's
default build of that lowered module would repeat the mistake; checking a build against
it cannot catch an import bug. :class:`OnnxReference` runs the model itself, as prepared
for import (opset upgraded to 17 where the version converter can, shapes inferred), in
onnx's numpy reference implementation, on the same inputs as the compiled module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import LoweringError

if TYPE_CHECKING:
    import onnx

ONNX_REFERENCE = "onnx-reference"
"""The reference kind ``tdsched run`` reports for it (``reference`` in its JSON)."""


@dataclass(frozen=True)
class OnnxReference:
    """Calls onnx's ``ReferenceEvaluator`` on ``model`` with the compiled module's
    arguments (the graph inputs that are not initializers, in graph order, as IREE's
    importer orders the function's arguments) and returns the graph outputs in order."""

    model: onnx.ModelProto
    source: str
    input_names: tuple[str, ...]
    opset: int

    @staticmethod
    def of(model: onnx.ModelProto, opset: int, source: str) -> OnnxReference:
        """The reference of the prepared ``model`` (``source`` names it in errors)."""
        initialized = {init.name for init in model.graph.initializer}
        names = tuple(v.name for v in model.graph.input if v.name not in initialized)
        return OnnxReference(model, source, names, opset)

    @property
    def description(self) -> str:
        """What the reference is, for docs and reports."""
        return f"onnx.reference.ReferenceEvaluator at opset {self.opset}"

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self.input_names):
            raise LoweringError(
                f"{self.source}: the lowered function takes {len(inputs)} arguments but the "
                f"model has {len(self.input_names)} inputs ({', '.join(self.input_names)}); "
                "its own reference cannot be run"
            )
        from onnx.reference import ReferenceEvaluator

        feeds = dict(zip(self.input_names, inputs, strict=True))
        try:
            outputs: list[Any] = ReferenceEvaluator(self.model).run(None, feeds)
        except Exception as exc:  # the evaluator raises whatever its op kernels raise
            raise LoweringError(
                f"{self.source}: onnx's reference evaluator failed on the model "
                f"({type(exc).__name__}: {exc}); check the model with "
                "onnx.reference.ReferenceEvaluator, or run it as a linalg .mlir file, "
                "checked against IREE's default build"
            ) from exc
        return [np.asarray(out) for out in outputs]
