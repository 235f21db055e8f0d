"""What every command that takes a RECIPE shares: its arguments (the recipe, what to build
it for, parameter overrides, trust grants) and the plan they make."""

from __future__ import annotations

import argparse
import glob
import os
import sys

from tdsched.targets.target import TARGET_NAMES

from ..compile.pipeline import Plan, plan
from ..dsl.params import parse_override
from ..frontends.loading import load
from ..frontends.shipped import shipped_recipe_names
from .args import (
    add_cpu_options,
    add_gpu_option,
    add_threads_option,
    add_trust_options,
    build_target_from,
    trust_from,
)
from .output_paths import reads, recipe_file


def _complete_recipe(prefix: str, **_: object) -> list[str]:
    """Shell completion of a RECIPE: shipped names, then recipe files and folders."""
    names = [n for n in shipped_recipe_names() if n.startswith(prefix)]
    paths = sorted(glob.glob(prefix + "*"))
    files = [p + "/" if os.path.isdir(p) else p for p in paths]
    return names + [f for f in files if f.endswith(("/", ".yaml", ".yml", ".py"))]


def add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """RECIPE and the options that say what to build it for: --target, --param, the x86
    CPU, the Vulkan GPU, threads, and the grants a recipe file may need."""
    recipe = parser.add_argument("recipe", help="recipe file (.yaml, .py) or shipped recipe name")
    recipe.completer = _complete_recipe  # type: ignore[attr-defined]
    reads(parser, recipe, recipe_file)
    parser.add_argument(
        "--target",
        choices=TARGET_NAMES,
        help="target to build for (default: the recipe's first)",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a recipe parameter (repeatable)",
    )
    add_cpu_options(parser)
    add_gpu_option(parser)
    add_threads_option(parser)
    add_trust_options(parser)


def plan_from(args: argparse.Namespace, **extra: object) -> Plan:
    """The plan of the recipe and build the command line names (:func:`add_recipe_arguments`);
    ``extra`` goes to :func:`~..compile.pipeline.plan`. Says on stderr which shape-table
    entry it used and which steps it left out."""
    overrides = dict(parse_override(text) for text in args.param)
    p = plan(
        load(args.recipe, trust_from(args)),
        build_target_from(args),
        overrides,
        **extra,  # type: ignore[arg-type]
    )
    if p.recipe.shape_choice is not None:
        print(f"tdsched: {p.recipe.shape_choice.describe()}", file=sys.stderr)
    for skipped in p.recipe.skipped:
        print(f"tdsched: {skipped.describe()}", file=sys.stderr)
    return p
