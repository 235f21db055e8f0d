"""ONNX nodes refused before import, each with its reason and its fix.

IREE's ONNX import accepts these, but what it makes of them fails later (a raw verifier
error, a compile failure in LLVM translation) or never finishes. Refusing them at
lowering names the node instead. Checked on IREE 3.13 (see ``docs/importing.md``):

* ``Pad`` with ``mode = "reflect"`` (what ``torch.nn.ReflectionPad2d`` exports): lowers to
  gathers that iree-compile cannot translate to LLVM;
* ``Pad`` with ``mode = "wrap"`` (opset 19): torch-mlir's lowering does not terminate;
* ``PRelu`` whose slope does not broadcast to its input under ONNX's unidirectional
  (numpy-style, right-aligned) broadcasting, e.g. a per-channel slope of shape ``[C]``
  on an NCHW input, which must be ``[C, 1, 1]``. ``onnx.checker`` accepts the model; the
  import fails with a linalg verifier error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import LoweringError

if TYPE_CHECKING:
    import onnx

Shape = tuple[int, ...]

PAD_MODES_REFUSED = {
    "reflect": "IREE cannot compile the lowering of reflect padding (LLVM translation "
    "fails); pad with mode 'constant' or 'edge', or outside the model",
    "wrap": "torch-mlir's lowering of wrap padding does not terminate; pad with mode "
    "'constant' or 'edge', or outside the model",
}
"""``Pad`` modes refused, and why."""


def refuse_unsupported(graph: onnx.GraphProto, source: str) -> None:
    """Raise :class:`LoweringError` listing every node of ``graph`` (shapes inferred)
    that is refused, one line each: ``source: node 'NAME' (op TYPE): reason; fix``."""
    shapes = _shapes(graph)
    lines = []
    for node in graph.node:
        reason = _refusal(node, shapes)
        if reason is not None:
            lines.append(f"{source}: node '{node.name}' (op {node.op_type}): {reason}")
    if lines:
        raise LoweringError("\n".join(lines))


def _refusal(node: onnx.NodeProto, shapes: dict[str, Shape]) -> str | None:
    """Why ``node`` is refused, or ``None``."""
    if node.op_type == "Pad" and not node.domain:
        mode = next((a.s.decode() for a in node.attribute if a.name == "mode"), "constant")
        if mode in PAD_MODES_REFUSED:
            return f"mode '{mode}' is not supported: {PAD_MODES_REFUSED[mode]}"
    if node.op_type == "PRelu" and not node.domain and len(node.input) == 2:
        x, slope = (shapes.get(name) for name in node.input)
        if x is not None and slope is not None and not _broadcasts(slope, x):
            return (
                f"slope of shape {list(slope)} does not broadcast to the input's "
                f"{list(x)}: ONNX aligns the slope's dims with the input's last dims, so a "
                f"per-channel slope of an NCHW input has shape [C, 1, 1]; reshape the "
                "slope in the model"
            )
    return None


def _broadcasts(small: Shape, big: Shape) -> bool:
    """Whether ``small`` broadcasts to ``big`` one way, dims aligned from the right."""
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(reversed(small), reversed(big), strict=False))


def _shapes(graph: onnx.GraphProto) -> dict[str, Shape]:
    """The static shape of every value whose shape is known: initializers, inputs,
    outputs and inferred ``value_info``."""
    shapes = {init.name: tuple(int(d) for d in init.dims) for init in graph.initializer}
    for value in (*graph.input, *graph.output, *graph.value_info):
        dims = _static_dims(value)
        if dims is not None:
            shapes.setdefault(value.name, dims)
    return shapes


def _static_dims(value: onnx.ValueInfoProto) -> Shape | None:
    """``value``'s dims when it is a tensor with every dim fixed, else ``None``."""
    if not value.type.HasField("tensor_type"):
        return None
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims: Sequence[onnx.TensorShapeProto.Dimension] = tensor.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)
