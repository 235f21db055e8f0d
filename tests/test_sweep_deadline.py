"""A sweep with a deadline (tune's rounds end with the budget): no compile starts once it
has passed, what compiled is timed and raced, and nothing is recorded for the rest.

Real IREE compiles; the deadline is already past when the sweep starts, so the one
wave a started sweep always compiles is all it does, whatever this machine's speed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tdsched.schedules.sweep.database import ResultsDB
from tdsched.schedules.sweep.executors import make_executor
from tdsched.schedules.sweep.runner import Sweep, SweepOptions
from tdsched.targets.racing import RaceSettings

pytestmark = pytest.mark.usefixtures("iree")

RECIPE = """\
name: tiles
workload:
  generator: matmul
  args: {M: 64, N: 64, K: 64, dtype: f32}
targets: [x86]
parameters: {TM: 8}
space:
  TM: [4, 8, 16, 32]
kernels:
  - name: matmul
    match: {kind: contraction}
    schedule:
      - match: {op: linalg.fill, as: fill}
      - tile: {sizes: ["${TM}", 32, 0], loop: forall, mapping: workgroup, loops: wg}
      - fuse_into: {producer: fill, loop: wg}
      - vectorize: {}
"""


def test_a_past_deadline_compiles_one_wave_and_leaves_the_rest_unrecorded(tmp_path: Path) -> None:
    recipe = tmp_path / "tiles.yaml"
    recipe.write_text(RECIPE)
    options = SweepOptions(
        repeats=2,
        race=RaceSettings(min_rounds=2, time_cap_s=2),
        deadline=time.monotonic(),
    )
    db = ResultsDB(tmp_path / "s.db")
    try:
        outcome = Sweep(str(recipe), options, db, make_executor("local", 1), jobs=1).run()
    finally:
        db.close()
    assert outcome.cut
    assert outcome.compiled == 1 and outcome.timed == 1  # one wave of one worker
    assert [r.status.value for r in outcome.results] == ["ok"]  # the rest: not recorded
    assert outcome.raced and outcome.decision is not None  # what compiled still raced

    later = ResultsDB(tmp_path / "s.db")  # a sweep without a deadline does the rest
    try:
        full = Sweep(
            str(recipe),
            SweepOptions(repeats=2, race=options.race),
            later,
            make_executor("local", 1),
            jobs=1,
        ).run()
    finally:
        later.close()
    assert not full.cut
    assert (full.reused, full.compiled) == (1, 3)
