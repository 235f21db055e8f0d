"""Turning a point of the space into a planned candidate and its content key.

The build key is a SHA-256 of everything that decides what gets built and how it is judged:
the workload, the schedule (the resolved graph and kernel steps without their source
locations, and the emitted scripts), the target and its flags, the recipe's compile
flags and tolerance, and the IREE version. Equal keys are the same experiment, so the
results database reuses them; a different IREE or a changed schedule is a new key. A
result's key adds the run conditions (:func:`result_key`), so a build timed with two
threads is not reused for a one-thread sweep, while its compiled artifact is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import iree.compiler.version

from ..compile.emit import ScriptStage
from ..compile.pipeline import Plan, plan
from ..dsl.recipe import Recipe
from ..dsl.space import ParamValue
from .messages import SweepContext

KEY_FORMAT = "1"


def plan_point(recipe: Recipe, context: SweepContext, params: Mapping[str, ParamValue]) -> Plan:
    """The plan of one candidate: the recipe with the fixed and the candidate's values."""
    return plan(recipe, context.request.build, {**context.request.params, **params})


def content_key(p: Plan) -> str:
    """The candidate's key (see the module docstring)."""
    graph_scripts = [s.script for s in p.scripts.graph if isinstance(s, ScriptStage)]
    return _digest(
        {
            "format": KEY_FORMAT,
            "workload": p.workload.mlir,
            "graph": _canonical(p.recipe.graph),
            "kernels": _canonical(p.recipe.kernels),
            "graph_scripts": graph_scripts,
            "kernel_library": p.scripts.kernel_library,
            "target": [p.target.backend, *p.target.flags],
            "compile_flags": list(p.recipe.compile_flags),
            "tolerance": _canonical(p.recipe.tolerance),
            "iree": iree.compiler.version.VERSION,
        }
    )


def result_key(build_key: str, threads: int | None) -> str:
    """The key of a measurement: what was built and the run conditions that change its
    time (the CPU thread count; ``None`` on a GPU target)."""
    return _digest({"format": KEY_FORMAT, "build": build_key, "threads": threads})


def baseline_key(p: Plan) -> str:
    """The key of IREE's default build of the workload (same target, baseline flags)."""
    return _digest(
        {
            "format": KEY_FORMAT,
            "workload": p.workload.mlir,
            "target": [p.target.backend, *p.target.flags],
            "baseline_flags": list(p.recipe.baseline.flags),
            "iree": iree.compiler.version.VERSION,
        }
    )


def _digest(material: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


def _canonical(obj: object) -> object:
    """A JSON-ready form of recipe data with source locations left out."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            type(obj).__name__: {
                f.name: _canonical(getattr(obj, f.name))
                for f in dataclasses.fields(obj)
                if f.name != "where"
            }
        }
    if isinstance(obj, tuple | list):
        return [_canonical(item) for item in obj]
    if obj is None or isinstance(obj, int | float | str | bool):
        return obj
    return repr(obj)
