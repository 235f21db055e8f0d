"""Load a script of ``benchmarks/`` as a module, to test its functions (the folder is
put on ``sys.path``, as running the script does, so it may import its neighbours)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def benchmark_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
