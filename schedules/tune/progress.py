"""The progress lines of a tune: the model's tasks, each task as prepared, and each
round with the budget spent and the model's estimated speedup."""

from __future__ import annotations

from .tasks import ModelTasks
from .tuning import TaskTuning, TuneOptions


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def tasks_line(tasks: ModelTasks, rewritten: bool) -> str:
    call = f"{tasks.call_ms.median:.3f} ms per call" if tasks.call_ms else "untimed"
    model = ", of the rewritten model" if rewritten else ""
    return f"tune: {len(tasks.tasks)} tasks (IREE default: {call}{model})"


def prepared_line(t: TaskTuning, resumed: bool) -> str:
    what = f"{t.task.name} {t.task.kind} {t.task.root.describe()} ({percent(t.task.share)})"
    if t.recipe is None:
        return f"tune: {what}: IREE's pipeline kept: {t.reason}"
    if resumed:
        best = f", best {t.speedup:.2f}x" if t.speedup else ""
        return f"tune: {what}: template {t.recipe}, resumed ({t.candidates} candidates{best})"
    return f"tune: {what}: template {t.recipe}"


def round_line(t: TaskTuning, estimate: float | None, elapsed: float, o: TuneOptions) -> str:
    best = f"best {t.speedup:.2f}x" if t.speedup else "no correct candidate yet"
    est = f"; model estimate {estimate:.2f}x" if estimate else ""
    return (
        f"tune: [{clock(elapsed)}/{clock(o.budget_s)}] {t.task.name} "
        f"({percent(t.task.share)}): {t.candidates}/{t.valid} candidates, {best}{est}"
    )


def clock(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"
