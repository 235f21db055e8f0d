"""What a tune did (:class:`TuneOutcome`: per task, the model recipe it wrote and the
packed alternative, which the command's later steps write again), and the model's
estimated speedup from its tasks' best candidates."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model_recipe import ModelSpec, packable, write_model_recipe
from .tasks import ModelTasks
from .tuning import TaskTuning, TuneOptions


@dataclass
class TuneOutcome:
    """What a tune did: per task, and the model recipe it wrote."""

    tasks: ModelTasks
    tunings: list[TaskTuning]
    recipe: Path
    spent_s: float
    """Of the budget, over every run into the folder (see :mod:`.state`)."""
    kernels: int
    this_run_s: float
    """Wall seconds this run took before the final check."""
    packed: tuple[Path, int] | None = None
    """The model recipe with every task that has a correct packed candidate packed, and
    its schedule count, where that differs from :attr:`recipe` (the layouts race on the
    whole model: a task's own timing misjudges what packing saves in the model)."""
    graph_speedup: float = 1.0
    """What the model rewrites gave IREE's own pipeline (1.0: none were kept)."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """A line per round over every run into the folder (see :mod:`.state`)."""
    model: ModelSpec | None = None
    """What every model recipe of this tune starts with (:meth:`write_recipe`)."""
    options: TuneOptions | None = None
    packed_kept: bool = False
    """Whether :attr:`recipe` is the packed one (the layout race kept it)."""

    @property
    def estimated_speedup(self) -> float | None:
        return estimated_speedup(self.tasks, self.tunings, self.graph_speedup)

    def write_recipe(self, path: Path, only: Collection[str] | None = None) -> int:
        """Write the model recipe in the kept layout again, from the tasks' choices now
        (``only``: the tasks that keep their schedules); return its schedule count."""
        assert self.model is not None and self.options is not None
        return write_model_recipe(
            path, self.model, self.tunings, self.options, self.packed_kept, only
        )

    def packable(self) -> list[TaskTuning]:
        """The tasks the packed alternative packs and the tasks' recipe does not."""
        return packable(self.tunings)

    def write_packed(self, path: Path, packing: Collection[str]) -> int:
        """Write the tasks' recipe with the tasks named in ``packing`` packed (their
        correct packed candidate, where they have one); return its schedule count."""
        assert self.model is not None and self.options is not None
        return write_model_recipe(
            path, self.model, self.tunings, self.options, True, packing=packing
        )

    def rewrite_packed(self) -> None:
        """Write the packed alternative again from the tasks' choices now, or drop it
        (:attr:`packed` ``None``) where no task would be packed any more."""
        if self.packed is None:
            return
        path = self.packed[0]
        if not self.packable():
            self.packed = None
            return
        self.packed = (path, self.write_packed(path, [t.task.name for t in self.tunings]))


def estimated_speedup(
    tasks: ModelTasks, tunings: list[TaskTuning], graph_speedup: float = 1.0
) -> float | None:
    """The whole call's speedup over IREE default of the model as imported, if each task
    that won ran at its best speedup and the rest did not change (``None`` without a
    profile). ``graph_speedup``: what the model rewrites the tasks come from gave."""
    call = tasks.call_ms.median if tasks.call_ms else None
    if not call:
        return None
    saved = sum((t.task.time_ms or 0.0) * (1 - 1 / (t.speedup or 1.0)) for t in tunings if t.won)
    return graph_speedup * call / (call - saved)
