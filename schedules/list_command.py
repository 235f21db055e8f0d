"""``tdsched list``: the shipped recipes, one line each (name, targets, what it schedules)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .errors import RecipeError
from .loading import load, shipped_recipe_names
from .text_table import aligned


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "list",
        help="list the shipped recipes (name, targets, description)",
        description="List the recipes that ship with tdsched: each can be given by name to "
        "show, apply, compile, run, sweep and regress (e.g. 'tdsched run matmul_x86'). "
        "Copy one from the recipes folder of the installed package to start your own.",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list")


def run(args: argparse.Namespace) -> int:
    rows = []
    for name in shipped_recipe_names():
        try:
            recipe = load(name)
        except RecipeError as exc:  # a broken shipped recipe is reported, not fatal
            rows.append({"name": name, "targets": [], "description": f"cannot load: {exc}"})
            continue
        rows.append(
            {
                "name": name,
                "targets": list(recipe.targets),
                "sweepable": bool(recipe.space.axes),
                "description": recipe.description,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [["recipe", "targets", "sweep", "description"]]
    table += [
        [r["name"], ",".join(r["targets"]), "yes" if r.get("sweepable") else "", r["description"]]
        for r in rows
    ]
    print("\n".join(aligned(table)))
    return 0
