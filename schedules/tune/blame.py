"""When a tune's model recipe fails in the model: find the task schedules to blame.

Each task's candidates are checked on the task alone, a workload of its own, against
IREE's pipeline on the same task. In the model a schedule can still fail: the dispatch
its kernel matches there is formed a little differently, or the schedule meets an IREE
bug that only the model's context triggers (attention's context matmul did, before its
template learned to refuse it). The final check of the model against its own reference
catches it; this module then finds the schedules to blame and makes their tasks keep
IREE's pipeline, so that the recipe a tune writes is right.

It checks recipes that keep a subset of the schedules (numerics only, no timing;
written next to the model recipe as ``MODEL.tuned.blame1.yaml``, ...),
halving the set: a half that fails alone is searched further; where the set fails but
neither half does, its schedules fail only together and all of them are blamed. One
culprit among n schedules takes about 2 log2(n) checks. The recipe with no task schedule
is checked first: when it fails too, the failure is not the schedules' (a model rewrite,
or a tolerance the model's own IREE build misses), and nothing is dropped.

The packed alternative of the layout race is searched the same way when it fails and
the tasks' recipe does not (:func:`blame_packed`): the culprits are among the tasks it
packs, checked as the tasks' recipe with a subset of them packed
(``MODEL.packed.blame1.yaml``, ...). Their packed candidates are left out; they keep
their choice in the tasks' recipe, and the rest of the packing races again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from ..measure.run_report import RunReport
from ..measure.status import Status
from .outcome import TuneOutcome
from .state import record_tasks
from .tuning import TaskTuning

UNBLAMED = frozenset({Status.OK, Status.TIMEOUT})
"""Final statuses that start no search (a timeout says nothing about the numbers)."""

Item = TypeVar("Item")
Check = Callable[[Path], RunReport]


def culprits(items: Sequence[Item], fails: Callable[[Sequence[Item]], bool]) -> list[Item]:
    """The items to blame for a failure, searched by halving ``items`` (which fail
    together: the precondition). A half that ``fails`` alone is searched further; when
    neither half fails alone, all of ``items`` are blamed. In ``items``' order."""
    if len(items) <= 1:
        return list(items)
    half = len(items) // 2
    first, second = items[:half], items[half:]
    found = [*(culprits(first, fails) if fails(first) else [])]
    found += culprits(second, fails) if fails(second) else []
    return found or list(items)


def blame_schedules(
    outcome: TuneOutcome,
    report: RunReport,
    check: Check,
    numerics: Check,
    progress: Callable[[str], None],
) -> tuple[RunReport, str]:
    """Make the model recipe right where its task schedules made it fail: search the
    schedules to blame (``numerics`` checks a recipe without timing it), make their tasks
    keep IREE's pipeline (recorded in the tune state, so a later run keeps them out),
    rewrite :attr:`TuneOutcome.recipe` and ``check`` it again; repeat while the recipe
    still fails and the search finds schedules to blame. Returns the last report and a
    line saying what was found. Precondition: ``report`` (the recipe's check) failed."""
    checks = 0

    def fails(subset: Sequence[TaskTuning]) -> bool:
        nonlocal checks
        checks += 1
        # next to the recipe: the workload's path in it is relative to the tune's folder
        path = outcome.recipe.with_suffix(f".blame{checks}.yaml")
        outcome.write_recipe(path, only={t.task.name for t in subset})
        status = numerics(path).status
        kept = _names(subset) or "no task schedule"
        progress(f"tune: blame    check {checks}, {kept}: {status}")
        return status is not Status.OK

    blamed: list[TaskTuning] = []
    first = _failure(report)
    bare_fails: bool | None = None  # the recipe without task schedules: checked once
    while report.status not in UNBLAMED:
        scheduled = [t for t in outcome.tunings if t.chosen(outcome.packed_kept) is not None]
        if scheduled and bare_fails is None:
            bare_fails = fails([])
        if not scheduled or bare_fails:
            line = f"the model fails without its task schedules too ({_failure(report)})"
            if blamed:
                return report, f"blame    {_blamed(first, blamed, checks)}; then {line}"
            return report, f"blame    {line}: not theirs, none dropped"
        found = culprits(scheduled, fails)
        reason = f"its schedule made the model {_failure(report)} (right on the task alone)"
        for tuning in found:
            chosen = tuning.chosen(outcome.packed_kept)
            assert chosen is not None
            tuning.wrong_in_model[chosen.key] = reason
        blamed += found
        record_tasks(outcome.recipe.parent, {t.task.name: t.state() for t in found})
        outcome.kernels = outcome.write_recipe(outcome.recipe)
        report = check(outcome.recipe)
    return report, f"blame    {_blamed(first, blamed, checks)}"


def blame_packed(
    outcome: TuneOutcome, failed: RunReport, numerics: Check, progress: Callable[[str], None]
) -> str:
    """Find the tasks whose packing made the packed alternative fail (``failed``: its
    check), searching subsets of :meth:`TuneOutcome.packable` packed on top of the tasks'
    recipe (``numerics`` checks a recipe without timing it); mark their packed candidates
    wrong in the model (recorded in the tune state) and write the packed alternative again
    without them (:meth:`TuneOutcome.rewrite_packed`). Returns a line saying what was
    found. Precondition: the tasks' recipe passed its check, the packed one did not."""
    assert outcome.packed is not None
    path = outcome.packed[0]
    checks = 0

    def fails(subset: Sequence[TaskTuning]) -> bool:
        nonlocal checks
        checks += 1
        # next to the recipe: the workload's path in it is relative to the tune's folder
        check_path = path.with_suffix(f".blame{checks}.yaml")
        outcome.write_packed(check_path, {t.task.name for t in subset})
        status = numerics(check_path).status
        progress(f"tune: blame    check {checks}, {_names(subset)} packed: {status}")
        return status is not Status.OK

    found = culprits(outcome.packable(), fails)
    failure = _failure(failed)
    reason = f"its packed schedule made the model {failure} (right on the task alone)"
    for tuning in found:
        assert tuning.best_packed is not None
        tuning.wrong_in_model[tuning.best_packed.key] = reason
    record_tasks(outcome.recipe.parent, {t.task.name: t.state() for t in found})
    outcome.rewrite_packed()
    counted = f"{checks} check{'s' if checks != 1 else ''} of packed subsets"
    return (
        f"blame    the packed recipe was {failure}: {counted} blame the packing of "
        f"{_names(found)}; they keep their schedules of the tasks' recipe"
    )


def _blamed(failure: str, blamed: Sequence[TaskTuning], checks: int) -> str:
    return (
        f"the model was {failure}: {checks} check{'s' if checks != 1 else ''} of task "
        f"subsets blame the schedules of "
        f"{_names(blamed)}; they keep IREE's pipeline"
    )


def _failure(report: RunReport) -> str:
    """What went wrong, in a few words: the status and the error or the error size."""
    if report.status is Status.WRONG and report.max_abs_error is not None:
        return f"wrong, max abs error {report.max_abs_error:.3g} vs {report.reference}"
    return str(report.status)


def _names(tunings: Sequence[TaskTuning]) -> str:
    return ", ".join(t.task.name for t in tunings)
