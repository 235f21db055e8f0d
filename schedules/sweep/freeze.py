"""The best candidate as a frozen recipe: a file ``tdsched run`` accepts unchanged.

A frozen recipe is the swept recipe with the winning values as its parameter defaults,
no space, constraints or shape table (an entry would override the winning values), the
swept target first (so ``tdsched run FILE`` runs it there), workload files as paths
relative to the frozen recipe, and a ``provenance`` block saying where it came from.
YAML recipes are re-written as YAML (comments are not kept); Python recipes are copied
with a last statement that freezes the built recipe.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..base.errors import RecipeError, Where
from ..dsl.space import ParamValue
from ..frontends.yaml_writer import recipe_yaml


def write_frozen(
    source: Path,
    out: Path,
    params: Mapping[str, ParamValue],
    target: str,
    provenance: Mapping[str, Any],
) -> Path:
    """Write the frozen recipe to ``out`` (Python for a Python ``source``, else YAML:
    :func:`frozen_suffixes` says how to name it); returns it."""
    if source.suffix == ".py":
        out.write_text(_frozen_python(source, params, target, provenance))
    else:
        out.write_text(_frozen_yaml(source, out.parent, params, target, provenance))
    return out


def frozen_suffixes(source: Path, shapes: bool) -> tuple[str, ...]:
    """The suffixes a file written from the recipe at ``source`` may have: a Python
    recipe's best is Python, a YAML recipe's best and a shape table (``shapes``) YAML."""
    return (".py",) if source.suffix == ".py" and not shapes else (".yaml", ".yml")


def _frozen_yaml(
    source: Path,
    out_folder: Path,
    params: Mapping[str, ParamValue],
    target: str,
    provenance: Mapping[str, Any],
) -> str:
    document = _document(source, out_folder, target)
    document.pop("space", None)
    document.pop("constraints", None)
    document.pop("shapes", None)  # its entries would override the frozen values
    document["parameters"] = {**(document.get("parameters") or {}), **params}
    document["provenance"] = dict(provenance)
    header = (
        f"# Frozen by tdsched sweep from {source}: the best candidate's parameters.\n"
        f"# Run it with: tdsched run {{this file}}\n"
    )
    return header + recipe_yaml(document)


@dataclass(frozen=True)
class WrittenTable:
    """A shape table :func:`write_shape_table` wrote."""

    path: Path
    replaced: list[dict[str, Any]]
    """The entries the table had (the recipe's own, or an earlier sweep's in the same
    file) that an entry of this sweep replaced."""


def write_shape_table(
    source: Path,
    out: Path,
    key: list[str],
    entries: list[dict[str, Any]],
    target: str,
    provenance: Mapping[str, Any],
) -> WrittenTable:
    """Write ``source`` with ``entries`` (one mapping per shape: key values, ``threads``,
    ``isa``, ``cpu``, ``gpu``, tuned values, ``iree_default``, ``note``) merged into its
    ``shapes`` table to ``out`` (YAML), together with the entries an earlier ``sweep
    --shape`` wrote to ``out``: a second sweep into the same file adds to the first's. An
    entry for a shape, thread count, ISA, CPU model and GPU the table already has
    replaces it (:attr:`WrittenTable.replaced`); the others stay. The space and
    constraints stay too (a table's nearest rule checks entries against the constraints,
    and the recipe can be swept again); ``provenance`` lists the earlier sweeps as well
    when they used the same database."""
    if source.suffix == ".py":
        raise RecipeError(
            Where(str(source)),
            "--shape writes a shape table into a YAML recipe; a Python recipe builds its "
            "table in code, or reads a YAML recipe's with RecipeBuilder.shapes_from(path) "
            "(see docs/recipes.md#shape-tables)",
        )
    document = _document(source, out.parent, target)
    table = document.get("shapes") or {}
    tables = [(table, source)]
    earlier = _swept_table(out)
    if earlier is not None:
        tables.append((earlier[0], out))
        provenance = _with_earlier_sweeps(provenance, earlier[1])

    def place(entry: Mapping[str, Any]) -> tuple[Any, ...]:
        return (
            *(entry.get(k) for k in key),
            entry.get("threads") or 0,
            entry.get("isa") or "",
            entry.get("cpu") or "",
            entry.get("gpu") or "",
        )

    had: dict[tuple[Any, ...], dict[str, Any]] = {}
    for found, where in tables:
        if found.get("key", key) != key:
            whose = "the recipe's table" if where == source else "the table written here"
            raise RecipeError(
                Where(str(where), None, "shapes.key"),
                f"{whose} is keyed by {found['key']}, the sweep's shapes by {key}",
            )
        had |= {place(e): e for e in found.get("entries") or []}
    replaced = [had.pop(place(e)) for e in entries if place(e) in had]
    merged = sorted([*had.values(), *entries], key=place)
    document["shapes"] = {"key": key, "rule": table.get("rule", "nearest"), "entries": merged}
    document["provenance"] = dict(provenance)
    header = (
        f"# Written by tdsched sweep --shape from {source}: tuned parameters per shape.\n"
        f"# Run it at any shape with: tdsched run {{this file}} --param NAME=VALUE ...\n"
    )
    out.write_text(header + recipe_yaml(document))
    return WrittenTable(out, replaced)


def _swept_table(path: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The shape table and provenance at ``path`` when an earlier ``sweep --shape``
    wrote them there (its provenance lists ``sweeps``); ``None`` for no file, or a file of
    another kind (the user's own recipe, a frozen best)."""
    provenance = read_provenance(path)
    if provenance is None or "sweeps" not in provenance:
        return None
    table = (yaml.safe_load(path.read_text()) or {}).get("shapes")
    return (table, provenance) if isinstance(table, dict) else None


def _with_earlier_sweeps(
    provenance: Mapping[str, Any], earlier: Mapping[str, Any]
) -> Mapping[str, Any]:
    """``provenance`` whose ``sweeps`` also lists the ``earlier`` table's, when both
    count sweeps of one database (ids of another database would mean other sweeps)."""
    if earlier.get("database") != provenance.get("database"):
        return provenance
    sweeps = [*(earlier.get("sweeps") or []), *(provenance.get("sweeps") or [])]
    return {**provenance, "sweeps": list(dict.fromkeys(sweeps))}


def _document(source: Path, out_folder: Path, target: str) -> dict[str, Any]:
    """The YAML recipe at ``source`` as data, its target first and its workload paths
    relative to ``out_folder``."""
    document = yaml.safe_load(source.read_text())
    if not isinstance(document, dict):
        raise RecipeError(Where(str(source)), "not a recipe mapping; cannot freeze it")
    targets = document.get("targets") or ["x86"]
    document["targets"] = [target, *(t for t in targets if t != target)]
    workload = document.get("workload") or {}
    for key in ("file", "model"):
        if _is_path(workload, key):
            found = (source.parent / workload[key]).resolve()
            workload[key] = os.path.relpath(found, out_folder.resolve())
    return document


def _frozen_python(
    source: Path, params: Mapping[str, ParamValue], target: str, provenance: Mapping[str, Any]
) -> str:
    return (
        source.read_text().rstrip()
        + "\n\n# --- frozen by tdsched sweep: the best candidate's parameters ---\n"
        + "from tdsched.schedules.frontends.python_api import frozen as _frozen  # noqa: E402\n\n"
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
