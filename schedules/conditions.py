"""Conditional steps and kernel schedules: ``when: "<condition on the parameters>"``.

One recipe may hold more than one way to compute its workload and let its parameters
choose: ``matmul_x86`` register-tiles the matmul in place (``LAYOUT: rowmajor``) or packs
it into IREE's data-tiling layout (``LAYOUT: packed``, a graph ``mmt4d`` step), and its
shape table picks per shape. Any step (graph or kernel) and any kernel schedule may carry
``when``, written in the constraint language (:mod:`.constraints`; strings may be
compared: ``LAYOUT == 'packed'``). Besides the parameters, a condition may read what
the recipe is built for (:mod:`.build_names`): ``TARGET == 'x86'``, ``ISA == 'avx2'``.
:func:`check_conditions` checks every condition's syntax and names when the recipe is
made; :func:`apply_conditions` evaluates them when the recipe is resolved, leaves out
what does not apply and says what it left out, so a skipped step is never silent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .build_names import BUILD_NAMES, build_values
from .constraints import ConstraintError, parse_constraint
from .errors import RecipeError, Where
from .space import ParamValue
from .steps import Step

if TYPE_CHECKING:
    from tdsched.targets.target import BuildMachine

    from .recipe import KernelSchedule, Recipe


@dataclass(frozen=True)
class Skipped:
    """A step or kernel schedule left out because its ``when`` was false."""

    what: str
    """``graph step 1 (mmt4d)``, ``kernel 'matmul'``, ``kernel 'matmul' step 3 (tile)``."""
    condition: str
    where: Where

    def describe(self) -> str:
        return f"{self.what} at {self.where} left out: when {self.condition!r} is false"


def check_conditions(recipe: Recipe) -> None:
    """Refuse a parameter named like a build name (:data:`~.build_names.BUILD_NAMES`),
    and a ``when`` that does not parse or names an undeclared parameter."""
    reserved = sorted(BUILD_NAMES & frozenset(recipe.parameter_dict))
    if reserved:
        name = reserved[0]
        raise RecipeError(
            Where(recipe.source, None, f"parameters.{name}"),
            f"{name} is reserved: 'when' conditions and constraints read the build by that "
            "name (docs/recipes.md#conditional-steps-and-kernels); rename the parameter",
        )
    known = frozenset(recipe.parameter_dict) | BUILD_NAMES
    for what, where, condition in _conditions(recipe):
        try:
            parse_constraint(condition, known)
        except ConstraintError as exc:
            raise RecipeError(where.child("when"), f"{what}: {exc}") from exc


def apply_conditions(
    recipe: Recipe,
    params: Mapping[str, ParamValue],
    target: str,
    machine: BuildMachine | None = None,
) -> tuple[Recipe, tuple[Skipped, ...]]:
    """``recipe`` without the steps and kernel schedules whose ``when`` is false for
    ``params`` (the resolved parameter values) on ``target`` for ``machine`` (the x86 CPU
    or Vulkan GPU built for; None: not known), and what was left out."""
    skipped: list[Skipped] = []
    params = {**params, **build_values(target, machine)}

    def holds(what: str, where: Where, condition: str | None) -> bool:
        if condition is None:
            return True
        try:
            keep = parse_constraint(condition, frozenset(params)).holds(dict(params))
        except ConstraintError as exc:
            raise RecipeError(where.child("when"), f"{what}: {exc}") from exc
        if not keep:
            skipped.append(Skipped(what, condition, where))
        return keep

    def steps(scope: str, listed: tuple[Step, ...]) -> tuple[Step, ...]:
        return tuple(
            step
            for i, step in enumerate(listed, 1)
            if holds(_step_label(scope, i, step), step.where, step.when)
        )

    graph = steps("graph", recipe.graph)
    kernels: list[KernelSchedule] = []
    for kernel in recipe.kernels:
        scope = _kernel_label(kernel)
        if holds(scope, kernel.where, kernel.when):
            kernels.append(dataclasses.replace(kernel, steps=steps(scope, kernel.steps)))
    return dataclasses.replace(recipe, graph=graph, kernels=tuple(kernels)), tuple(skipped)


def has_conditions(recipe: Recipe) -> bool:
    """Whether any step or kernel schedule of ``recipe`` carries a ``when``."""
    return any(True for _ in _conditions(recipe))


def condition_parameters(recipe: Recipe) -> frozenset[str]:
    """The parameters the ``when`` conditions of ``recipe`` read (not the build names):
    they choose which way its workload is computed. Preconditions: the conditions parse
    (:func:`check_conditions` has passed)."""
    known = frozenset(recipe.parameter_dict) | BUILD_NAMES
    read = (parse_constraint(c, known).names for _, _, c in _conditions(recipe))
    return frozenset().union(*read) - BUILD_NAMES


def _conditions(recipe: Recipe) -> Iterator[tuple[str, Where, str]]:
    for i, step in enumerate(recipe.graph, 1):
        if step.when is not None:
            yield _step_label("graph", i, step), step.where, step.when
    for kernel in recipe.kernels:
        scope = _kernel_label(kernel)
        if kernel.when is not None:
            yield scope, kernel.where, kernel.when
        for i, step in enumerate(kernel.steps, 1):
            if step.when is not None:
                yield _step_label(scope, i, step), step.where, step.when


def _kernel_label(kernel: KernelSchedule) -> str:
    return f"kernel {kernel.name!r}"


def _step_label(scope: str, number: int, step: Step) -> str:
    return f"{scope} step {number} ({step.primitive})"
