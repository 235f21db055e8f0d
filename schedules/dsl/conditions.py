"""Conditional steps and kernel schedules: ``when: "<condition on the parameters>"``.

One recipe may hold more than one way to compute its workload and let its parameters
choose: ``matmul_x86`` register-tiles the matmul in place (``LAYOUT: rowmajor``) or packs
it into IREE's data-tiling layout (``LAYOUT: packed``, a graph ``mmt4d`` step), and its
shape table picks per shape. Any step (graph or kernel) and any kernel schedule may carry
``when``, written in the constraint language (:mod:`.constraints`; strings may be
compared: ``LAYOUT == 'packed'``). Besides the parameters, a condition may read what
the recipe is built for (:mod:`.build_names`): ``TARGET == 'x86'``, ``ISA == 'avx2'``.
The recipe model checks every condition's syntax and names when a recipe is made
(:mod:`.when`); :func:`apply_conditions` evaluates them when the recipe is resolved, leaves out
what does not apply and says what it left out, so a skipped step is never silent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tdsched.targets.target import BuildMachine

from ..base.errors import RecipeError, Where
from .build_names import BUILD_NAMES, build_values
from .constraints import ConstraintError, parse_constraint
from .recipe import KernelSchedule, Recipe
from .space import ParamValue
from .steps import Step
from .when import Skipped, kernel_label, place, step_label


def apply_conditions(
    recipe: Recipe,
    params: Mapping[str, ParamValue],
    target: str,
    machine: BuildMachine | None = None,
) -> tuple[Recipe, tuple[Skipped, ...], tuple[str, ...]]:
    """``recipe`` without the steps and kernel schedules whose ``when`` is false for
    ``params`` (the resolved parameter values) on ``target`` for ``machine`` (the x86 CPU
    or Vulkan GPU built for; None: not known), what was left out, and what applies on
    ``target``, labelled as what is left out (field paths count from 0, in both front
    ends): ``graph[1] (mmt4d) at FILE:LINE``, ``kernel 'matmul' (kernels[0], 10 steps)
    at FILE:LINE``."""
    skipped: list[Skipped] = []
    applied: list[str] = []
    params = {**params, **build_values(target, machine)}

    def holds(what: str, where: Where, condition: str | None, label: str = "") -> bool:
        """Whether ``condition`` holds (``what`` names the step in an error, ``label``,
        default ``what``, in the list of what was left out)."""
        if condition is None:
            return True
        try:
            keep = parse_constraint(condition, frozenset(params)).holds(dict(params))
        except ConstraintError as exc:
            raise RecipeError(where.child("when"), f"{what}: {exc}") from exc
        if not keep:
            skipped.append(Skipped(label or what, condition, where))
        return keep

    def steps(scope: str, listed: tuple[Step, ...]) -> tuple[Step, ...]:
        return tuple(
            step
            for i, step in enumerate(listed)
            if holds(step_label(scope, i, step.primitive), step.where, step.when)
        )

    graph: list[Step] = []
    for i, step in enumerate(recipe.graph):
        label = step_label("graph", i, step.primitive)
        if holds(label, step.where, step.when):
            graph.append(step)
            applied.append(f"{label} at {place(step.where)}")
    kernels: list[KernelSchedule] = []
    for i, kernel in enumerate(recipe.kernels):
        scope = kernel_label(kernel.name)
        if holds(scope, kernel.where, kernel.when, f"{scope} (kernels[{i}])"):
            kept = dataclasses.replace(kernel, steps=steps(scope, kernel.steps))
            kernels.append(kept)
            if kernel.targets is None or target in kernel.targets:
                body = f"{len(kept.steps)} steps" if kept.steps else "a lowering config"
                applied.append(f"{scope} (kernels[{i}], {body}) at {place(kernel.where)}")
    resolved = dataclasses.replace(recipe, graph=tuple(graph), kernels=tuple(kernels))
    return resolved, tuple(skipped), tuple(applied)


def has_conditions(recipe: Recipe) -> bool:
    """Whether any step or kernel schedule of ``recipe`` carries a ``when``."""
    return any(True for _ in recipe.conditions())


def condition_parameters(recipe: Recipe) -> frozenset[str]:
    """The parameters the ``when`` conditions of ``recipe`` read (not the build names):
    they choose which way its workload is computed. Preconditions: the conditions parse
    (the recipe was made)."""
    known = frozenset(recipe.parameter_dict) | BUILD_NAMES
    read = (parse_constraint(c, known).names for _, _, c in recipe.conditions())
    return frozenset().union(*read) - BUILD_NAMES
