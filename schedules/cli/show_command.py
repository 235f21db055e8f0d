"""``tdsched show RECIPE``: print the transform scripts a recipe generates: the graph
script and the kernel library, as iree-compile receives them."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from ..compile.emit import ScriptStage
from ..compile.pipeline import apply_graph, build
from .recipe_options import add_recipe_arguments, plan_from

SEPARATOR = "// -----"
"""Between the scripts (and kernels) printed: ``iree-opt --split-input-file`` reads them."""


def add_parser(sub: Any) -> None:
    show = sub.add_parser(
        "show",
        help="print the generated transform scripts",
        description="Print the graph script (@__transform_main, applied to the whole module "
        "before dispatch formation) and the kernel library (@__kernel_config, passed to "
        f"iree-compile), separated by '{SEPARATOR}' lines "
        "(iree-opt --split-input-file reads them).",
    )
    add_recipe_arguments(show)


def run(args: argparse.Namespace) -> int:
    p = plan_from(args)
    parts = []
    if all(isinstance(stage, ScriptStage) for stage in p.scripts.graph):
        for stage in p.scripts.graph:
            assert isinstance(stage, ScriptStage)
            parts.append(
                "// graph schedule: whole module, applied before dispatch formation\n"
                + stage.script
            )
    else:
        # fuse_ext plans its transform steps on the payload: run the graph to know them.
        for script in apply_graph(p).scripts:
            parts.append("// graph schedule step (whole module)\n" + script)
    library = p.scripts.kernel_library
    if p.scripts.kernel_fusions:
        # Kernel-level fuse_ext is planned on the dispatch sources: build them first.
        with tempfile.TemporaryDirectory(prefix="tdsched-show-") as tmp:
            files = build(p, Path(tmp))
            assert files.kernel_library is not None
            library = files.kernel_library.read_text()
    if library:
        parts.append(
            f"// kernel library for {p.target.name}: pass with "
            "--iree-codegen-transform-dialect-library\n" + library
        )
    if not parts:
        print(f"// recipe {p.recipe.name} has no schedules")
    print(f"\n{SEPARATOR}\n".join(parts), end="")
    return 0
