"""Load a recipe from a YAML file or a Python file, or by shipped-recipe name."""

from __future__ import annotations

import runpy
from pathlib import Path

from tdsched.recipes.workloads.user_code import describe_failure, failing_line

from ..base.errors import RecipeError, Where
from ..base.files import read_user_text
from ..dsl.recipe import Recipe
from .recipe_trust import UNTRUSTED, Trust
from .shipped import find_recipe
from .yaml_frontend import load_recipe as load_yaml


def load(spec: str, trust: Trust = UNTRUSTED) -> Recipe:
    """Load a recipe file (``.yaml``/``.yml``, or ``.py`` defining ``recipe``).

    ``trust``: what the user granted a YAML recipe on the command line beyond the rule of
    :mod:`.recipe_trust`; a Python recipe is code and runs as such."""
    path = find_recipe(spec)
    if path.suffix in (".yaml", ".yml"):
        return load_yaml(path, trust)
    if path.suffix == ".py":
        recipe = _run_python_recipe(path).get("recipe")
        if not isinstance(recipe, Recipe):
            raise RecipeError(
                Where(str(path)),
                "a Python recipe must define `recipe = RecipeBuilder(...)...build()` (a Recipe)",
            )
        return recipe
    raise RecipeError(Where(str(path)), "recipes are .yaml, .yml or .py files")


def _run_python_recipe(path: Path) -> dict[str, object]:
    """Run a Python recipe file; whatever goes wrong in it (an exception, a syntax error,
    null bytes, sys.exit) is a RecipeError naming its line. Errors tdsched raised about
    a step already name the step's line and pass through as they are."""
    read_user_text(path, "Python recipe")  # names the file and line of a non-UTF-8 byte
    try:
        return runpy.run_path(str(path))
    except RecipeError:
        raise
    except (Exception, SystemExit) as exc:
        where = Where(str(path), failing_line(path, exc))
        raise RecipeError(where, describe_failure("running the Python recipe", exc)) from exc
