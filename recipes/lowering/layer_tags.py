"""Layer names from MLIR locations: ``loc("conv1")`` becomes ``tdsched.layer = "conv1"``.

Importers give each op the location of the model node it came from (IREE's ONNX importer
uses ``loc("<node name>")``; a TOSA file may write ``loc("conv1")``). Lowering keeps those
locations on the linalg ops, possibly wrapped in fused or call-site locations. The
attributes written here are what graph and kernel schedules match layers by.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from iree.compiler import ir

LAYER_ATTR = "tdsched.layer"
ONNX_OP_ATTR = "tdsched.onnx_op"

# Ops that hold data or storage for a layer rather than its computation.
_UNTAGGED = frozenset({"arith.constant", "tensor.empty", "func.return"})


def iter_locations(loc: ir.Location) -> Iterator[ir.Location]:
    """``loc`` and every location nested in it, depth first (a name before its child,
    a call site's callee before its caller, fused parts in order), each as its concrete
    class (``NameLoc``, ``FileLineColLoc``, ...) even where ``loc`` comes untyped, as
    diagnostics' locations do."""
    loc = ir.Location.from_attr(loc.attr)
    yield loc
    nested: list[ir.Location] = []
    if isinstance(loc, ir.NameLoc):
        nested = [loc.child_loc]
    elif isinstance(loc, ir.FusedLoc):
        nested = list(loc.locations)
    elif isinstance(loc, ir.CallSiteLoc):
        nested = [loc.callee, loc.caller]
    for inner in nested:
        yield from iter_locations(inner)


def location_names(loc: ir.Location) -> list[str]:
    """The names of the ``NameLoc``s in ``loc``, outermost first."""
    return [str(part.name_str) for part in iter_locations(loc) if isinstance(part, ir.NameLoc)]


def function_body_ops(module: ir.Module) -> Iterator[ir.Operation]:
    """Ops directly in the bodies of the module's ``func.func``s (not the payload ops
    nested inside linalg or tensor.pad regions)."""
    for top in module.body.operations:
        if top.operation.name != "func.func":
            continue
        for block in top.operation.regions[0].blocks:
            for op in block.operations:
                yield op.operation


def tag_layers(module: ir.Module, *, layers: Collection[str] | None = None) -> None:
    """Give every computing op in a function body ``tdsched.layer = "<name>"``, the first
    ``NameLoc`` name in its location, unless it already has that attribute.

    ``layers``, when given, limits the names used (e.g. to ONNX node names, so that an
    initializer's or the graph's own name never becomes a layer). Constants,
    ``tensor.empty`` and returns are skipped. Must run inside the module's context.
    """
    for op in function_body_ops(module):
        if op.name in _UNTAGGED or LAYER_ATTR in op.attributes:
            continue
        names = [n for n in location_names(op.location) if layers is None or n in layers]
        if names:
            op.attributes[LAYER_ATTR] = ir.StringAttr.get(names[0])


def annotate_layers(module: ir.Module, attr: str, values: Mapping[str, str]) -> None:
    """Set ``attr = values[layer]`` on every op whose ``tdsched.layer`` is a key of
    ``values`` (e.g. ``tdsched.onnx_op = "Conv"``). Runs after :func:`tag_layers`."""
    for op in function_body_ops(module):
        if LAYER_ATTR not in op.attributes:
            continue
        layer = ir.StringAttr(op.attributes[LAYER_ATTR]).value
        if layer in values:
            op.attributes[attr] = ir.StringAttr.get(values[layer])
