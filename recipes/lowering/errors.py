"""Lowering errors: MLIR diagnostics and leftover ops turned into one clear message.

Every failure of a lowering is a :class:`LoweringError` whose message starts with the
place in the user's file (``net.mlir:7:10``, or ``net.onnx at 'stem'`` for a named
location), never a traceback and never a module that is silently wrong.
"""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.passmanager import PassManager
from tdsched.targets.workload import WorkloadError

from .layer_tags import iter_locations, location_names

# The file name MLIR records for text parsed in-process (``ir.Module.parse``).
PLACEHOLDER_FILE = "-"

# Dialects a lowered function body may hold: linalg on tensors and its scalar payload.
LOWERED_DIALECTS = frozenset({"func", "linalg", "tensor", "arith", "math"})

Describe = Callable[[ir.DiagnosticInfo, str], str]
DescribeOp = Callable[[str, str], str]


class LoweringError(WorkloadError):
    """A model cannot be lowered to linalg on tensors; the message names the file, the
    place in it and the reason."""


def position(loc: ir.Location, source: str) -> str:
    """Where ``loc`` points, for a message: ``source:line:col`` from its first file
    location (the parser's placeholder file name becomes ``source``), else
    ``source at 'name'`` from its first name, else ``source``."""
    for part in iter_locations(loc):
        if isinstance(part, ir.FileLineColLoc):
            file = source if part.filename == PLACEHOLDER_FILE else part.filename
            return f"{file}:{part.start_line}:{part.start_col}"
    names = location_names(loc)
    return f"{source} at '{names[0]}'" if names else source


def format_diagnostic(diag: ir.DiagnosticInfo, source: str) -> str:
    """``position: message`` (first line), then its notes; MLIR's "see current
    operation" dumps are left out."""
    lines = [f"{position(diag.location, source)}: {_first_line(diag.message)}"]
    for note in diag.notes:
        if not note.message.startswith("see current operation"):
            lines.append(f"  note: {position(note.location, source)}: {_first_line(note.message)}")
    return "\n".join(lines)


def describe_mlir_error(
    exc: ir.MLIRError, source: str, describe: Describe = format_diagnostic
) -> str:
    """One line (plus notes) per error diagnostic of ``exc``."""
    lines = [describe(diag, source) for diag in exc.error_diagnostics]
    return "\n".join(lines) if lines else f"{source}: {exc.message}"


def run_pipeline(
    module: ir.Module, pipeline: str, source: str, describe: Describe = format_diagnostic
) -> None:
    """Run the textual pass ``pipeline`` on ``module`` (in the module's context); a failure raises
    :class:`LoweringError` with the diagnostics described by ``describe``."""
    try:
        PassManager.parse(pipeline, context=module.context).run(module.operation)
    except ir.MLIRError as exc:
        raise LoweringError(describe_mlir_error(exc, source, describe)) from exc


def check_lowered(module: ir.Module, source: str, describe_op: DescribeOp) -> None:
    """Reject a lowered module that is not plain linalg on tensors with static-shaped
    entry points: every op outside :data:`LOWERED_DIALECTS` is listed with its position
    (``describe_op(op_name, position)`` words each), then every dynamic signature."""
    lines = list(
        dict.fromkeys(
            describe_op(op.name, position(op.location, source)) for op in _leftover_ops(module)
        )
    )
    lines += _dynamic_signatures(module, source)
    if lines:
        raise LoweringError("\n".join(lines))


def _leftover_ops(module: ir.Module) -> list[ir.Operation]:
    """Ops outside :data:`LOWERED_DIALECTS` (not the ops nested in them) and every
    top-level op other than a function."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.split(".", 1)[0] in LOWERED_DIALECTS:
            return ir.WalkResult.ADVANCE
        found.append(op)
        return ir.WalkResult.SKIP

    for top in module.body.operations:
        if top.operation.name == "func.func":
            top.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        else:
            found.append(top.operation)
    return found


def _dynamic_signatures(module: ir.Module, source: str) -> list[str]:
    lines = []
    for top in module.body.operations:
        op = top.operation
        if op.name != "func.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        where = position(op.location, source)
        for kind, types in (("argument", ftype.inputs), ("result", ftype.results)):
            for index, t in enumerate(types):
                if not (isinstance(t, ir.RankedTensorType) and t.has_static_shape):
                    lines.append(
                        f"{where}: function @{name} {kind} {index} has type {t}: "
                        "tdsched needs static-shaped ranked tensors"
                    )
    return lines


def _first_line(message: str) -> str:
    return message.split("\n", 1)[0]
