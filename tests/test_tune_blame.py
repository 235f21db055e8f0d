"""tdsched tune's search for the task schedules that made the model fail
(:mod:`tdsched.schedules.tune.blame`), and what the model recipe keeps for them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from tdsched.schedules.cli.main import main
from tdsched.schedules.cli.tune_command import _final_check
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.measure.run_report import RunReport
from tdsched.schedules.measure.status import Status
from tdsched.schedules.tune.blame import blame_packed, culprits
from tdsched.schedules.tune.model_recipe import ModelSpec, write_model_recipe
from tdsched.schedules.tune.outcome import TuneOutcome
from tdsched.schedules.tune.tasks import ModelTasks
from tdsched.schedules.tune.tuning import TaskTuning, TuneOptions
from test_tune import TRANSPOSED, rowmajor_and_packed


class Checks:
    """A failure that ``bad`` cause: a set fails when it holds all of one of them."""

    def __init__(self, *bad: frozenset[int]) -> None:
        self.bad, self.count = bad, 0

    def fails(self, items: Sequence[int]) -> bool:
        self.count += 1
        return any(b <= set(items) for b in self.bad)


def test_one_culprit_is_found_in_about_two_log2_n_checks() -> None:
    checks = Checks(frozenset({5}))
    assert culprits(list(range(8)), checks.fails) == [5]
    assert checks.count <= 6


def test_culprits_in_both_halves_are_all_found_in_order() -> None:
    assert culprits(list(range(8)), Checks(frozenset({6}), frozenset({1})).fails) == [1, 6]


def test_schedules_that_fail_only_together_are_all_blamed() -> None:
    # 2 and 5 fail only together: no half fails alone, so the set they are in is blamed
    assert culprits(list(range(8)), Checks(frozenset({2, 5})).fails) == list(range(8))
    assert culprits([3], Checks(frozenset({3})).fails) == [3]


def test_a_candidate_wrong_in_the_model_is_not_taken_and_says_why(tmp_path: Path) -> None:
    tuning = rowmajor_and_packed(tmp_path)
    assert tuning.won and tuning.chosen(False) == tuning.best
    assert tuning.best is not None and tuning.best_packed is not None
    tuning.wrong_in_model[tuning.best.key] = "its schedule made the model wrong"
    assert not tuning.won and tuning.chosen(False) is None
    assert tuning.outcome == "IREE's pipeline: its schedule made the model wrong"
    assert tuning.chosen(True) == tuning.best_packed  # the packed candidate is another
    # a later run keeps it out: the mark is part of the task's saved state
    again = TaskTuning(tuning.task, recipe=tuning.recipe)
    assert again.resume(tuning.state()) and again.wrong_in_model == tuning.wrong_in_model
    assert again.chosen(False) is None
    # the packed candidate wrong in the model: the packed recipe falls back to rowmajor
    packed_only = rowmajor_and_packed(tmp_path)
    packed_only.wrong_in_model["k2"] = "its schedule made the model wrong"
    assert packed_only.chosen(True) == packed_only.best


def test_a_model_recipe_can_keep_a_subset_of_the_task_schedules(tmp_path: Path) -> None:
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60)
    model = ModelSpec("m", {"model": "m"}, ())
    path = tmp_path / "m.yaml"
    assert (
        write_model_recipe(path, model, [rowmajor_and_packed(tmp_path)], options, only={"t0"}) == 1
    )
    assert (
        write_model_recipe(path, model, [rowmajor_and_packed(tmp_path)], options, only=set()) == 0
    )
    assert yaml.safe_load(path.read_text())["kernels"] == []


def test_a_schedule_wrong_in_the_model_is_blamed_and_left_out(
    iree: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real tune of a transposed-epilogue matmul, then its saved winner replaced by a
    schedule known to be wrong (register tile RH 1: IREE 3.13 drops the write's
    permutation) and made to look fast. The re-run's final check fails; the search
    blames that schedule, the task keeps IREE's pipeline, the written recipe is right and
    a third run does not search again."""
    model = tmp_path / "model.mlir"
    model.write_text(TRANSPOSED)
    out = tmp_path / "m.tune"
    args = ["tune", str(model), "--threads", "1", "--budget", "0.3", "--round-size", "4"]
    args += ["--repeats", "3", "--out", str(out), "--json"]
    assert main(args) == 0
    capsys.readouterr()
    state_file = out / "tune-state.json"
    state = json.loads(state_file.read_text())
    saved = state["tasks"]["t0"]
    assert saved["best"] is not None, "the tune found no correct candidate to replace"
    # The model's only matmul may also run packed: the wrong schedule is a row-major one,
    # and no packed alternative races it (the layout race would keep that instead).
    if "LAYOUT" in saved["best"]["params"]:
        saved["best"]["params"].update(LAYOUT="rowmajor", M0=16, N0=32, K0=1, UNPACK="separate")
    saved["best_packed"] = None
    saved["best"]["params"]["RH"] = 1
    saved["best"]["params"]["EPILOGUE"] = "fused"
    saved["best"]["key"] = "wrong-in-model"
    saved["best"]["speedup"] = saved["best"]["confirmed_speedup"] = 1.5
    saved["raced"] = {"wrong-in-model": [1.5]}
    # The budget is spent, so the re-run sweeps nothing (a new round would race the saved
    # winner, whose build does not exist, and drop it): it goes straight to the final check.
    # A fast machine finishes the first run inside the budget, leaving time for a round.
    state["spent_s"] = max(state["spent_s"], 0.3 * 60)
    state_file.write_text(json.dumps(state))

    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["status"] == "ok"
    assert report["blame"].startswith("blame    the model was wrong, max abs error")
    assert report["blame"].endswith("blame the schedules of t0; they keep IREE's pipeline")
    (task,) = report["tasks"]
    assert task["kept"] == "iree"
    assert task["reason"].startswith("its schedule made the model wrong")
    assert yaml.safe_load((out / "model.tuned.yaml").read_text())["kernels"] == []

    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["blame"] is None and again["run"]["status"] == "ok"


def _three_packable(tmp_path: Path) -> list[TaskTuning]:
    """Tasks t0, t1, t2 (layers l0, l1, l2), each with a winning rowmajor candidate and
    a correct packed one the tasks' recipe does not take."""
    tunings = []
    for n in range(3):
        folder = tmp_path / f"t{n}"
        folder.mkdir()
        tuning = rowmajor_and_packed(folder)
        tuning.task = dataclasses.replace(tuning.task, name=f"t{n}", layers=[f"l{n}"])
        tunings.append(tuning)
    return tunings


def _packed_layers(recipe: Path) -> set[str]:
    """The layers a model recipe's mmt4d steps pack."""
    graph = yaml.safe_load(recipe.read_text()).get("graph", [])
    return {layer for step in graph for layer in step["mmt4d"]["ops"]["layer"]}


def _report(status: Status, speedup: float | None = None) -> RunReport:
    return RunReport(
        "m", "x86", "m", {}, 1, "iree-default", status=status, speedup=speedup, reference="numpy"
    )


def _outcome(tmp_path: Path, tunings: list[TaskTuning]) -> TuneOutcome:
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60)
    tasks = ModelTasks("m", "x86", 1, (), None)
    recipe, packed = tmp_path / "m.tuned.yaml", tmp_path / "m.packed.yaml"
    model = ModelSpec("m", {"model": "m"}, ())
    write_model_recipe(recipe, model, tunings, options)
    count = write_model_recipe(packed, model, tunings, options, packed=True)
    return TuneOutcome(
        tasks, tunings, recipe, 60.0, 3, 60.0, (packed, count), 1.0, [], model, options
    )


def test_the_packing_that_makes_the_model_fail_is_blamed_and_the_rest_stays_packed(
    tmp_path: Path,
) -> None:
    tunings = _three_packable(tmp_path)
    outcome = _outcome(tmp_path, tunings)
    assert outcome.packed is not None and _packed_layers(outcome.packed[0]) == {"l0", "l1", "l2"}
    checked: list[set[str]] = []

    def numerics(recipe: Path) -> RunReport:
        checked.append(_packed_layers(recipe))
        return _report(Status.WRONG if "l1" in checked[-1] else Status.OK)

    lines: list[str] = []
    failed = dataclasses.replace(_report(Status.WRONG), max_abs_error=3.5)
    line = blame_packed(outcome, failed, numerics, lines.append)
    assert line == (
        "blame    the packed recipe was wrong, max abs error 3.5 vs numpy: 4 checks of packed "
        "subsets blame the packing of t1; they keep their schedules of the tasks' recipe"
    )
    assert checked == [{"l0"}, {"l1", "l2"}, {"l1"}, {"l2"}]  # halving, on the packed three
    assert lines[0].startswith("tune: blame    check 1, t0 packed: ")
    # t1 keeps its rowmajor winner in both recipes; the others stay packed.
    assert tunings[1].chosen(True) == tunings[1].best
    assert tunings[1].wrong_in_model["k2"].startswith("its packed schedule made the model wrong")
    assert outcome.packed is not None and _packed_layers(outcome.packed[0]) == {"l0", "l2"}
    # Blaming the last packing drops the packed alternative.
    for tuning in (tunings[0], tunings[2]):
        tuning.wrong_in_model["k2"] = "wrong"
    outcome.rewrite_packed()
    assert outcome.packed is None


def test_a_failed_packed_recipe_is_blamed_then_the_rest_of_the_packing_races_again(
    tmp_path: Path,
) -> None:
    tunings = _three_packable(tmp_path)
    outcome = _outcome(tmp_path, tunings)

    def run(recipe: Path) -> RunReport:
        packed = _packed_layers(recipe)
        if "l1" in packed:
            return dataclasses.replace(_report(Status.WRONG), max_abs_error=3.5)
        return _report(Status.OK, 1.5 if packed else 1.2)

    lines: list[str] = []
    report, layouts, blames = _final_check(outcome, run, run, lines.append)
    assert report is not None and report.status is Status.OK and report.speedup == 1.5
    assert layouts is not None and layouts.startswith(
        "layouts  packed matmuls 1.50x vs 1.20x: kept"
    )
    assert len(blames) == 1 and "blame the packing of t1" in blames[0]
    assert outcome.packed_kept and _packed_layers(outcome.recipe) == {"l0", "l2"}
