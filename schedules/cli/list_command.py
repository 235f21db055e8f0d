"""``tdsched list``: the shipped recipes, one line each (name, targets, what it schedules)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from ..base.errors import RecipeError
from ..base.text_table import aligned
from ..frontends.shipped import RecipeHeader, shipped_header, shipped_recipe_names


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "list",
        help="list the shipped recipes (name, targets, description)",
        description="List the recipes that ship with tdsched: each can be given by name to "
        "show, apply, compile, run, sweep and regress (e.g. 'tdsched run matmul_x86'). "
        "Copy one from the recipes folder of the installed package to start your own.",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list")


def shipped_recipes() -> list[RecipeHeader]:
    """Every shipped recipe, from its header (:mod:`..frontends.shipped`: the recipe is
    not built, so a mistake past its header shows when it is used); a recipe without a
    readable header is built, and one that cannot be says why in its description."""
    found = []
    for name in shipped_recipe_names():
        try:
            header = shipped_header(name)
            if header is None:
                from ..frontends.loading import load  # builds it: imports the recipe model

                recipe = load(name)
                found.append(
                    RecipeHeader(name, recipe.targets, bool(recipe.space.axes), recipe.description)
                )
                continue
        except RecipeError as exc:
            found.append(RecipeHeader(name, (), False, f"cannot load: {exc}"))
            continue
        found.append(dataclasses.replace(header, name=name))  # listed by its file's name
    return found


def run(args: argparse.Namespace) -> int:
    rows = shipped_recipes()
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
        return 0
    table = [["recipe", "targets", "sweep", "description"]]
    table += [
        [r.name, ",".join(r.targets), "yes" if r.sweepable else "", r.description] for r in rows
    ]
    print("\n".join(aligned(table)))
    return 0
