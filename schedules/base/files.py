"""Files users give tdsched, and files that other processes (or a later run) may read at
any moment."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import RecipeError, Where


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a ``.partial`` file: a killed run never leaves
    half a file where a later one would take it for a whole one."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def read_user_text(path: Path, what: str) -> str:
    """The UTF-8 text of a file the user named (``what`` says which kind, e.g. ``recipe``);
    a file that cannot be read, or is not UTF-8, is a RecipeError naming it (and the line
    of the first bad byte)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecipeError(Where(str(path)), f"cannot read the {what}: {exc.strerror}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RecipeError(
            Where(str(path), line),
            f"the {what} is not UTF-8 text (byte 0x{data[exc.start]:02x}); save it as UTF-8",
        ) from exc
