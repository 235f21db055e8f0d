"""What each schedule step did: the payload before a schedule and after each of its steps.

``tdsched explain`` (loop nests) and ``tdsched apply --step/--diff`` (IR) read a
:class:`StepTrace`. It comes from a plan made with ``trace_steps``:

* the graph schedule's transform scripts print the module after each step, and the steps
  tdsched runs itself (fuse_ext, dispatch_region, the graph rewrites) are recorded after
  they run;
* each kernel strategy prints its dispatch function before its first step and after each
  step, inside iree-compile, once per dispatch it applies to.

A step that failed, or left a handle empty, ends its schedule's snapshots there and is
kept as :attr:`StepTrace.failure` (its ``where`` names the step), so what ran before it
can be shown.
"""

from __future__ import annotations

import enum
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tdsched.targets.compiler import CompileError
from tdsched.transform_lib.remarks import snapshot_sections

from ..base.errors import RecipeError
from ..dsl.options import step_options
from ..dsl.steps import Step
from .emit import GRAPH_SCOPE, kernel_scope
from .pipeline import Plan, build, compile_printed


@dataclass(frozen=True)
class Schedule:
    """The graph schedule (``name`` ``graph``) or a kernel schedule, and its steps."""

    name: str
    steps: tuple[Step, ...]

    @property
    def title(self) -> str:
        return "graph schedule" if self.name == GRAPH_SCOPE else kernel_scope(self.name)

    def step_title(self, step: int) -> str:
        """``step 2 of 5: tile sizes=[32, 128] (matmul_x86.yaml:21)``; 0 is the payload
        before the schedule."""
        if step == 0:
            return "before the schedule"
        return f"step {step} of {len(self.steps)}: {describe_step(self.steps[step - 1])}"


@dataclass(frozen=True)
class Snapshot:
    """The payload after step ``step`` (1-based; 0: before the first step)."""

    step: int
    ir: str


@dataclass(frozen=True)
class UnitTrace:
    """The snapshots of one payload a schedule ran on: the module (graph schedule) or
    one dispatch function (a kernel schedule runs once per dispatch it matches)."""

    schedule: Schedule
    unit: str
    snapshots: tuple[Snapshot, ...]


@dataclass(frozen=True)
class StepTrace:
    """Every schedule's snapshots, what fuse_ext and the rewrites reported, and what
    stopped the trace early (``None``: every step ran and applied)."""

    schedules: tuple[Schedule, ...]
    units: tuple[UnitTrace, ...]
    reports: tuple[str, ...]
    failure: RecipeError | CompileError | None

    def failed_step(self, schedule: Schedule) -> int | None:
        """The step of ``schedule`` the failure names (1-based), if it names one."""
        where = getattr(self.failure, "where", None)
        if where is None:
            return None
        for number, step in enumerate(schedule.steps, start=1):
            if step.where.file == where.file and step.where.line == where.line:
                return number
        return None


def trace(p: Plan) -> StepTrace:
    """Apply and compile ``p`` (planned with ``trace_steps``) and collect its snapshots."""
    if not p.trace_steps:
        raise ValueError("trace() needs a plan made with trace_steps=True")
    schedules = recipe_schedules(p)
    graph: list[tuple[int, str]] = [(0, p.workload.mlir)]
    reports: tuple[str, ...] = ()
    printed = ""
    failure: RecipeError | CompileError | None = None
    with tempfile.TemporaryDirectory(prefix="tdsched-trace-") as tmp:
        try:
            files = build(p, Path(tmp), snapshots=graph)
        except (RecipeError, CompileError) as exc:
            failure = exc
        else:
            reports = files.reports
            if files.kernel_library is not None:
                printed, failure = compile_printed(p, files)
    units: list[UnitTrace] = []
    for schedule in schedules:
        if schedule.name == GRAPH_SCOPE:
            snapshots = tuple(Snapshot(step, ir) for step, ir in graph)
            units.append(UnitTrace(schedule, "module", snapshots))
        else:
            units.extend(_kernel_units(schedule, printed))
    return StepTrace(tuple(schedules), tuple(units), reports, failure)


def recipe_schedules(p: Plan) -> list[Schedule]:
    """The recipe's schedules that have steps: the graph schedule, then each strategy
    kernel schedule (config-only kernels have no steps)."""
    schedules = [Schedule(GRAPH_SCOPE, p.recipe.graph)] if p.recipe.graph else []
    schedules += [Schedule(k.name, k.steps) for k in p.recipe.kernels if k.config is None]
    return schedules


_FUNCTION = re.compile(r"func\.func @([\w$.\-]+)")


def _kernel_units(schedule: Schedule, printed: str) -> list[UnitTrace]:
    """One unit per dispatch function the kernel schedule printed, in compile order."""
    scope = kernel_scope(schedule.name)
    by_function: dict[str, list[Snapshot]] = {}
    for section_scope, step, ir in snapshot_sections(printed):
        if section_scope != scope:
            continue
        match = _FUNCTION.search(ir)
        function = match.group(1) if match else "(dispatch)"
        by_function.setdefault(function, []).append(Snapshot(step, ir))
    return [UnitTrace(schedule, f, tuple(s)) for f, s in by_function.items()]


def describe_step(step: Step) -> str:
    """``tile sizes=[32, 128] loop=forall (recipe.yaml:21)``: the primitive, the options
    given other than their defaults (plain values only), and where it is written."""
    parts = [step.primitive]
    for opt in step_options(type(step)):
        value = getattr(step, opt.name)
        if value == opt.default or not _plain(value):
            continue
        parts.append(f"{opt.key}={_format(value)}")
    where = step.where
    place = Path(where.file).name if where.file else ""
    if where.line is not None:
        place = f"{place}:{where.line}" if place else f"line {where.line}"
    return " ".join(parts) + (f" ({place})" if place else "")


def _plain(value: object) -> bool:
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return isinstance(value, int | str | float | enum.Enum)


def _format(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_format(v) for v in value) + "]"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


@dataclass(frozen=True)
class StepSelector:
    """``--step`` text: ``[SCHEDULE:]N`` or ``[SCHEDULE:]PRIMITIVE``."""

    text: str
    schedule: str | None
    number: int | None
    primitive: str | None


def parse_step_selector(text: str) -> StepSelector:
    """Parse ``--step`` (argparse type). ``SCHEDULE`` is ``graph`` or a kernel name."""
    schedule, _, which = text.rpartition(":")
    which = which.strip()
    if not which:
        raise ValueError(f"--step {text!r}: give a step number or primitive after the ':'")
    if which.isdigit():
        if int(which) < 1:
            raise ValueError(f"--step {text!r}: steps are numbered from 1")
        return StepSelector(text, schedule or None, int(which), None)
    return StepSelector(text, schedule or None, None, which)


def select_steps(
    schedules: Sequence[Schedule], selectors: Iterable[StepSelector]
) -> set[tuple[str, int]]:
    """The ``(schedule, step)`` pairs the selectors name; a selector that names nothing
    is an error that lists what there is."""
    chosen: set[tuple[str, int]] = set()
    for selector in selectors:
        found = [
            (s.name, number)
            for s in schedules
            if selector.schedule in (None, s.name)
            for number, step in enumerate(s.steps, start=1)
            if selector.number in (None, number) and selector.primitive in (None, step.primitive)
        ]
        if not found:
            raise ValueError(f"--step {selector.text!r} names no step; {_listing(schedules)}")
        chosen.update(found)
    return chosen


def _listing(schedules: Sequence[Schedule]) -> str:
    if not schedules:
        return "this recipe has no schedule steps"
    parts = [
        f"{s.name} (steps 1-{len(s.steps)}: {', '.join(st.primitive for st in s.steps)})"
        for s in schedules
    ]
    return "the schedules are " + "; ".join(parts)
