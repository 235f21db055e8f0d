"""The ``when`` field of steps and kernel schedules, as the recipe model checks it.

A ``when`` is a condition in the constraint language (:mod:`.constraints`) over the
recipe's parameters and the build names (:mod:`.build_names`). This module holds what a
:class:`~.recipe.Recipe` needs when it is made: the labels that name a step or kernel
schedule in messages, the syntax-and-names check of every condition, and the record of
something left out (:class:`Skipped`). Evaluating conditions against a build is
:mod:`.conditions`, a layer above the recipe model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..base.errors import RecipeError, Where
from .build_names import BUILD_NAMES
from .constraints import ConstraintError, parse_constraint

Condition = tuple[str, Where, str]
"""A ``when`` as a recipe holds it: what carries it (:func:`step_label`,
:func:`kernel_label`), where it was written, and its text."""


@dataclass(frozen=True)
class Skipped:
    """A step or kernel schedule left out because its ``when`` was false."""

    what: str
    """``graph[0] (mmt4d)``, ``kernel 'matmul' (kernels[0])``, ``kernel 'matmul'
    schedule[3] (tile)``: :func:`step_label`, :func:`kernel_label`."""
    condition: str
    where: Where

    def describe(self) -> str:
        return f"{self.what} at {place(self.where)} left out: when {self.condition!r} is false"


def place(where: Where) -> str:
    """``file:line`` of ``where``, without its field path (the labels name it)."""
    return str(Where(where.file, where.line))


def kernel_label(name: str) -> str:
    """How messages name the kernel schedule ``name``."""
    return f"kernel {name!r}"


def step_label(scope: str, index: int, primitive: str) -> str:
    """How messages name step ``index`` (0-based, as the recipe's field paths count: a
    ``primitive`` step) of ``scope`` (``graph`` or a kernel's name label):
    ``graph[1] (mmt4d)``, ``kernel 'matmul' schedule[2] (tile)``."""
    if scope == "graph":
        return f"graph[{index}] ({primitive})"
    return f"{scope} schedule[{index}] ({primitive})"


def check_conditions(
    parameters: Iterable[str], source: str | None, conditions: Iterable[Condition]
) -> None:
    """Refuse a parameter named like a build name (:data:`~.build_names.BUILD_NAMES`),
    and a condition that does not parse or names neither one of ``parameters`` nor a
    build name. ``source`` is the recipe's file, for the message."""
    names = frozenset(parameters)
    reserved = sorted(BUILD_NAMES & names)
    if reserved:
        name = reserved[0]
        raise RecipeError(
            Where(source, None, f"parameters.{name}"),
            f"{name} is reserved: 'when' conditions and constraints read the build by that "
            "name (docs/recipes.md#conditional-steps-and-kernels); rename the parameter",
        )
    known = names | BUILD_NAMES
    for what, where, condition in conditions:
        try:
            parse_constraint(condition, known)
        except ConstraintError as exc:
            raise RecipeError(where.child("when"), f"{what}: {exc}") from exc
