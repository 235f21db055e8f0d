"""The best candidate as a frozen recipe: a file ``tdsched run`` accepts unchanged.

A frozen recipe is the swept recipe with the winning values as its parameter defaults,
no space or constraints, the swept target first (so ``tdsched run FILE`` runs it there),
workload files as paths relative to the frozen recipe, and a ``provenance`` block saying
where it came from.
YAML recipes are re-written as YAML (comments are not kept); Python recipes are copied
with a last statement that freezes the built recipe.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import RecipeError, Where
from ..space import ParamValue


def write_frozen(
    source: Path,
    out: Path,
    params: Mapping[str, ParamValue],
    target: str,
    provenance: Mapping[str, Any],
) -> Path:
    """Write the frozen recipe to ``out`` (its suffix follows the source's); returns it."""
    if source.suffix == ".py":
        out = out.with_suffix(".py")
        out.write_text(_frozen_python(source, params, target, provenance))
    else:
        out = out.with_suffix(".yaml")
        out.write_text(_frozen_yaml(source, out.parent, params, target, provenance))
    return out


def _frozen_yaml(
    source: Path,
    out_folder: Path,
    params: Mapping[str, ParamValue],
    target: str,
    provenance: Mapping[str, Any],
) -> str:
    document = yaml.safe_load(source.read_text())
    if not isinstance(document, dict):
        raise RecipeError(Where(str(source)), "not a recipe mapping; cannot freeze it")
    document.pop("space", None)
    document.pop("constraints", None)
    document["parameters"] = {**(document.get("parameters") or {}), **params}
    targets = document.get("targets") or ["x86"]
    document["targets"] = [target, *(t for t in targets if t != target)]
    workload = document.get("workload") or {}
    for key in ("file", "model"):
        if _is_path(workload, key):
            found = (source.parent / workload[key]).resolve()
            workload[key] = os.path.relpath(found, out_folder.resolve())
    document["provenance"] = dict(provenance)
    header = (
        f"# Frozen by tdsched sweep from {source}: the best candidate's parameters.\n"
        f"# Run it with: tdsched run {{this file}}\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=None)


def _frozen_python(
    source: Path, params: Mapping[str, ParamValue], target: str, provenance: Mapping[str, Any]
) -> str:
    return (
        source.read_text().rstrip()
        + "\n\n# --- frozen by tdsched sweep: the best candidate's parameters ---\n"
        + "from tdsched.schedules.python_api import frozen as _frozen  # noqa: E402\n\n"
        + f"PROVENANCE = {dict(provenance)!r}\n"
        + f"recipe = _frozen(recipe, {dict(params)!r}, {target!r})\n"
    )


def _is_path(workload: Mapping[str, Any], key: str) -> bool:
    """Whether ``workload[key]`` names a file beside the recipe (a ``file``, or a model
    given as ``FILE.py[:FUNCTION]``), not a shipped name."""
    value = workload.get(key)
    if not isinstance(value, str):
        return False
    return key == "file" or value.partition(":")[0].endswith(".py")


def read_provenance(path: Path) -> dict[str, Any] | None:
    """The ``provenance`` a frozen recipe at ``path`` carries (YAML block, or the Python
    ``PROVENANCE = {...}`` line); ``None`` when the file is not a frozen recipe."""
    try:
        text = path.read_text()
        if path.suffix == ".py":
            line = next(ln for ln in text.splitlines() if ln.startswith("PROVENANCE = "))
            found = ast.literal_eval(line.removeprefix("PROVENANCE = "))
        else:
            found = (yaml.safe_load(text) or {}).get("provenance")
    except (OSError, UnicodeDecodeError, StopIteration, ValueError, SyntaxError, AttributeError):
        return None
    except yaml.YAMLError:
        return None
    return found if isinstance(found, dict) else None


def recorded_sweep(path: Path) -> tuple[str, int] | None:
    """The (database, sweep id) a frozen recipe at ``path`` came from; ``None`` when there
    is no file, ``("", -1)`` when the file is not a frozen recipe (the user's own)."""
    if not path.is_file():
        return None
    provenance = read_provenance(path) or {}
    try:
        return str(provenance["database"]), int(provenance["sweep"])
    except (KeyError, TypeError, ValueError):
        return ("", -1)
