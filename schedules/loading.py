"""Load a recipe from a YAML file or a Python file, or by shipped-recipe name."""

from __future__ import annotations

import runpy
from pathlib import Path

from tdsched.recipes import RECIPES_DIR

from .errors import RecipeError, Where
from .recipe import Recipe
from .yaml_frontend import load_recipe as load_yaml


def find_recipe(spec: str) -> Path:
    """A recipe path: ``spec`` itself, or a shipped recipe's name (``matmul_x86``)."""
    path = Path(spec)
    if path.exists():
        return path
    for suffix in ("", ".yaml", ".py"):
        shipped = RECIPES_DIR / f"{spec}{suffix}"
        if shipped.is_file():
            return shipped
    names = sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")) + sorted(
        p.stem for p in RECIPES_DIR.glob("*.py") if not p.name.startswith("_")
    )
    raise RecipeError(Where(spec), f"no such recipe file; shipped recipes: {', '.join(names)}")


def load(spec: str) -> Recipe:
    """Load a recipe file (``.yaml``/``.yml``, or ``.py`` defining ``recipe``)."""
    path = find_recipe(spec)
    if path.suffix in (".yaml", ".yml"):
        return load_yaml(path)
    if path.suffix == ".py":
        namespace = runpy.run_path(str(path))
        recipe = namespace.get("recipe")
        if not isinstance(recipe, Recipe):
            raise RecipeError(
                Where(str(path)),
                "a Python recipe must define `recipe = RecipeBuilder(...)...build()` (a Recipe)",
            )
        return recipe
    raise RecipeError(Where(str(path)), "recipes are .yaml, .yml or .py files")
