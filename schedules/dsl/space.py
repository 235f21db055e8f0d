"""Parameter spaces: which values each swept parameter takes, and which combinations are valid.

A :class:`SearchSpace` has one :class:`Axis` per swept parameter (a list of values, an
inclusive integer range with a step, or the powers of two between two bounds) and
:class:`Constraint` expressions between parameters. :meth:`SearchSpace.enumerate` walks the
cross product, evaluates the constraints with every other parameter at its default, and
returns the valid candidates together with how many each constraint pruned, so a sweep can
say why its space shrank instead of collapsing silently.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..base.errors import RecipeError, Where
from .build_names import BUILD_NAMES
from .constraints import ConstraintError, Expression, parse_constraint

ParamValue = int | float | str
Point = tuple[ParamValue, ...]
"""One candidate: a value per axis, in axis order."""
MAX_POINTS = 2_000_000
"""Cross products larger than this are refused (enumerating them would take minutes)."""


@dataclass(frozen=True)
class Axis:
    """The values one swept parameter takes, in order (neighbours are adjacent values)."""

    name: str
    values: tuple[ParamValue, ...]
    where: Where = field(default_factory=Where)


@dataclass(frozen=True)
class Constraint:
    """A boolean expression every candidate must satisfy."""

    expression: Expression
    where: Where = field(default_factory=Where)

    @property
    def text(self) -> str:
        return self.expression.text


@dataclass(frozen=True)
class Enumeration:
    """The valid candidates of a space and what pruning removed."""

    names: tuple[str, ...]
    valid: tuple[Point, ...]
    total: int
    pruned: tuple[tuple[str, int], ...]
    """(reason, count) per constraint that removed candidates, in constraint order; a
    candidate is counted under the first constraint it fails."""
    ignored: Mapping[Point, tuple[str, ...]] = field(default_factory=dict)
    """The swept parameters a valid point's build does not read, where some do not
    (:func:`~tdsched.schedules.sweep.distinct.distinct_builds`): its values there are
    those of the first of the points that build the same module."""

    def as_params(self, point: Point) -> dict[str, ParamValue]:
        return dict(zip(self.names, point, strict=True))

    def pruning_lines(self) -> list[str]:
        """Human-readable lines: the space size, each constraint's toll, what is left."""
        lines = [f"space: {self.total} candidates ({' x '.join(self.names) or 'no axes'})"]
        lines += [f"  pruned {count} by {reason}" for reason, count in self.pruned]
        lines.append(f"  {len(self.valid)} valid")
        return lines


@dataclass(frozen=True)
class SearchSpace:
    """Swept parameters and the constraints between them (empty: nothing to sweep)."""

    axes: tuple[Axis, ...] = ()
    constraints: tuple[Constraint, ...] = ()

    @property
    def size(self) -> int:
        return math.prod(len(a.values) for a in self.axes) if self.axes else 0

    def enumerate(
        self, defaults: Mapping[str, ParamValue], build: Mapping[str, str]
    ) -> Enumeration:
        """Every combination of axis values that satisfies all constraints.

        ``defaults`` gives the value of parameters that are not swept (constraints may
        read them, e.g. ``K % TK == 0``), ``build`` what the candidates are built for
        (:func:`~.build_names.build_values`: constraints may read ``TARGET`` and ``ISA``).
        """
        names = tuple(a.name for a in self.axes)
        if self.size > MAX_POINTS:
            raise RecipeError(
                self.axes[0].where,
                f"the space has {self.size} candidates (more than {MAX_POINTS}); "
                "narrow the axes or use coarser steps",
            )
        tolls = {c.text: 0 for c in self.constraints}
        errors: dict[str, int] = {}
        valid: list[Point] = []
        values = {**defaults, **build}
        for point in itertools.product(*(a.values for a in self.axes)):
            values.update(zip(names, point, strict=True))
            failed = None
            for constraint in self.constraints:
                try:
                    ok = constraint.expression.holds(values)
                except ConstraintError as exc:
                    failed = f"an error: {exc}"
                    errors[failed] = errors.get(failed, 0) + 1
                    break
                if not ok:
                    failed = constraint.text
                    tolls[failed] += 1
                    break
            if failed is None:
                valid.append(point)
        pruned = [(repr(t), n) for t, n in tolls.items() if n] + list(errors.items())
        return Enumeration(names, tuple(valid), self.size, tuple(pruned))


def int_range(start: int, stop: int, step: int, where: Where) -> tuple[int, ...]:
    """``start, start+step, ...`` up to and including ``stop``."""
    if step <= 0:
        raise RecipeError(where, f"step must be a positive integer, got {step}")
    if stop < start:
        raise RecipeError(where, f"'to' ({stop}) is below 'from' ({start})")
    return tuple(range(start, stop + 1, step))


def pow2_range(low: int, high: int, where: Where) -> tuple[int, ...]:
    """The powers of two ``p`` with ``low <= p <= high``."""
    if low < 1 or high < low:
        raise RecipeError(where, f"pow2 bounds must satisfy 1 <= from <= to, got [{low}, {high}]")
    values = tuple(2**e for e in range(high.bit_length()) if low <= 2**e <= high)
    if not values:
        raise RecipeError(where, f"no power of two lies in [{low}, {high}]")
    return values


def build_space(
    axes: Sequence[Axis],
    constraints: Sequence[tuple[str, Where]],
    parameters: Mapping[str, ParamValue],
) -> SearchSpace:
    """Validate axes and parse constraints against the recipe's declared ``parameters``
    (and the build names, :mod:`.build_names`: ``ISA == 'avx512' or M0 * N0 <= 96``).

    Every swept parameter must be declared (its default is what ``tdsched run`` uses);
    an axis needs at least one value and no repeated values.
    """
    seen: set[str] = set()
    for axis in axes:
        if axis.name not in parameters:
            raise RecipeError(
                axis.where,
                f"{axis.name!r} is swept but not declared; add it under 'parameters' with "
                f"the default 'tdsched run' uses (declared: {', '.join(parameters) or 'none'})",
            )
        if axis.name in seen:
            raise RecipeError(axis.where, f"{axis.name!r} is swept twice")
        seen.add(axis.name)
        if not axis.values:
            raise RecipeError(axis.where, "the axis has no values")
        if len(set(axis.values)) != len(axis.values):
            raise RecipeError(axis.where, f"repeated values in {list(axis.values)}")
    parsed = []
    for text, where in constraints:
        try:
            known = frozenset(parameters) | BUILD_NAMES
            parsed.append(Constraint(parse_constraint(text, known), where))
        except ConstraintError as exc:
            raise RecipeError(where, str(exc)) from exc
    return SearchSpace(tuple(axes), tuple(parsed))
