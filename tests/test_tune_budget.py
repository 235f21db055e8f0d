"""tune's --budget is wall time of the whole command: the sweeps get what the steps
before them took and the steps after them are estimated to take leave, shared equally by
the tasks still without a round."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tdsched.schedules.tune.budget import AFTER_PER_PROFILE, WAVE_PER_PROFILE, Budget
from tdsched.schedules.tune.progress import clock
from tdsched.schedules.tune.state import TuneState, load_state, record_finish, save_state


def _budget(total_s: float, elapsed_s: float, before_s: float = 0.0) -> Budget:
    return Budget(total_s, started=time.monotonic() - elapsed_s, before_s=before_s)


def test_the_sweeps_get_what_the_steps_before_and_after_them_leave() -> None:
    budget = _budget(180.0, elapsed_s=30.0)
    budget.plan(profile_s=2.0, after_per_profile=None)
    assert budget.reserve_s == pytest.approx(AFTER_PER_PROFILE * 2.0)
    assert budget.sweeps_left() == pytest.approx(150 - AFTER_PER_PROFILE * 2.0, abs=0.5)
    budget.plan(profile_s=10.0, after_per_profile=2.0)  # what the last run measured
    assert budget.sweeps_left() == pytest.approx(130, abs=0.5)
    assert "for the sweeps of 4 tasks" in budget.plan_line(4, 2)
    assert not budget.over()


def test_untried_tasks_share_the_sweeps_equally_and_later_rounds_take_the_rest() -> None:
    budget = _budget(300.0, elapsed_s=0.0)
    budget.plan(profile_s=0.0, after_per_profile=None)
    now = time.monotonic()
    assert budget.round_end(untried=4) - now == pytest.approx(75, abs=0.5)
    assert budget.round_end(untried=1) - now == pytest.approx(300, abs=0.5)
    assert budget.round_end(untried=0) - now == pytest.approx(300, abs=0.5)


def test_a_spent_budget_still_gives_each_untried_task_one_wave_and_says_so() -> None:
    budget = _budget(30.0, elapsed_s=40.0)
    budget.plan(profile_s=5.0, after_per_profile=None)
    assert budget.over()
    # a deadline already reached: the sweep compiles one wave of --jobs and stops
    assert budget.round_end(untried=3) <= time.monotonic() + 0.01
    line = budget.plan_line(3, 2)
    assert "nothing is left for the sweeps" in line and "one wave of 2 candidates" in line
    # 40 s so far, the time kept for after the sweeps, 3 waves of 1.75 x 5 s each
    total = 40 + AFTER_PER_PROFILE * 5 + 3 * WAVE_PER_PROFILE * 5
    assert f"this run takes about {clock(total)}, not 00:30" in line


def test_earlier_runs_count_and_the_plan_line_names_them() -> None:
    budget = _budget(600.0, elapsed_s=10.0, before_s=400.0)
    budget.plan(profile_s=5.0, after_per_profile=1.0)
    assert budget.spent() == pytest.approx(410, abs=0.5)
    assert budget.sweeps_left() == pytest.approx(185, abs=0.5)
    assert "(06:40 spent by earlier runs)" in budget.plan_line(2, 2)


def test_the_state_keeps_what_the_steps_after_the_sweeps_took(tmp_path: Path) -> None:
    identity = {"model": "m", "target": "x86", "threads": 1}
    state = TuneState(dict(identity), spent_s=100.0, profile_s=8.0)
    save_state(tmp_path, state)
    fresh, _ = load_state(tmp_path, identity)
    assert fresh.profile_s == 8.0 and fresh.after_per_profile() is None  # no run finished
    record_finish(tmp_path, spent_s=160.0, profile_s=8.0, after_s=40.0)
    finished, _ = load_state(tmp_path, identity)
    assert finished.spent_s == 160.0 and finished.after_per_profile() == pytest.approx(5.0)
    saved = json.loads((tmp_path / "tune-state.json").read_text())
    assert saved["after_s"] == 40.0 and saved["profile_s"] == 8.0
    # --no-check: the steps after the sweeps did not run; the last measured pair is kept
    record_finish(tmp_path, spent_s=170.0, profile_s=9.0, after_s=None)
    kept, _ = load_state(tmp_path, identity)
    assert kept.spent_s == 170.0 and kept.after_per_profile() == pytest.approx(5.0)
    record_finish(tmp_path / "none", 1.0, 1.0, 1.0)  # a run that wrote no state: nothing
    assert not (tmp_path / "none").exists()
