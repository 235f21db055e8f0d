"""``tdsched tune``'s budget: wall time of the whole command, not of its sweeps alone.

A user reads ``--budget 3`` as "this takes about three minutes", so the clock starts
when the command does and every step counts: the graph race, the profile of IREE's
default build, the sweeps, and the steps after them (the layout race, the final check,
the IREE race, any blame search). The sweeps are the one step whose length tune
chooses, so they get what the others leave:

* **The steps before the sweeps** have run when the sweeps are planned: their time is
  known.
* **The steps after the sweeps** are estimated as a multiple of the profile's time (the
  profile builds the model with IREE's default pipeline and runs it; the steps after
  build and run the model recipe, IREE's configurations of the model and maybe a packed
  alternative): :data:`AFTER_PER_PROFILE` times it on a first run, and on later runs into
  the same folder the ratio the last run measured (``after_s`` / ``profile_s`` in its
  state), so the estimate learns the machine and the model.
* **The sweeps** get the rest. Every task with a template gets a first round however
  small the rest is, of at least one wave of ``--jobs`` compiles: untried tasks share
  the sweeps' time equally (:meth:`Budget.round_end`), so a small budget spreads over
  every task instead of going to the first. Later rounds end with the sweeps' share.

A budget smaller than the fixed steps plus one wave per task is overrun by that much;
the plan line printed before the sweeps says so, with the run's expected length.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .progress import clock

AFTER_PER_PROFILE = 20.0
"""The steps after the sweeps, in units of the profile's time, for a first run: the
layout race (three runs of each recipe on a close call), the final check with the peers
(the recipe and IREE's three configurations of the model built and run), the recipe with
the flags of IREE's faster configuration (four more builds) and a check of what is kept.
``tdsched tune small_cnn --threads 1 --budget 3`` on a 2-core Xeon (cascadelake) measured
170 s of them after an 8.5 s profile; see docs/commands/tune.md#the-budget."""
WAVE_PER_PROFILE = 1.75
"""A first round of one wave (``--jobs`` task candidates compiled, checked, timed and
raced), in units of the profile's time, for the estimate of a budget too small for the
sweeps: the same small_cnn tune measured 15 s a wave."""


@dataclass
class Budget:
    """The wall time one ``tdsched tune`` run may take, and what it has used.

    ``total_s`` is the budget over every run into the folder; ``before_s`` what earlier
    runs spent (from the state, set once it is read); ``started`` the
    ``time.monotonic()`` instant the command started; ``reserve_s`` the time kept for the
    steps after the sweeps and ``profile_s`` the profile's time (both set by
    :meth:`plan`)."""

    total_s: float
    started: float = field(default_factory=time.monotonic)
    before_s: float = 0.0
    reserve_s: float = 0.0
    profile_s: float = 0.0

    def elapsed(self) -> float:
        """Seconds since this run started."""
        return time.monotonic() - self.started

    def spent(self) -> float:
        """The budget spent, over every run into the folder."""
        return self.before_s + self.elapsed()

    def sweeps_left(self) -> float:
        """Seconds the sweeps may still take (negative: over)."""
        return self.total_s - self.spent() - self.reserve_s

    def plan(self, profile_s: float, after_per_profile: float | None) -> None:
        """Keep time for the steps after the sweeps: ``after_per_profile`` (the ratio a
        previous run measured; ``None``: :data:`AFTER_PER_PROFILE`) times the profile's
        ``profile_s``."""
        ratio = AFTER_PER_PROFILE if after_per_profile is None else after_per_profile
        self.profile_s = profile_s
        self.reserve_s = ratio * profile_s

    def round_end(self, untried: int) -> float:
        """The ``time.monotonic()`` instant a round must compile its last wave by: for a
        task's first round (``untried`` tasks, this one included, still without one) an
        equal share of the sweeps' time, for a later one (``untried`` 0) all of it. A
        share already spent still compiles one wave (the sweep's deadline rule)."""
        left = max(0.0, self.sweeps_left())
        return time.monotonic() + (left / untried if untried else left)

    def over(self) -> bool:
        """Whether the sweeps' share is spent (no later round starts)."""
        return self.sweeps_left() <= 0

    def plan_line(self, tasks: int, jobs: int) -> str:
        """What the budget leaves the sweeps, printed before them."""
        this_run = self.total_s - self.before_s
        head = f"tune: budget {clock(self.total_s)}"
        if self.before_s:
            head += f" ({clock(self.before_s)} spent by earlier runs)"
        used = f"{clock(self.elapsed())} went to the graph race and the profile"
        after = f"~{clock(self.reserve_s)} is kept for the checks and races after the sweeps"
        if tasks == 0:
            return f"{head}: {used}; {after}; no task to sweep"
        sweeps = self.sweeps_left()
        if sweeps > 0:
            return f"{head}: {used}; {after}; {clock(sweeps)} for the sweeps of {tasks} tasks"
        total = self.elapsed() + self.reserve_s + tasks * WAVE_PER_PROFILE * self.profile_s
        return (
            f"{head}: {used}; {after}; nothing is left for the sweeps, so each of the "
            f"{tasks} tasks gets one wave of {jobs} candidates and this run takes about "
            f"{clock(total)}, not {clock(max(this_run, 0.0))}"
        )
