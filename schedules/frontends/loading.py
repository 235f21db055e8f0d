"""Load a recipe from a YAML file or a Python file, or by shipped-recipe name."""

from __future__ import annotations

import runpy
from pathlib import Path

from tdsched.recipes import RECIPES_DIR
from tdsched.recipes.workloads.user_code import describe_failure, failing_line

from ..base.errors import RecipeError, Where
from ..base.files import read_user_text
from ..dsl.recipe import Recipe
from .recipe_trust import UNTRUSTED, Trust
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
    names = shipped_recipe_names()
    raise RecipeError(Where(spec), f"no such recipe file; shipped recipes: {', '.join(names)}")


def shipped_recipe_names() -> list[str]:
    """The names of the shipped recipes (YAML first, then Python), each sorted."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")) + sorted(
        p.stem for p in RECIPES_DIR.glob("*.py") if not p.name.startswith("_")
    )


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
