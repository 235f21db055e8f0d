"""TOSA MLIR to linalg on tensors, with IREE's TOSA input conversion run in-process.

The pipeline ``iree-tosa-input-transformation-pipeline`` keeps ``func.func`` entry
points (``iree-compile --compile-to=input`` would turn them into ``util.func``).
"""

from __future__ import annotations

import re

from iree.compiler import ir

from .errors import (
    LoweringError,
    check_lowered,
    describe_mlir_error,
    format_diagnostic,
    position,
    run_pipeline,
)
from .layer_tags import tag_layers

TOSA_PIPELINE = "builtin.module(iree-tosa-input-transformation-pipeline)"

# A TOSA op in generic form (``"tosa.conv2d"(``) or custom form (``= tosa.add`` or an op
# without results starting its line); attributes such as ``tosa.target_env`` do not count.
_TOSA_OP = re.compile(r'"tosa\.\w+"\s*\(|(?:^|=)[ \t]*tosa\.\w+', re.MULTILINE)
_NOT_LEGALIZED = re.compile(r"failed to legalize operation '([\w.]+)'")


def looks_like_tosa(text: str) -> bool:
    """Whether the MLIR ``text`` uses TOSA ops (a cheap textual check that also holds
    for a file that does not parse, so its parse error reaches the user)."""
    return _TOSA_OP.search(text) is not None


def lower_tosa(text: str, source: str) -> str:
    """Lower the TOSA module ``text`` (read from ``source``, named in errors) to a
    linalg-on-tensors module with the same ``func.func`` entry points.

    Ops written with ``loc("name")`` get ``tdsched.layer = "name"``. Raises
    :class:`LoweringError` for text that does not parse (``source:line:col``), TOSA ops
    IREE cannot lower, ops other than linalg/tensor/arith/math left after lowering, and
    entry points without static shapes.
    """
    with ir.Context():
        module = _parse(text, source)
        run_pipeline(module, TOSA_PIPELINE, source, _describe)
        check_lowered(module, source, _unsupported)
        _drop_tosa_attributes(module)
        tag_layers(module)
        return str(module)


def _parse(text: str, source: str) -> ir.Module:
    try:
        return ir.Module.parse(text)
    except ir.MLIRError as exc:
        raise LoweringError(describe_mlir_error(exc, source)) from exc


def _describe(diag: ir.DiagnosticInfo, source: str) -> str:
    """A legalization failure names the op; other diagnostics are shown as they are."""
    failed = _NOT_LEGALIZED.match(diag.message)
    if failed is None:
        return format_diagnostic(diag, source)
    return _unsupported(failed.group(1), position(diag.location, source))


def _unsupported(op_name: str, where: str) -> str:
    if op_name.startswith("tosa."):
        return (
            f"{where}: unsupported TOSA op '{op_name}': "
            "IREE's TOSA input conversion has no lowering for it"
        )
    return (
        f"{where}: unsupported op '{op_name}' after IREE's TOSA input conversion: "
        "tdsched takes linalg, tensor, arith and math ops only"
    )


def _drop_tosa_attributes(module: ir.Module) -> None:
    """Remove the module's ``tosa.*`` attributes (the TOSA target environment)."""
    attributes = module.operation.attributes
    for name in [name for name in attributes if name.startswith("tosa.")]:
        del attributes[name]
