"""What tuning one task is: how to tune (:class:`TuneOptions`), where a task stands
(:class:`TaskTuning`: its rounds, best candidates and their races, what the model recipe
takes for it) and the thresholds it is judged by."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compile.build_target import BuildTarget
from ..sweep.database import Result
from .state import digest
from .tasks import Task

WIN = 1.02
"""A task's best candidate must be this much faster than IREE's pipeline to be kept."""
MIN_GAIN = 0.05
"""The relative gain a task's second round is assumed to find at least (the floor falls
with each round: a task whose rounds find nothing still gets time while it dominates)."""
NO_CORRECT_ROUNDS = 2
"""Rounds a task gets while none of its candidates is correct: the template does not fit
it (its candidates fail to build or give wrong results), and the budget goes elsewhere."""
NO_WIN = "no candidate beat IREE's pipeline"
UNREACHED = "the budget ran out before its first round (run again with a larger --budget)"
"""A task templated in a run whose budget earlier runs had spent (its share of the profile
crossed --min-share): every run given budget of its own gives each task a round."""


@dataclass(frozen=True)
class TuneOptions:
    """How to tune (see ``tdsched tune --help`` for each)."""

    build: BuildTarget
    """What the tasks and the model recipe are built for (the target known) and run on."""
    budget_s: float
    min_share: float = 0.01
    round_size: int = 8
    jobs: int = 2
    seed: int = 0
    rounds: int = 3
    """Profiled runs of IREE default when weighing the tasks."""
    executor: str = "local"
    """Where the sweeps compile and time (:data:`~..sweep.executors.EXECUTORS`)."""
    ray_address: str | None = None
    """With the ``ray`` executor: the cluster (``None``: a local one, per round)."""


@dataclass
class TaskTuning:
    """What tuning did for one task."""

    task: Task
    recipe: Path | None = None
    reason: str | None = None
    """Why the task keeps IREE's pipeline (not tuned, or no candidate won)."""
    candidates: int = 0
    """Candidates evaluated (those reused from earlier runs included)."""
    failed: int = 0
    spent_s: float = 0.0
    best: Result | None = None
    last_gain: float = 1.0
    rounds: int = 0
    valid: int = 0
    """Valid candidates in its space."""
    exhausted: bool = False
    """Its last round found no candidate it had not evaluated (the search converged)."""
    best_packed: Result | None = None
    """Its best correct candidate in the packed layout, where its template has one: the
    model-level layout race may take it (see :func:`~.scheduler.tune`)."""
    raced: dict[str, list[float]] = field(default_factory=dict)
    """Per candidate key, the median speedup each of its races measured, one per round
    whose race it ran in."""
    wrong_in_model: dict[str, str] = field(default_factory=dict)
    """Per candidate key, why the model recipe must not take it although it was right
    on the task: the whole model, checked against its reference, came out wrong with it
    (:mod:`.blame`)."""

    @property
    def speedup(self) -> float | None:
        """The best candidate's speedup over IREE's pipeline on the task: the median over
        the races it ran in (one race that lands on a noisy stretch of the machine moves
        it less than it moves that race), else its screening speedup."""
        if self.best is None:
            return None
        history = self.raced.get(self.best.key)
        if history:
            return statistics.median(history)
        return self.best.confirmed_speedup or self.best.speedup

    @property
    def won(self) -> bool:
        """Its best candidate beat IREE's pipeline by ``WIN`` and was not found wrong in
        the model."""
        if self.best is None or self.best.key in self.wrong_in_model:
            return False
        return self.speedup is not None and self.speedup >= WIN

    def chosen(self, packed: bool) -> Result | None:
        """The candidate a model recipe takes for it (``packed``: the packed layout's
        best where it has one); ``None``: IREE's pipeline."""
        packed_best = self.best_packed if packed else None
        if packed_best is not None and packed_best.key not in self.wrong_in_model:
            return packed_best
        return self.best if self.won else None

    @property
    def tunable(self) -> bool:
        untried = self.rounds == 0 or self.candidates < self.valid
        return self.recipe is not None and untried and not self.exhausted

    @property
    def kept_because(self) -> str | None:
        """Why the model recipe keeps IREE's pipeline for it (``None``: it won)."""
        if self.won:
            return None
        if self.best is not None and self.best.key in self.wrong_in_model:
            return self.wrong_in_model[self.best.key]
        if self.reason is None and self.recipe is not None and self.rounds == 0:
            return UNREACHED
        return self.reason or NO_WIN

    @property
    def outcome(self) -> str:
        """What the model recipe keeps for it, with the reason for IREE's pipeline."""
        return "schedule" if self.won else f"IREE's pipeline: {self.kept_because}"

    def expected_gain_ms(self) -> float:
        """The time per call its next round is expected to save (see :mod:`.scheduler`)."""
        now = (self.task.time_ms or 0.0) / max(self.speedup or 1.0, 1.0)
        return now * max(self.last_gain, MIN_GAIN / max(self.rounds, 1))

    def state(self) -> dict[str, Any]:
        """What a later run resumes from (see :mod:`.state`)."""
        return {
            "root": self.task.root.describe(),
            "template": digest(self.recipe) if self.recipe else None,
            "rounds": self.rounds,
            "candidates": self.candidates,
            "failed": self.failed,
            "spent_s": round(self.spent_s, 3),
            "last_gain": self.last_gain,
            "valid": self.valid,
            "exhausted": self.exhausted,
            "best": self.best.as_dict() if self.best else None,
            "best_packed": self.best_packed.as_dict() if self.best_packed else None,
            "raced": self.raced,
            "wrong_in_model": self.wrong_in_model,
        }

    def resume(self, saved: Mapping[str, Any] | None) -> bool:
        """Take up ``saved`` (this task's state from an earlier run) when it is for the
        same task and template; return whether it was."""
        if self.recipe is None or not saved:
            return False
        if saved.get("root") != self.task.root.describe():
            return False
        if saved.get("template") != digest(self.recipe):
            return False
        # load_state checked every field; the last three are absent from older states
        best = Result(**saved["best"]) if saved["best"] else None
        packed = saved.get("best_packed")
        self.best, self.best_packed = best, Result(**packed) if packed else None
        self.rounds, self.candidates = saved["rounds"], saved["candidates"]
        self.failed, self.spent_s = saved["failed"], float(saved["spent_s"])
        self.last_gain, self.valid = float(saved["last_gain"]), saved["valid"]
        self.exhausted = saved["exhausted"]
        self.raced = {key: [float(x) for x in runs] for key, runs in saved.get("raced", {}).items()}
        self.wrong_in_model = dict(saved.get("wrong_in_model", {}))
        if best is None and self.rounds:
            self.reason = no_correct(self.candidates)
        return True

    def as_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "task": self.task.name,
            "kind": self.task.kind,
            "root": self.task.root.describe(),
            "layers": self.task.layers,
            "share": self.task.share,
            "time_ms": self.task.time_ms,
            "recipe": str(self.recipe) if self.recipe else None,
            "candidates": self.candidates,
            "failed": self.failed,
            "spent_s": round(self.spent_s, 1),
            "speedup": self.speedup,
            "best": dict(best.params) if best else None,
            "kept": "schedule" if self.won else "iree",
            "reason": self.kept_because,
        }


def no_correct(candidates: int) -> str:
    return f"none of its {candidates} candidates built and checked"
