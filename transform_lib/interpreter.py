"""Applying a whole-module transform script in-process (the graph-schedule route).

tdsched applies graph schedules itself, before IREE sees the module, so ``tdsched apply``
shows exactly the module that ``iree-compile`` later receives, and a step that matched
nothing is reported before compiling. ``transform.print`` writes to the process's C-level
stdout, so that file descriptor is captured while the interpreter runs.
"""

from __future__ import annotations

import os
import sys
import tempfile

from iree.compiler import ir
from iree.compiler.dialects.transform import interpreter

from .errors import ScheduleError


class ScriptFailed(ScheduleError):
    """A graph transform script failed; ``printed`` is what it printed before failing
    (the step markers, so the caller can name a step whose handle came out empty)."""

    def __init__(self, message: str, printed: str) -> None:
        super().__init__(message)
        self.printed = printed


class CapturedStdout:
    """Redirect file descriptor 1 into a temporary file for the duration of a block."""

    def __enter__(self) -> CapturedStdout:
        sys.stdout.flush()
        self._file = tempfile.TemporaryFile(mode="w+b")
        self._saved = os.dup(1)
        os.dup2(self._file.fileno(), 1)
        self.text = ""
        return self

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, 1)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()


def apply_in_place(payload: ir.Operation | ir.Module, script: str, entry: str) -> str:
    """Apply ``@entry`` of ``script`` to ``payload`` in the current context, in place.

    Returns what the script printed; a failing transform raises ``ir.MLIRError`` with
    MLIR's diagnostics (callers say which step failed), with what the script printed
    before failing as its ``printed`` attribute.
    """
    transforms = ir.Module.parse(script)
    sequence = next(
        op
        for op in transforms.body.operations
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == entry
    )
    with CapturedStdout() as out:
        try:
            interpreter.apply_named_sequence(payload, sequence, transforms)
        except ir.MLIRError as exc:
            failure: ir.MLIRError | None = exc
        else:
            failure = None
    if failure is not None:
        failure.printed = out.text
        raise failure
    return out.text


def apply_script(payload: str, script: str, entry: str) -> tuple[str, str]:
    """Apply ``@entry`` of ``script`` to the ``payload`` module.

    Returns the transformed module text and what the script printed. A failing transform
    raises :class:`ScheduleError` with MLIR's diagnostics.
    """
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(payload)
        except ir.MLIRError as exc:
            raise ScheduleError(f"cannot parse: {exc}") from exc
        try:
            printed = apply_in_place(module, script, entry)
        except ir.MLIRError as exc:
            printed_before = getattr(exc, "printed", "")
            raise ScriptFailed(f"the graph schedule failed: {exc}", printed_before) from exc
        if not module.operation.verify():
            raise ScheduleError("the graph schedule produced an invalid module")
        return str(module), printed
