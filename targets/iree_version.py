"""IREE's version, read without loading the compiler's Python bindings (``tdsched
--version`` answers in well under a second)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

_VERSION = re.compile(r'^VERSION\s*=\s*"([^"]+)"', re.M)


def iree_compiler_version() -> str:
    """The ``VERSION`` of the installed ``iree.compiler`` (e.g. ``3.13.0rc20261016``),
    as ``iree.compiler.version.VERSION`` holds it; ``unknown`` where it cannot be read.
    Importing ``iree.compiler.version`` would load the MLIR bindings first (the package's
    ``__init__`` does), so the generated file is read as text."""
    spec = importlib.util.find_spec("iree.compiler")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "version.py"
        if path.is_file():
            found = _VERSION.search(path.read_text())
            if found:
                return found.group(1)
    return "unknown"
