"""What a workload file may not hold: code for IREE's runtime instead of a computation.

A recipe's ``workload: {file: net.mlir}`` is compiled by iree-compile, and MLIR can carry
more than linalg: ``hal.executable`` variants with ``hal.executable.objects`` (object files
linked into the module and run), external dispatches, LLVM or SPIR-V code, transform
scripts. A recipe file must not make tdsched run code of its choosing
(docs/recipes.md, 'What a recipe file may do'), so a linalg workload file holding an op of
those dialects, or an attribute that names HAL executables, is refused.
"""

from __future__ import annotations

from iree.compiler import ir

from .errors import LoweringError, position

RUNTIME_DIALECTS = frozenset(
    {
        "hal",
        "flow",
        "stream",
        "util",
        "vm",
        "vmvx",
        "llvm",
        "emitc",
        "spirv",
        "gpu",
        "nvvm",
        "rocdl",
        "amdgpu",
        "transform",
        "iree_codegen",
        "iree_gpu",
    }
)
"""Dialects of IREE's executables and runtime, of target code, and of transform scripts."""


def refuse_runtime_code(module: ir.Module, source: str) -> None:
    """Raise :class:`LoweringError` at the first op of :data:`RUNTIME_DIALECTS`, or with an
    attribute of the ``hal`` dialect (by name or value), in ``module``."""

    found: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        dialect = op.name.split(".", 1)[0]
        attributes = op.attributes
        named = [name for name in attributes if _is_hal(name, str(attributes[name]))]
        if dialect in RUNTIME_DIALECTS or named:
            what = f"op '{op.name}'" if not named else f"attribute '{named[0]}' of '{op.name}'"
            found.append(f"{position(op.location, source)}: {what}")
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if found:
        raise LoweringError(
            f"{found[0]}: a workload file holds a computation (linalg on tensors), not IREE "
            "executables, runtime, target code or transform scripts, which could link or run "
            "code of the file's choosing"
        )


def _is_hal(name: str, value: str) -> bool:
    return name.startswith("hal.") or "#hal." in value
