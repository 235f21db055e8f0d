"""Running users' Python files (recipes, models): a failure becomes one line that names the
user's file and line, never a traceback of tdsched's internals."""

from __future__ import annotations

import traceback
from pathlib import Path


def user_code_failure(path: Path, doing: str, exc: BaseException) -> str:
    """``FILE:LINE: <doing> failed: <Type>: <message>`` (see :func:`failing_line`)."""
    line = failing_line(path, exc)
    where = f"{path}:{line}" if line is not None else str(path)
    return f"{where}: {describe_failure(doing, exc)}"


def failing_line(path: Path, exc: BaseException) -> int | None:
    """The line of ``path`` where ``exc`` arose: a syntax error's own line, else the
    deepest frame of ``path`` in its traceback."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return exc.lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return frames[-1].lineno if frames else None


def describe_failure(doing: str, exc: BaseException) -> str:
    """What went wrong, in one line (``sys.exit`` is named as such)."""
    if isinstance(exc, SystemExit):
        return f"{doing} called sys.exit({exc.code!r}) instead of finishing"
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return f"{doing} failed: {type(exc).__name__}: {message}"
