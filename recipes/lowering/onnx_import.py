"""ONNX models to linalg on tensors: IREE's ONNX importer and torch-mlir's lowering.

Steps: load and ``onnx.checker``; reject symbolic input dims; name unnamed nodes; upgrade
opsets older than :data:`MIN_OPSET` (torch-mlir lowers e.g. ``MaxPool`` only from opset
12), keeping the node names (:mod:`.onnx_names`); shape inference; refuse the nodes that
:mod:`.onnx_refusals` lists; import (each op gets ``loc("<node name>")``); convert ONNX
ops to torch ops and list the nodes left unconverted; lower to linalg; tag layers. The
prepared model is also the workload's reference (:mod:`.onnx_reference`).

The import and the lowering run in a child process (:mod:`.onnx_isolated`): on some ops
(``Unique``) IREE's conversion segfaults, which must fail the lowering, not the command.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from iree.compiler import ir

from .errors import LoweringError, check_lowered, position, run_pipeline
from .layer_tags import ONNX_OP_ATTR, annotate_layers, location_names, tag_layers
from .onnx_isolated import lower_isolated
from .onnx_names import function_name, name_nodes, name_unnamed, restore_names
from .onnx_reference import OnnxReference
from .onnx_refusals import refuse_unsupported

if TYPE_CHECKING:
    import onnx

MIN_OPSET = 17
ONNX_TO_TORCH = "builtin.module(func.func(convert-torch-onnx-to-torch))"
TORCH_TO_LINALG = (
    "builtin.module(torch-onnx-to-torch-backend-pipeline,"
    "torch-backend-to-linalg-on-tensors-backend-pipeline)"
)
DEFAULT_DOMAIN = "ai.onnx"


@dataclass(frozen=True)
class LoweredOnnx:
    """An ONNX model lowered to linalg (``text``) and its own ``reference``."""

    text: str
    reference: OnnxReference


def lower_onnx(model: onnx.ModelProto | str | Path, source: str) -> str:
    """Lower an ONNX model (a ``ModelProto`` or a file path) to a linalg-on-tensors
    module whose ``func.func`` is named after the graph (:func:`.onnx_names.function_name`):
    :func:`import_onnx`'s text."""
    return import_onnx(model, source).text


def import_onnx(model: onnx.ModelProto | str | Path, source: str) -> LoweredOnnx:
    """Lower an ONNX model (a ``ModelProto`` or a file path) to a linalg-on-tensors
    module whose ``func.func`` is named after the graph (:func:`.onnx_names.function_name`),
    with onnx's reference evaluator of the model as prepared for import.

    Each op of a node carries ``tdsched.layer = "<node name>"`` and
    ``tdsched.onnx_op = "<op type>"``, both as in the model also where the opset upgrade
    replaced the node. ``source`` names the model in errors. Raises
    :class:`LoweringError` for a missing or invalid model, symbolic input dims, nodes
    refused before import (:mod:`.onnx_refusals`) or that IREE's ONNX import cannot
    lower, or a missing ``onnx`` package. The caller's ``ModelProto`` is not modified.
    """
    onnx_mod = _require_onnx()
    original = _load(onnx_mod, model, source)
    proto, _ = _prepared(onnx_mod, original, source)
    text = lower_isolated(original, proto, source)
    return LoweredOnnx(text, OnnxReference.of(proto, _opset(proto), source))


def lower_in_process(model: onnx.ModelProto, source: str) -> str:
    """The lowered module's text, in this process (a crash of IREE's import takes the
    process with it: :func:`import_onnx` calls this in a child)."""
    onnx_mod = _require_onnx()
    proto, nodes = _prepared(onnx_mod, _load(onnx_mod, model, source), source)
    with ir.Context():
        module = _import(proto, source)
        run_pipeline(module, ONNX_TO_TORCH, source)
        _reject_unconverted(module, nodes, _opset(proto), source)
        run_pipeline(module, TORCH_TO_LINALG, source)
        check_lowered(module, source, _leftover)
        tag_layers(module, layers=nodes)
        annotate_layers(module, ONNX_OP_ATTR, {name: n.op_type for name, n in nodes.items()})
        return str(module)


def _require_onnx() -> ModuleType:
    """The ``onnx`` module, imported only when a model is lowered (it is optional)."""
    try:
        return importlib.import_module("onnx")
    except ImportError as exc:
        raise LoweringError(
            "ONNX import needs the onnx package: pip install 'tdsched[onnx]'"
        ) from exc


def _load(
    onnx_mod: ModuleType, model: onnx.ModelProto | str | Path, source: str
) -> onnx.ModelProto:
    """The model, read if it is a path, that passes ``onnx.checker`` and whose opset
    this ``onnx`` knows (the checker lets any number pass)."""
    from google.protobuf.message import DecodeError

    try:
        proto = model if isinstance(model, onnx_mod.ModelProto) else onnx_mod.load(Path(model))
        onnx_mod.checker.check_model(proto)
    except OSError as exc:
        raise LoweringError(
            f"{source}: not a valid ONNX model: cannot read it ({exc.strerror})"
        ) from exc
    except (DecodeError, onnx_mod.checker.ValidationError, ValueError) as exc:
        raise LoweringError(f"{source}: not a valid ONNX model: {exc}") from exc
    newest = onnx_mod.defs.onnx_opset_version()
    if _opset(proto) > newest:
        raise LoweringError(
            f"{source}: opset {_opset(proto)} is newer than any this onnx package knows (up "
            f"to {newest}), so what its ops mean is unknown: export the model with opset "
            f"{newest} or older, or upgrade onnx"
        )
    return proto


def _prepared(
    onnx_mod: ModuleType, proto: onnx.ModelProto, source: str
) -> tuple[onnx.ModelProto, dict[str, onnx.NodeProto]]:
    """A copy of ``proto`` ready to import (static inputs checked, every node named, opset
    upgraded where possible, shapes inferred, no node :mod:`.onnx_refusals` refuses) and
    the nodes that name layers: the model's own, plus any node of the upgrade that could
    not be traced to one."""
    _check_static_inputs(proto, source)
    named = onnx_mod.ModelProto()
    named.CopyFrom(proto)
    named.graph.name = function_name(named.graph.name)
    name_nodes(named.graph)
    nodes = {node.name: node for node in named.graph.node}
    if _opset(named) < MIN_OPSET:
        upgraded = _upgraded(onnx_mod, named)
        restore_names(named.graph.node, upgraded.graph)
        name_unnamed(upgraded.graph)
        nodes.update({n.name: n for n in upgraded.graph.node if n.name not in nodes})
        named = upgraded
    try:
        ready: onnx.ModelProto = onnx_mod.shape_inference.infer_shapes(named, data_prop=True)
    except (onnx_mod.shape_inference.InferenceError, onnx_mod.checker.ValidationError) as exc:
        raise LoweringError(
            f"{source}: not a valid ONNX model: shape inference failed: {exc}"
        ) from exc
    refuse_unsupported(ready.graph, source)
    return ready, nodes


def _upgraded(onnx_mod: ModuleType, proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` converted to :data:`MIN_OPSET`, or unchanged where ONNX's version
    converter cannot (nodes torch-mlir then cannot lower are reported with the opset).
    Nodes the converter creates are unnamed."""
    try:
        converted: onnx.ModelProto = onnx_mod.version_converter.convert_version(proto, MIN_OPSET)
    except (RuntimeError, ValueError):
        return proto
    return converted


def _opset(proto: onnx.ModelProto) -> int:
    """The model's opset version of the default (``ai.onnx``) domain."""
    versions = [o.version for o in proto.opset_import if o.domain in ("", DEFAULT_DOMAIN)]
    return int(versions[0]) if versions else 0


def _check_static_inputs(proto: onnx.ModelProto, source: str) -> None:
    """Every graph input (initializers aside) is a tensor with a fixed size per dim."""
    initialized = {init.name for init in proto.graph.initializer}
    for value in proto.graph.input:
        if value.name in initialized:
            continue
        if not value.type.HasField("tensor_type"):
            raise LoweringError(
                f"{source}: input '{value.name}' is not a tensor; tdsched feeds tensors"
            )
        tensor = value.type.tensor_type
        dims = tensor.shape.dim if tensor.HasField("shape") else None
        if dims is None or any(d.dim_value <= 0 for d in dims):
            shape = "unknown" if dims is None else f"[{', '.join(map(_dim_text, dims))}]"
            raise LoweringError(
                f"{source}: input '{value.name}' has dynamic shape {shape}: tdsched needs static "
                "shapes; fix the input dims in the model (e.g. with "
                "onnx.tools.update_model_dims.update_inputs_outputs_dims)"
            )


def _dim_text(dim: onnx.TensorShapeProto.Dimension) -> str:
    """A dim as ONNX declares it: its size, its symbolic name, or ``?``."""
    if dim.HasField("dim_value"):
        return str(dim.dim_value)
    return str(dim.dim_param) or "?"


def _import(proto: onnx.ModelProto, source: str) -> ir.Module:
    """Import ``proto`` as torch-dialect IR in the current context."""
    from iree.compiler.extras import onnx_importer

    try:
        with warnings.catch_warnings():
            # Nodes without inferred types (custom ops) warn here; they are reported below.
            warnings.simplefilter("ignore")
            info = onnx_importer.ModelInfo(proto)
            module: ir.Module = info.create_module(context=ir.Context.current)
            importer = onnx_importer.NodeImporter.define_function(info.main_graph, module.operation)
            importer.import_all()
    except onnx_importer.OnnxImportError as exc:
        raise LoweringError(f"{source}: IREE's ONNX import failed: {exc}") from exc
    return module


def _reject_unconverted(
    module: ir.Module, nodes: dict[str, onnx.NodeProto], opset: int, source: str
) -> None:
    """List every node whose ONNX op was not converted to torch ops (``torch.operator``
    is what the importer emits and the ONNX-to-torch conversion replaces)."""
    lines: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "torch.operator":
            lines.append(_unconverted(op, nodes, opset, source))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if lines:
        raise LoweringError("\n".join(lines))


def _unconverted(
    op: ir.Operation, nodes: dict[str, onnx.NodeProto], opset: int, source: str
) -> str:
    op_type = ir.StringAttr(op.attributes["name"]).value.removeprefix("onnx.")
    names = [name for name in location_names(op.location) if name in nodes]
    if not names:
        return f"{position(op.location, source)}: op {op_type}: not supported by IREE's ONNX import"
    node = nodes[names[0]]
    domain = node.domain or DEFAULT_DOMAIN
    version = f", opset {opset}" if domain == DEFAULT_DOMAIN else ""
    return (
        f"{source}: node '{node.name}' (op {node.op_type}, domain {domain}{version}): not "
        "supported by IREE's ONNX import (torch-mlir has no lowering for it)"
    )


def _leftover(op_name: str, where: str) -> str:
    return (
        f"{where}: unsupported op '{op_name}' after IREE's ONNX import and torch-mlir's "
        "lowering: tdsched takes linalg, tensor, arith and math ops only"
    )
