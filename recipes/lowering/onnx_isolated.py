"""IREE's ONNX import in a child process, where a crash is a :class:`LoweringError` that
names the node it crashed on.

IREE's ONNX-to-torch conversion segfaults on some ops (``Unique`` in IREE 3.13): in the
command's own process that is exit status 139 and no word. Here the child
(:mod:`.onnx_child`) lowers the model
in ``FOLDER`` and writes the module's text, or the lowering's error; a child killed by
a signal is followed by one child per distinct op type of the model, each lowering a
model of one node of that type, to find the node to blame.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import LoweringError

if TYPE_CHECKING:
    import onnx

MODEL, MODULE, ERROR = "model.onnx", "module.mlir", "error.txt"
CHILD = f"{__package__}.onnx_child"
"""The module the child runs (``python -m CHILD FOLDER SOURCE``)."""
PROBE_TIMEOUT_S = 120.0
"""How long a probe of one node may take (a hang counts as no crash)."""


def lower_isolated(original: onnx.ModelProto, prepared: onnx.ModelProto, source: str) -> str:
    """The text :func:`.onnx_import.lower_in_process` gives for ``original``, computed in
    a child process. ``prepared``: ``original`` as prepared for import (its inferred
    types build the one-node models that find the node a crash is to blame on)."""
    died = _lower_in_child(original, source)
    if isinstance(died, str):
        return died
    culprit = _crash_culprit(prepared, source)
    if culprit is not None:
        raise LoweringError(
            f"{source}: node '{culprit.name}' (op {culprit.op_type}): IREE's ONNX import "
            f"crashed on it ({died.name}); tdsched cannot lower this model: remove or replace "
            "the node"
        )
    raise LoweringError(
        f"{source}: IREE's ONNX import crashed ({died.name}) and no single node of the model "
        "crashes it alone; tdsched cannot lower this model"
    )


def _lower_in_child(
    model: onnx.ModelProto, source: str, timeout_s: float | None = None
) -> str | signal.Signals:
    """The lowered text, or the signal that killed the child; the lowering's own error
    is raised as :class:`LoweringError` (and a child past ``timeout_s`` as
    ``subprocess.TimeoutExpired``)."""
    with tempfile.TemporaryDirectory(prefix="tdsched-onnx-") as tmp:
        folder = Path(tmp)
        (folder / MODEL).write_bytes(model.SerializeToString())
        proc = subprocess.run(
            [sys.executable, "-m", CHILD, str(folder), source],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
        )
        if proc.returncode < 0:
            return signal.Signals(-proc.returncode)
        if (folder / ERROR).is_file():
            raise LoweringError((folder / ERROR).read_text())
        if proc.returncode != 0 or not (folder / MODULE).is_file():
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            raise LoweringError(
                f"{source}: IREE's ONNX import failed (exit status {proc.returncode})"
                + (f": {lines[-1]}" if lines else "")
            )
        return (folder / MODULE).read_text()


def _crash_culprit(prepared: onnx.ModelProto, source: str) -> onnx.NodeProto | None:
    """The first node whose op type crashes the import in a model of that node alone."""
    seen: set[tuple[str, str]] = set()
    for node in prepared.graph.node:
        kind = (node.domain, node.op_type)
        if kind in seen:
            continue
        seen.add(kind)
        alone = _one_node_model(prepared, node)
        if alone is None:
            continue
        try:
            if isinstance(_probe(alone, source), signal.Signals):
                return node
        except LoweringError:
            continue
    return None


def _probe(model: onnx.ModelProto, source: str) -> str | signal.Signals:
    """What lowering ``model`` gives; one that hangs counts as lowered (no crash)."""
    try:
        return _lower_in_child(model, source, PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return ""


def _one_node_model(prepared: onnx.ModelProto, node: onnx.NodeProto) -> onnx.ModelProto | None:
    """A model of ``node`` alone: its inputs as graph inputs (initializers stay
    initializers), typed as shape inference typed them; None where a type is unknown."""
    import onnx

    graph = prepared.graph
    typed = {v.name: v for v in (*graph.input, *graph.value_info, *graph.output)}
    initializers = {init.name: init for init in graph.initializer}
    inputs, kept = [], []
    for name in (n for n in node.input if n):
        if name in initializers:
            kept.append(initializers[name])
        elif name in typed:
            inputs.append(typed[name])
        else:
            return None
    outputs = [typed[name] for name in node.output if name in typed]
    if not outputs:
        return None
    alone = onnx.helper.make_graph([node], "probe", inputs, outputs, initializer=kept)
    model = onnx.helper.make_model(alone, opset_imports=prepared.opset_import)
    model.ir_version = prepared.ir_version
    return model
