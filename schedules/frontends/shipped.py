"""The shipped recipes, by name, and each one's header (name, targets, description, and
whether it declares a sweep space), read without building it: ``tdsched list`` answers
in a fraction of a second this way, where building every recipe takes seconds.

A YAML recipe's header is its top-level fields. A Python recipe's is read from its
source without running it: the literal arguments of its ``RecipeBuilder(...)`` call and
whether it calls ``.space(...)``. A Python recipe written otherwise has no header here;
``tdsched list`` then builds it."""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tdsched.recipes import RECIPES_DIR

from ..base.errors import RecipeError, Where

DEFAULT_TARGETS = ("x86",)
"""A recipe's targets where it names none (both front ends)."""


def shipped_recipe_names() -> list[str]:
    """The names of the shipped recipes (YAML first, then Python), each sorted."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")) + sorted(
        p.stem for p in RECIPES_DIR.glob("*.py") if not p.name.startswith("_")
    )


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


@dataclass(frozen=True)
class RecipeHeader:
    """What ``tdsched list`` shows of a recipe."""

    name: str
    targets: tuple[str, ...]
    sweepable: bool
    """Whether it declares a sweep space."""
    description: str

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "targets": list(self.targets)}


def shipped_header(name: str) -> RecipeHeader | None:
    """The header of the shipped recipe ``name`` (a YAML file, else a Python one);
    ``None`` for a Python recipe whose header cannot be read without running it.
    Raises RecipeError for a YAML file that does not parse or is not a recipe."""
    yaml_path = RECIPES_DIR / f"{name}.yaml"
    if yaml_path.is_file():
        return _yaml_header(yaml_path)
    return _python_header(RECIPES_DIR / f"{name}.py")


def _yaml_header(path: Path) -> RecipeHeader:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        top = yaml.load(path.read_text(), Loader=loader)
    except yaml.YAMLError as exc:
        raise RecipeError(Where(str(path)), f"not valid YAML: {exc}") from exc
    if not isinstance(top, dict) or not isinstance(top.get("name"), str):
        raise RecipeError(Where(str(path)), "not a recipe: a mapping with a 'name' is expected")
    targets = top.get("targets") or DEFAULT_TARGETS
    return RecipeHeader(
        top["name"],
        tuple(str(t) for t in targets),
        bool(top.get("space")),
        str(top.get("description") or ""),
    )


def _python_header(path: Path) -> RecipeHeader | None:
    tree = ast.parse(path.read_text(), str(path))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    builders = [c for c in calls if _called(c) == "RecipeBuilder"]
    if len(builders) != 1 or not builders[0].args:
        return None
    builder = builders[0]
    keywords = {k.arg: k.value for k in builder.keywords if k.arg}
    try:
        name = ast.literal_eval(builder.args[0])
        targets = ast.literal_eval(keywords["targets"]) if "targets" in keywords else None
        description = ast.literal_eval(keywords.get("description", ast.Constant("")))
    except ValueError:  # not literals
        return None
    sweepable = any(_called(c) == "space" and (c.args or c.keywords) for c in calls)
    return RecipeHeader(str(name), tuple(targets or DEFAULT_TARGETS), sweepable, str(description))


def _called(call: ast.Call) -> str | None:
    """The name a call calls: ``f`` of ``f(...)`` and of ``x.f(...)``."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None
