"""Views of a :class:`~.step_trace.StepTrace`: loop nests (``tdsched explain``) and IR or
IR diffs (``tdsched apply --step/--diff``), step by step, with the steps that changed
nothing or failed flagged where they happened."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tdsched.transform_lib.loop_nest import NestLine, loop_nest

from .step_trace import Schedule, Snapshot, StepTrace, UnitTrace

FLAG = "!"
"""Starts a line that flags a step: it changed nothing, or it failed."""

_SSA = re.compile(r"%[\w.$-]+")


@dataclass(frozen=True)
class StepView:
    """One snapshot of one unit, with the one before it (``None`` for the first)."""

    unit: UnitTrace
    snapshot: Snapshot
    previous: Snapshot | None

    @property
    def unchanged(self) -> bool:
        return self.previous is not None and self.previous.ir == self.snapshot.ir

    @property
    def binds_only(self) -> bool:
        """The step only binds a handle (it is not expected to change the IR)."""
        step = self.snapshot.step
        return step > 0 and self.unit.schedule.steps[step - 1].binds_only


def step_views(trace: StepTrace, selected: set[tuple[str, int]] | None) -> Iterator[StepView]:
    """The snapshots to show, in order: all of them (``selected`` ``None``), or those
    after the selected ``(schedule, step)`` pairs."""
    for unit in trace.units:
        previous = None
        for snapshot in unit.snapshots:
            chosen = selected is None or (unit.schedule.name, snapshot.step) in selected
            if chosen:
                yield StepView(unit, snapshot, previous)
            previous = snapshot


def unit_heading(unit: UnitTrace) -> str:
    where = "the module" if unit.unit == "module" else f"dispatch {unit.unit}"
    return f"{unit.schedule.title} on {where}"


def explain_text(trace: StepTrace, selected: set[tuple[str, int]] | None) -> list[str]:
    """The loop nest after each shown step, its lines marked ``+``/``-`` where they
    differ from the nest before the step (loops and ops compared, SSA names ignored)."""
    lines: list[str] = []
    current: UnitTrace | None = None
    nests: dict[str, list[NestLine]] = {}
    """Each IR's nest, read once (a snapshot is the 'after' of one step and the 'before'
    of the next)."""

    def nest_of(ir: str) -> list[NestLine]:
        if ir not in nests:
            nests[ir] = loop_nest(ir)
        return nests[ir]

    for view in step_views(trace, selected):
        if view.unit is not current:
            lines.extend(_unit_end(trace, current))
            current = view.unit
            lines.append(f"== {unit_heading(view.unit)}")
        lines.append(view.unit.schedule.step_title(view.snapshot.step))
        after = nest_of(view.snapshot.ir)
        before = nest_of(view.previous.ir) if view.previous is not None else None
        lines.extend(f"  {line}" for line in annotated_nest(before, after))
        lines.extend(f"  {flag}" for flag in _flags(trace, view, before == after))
    lines.extend(_unit_end(trace, current))
    lines.extend(_unreached(trace))
    return lines


def explain_json(trace: StepTrace, selected: set[tuple[str, int]] | None) -> dict[str, Any]:
    """The same as :func:`explain_text`, as data: per unit and step, the nest lines
    (depth, text) and whether the step changed the IR."""
    units: dict[int, dict[str, Any]] = {}
    for view in step_views(trace, selected):
        entry = units.setdefault(
            id(view.unit),
            {"schedule": view.unit.schedule.name, "unit": view.unit.unit, "steps": []},
        )
        entry["steps"].append(
            {
                "step": view.snapshot.step,
                "title": view.unit.schedule.step_title(view.snapshot.step),
                "changed_ir": view.previous is None or not view.unchanged,
                "nest": [{"depth": n.depth, "text": n.text} for n in loop_nest(view.snapshot.ir)],
            }
        )
    return {
        "units": list(units.values()),
        "failure": str(trace.failure) if trace.failure is not None else None,
    }


def annotated_nest(before: list[NestLine] | None, after: list[NestLine]) -> list[str]:
    """``after`` rendered, each line prefixed ``+`` (new), ``-`` (gone, from ``before``)
    or a space (as before)."""
    if before is None:
        return [f"  {line.render()}" for line in after]
    matcher = difflib.SequenceMatcher(
        a=[_key(line) for line in before], b=[_key(line) for line in after], autojunk=False
    )
    out: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(f"  {line.render()}" for line in after[j1:j2])
            continue
        out.extend(f"- {line.render()}" for line in before[i1:i2])
        out.extend(f"+ {line.render()}" for line in after[j1:j2])
    return out


def _key(line: NestLine) -> str:
    return _SSA.sub("%", line.render())


def _flags(trace: StepTrace, view: StepView, same_nest: bool) -> list[str]:
    """What to say under a step: that it failed (e.g. left a handle empty), that it
    changed nothing, or that its change is not in the loop nest."""
    flags = []
    if trace.failed_step(view.unit.schedule) == view.snapshot.step:
        flags.append(f"{FLAG} {_message(trace)}")
    if view.unchanged:
        flags.append(
            "(it binds a handle: the IR is unchanged)"
            if view.binds_only
            else f"{FLAG} this step changed nothing"
        )
    elif same_nest and view.previous is not None:
        flags.append("(same loop nest; the IR changed: 'tdsched apply --diff' shows how)")
    return flags


def ir_text(trace: StepTrace, selected: set[tuple[str, int]] | None, diff: bool) -> list[str]:
    """The IR after each shown step, or (``diff``) its unified diff against the IR
    before that step."""
    lines: list[str] = []
    current: UnitTrace | None = None
    for view in step_views(trace, selected):
        if view.unit is not current:
            lines.extend(f"// {line}" for line in _unit_end(trace, current))
            current = view.unit
        schedule = view.unit.schedule
        title = schedule.step_title(view.snapshot.step)
        lines.append(f"// {unit_heading(view.unit)}, {title}")
        flags = _flags(trace, view, same_nest=False)
        lines.extend(f"// {flag}" for flag in flags)
        if not diff or view.previous is None:
            lines.append(view.snapshot.ir)
        elif not view.unchanged:
            lines.extend(
                difflib.unified_diff(
                    view.previous.ir.splitlines(),
                    view.snapshot.ir.splitlines(),
                    fromfile=schedule.step_title(view.previous.step),
                    tofile=title,
                    lineterm="",
                )
            )
    lines.extend(f"// {line}" for line in _unit_end(trace, current))
    lines.extend(f"// {line}" for line in _unreached(trace))
    return lines


def _unit_end(trace: StepTrace, unit: UnitTrace | None) -> list[str]:
    """The failure at the step after the unit's last snapshot, when it is that step's."""
    if unit is None or not unit.snapshots:
        return []
    failed = trace.failed_step(unit.schedule)
    last = unit.snapshots[-1].step
    if failed is None or failed != last + 1:
        return []
    title = unit.schedule.step_title(failed)
    return [f"{title}", f"  {FLAG} {_message(trace)}"]


def _message(trace: StepTrace) -> str:
    failure = trace.failure
    return getattr(failure, "message", None) or str(failure)


def _unreached(trace: StepTrace) -> list[str]:
    """Schedules that printed nothing (a kernel that matched no dispatch, or one that a
    failure before it kept from running); a recipe without steps says so."""
    if not trace.schedules:
        return ["(this recipe has no schedule steps: nothing to trace)"]
    shown = {unit.schedule.name for unit in trace.units}
    return [
        f"{FLAG} {schedule.title}: {_why_silent(trace, schedule)}"
        for schedule in trace.schedules
        if schedule.name not in shown
    ]


def _why_silent(trace: StepTrace, schedule: Schedule) -> str:
    if trace.failure is None:
        return "ran on no dispatch"
    return "did not run (see the error)"
