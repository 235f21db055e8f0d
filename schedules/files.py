"""Writing files that other processes (or a later run) may read at any moment."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a ``.partial`` file: a killed run never leaves
    half a file where a later one would take it for a whole one."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)
