"""The evaluator's error type and how it names an op and where the op is."""

from __future__ import annotations

from iree.compiler import ir


class EvalError(ValueError):
    """The IR cannot be evaluated (or compared); the message says which op, where, and why."""


class OpFailure(Exception):
    """Raised by op helpers that do not know which op they serve: the interpreter turns it
    into an :class:`EvalError` naming the op being evaluated and its location."""


def describe_location(location: ir.Location, source: str) -> str:
    """``file:line:col`` for a file location (``source`` for parsed text), else MLIR's form.

    Text parsed from a string gets the buffer name ``-``; ``source`` names it instead.
    """
    if isinstance(location, ir.FileLineColLoc):
        filename = source if location.filename == "-" else location.filename
        return f"{filename}:{location.start_line}:{location.start_col}"
    return f"{source}: {location}"
