"""``tdsched lower MODEL``: print the linalg on tensors that recipes schedule.

MODEL is a shipped model-builder model (``small_cnn``, ``encoder_layer``, ``mobilenet``), a
Python file returning a ``Model`` (``net.py[:FUNCTION]``), an ONNX file, or a TOSA / linalg
``.mlir`` file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iree.compiler import ir
from tdsched.recipes.models import MODELS
from tdsched.recipes.workloads.lowered import (
    FILE_FORMATS,
    ROUTES,
    file_workload,
    model_workload,
)
from tdsched.targets.workload import Workload
from tdsched.transform_lib.census import structured_ops
from tdsched.transform_lib.graph.report import layer_of
from tdsched.transform_lib.payload import ops_under

from ..base.files import write_atomically
from ..base.text_table import aligned
from .output_paths import model_file, reads, writes

DESCRIPTION = f"""\
Lower MODEL to linalg on tensors, as recipes see it, and print it (or write it with -o).

MODEL is one of:
  a shipped model-builder model ({", ".join(MODELS)}), with --arg NAME=VALUE arguments
  FILE.py[:FUNCTION]   a Python file whose FUNCTION (default: model) returns a
                       tdsched Model (see docs/model-builder.md)
  FILE.onnx            an ONNX model, imported with IREE's ONNX importer
  FILE.mlir            TOSA (lowered with IREE's TOSA input conversion) or linalg

Every op a layer lowers to carries tdsched.layer = "<layer>" (ONNX: the node name), which
recipes match with `match: {{layer: NAME}}`; --layers lists the layers and their ops.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``lower`` on the ``tdsched`` subcommand parser."""
    lower = sub.add_parser(
        "lower",
        help="print a model (builder, ONNX, TOSA) lowered to linalg on tensors",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_arguments(lower)
    lower.add_argument("--layers", action="store_true", help="list the layers and their ops")
    writes(lower, lower.add_argument("-o", "--output", type=Path, help="write the module here"))


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """MODEL and the options that say how to lower it (read by :func:`lower`)."""
    model = parser.add_argument(
        "model", metavar="MODEL", help="a model name, FILE.py[:FUNCTION], FILE.onnx or FILE.mlir"
    )
    reads(parser, model, model_file)
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="argument of a builder model (repeatable), e.g. --arg layout=NHWC",
    )
    parser.add_argument(
        "--via",
        choices=ROUTES,
        default="builder",
        help="lower a builder model directly (default) or by exporting it to ONNX first",
    )
    parser.add_argument(
        "--format",
        choices=FILE_FORMATS,
        default="auto",
        help="the format of a file MODEL (default: from its suffix and contents)",
    )
    parser.add_argument("--function", help="entry function of a .mlir file with several")


def run(args: argparse.Namespace) -> int:
    """Lower ``args.model`` and print it, its layer table, or write it to ``-o``."""
    workload = lower(args)
    if args.layers:
        print("\n".join(layer_table(workload.mlir)))
    elif args.output is None:
        sys.stdout.write(workload.mlir if workload.mlir.endswith("\n") else workload.mlir + "\n")
    if args.output is not None:
        write_atomically(args.output, workload.mlir.encode())
        print(f"wrote {args.output} (entry @{workload.function})", file=sys.stderr)
    return 0


def lower(args: argparse.Namespace) -> Workload:
    """The workload ``args`` names (see DESCRIPTION)."""
    path = Path(args.model.partition(":")[0])
    if path.suffix in (".onnx", ".mlir"):
        if args.arg:
            raise ValueError(f"{path}: --arg applies to builder models, not to files")
        return file_workload(path, args.function, args.format)
    return model_workload(args.model, model_args(args.arg), args.via, Path.cwd())


def model_args(texts: list[str]) -> dict[str, int | str]:
    """``--arg NAME=VALUE`` texts as a builder model's arguments (integers where they are)."""
    parsed: dict[str, int | str] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise ValueError(f"--arg {text!r}: expected NAME=VALUE")
        parsed[name] = int(value) if value.lstrip("-").isdigit() else value
    return parsed


def layer_table(module_text: str) -> list[str]:
    """One row per layer: its name, type, and its structured ops with loop bounds."""
    with ir.Context():
        ops = structured_ops(ir.Module.parse(module_text))
        types = _layer_types(ir.Module.parse(module_text))
    rows: dict[str, list[str]] = {}
    for op in ops:
        bounds = list(op.loop_ranges) if op.loop_ranges is not None else "dynamic"
        rows.setdefault(op.layer or "(no layer)", []).append(f"{op.op} {bounds}")
    table = [["layer", "type", "structured ops (loop bounds)"]]
    table += [[layer, types.get(layer, ""), "; ".join(found)] for layer, found in rows.items()]
    return aligned(table)


def _layer_types(module: ir.Module) -> dict[str, str]:
    """Layer name -> its type (``tdsched.layer_type`` or ``tdsched.onnx_op``)."""
    types: dict[str, str] = {}
    for op in ops_under(module.operation, lambda op: layer_of(op) is not None):
        for attr in ("tdsched.layer_type", "tdsched.onnx_op"):
            if attr in op.attributes:
                types.setdefault(layer_of(op) or "", ir.StringAttr(op.attributes[attr]).value)
    return types
