"""One candidate per build: points of a space whose values differ only where no step reads
them build the same module.

A recipe with ``when`` conditions holds more than one way to compute its workload, and
each way reads its own parameters: ``matmul_x86``'s packed layout ignores the row-major
tiles ``TM``, ``TN``, ``TK``..., its row-major layout the pack tiles ``M0``, ``N0``. The
space still crosses every axis, so a sampled sweep would spend its budget compiling
and timing one packed build under many names (the results database keys builds by
content, so they were timed once, but each still took a sample).

A point's *build signature* is what decides its build: which steps and kernels its
``when`` conditions leave out, and the values of the parameters the rest refers to
(``${NAME}``, expressions included). :func:`distinct_builds` keeps the first point of
each signature. The signature reads the parameters as a candidate resolves them (the
recipe's defaults, a shape-table entry, the fixed ``--param`` values, then the point), so
it is exact where the build depends on parameters through ``${...}`` and ``when`` only,
which is how recipes reach their schedules.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from tdsched.targets.target import BuildMachine

from ..dsl.conditions import apply_conditions, condition_parameters, has_conditions
from ..dsl.params import referenced_parameters, resolved_values
from ..dsl.recipe import Recipe
from ..dsl.space import Enumeration, ParamValue, Point
from ..dsl.when import Skipped

SAME_BUILD = "a build another candidate has (a `when` leaves the values that differ unused)"
"""The pruning reason :func:`distinct_builds` reports."""


def build_signature(
    recipe: Recipe,
    values: Mapping[str, ParamValue],
    target: str,
    threads: int | None,
    machine: BuildMachine | None = None,
) -> Hashable:
    """What decides the build for ``target`` of the candidate with parameter ``values``
    (overrides of the recipe's defaults, as a sweep gives them; ``threads`` and the
    ``machine`` built for select shape-table entries)."""
    params, kept, skipped = _applied(recipe, values, target, threads, machine)
    used = sorted(referenced_parameters(kept) & set(params))
    return tuple(s.what for s in skipped), tuple((name, repr(params[name])) for name in used)


def parameters_read(
    recipe: Recipe,
    values: Mapping[str, ParamValue],
    target: str,
    threads: int | None,
    machine: BuildMachine | None = None,
) -> frozenset[str]:
    """The parameters the build of the candidate with ``values`` reads (arguments as for
    :func:`build_signature`): those its workload and the steps and kernel schedules its
    ``when`` conditions keep refer to, and those the conditions read. A value outside
    this set leaves the build as it is (``matmul_x86``'s pack tiles on a row-major
    candidate), so a table entry need not carry it."""
    params, kept, _ = _applied(recipe, values, target, threads, machine)
    return (referenced_parameters(kept) | condition_parameters(recipe)) & frozenset(params)


def _applied(
    recipe: Recipe,
    values: Mapping[str, ParamValue],
    target: str,
    threads: int | None,
    machine: BuildMachine | None,
) -> tuple[dict[str, ParamValue], Recipe, tuple[Skipped, ...]]:
    """The candidate's resolved parameters, and ``recipe`` with what its ``when``
    conditions leave out removed (and what they left out)."""
    params, _ = resolved_values(recipe, values, threads, target, machine)
    kept, skipped, _ = apply_conditions(recipe, params, target, machine)
    return params, kept, skipped


def distinct_builds(
    recipe: Recipe,
    enumeration: Enumeration,
    fixed: Mapping[str, ParamValue],
    target: str,
    threads: int | None,
    machine: BuildMachine | None = None,
) -> Enumeration:
    """``enumeration`` with one point per build signature (the first), and a pruning
    line for the others. Each point kept names the swept parameters its build ignores:
    those in which the points of its signature differ (``Enumeration.ignored``). A
    recipe without ``when`` conditions is returned as it is: all of its parameters reach
    its one way."""
    if not has_conditions(recipe):
        return enumeration
    groups: dict[Hashable, list[Point]] = {}
    for point in enumeration.valid:
        values = {**fixed, **enumeration.as_params(point)}
        signature = build_signature(recipe, values, target, threads, machine)
        groups.setdefault(signature, []).append(point)
    kept = tuple(points[0] for points in groups.values())
    same = len(enumeration.valid) - len(kept)
    if not same:
        return enumeration
    ignored = {
        points[0]: names
        for points in groups.values()
        if (names := _varying(enumeration.names, points))
    }
    pruned = (*enumeration.pruned, (SAME_BUILD, same))
    return Enumeration(enumeration.names, kept, enumeration.total, pruned, ignored)


def _varying(names: tuple[str, ...], points: list[Point]) -> tuple[str, ...]:
    """The parameters in which ``points`` (one build) take more than one value."""
    return tuple(n for i, n in enumerate(names) if len({p[i] for p in points}) > 1)
