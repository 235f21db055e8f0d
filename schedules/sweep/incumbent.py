"""The recipe's own choice in a sweep: the candidate it runs without the sweep.

A sweep answers "which values win here?", and the first thing its user needs to know
is whether they beat what the recipe already runs at this shape: its shape table's entry
for the shape, thread count and machine, else its parameter defaults (either with the
sweep's ``--param`` values). That candidate is the *incumbent*. The sampling strategies
(random, adaptive, model) evaluate it before any other (a grid evaluates everything), so
it is screened and, when it is among the leaders, raced like any candidate; the report
then says where it ranked. A best recipe or table entry written by the sweep is so never
one that merely beat the candidates sampled while the recipe's own values were faster.

The incumbent is no candidate when its values lie outside the space, break a constraint,
or when the recipe's table runs IREE's own pipeline at this shape (the sweep's baseline
is that pipeline already); the report says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tdsched.targets.target import BuildMachine

from ..dsl.conditions import has_conditions
from ..dsl.params import resolved_values
from ..dsl.recipe import Recipe
from ..dsl.space import Enumeration, ParamValue, Point
from .database import Result
from .distinct import build_signature


@dataclass(frozen=True)
class Incumbent:
    """What the recipe runs at the swept shape, and which candidate that is."""

    source: str
    """Where its values come from: ``its defaults``, ``its shape table's entry LABEL``."""
    point: Point | None
    """The candidate with those values (or one that builds the same); None: none is."""
    why_not: str | None = None
    """Why no candidate has them (None when one has)."""

    @staticmethod
    def place(ranked: list[Result], key: str | None) -> int | None:
        """The incumbent's index among the correct candidates ``ranked`` (its result key
        is ``key``), None where it failed or is no candidate."""
        return next((i for i, r in enumerate(ranked) if r.key == key), None)

    def line(self, ranked: list[Result], key: str | None, kept: bool = False) -> str:
        """The report's line: where the incumbent (result key ``key``) ranked among the
        correct candidates ``ranked`` (``kept``: first because the race kept it), or why
        it is no candidate."""
        here = f"the recipe's own values ({self.source})"
        if self.point is None:
            return f"{here}: no candidate ({self.why_not})"
        place = self.place(ranked, key)
        if place is None:
            return f"{here}: failed (see the failures above)"

        def speed(result: Result) -> str:
            return f"{result.confirmed_speedup or result.speedup or 0.0:.3f}x"

        if place == 0:
            why = "nothing raced was shown faster" if kept else "the sweep found nothing faster"
            return f"{here}: kept, {speed(ranked[0])}; {why}"
        return (
            f"{here}: ranked {place + 1} of {len(ranked)}, {speed(ranked[place])} against "
            f"the best's {speed(ranked[0])}"
        )


def find_incumbent(
    recipe: Recipe,
    enumeration: Enumeration,
    fixed: Mapping[str, ParamValue],
    target: str,
    threads: int | None,
    machine: BuildMachine | None,
) -> Incumbent:
    """The incumbent of a sweep of ``recipe`` over ``enumeration`` with the ``fixed``
    values, on ``target`` with CPU ``threads`` (None: a GPU) for ``machine``."""
    params, choice = resolved_values(recipe, fixed, threads, target, machine)
    if choice is not None and choice.runs_iree_default and choice.entry is not None:
        return Incumbent(
            f"its shape table's entry {choice.entry.label}",
            None,
            "that entry runs IREE's own pipeline, the sweep's baseline",
        )
    source = "its defaults"
    if choice is not None and choice.entry is not None:
        source = f"its shape table's entry {choice.entry.label}"
    point = tuple(params[name] for name in enumeration.names)
    if point in set(enumeration.valid):
        return Incumbent(source, point)
    if has_conditions(recipe):
        # the point may have been pruned as a build another candidate has
        values = {**fixed, **enumeration.as_params(point)}
        mine = build_signature(recipe, values, target, threads, machine)
        for other in enumeration.valid:
            same = {**fixed, **enumeration.as_params(other)}
            if build_signature(recipe, same, target, threads, machine) == mine:
                return Incumbent(source, other)
    taken = [{p[axis] for p in enumeration.valid} for axis in range(len(point))]
    outside = [
        f"{name}={value}"
        for axis, (name, value) in enumerate(zip(enumeration.names, point, strict=True))
        if value not in taken[axis]
    ]
    why = f"no valid candidate has {', '.join(outside)}" if outside else "a constraint prunes it"
    return Incumbent(source, None, why)
