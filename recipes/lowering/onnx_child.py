"""The child process of :mod:`.onnx_isolated`: ``python -m
tdsched.recipes.lowering.onnx_child FOLDER SOURCE`` lowers the ONNX model in ``FOLDER``
and writes the module's text there, or the lowering's error (``SOURCE`` names the model
in messages). A crash of IREE's import kills this process only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import LoweringError
from .onnx_import import lower_in_process
from .onnx_isolated import ERROR, MODEL, MODULE


def main(folder: str, source: str) -> int:
    """Lower ``folder``'s model; write the text, or the lowering's error."""
    import onnx

    path = Path(folder)
    try:
        text = lower_in_process(onnx.load(path / MODEL), source)
    except LoweringError as exc:
        (path / ERROR).write_text(str(exc))
        return 0
    (path / MODULE).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
