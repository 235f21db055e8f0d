"""``tdsched regress BASELINE --add RECIPE``: gate a recipe, typically a sweep's best.

The entry names the recipe by a path relative to the baseline file (the two move
together), on the recipe's first target (a frozen best lists the swept one first). A
frozen best also carries the sweep's thread count and raced speedup in its
``provenance``: the entry is measured with the same threads (and the same ``--cpu``
where the sweep built for another CPU than this machine's, the same ``--gpu`` where it
built for a named Vulkan GPU), so the gate judges the
configuration the sweep chose, and its note says where it came from. It is added
unblessed: ``--update`` measures and blesses it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..base.errors import RecipeError, Where
from ..frontends.loading import load
from ..frontends.recipe_trust import UNTRUSTED, Trust
from ..frontends.shipped import find_recipe
from ..sweep.freeze import read_provenance
from .baseline_file import BaselineFile, Entry, Settings, load_baseline


def with_added(baseline_path: Path, recipes: list[str], trust: Trust = UNTRUSTED) -> BaselineFile:
    """The baseline file (a new one if ``baseline_path`` does not exist) with an entry for
    each of ``recipes``; an entry that is already there is an error naming it."""
    if baseline_path.exists():
        baseline = load_baseline(baseline_path)
    else:
        baseline = BaselineFile(baseline_path, "", Settings(), {}, ())
    entries = list(baseline.entries)
    for spec in recipes:
        entry = _entry_for(spec, baseline_path.parent, trust)
        for existing in entries:
            if existing.identity == entry.identity:
                raise RecipeError(
                    existing.where if existing.where.file else Where(str(baseline_path)),
                    f"{baseline_path} already gates {entry.label}",
                )
        entries.append(entry)
    return dataclasses.replace(baseline, entries=tuple(entries))


def _entry_for(spec: str, folder: Path, trust: Trust) -> Entry:
    path = find_recipe(spec)
    recipe = load(spec, trust)
    shipped = not Path(spec).exists()
    name = spec if shipped else os.path.relpath(path.resolve(), folder.resolve())
    provenance = read_provenance(path)
    overrides: dict[str, float | int] = {}
    note = cpu = gpu = None
    if provenance:
        if isinstance(provenance.get("threads"), int):
            overrides["threads"] = provenance["threads"]
        if isinstance(provenance.get("cpu"), str):
            cpu = provenance["cpu"]
        if isinstance(provenance.get("gpu"), str):
            gpu = provenance["gpu"]
        note = (
            f"best of sweep {provenance.get('sweep')} ({provenance.get('database')}), "
            f"raced at {provenance.get('speedup')}x on {provenance.get('target')}"
        )
    return Entry(
        recipe=name, target=recipe.targets[0], cpu=cpu, gpu=gpu, overrides=overrides, note=note
    )
