"""``tdsched tune``'s last race: the model recipe against IREE's one-flag configurations
(data tiling, with and without microkernels), run as ``tdsched run --peers`` runs them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import PeerResult, RunReport
from tdsched.schedules.measure.status import Check, Status
from tdsched.schedules.tune.iree_race import (
    IREE_RACE_FILE,
    race_iree_configurations,
    write_configuration_recipe,
)
from tdsched.schedules.tune.outcome import TuneOutcome
from tdsched.schedules.tune.races import Pruned
from tdsched.schedules.tune.tasks import ModelTasks

MATMUL = """
func.func @mm(%a: tensor<256x512xf32>, %b: tensor<512x384xf32>) -> tensor<256x384xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x384xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<256x384xf32>) -> tensor<256x384xf32>
  %m = linalg.matmul ins(%a, %b : tensor<256x512xf32>, tensor<512x384xf32>) outs(%c : tensor<256x384xf32>) -> tensor<256x384xf32>
  return %m : tensor<256x384xf32>
}
"""

TUNED = """name: mm
workload: {{file: mm.mlir}}
targets: [x86]
tolerance: {{atol: 1.0e-4, rtol: 1.0e-4}}
graph:
  - conv1x1_to_matmul: {{}}
kernels: {kernels}
provenance: {{tool: tdsched tune, tasks: []}}
"""


def _tuned(folder: Path, kernels: str = "[]") -> TuneOutcome:
    (folder / "mm.mlir").write_text(MATMUL)
    recipe = folder / "mm.tuned.yaml"
    recipe.write_text(TUNED.format(kernels=kernels))
    tasks = ModelTasks("mm", "x86", 1, (), None)
    return TuneOutcome(tasks, [], recipe, 60.0, 1, 60.0)


def _report(speedup: float | None = None, peers: dict[str, float] | None = None) -> RunReport:
    report = RunReport("mm", "x86", "mm", {}, 1, "iree-default", status=Status.OK)
    report.speedup = speedup
    if peers is not None:  # a run without the peers has none (None), as run_recipe's
        report.peers = [PeerResult(n, Check(Status.OK), speedup=s) for n, s in peers.items()]
    return report


def _runs(report: RunReport, ran: list[str]) -> Callable[[Path], RunReport]:
    def run(recipe: Path) -> RunReport:
        ran.append(recipe.read_text())
        return report

    return run


def _peers_runs(by_name: dict[str, RunReport], ran: list[str]) -> Callable[[Path], RunReport]:
    """A stand-in for runs with the peers: each recipe's report by its file name, the
    names appended to ``ran``."""

    def run(recipe: Path) -> RunReport:
        ran.append(recipe.name)
        return by_name[recipe.name]

    return run


DTUK = "iree-data-tiling-ukernels"


def _not_applied() -> RunReport:
    report = _report()
    report.status = Status.NOT_APPLIED
    return report


def test_a_final_check_run_with_the_peers_is_taken_up_not_run_again(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path)
    peers = {"iree-data-tiling": 0.95, DTUK: 0.90}
    runs = {f"mm.{DTUK}.yaml": _not_applied()}
    ran: list[str] = []
    checked: list[str] = []
    race = race_iree_configurations(
        outcome, _report(1.2, peers), _peers_runs(runs, ran), _runs(_report(1.4), checked)
    )
    assert ran == [f"mm.{DTUK}.yaml"]  # only the schedules with the flags ran
    assert race.configuration == DTUK and len(checked) == 1


def test_a_configuration_that_beats_the_schedules_becomes_the_recipe(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path)
    before = outcome.recipe.read_text()
    peers = {"iree-data-tiling": 0.95, DTUK: 0.90}
    # With the flags, the schedules' matmul is gone: they do not apply.
    runs = {"mm.tuned.yaml": _report(1.2, peers), f"mm.{DTUK}.yaml": _not_applied()}
    ran: list[str] = []
    checked: list[str] = []
    final = _report(1.4)
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, ran), _runs(final, checked)
    )
    assert ran == ["mm.tuned.yaml", f"mm.{DTUK}.yaml"]
    assert race.configuration == DTUK and race.report is final
    assert race.line == (
        "iree     the schedules run 1.20x IREE default, 0.95x IREE data tiling, 0.90x IREE "
        "data tiling + microkernels; with the flags of IREE data tiling + microkernels they ran not_applied "
        f"({tmp_path / f'mm.{DTUK}.yaml'}) (each against the configurations in its own run): "
        "the recipe builds IREE data tiling + microkernels (--iree-opt-data-tiling "
        f"--iree-llvmcpu-enable-ukernels=all); the schedules are in {tmp_path / 'mm.schedules.yaml'}"
    )
    # The schedules stay beside it; the recipe builds IREE's pipeline with the flags.
    assert (tmp_path / "mm.schedules.yaml").read_text() == before
    recipe = load(str(outcome.recipe))
    assert recipe.compile_flags == ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all")
    assert not recipe.kernels and not recipe.graph and outcome.kernels == 0
    assert "1.11x as fast as the schedules" in recipe.description
    document = yaml.safe_load(outcome.recipe.read_text())
    assert document["provenance"]["iree_configuration"]["name"] == DTUK
    assert checked == [outcome.recipe.read_text()]  # the final check ran the new recipe


def test_the_schedules_with_a_configuration_s_flags_are_kept_when_fastest(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path)
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 0.95, DTUK: 0.9}),
        f"mm.{DTUK}.yaml": _report(1.5, {DTUK: 1.2}),
    }
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, []), _runs(_report(1.5), [])
    )
    assert race.configuration == f"schedules+{DTUK}"
    assert race.line is not None and race.line.endswith(
        "the recipe adds the flags of IREE data tiling + microkernels (--iree-opt-data-tiling "
        "--iree-llvmcpu-enable-ukernels=all) to the schedules"
    )
    assert "they run 1.20x it" in race.line
    recipe = load(str(outcome.recipe))
    assert recipe.compile_flags == ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all")
    assert [step.primitive for step in recipe.graph] == ["conv1x1_to_matmul"]
    assert outcome.kernels == 1 and not (tmp_path / "mm.schedules.yaml").exists()
    assert "1.20x as fast as IREE data tiling + microkernels alone" in recipe.description


def test_schedules_that_beat_every_configuration_are_kept(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path)
    before = outcome.recipe.read_text()
    first = _report(1.2)
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 1.1, DTUK: 1.02}),
        f"mm.{DTUK}.yaml": _report(1.2, {DTUK: 1.01}),
    }
    race = race_iree_configurations(outcome, first, _peers_runs(runs, []), _runs(first, []))
    assert race.configuration is None and race.report is first
    assert race.line is not None and race.line.startswith(
        "iree     the schedules run 1.20x IREE default, 1.10x IREE data tiling, 1.02x IREE "
        "data tiling + microkernels; with the flags of IREE data tiling + microkernels they "
        "run 1.01x it"
    )
    assert race.line.endswith("own run): the schedules are kept")
    assert outcome.recipe.read_text() == before and not (tmp_path / "mm.schedules.yaml").exists()


def test_onnxruntime_is_shown_beside_the_configurations_but_not_raced(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path)
    first = _report(1.2)
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 1.1, DTUK: 1.05, "onnxruntime": 0.5}),
        f"mm.{DTUK}.yaml": _report(1.2, {DTUK: 1.01}),
    }
    race = race_iree_configurations(outcome, first, _peers_runs(runs, []), _runs(first, []))
    assert race.configuration is None and race.report is first  # onnxruntime is faster
    assert race.line is not None and race.line.startswith(
        "iree     the schedules run 1.20x IREE default, 1.10x IREE data tiling, 1.05x IREE "
        "data tiling + microkernels, 0.50x onnxruntime (a peer, not raced); with the flags"
    )


def test_a_configuration_within_noise_of_the_schedules_does_not_replace_them(
    tmp_path: Path,
) -> None:
    # 1% is noise: a challenger must be 2% faster than what it replaces.
    outcome = _tuned(tmp_path)
    before = outcome.recipe.read_text()
    runs = {
        "mm.tuned.yaml": _report(1.0, {"iree-data-tiling": 0.99, DTUK: 1.0}),
        "mm.iree-data-tiling.yaml": _report(1.0, {"iree-data-tiling": 1.0}),
    }
    race = race_iree_configurations(
        outcome, _report(1.0), _peers_runs(runs, []), _runs(_report(), [])
    )
    assert race.configuration is None and outcome.recipe.read_text() == before


def test_schedules_slower_than_iree_default_give_way_to_it(tmp_path: Path) -> None:
    outcome = _tuned(
        tmp_path, kernels="[{name: k, match: {op: linalg.matmul}, schedule: [{vectorize: {}}]}]"
    )
    ran: list[str] = []
    runs = {
        "mm.tuned.yaml": _report(0.9, {"iree-data-tiling": 0.95, DTUK: 0.97}),
        "mm.iree-data-tiling.yaml": _not_applied(),
        "mm.iree-data-tiling.graph.yaml": _report(1.0, {"iree-data-tiling": 0.99}),
    }
    race = race_iree_configurations(
        outcome, _report(0.9), _peers_runs(runs, ran), _runs(_report(1.0), [])
    )
    # The schedules with the faster flagged configuration's flags ran too, and where
    # they did not apply, the graph steps alone with them.
    assert ran == ["mm.tuned.yaml", "mm.iree-data-tiling.yaml", "mm.iree-data-tiling.graph.yaml"]
    assert race.configuration == "iree-default"
    assert race.line is not None and "the recipe builds IREE default (no flags)" in race.line
    recipe = load(str(outcome.recipe))
    assert recipe.compile_flags == () and not recipe.kernels and not recipe.graph
    assert "k" in (tmp_path / "mm.schedules.yaml").read_text()


def test_a_recorded_decision_is_taken_up_without_racing_even_without_a_check(
    tmp_path: Path,
) -> None:
    outcome = _tuned(tmp_path)
    runs = {
        "mm.tuned.yaml": _report(1.1, {"iree-data-tiling": 0.8}),
        "mm.iree-data-tiling.yaml": _not_applied(),
    }
    race_iree_configurations(outcome, _report(1.0), _peers_runs(runs, []), _runs(_report(), []))
    record = json.loads((tmp_path / IREE_RACE_FILE).read_text())
    assert record["kept"] == "iree-data-tiling" and record["speedup"] == 0.8
    # A later run writes the same schedules again (--no-check: nothing runs).
    again = _tuned(tmp_path)
    race = race_iree_configurations(again, None, None, None)
    assert race.configuration == "iree-data-tiling" and race.report is None
    assert race.line is not None and race.line.endswith("(raced by an earlier run)")
    flags = load(str(again.recipe)).compile_flags
    assert flags == ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=none")
    # Other schedules are raced afresh: without a check, nothing is decided.
    other = _tuned(tmp_path, kernels="[]\ndescription: other")
    assert race_iree_configurations(other, None, None, None).line is None


def test_a_failed_peer_run_keeps_the_schedules_and_says_why(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path)
    wrong = _report()
    wrong.status, wrong.error = Status.CRASHED, "killed by SIGSEGV"
    first = _report(1.2)
    race = race_iree_configurations(outcome, first, _runs(wrong, []), _runs(first, []))
    assert race.report is first and race.configuration is None
    assert race.line == "iree     not raced: the recipe ran crashed (killed by SIGSEGV)"
    assert not (tmp_path / IREE_RACE_FILE).exists()


@pytest.mark.usefixtures("iree")
def test_the_configuration_recipe_builds_iree_s_pipeline_with_its_flags_and_is_right(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tdsched.schedules.cli.main import main

    outcome = _tuned(tmp_path)
    schedules = tmp_path / "mm.schedules.yaml"
    schedules.write_text(outcome.recipe.read_text())
    write_configuration_recipe(outcome.recipe, "iree-data-tiling", 0.9, schedules)
    args = ["run", str(outcome.recipe), "--threads", "1", "--repeats", "1", "--json", "--peers"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "ok" and report["reference"] == "numpy-ir-evaluator"
    assert "--iree-opt-data-tiling" in report["compile_command"]
    peers = {p["name"]: p for p in report["peers"]}
    assert peers["iree-data-tiling"]["status"] == "ok"
    # The workload file is one matmul: numpy's a @ b is its peer.
    assert peers["numpy"]["status"] == "ok" and peers["numpy"]["speedup"] > 0


def test_flags_that_pay_only_with_the_schedules_are_added_when_default_is_as_fast(
    tmp_path: Path,
) -> None:
    # Data tiling alone is no faster than IREE default here (an attention block: the
    # schedules 1.31x both), but with the schedules it takes the matmuls they left alone.
    outcome = _tuned(tmp_path)
    runs = {
        "mm.tuned.yaml": _report(1.31, {"iree-data-tiling": 1.31, DTUK: 1.35}),
        "mm.iree-data-tiling.yaml": _report(1.46, {"iree-data-tiling": 1.46}),
    }
    race = race_iree_configurations(
        outcome, _report(1.31), _peers_runs(runs, []), _runs(_report(1.46), [])
    )
    assert race.configuration == "schedules+iree-data-tiling"
    assert load(str(outcome.recipe)).compile_flags == (
        "--iree-opt-data-tiling",
        "--iree-llvmcpu-enable-ukernels=none",
    )


def test_a_recipe_without_schedules_is_not_raced_with_flags_added(tmp_path: Path) -> None:
    # With the flags it would be the configuration itself: only noise tells them apart.
    outcome = _tuned(tmp_path)
    outcome.recipe.write_text(
        outcome.recipe.read_text().replace("graph:\n  - conv1x1_to_matmul: {}\n", "")
    )
    ran: list[str] = []
    runs = {"mm.tuned.yaml": _report(1.0, {"iree-data-tiling": 0.99, DTUK: 1.0})}
    race = race_iree_configurations(
        outcome, _report(1.0), _peers_runs(runs, ran), _runs(_report(), [])
    )
    assert ran == ["mm.tuned.yaml"] and race.configuration is None


def test_a_combination_that_fails_to_compile_names_the_compiler_s_error(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path)
    failed = _report()
    failed.status = Status.COMPILE_FAILED
    failed.error = (
        "iree-compile failed (exit 1):\n"
        "m.mlir:3:5: error: One or more operations with large vector sizes (32768 bytes)\n"
    )
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 1.1}),
        "mm.iree-data-tiling.yaml": failed,
    }
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, []), _runs(_report(), [])
    )
    assert race.line is not None
    assert "they ran compile_failed (m.mlir:3:5: error: One or more operations" in race.line


KERNEL = "[{name: t0, match: {op: linalg.matmul}, schedule: [{tile: {sizes: [8, 16, 0]}}]}]"


def test_graph_steps_alone_take_the_flags_where_the_schedules_with_them_fail(
    tmp_path: Path,
) -> None:
    # With data tiling a matmul's dispatch holds no linalg.matmul: the kernel schedule
    # does not apply, but the graph steps (convolutions made matmuls) still pay with it.
    outcome = _tuned(tmp_path, KERNEL)
    before = outcome.recipe.read_text()
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 0.95, DTUK: 0.9}),
        f"mm.{DTUK}.yaml": _not_applied(),
        f"mm.{DTUK}.graph.yaml": _report(1.5, {DTUK: 1.25}),
    }
    ran: list[str] = []
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, ran), _runs(_report(1.5), [])
    )
    assert ran == ["mm.tuned.yaml", f"mm.{DTUK}.yaml", f"mm.{DTUK}.graph.yaml"]
    assert race.configuration == f"graph+{DTUK}"
    assert race.line is not None
    assert (
        f"they ran not_applied ({tmp_path / f'mm.{DTUK}.yaml'}); their graph steps alone "
        f"with the flags run 1.25x it ({tmp_path / f'mm.{DTUK}.graph.yaml'})"
    ) in race.line
    assert race.line.endswith(
        "the recipe keeps its graph steps with the flags of IREE data tiling + microkernels "
        "(--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=all) and no kernel "
        f"schedule; the schedules are in {tmp_path / 'mm.schedules.yaml'}"
    )
    recipe = load(str(outcome.recipe))
    assert recipe.compile_flags == ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all")
    assert [step.primitive for step in recipe.graph] == ["conv1x1_to_matmul"]
    assert not recipe.kernels and outcome.kernels == 0
    assert (tmp_path / "mm.schedules.yaml").read_text() == before
    document = yaml.safe_load(outcome.recipe.read_text())
    assert document["provenance"]["iree_configuration"] == {
        "name": DTUK,
        "with_schedules": False,
        "speedup": 1.25,
        "schedules": "mm.schedules.yaml",
    }
    # taken up by a later run without racing again
    again = race_iree_configurations(
        _tuned_again(tmp_path, before), None, None, _runs(_report(1.5), [])
    )
    assert again.configuration == f"graph+{DTUK}" and not load(str(outcome.recipe)).kernels


def _tuned_again(folder: Path, text: str) -> TuneOutcome:
    """The outcome of a later run that wrote the same schedules ``text``."""
    recipe = folder / "mm.tuned.yaml"
    recipe.write_text(text)
    return TuneOutcome(ModelTasks("mm", "x86", 1, (), None), [], recipe, 60.0, 1, 60.0)


def test_a_flag_the_recipe_sets_to_the_same_value_is_no_clash(tmp_path: Path) -> None:
    # tune's packed kernels build with microkernels off, as data tiling does: the flags
    # combine (the shared one once); with microkernels on, they clash and are not tried.
    outcome = _tuned(tmp_path, KERNEL)
    flagged = outcome.recipe.read_text().replace(
        "graph:", "compile_flags: [--iree-llvmcpu-enable-ukernels=none]\ngraph:"
    )
    outcome.recipe.write_text(flagged)
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 0.9, DTUK: 0.95}),
        "mm.iree-data-tiling.yaml": _report(1.4, {"iree-data-tiling": 1.2}),
    }
    ran: list[str] = []
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, ran), _runs(_report(1.5), [])
    )
    assert ran == ["mm.tuned.yaml", "mm.iree-data-tiling.yaml"]
    assert race.configuration == "schedules+iree-data-tiling"
    assert load(str(outcome.recipe)).compile_flags == (
        "--iree-llvmcpu-enable-ukernels=none",
        "--iree-opt-data-tiling",
    )
    (tmp_path / "clash").mkdir()
    clash = _tuned(tmp_path / "clash", KERNEL)
    clash.recipe.write_text(flagged)
    # microkernels are the fastest configuration, but the recipe turns them off: the
    # fastest of the others (data tiling) is the one tried with the schedules
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 1.1, DTUK: 1.05}),
        "mm.iree-data-tiling.yaml": _report(1.3, {"iree-data-tiling": 1.04}),
    }
    ran = []
    race = race_iree_configurations(
        clash, _report(1.2), _peers_runs(runs, ran), _runs(_report(1.5), [])
    )
    assert ran == ["mm.tuned.yaml", "mm.iree-data-tiling.yaml"] and race.configuration is None
    assert race.line is not None and "with the flags of IREE data tiling they run 1.04x it" in (
        race.line
    )


def test_the_other_layout_s_graph_steps_with_the_flags_can_win(tmp_path: Path) -> None:
    # The rewrite race kept NCHW by IREE default's times; with data tiling the NHWC
    # race's steps run faster: the recipe keeps those, and a later run takes them up.
    outcome = _tuned(tmp_path, KERNEL)
    before = outcome.recipe.read_text()
    other = [{"channels_last": {}}, {"im2col": {}}]
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 0.95, DTUK: 0.9}),
        f"mm.{DTUK}.yaml": _not_applied(),
        f"mm.{DTUK}.graph.yaml": _report(1.3, {DTUK: 1.2}),
        f"mm.{DTUK}.other-layout.yaml": _report(1.5, {DTUK: 1.4}),
    }
    ran: list[str] = []
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, ran), _runs(_report(1.5), []), other
    )
    assert ran == [
        "mm.tuned.yaml",
        f"mm.{DTUK}.yaml",
        f"mm.{DTUK}.graph.yaml",
        f"mm.{DTUK}.other-layout.yaml",
    ]
    assert race.configuration == f"graph+{DTUK}" and race.line is not None
    assert (
        "their graph steps alone with the flags run 1.20x it "
        f"({tmp_path / f'mm.{DTUK}.graph.yaml'}); the other layout's (channels_last, im2col) "
        f"with the flags run 1.40x it ({tmp_path / f'mm.{DTUK}.other-layout.yaml'})"
    ) in race.line
    assert "the recipe keeps the other layout's graph steps with the flags of" in race.line
    kept = yaml.safe_load(outcome.recipe.read_text())
    assert kept["graph"] == other and kept["kernels"] == []
    assert "the other layout's graph steps built with the flags" in kept["description"]
    again = race_iree_configurations(
        _tuned_again(tmp_path, before), None, None, _runs(_report(1.5), [])
    )
    assert again.configuration == f"graph+{DTUK}"
    assert yaml.safe_load(outcome.recipe.read_text())["graph"] == other


def test_the_other_layout_is_tried_beside_schedules_that_take_the_flags(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path, KERNEL)
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 0.95, DTUK: 0.9}),
        f"mm.{DTUK}.yaml": _report(1.4, {DTUK: 1.3}),
        f"mm.{DTUK}.other-layout.yaml": _report(1.2, {DTUK: 1.1}),
    }
    ran: list[str] = []
    race = race_iree_configurations(
        outcome,
        _report(1.2),
        _peers_runs(runs, ran),
        _runs(_report(1.5), []),
        [{"channels_last": {}}],
    )
    assert ran == ["mm.tuned.yaml", f"mm.{DTUK}.yaml", f"mm.{DTUK}.other-layout.yaml"]
    assert race.configuration == f"schedules+{DTUK}"
    assert load(str(outcome.recipe)).kernels


def test_graph_steps_kept_with_the_flags_are_pruned_by_convolution_group(tmp_path: Path) -> None:
    # The other layout's steps win with the flags; raced again by group with the flags,
    # some convolutions stay convolutions: those steps run with the peers and are kept.
    outcome = _tuned(tmp_path, KERNEL)
    other = [{"channels_last": {}}, {"im2col": {}}]
    pruned_graph = [{"channels_last": {}}, {"im2col": {"ops": {"layer": ["s"]}}}]
    pruned_recipe = tmp_path / f"mm.{DTUK}.other-layout.without-1.yaml"
    pruned_recipe.write_text("name: pruned\n")
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 0.95, DTUK: 0.9}),
        f"mm.{DTUK}.yaml": _not_applied(),
        f"mm.{DTUK}.graph.yaml": _report(1.3, {DTUK: 1.2}),
        f"mm.{DTUK}.other-layout.yaml": _report(1.5, {DTUK: 1.4}),
        pruned_recipe.name: _report(1.7, {DTUK: 1.6}),
    }
    asked: list[tuple[Any, ...]] = []

    def prune(graph: Any, recipe: Path, speedup: float, stem: str) -> Pruned:
        asked.append((graph, recipe.name, speedup, stem))
        line = "graph    im2col without a, b: 1.70x IREE default (without it 1.50x), kept: ..."
        return Pruned(pruned_graph, pruned_recipe, (line,))

    ran: list[str] = []
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, ran), _runs(_report(1.7), []), other, prune
    )
    # pruned from the winner, with its speedup over IREE default in its own run
    assert asked == [(other, f"mm.{DTUK}.other-layout.yaml", 1.5, f"mm.{DTUK}.other-layout")]
    assert ran[-1] == pruned_recipe.name
    assert race.configuration == f"graph+{DTUK}" and race.line is not None
    assert "; im2col without a, b: 1.70x IREE default (without it 1.50x), kept" in race.line
    assert f"the steps so kept with the flags run 1.60x it ({pruned_recipe})" in race.line
    assert yaml.safe_load(outcome.recipe.read_text())["graph"] == pruned_graph
    record = json.loads((tmp_path / IREE_RACE_FILE).read_text())
    assert record["graph"] == pruned_graph and record["speedup"] == 1.6


def test_pruning_that_keeps_every_group_changes_nothing(tmp_path: Path) -> None:
    outcome = _tuned(tmp_path, KERNEL)
    runs = {
        "mm.tuned.yaml": _report(1.2, {"iree-data-tiling": 0.95, DTUK: 0.9}),
        f"mm.{DTUK}.yaml": _not_applied(),
        f"mm.{DTUK}.graph.yaml": _report(1.3, {DTUK: 1.2}),
    }
    graph = yaml.safe_load(outcome.recipe.read_text())["graph"]

    def prune(steps: Any, recipe: Path, speedup: float, stem: str) -> Pruned:
        return Pruned(list(steps), recipe, ("graph    im2col without a: 1.2x ..., not kept",))

    ran: list[str] = []
    race = race_iree_configurations(
        outcome, _report(1.2), _peers_runs(runs, ran), _runs(_report(1.3), []), None, prune
    )
    assert ran == ["mm.tuned.yaml", f"mm.{DTUK}.yaml", f"mm.{DTUK}.graph.yaml"]
    assert race.configuration == f"graph+{DTUK}" and race.line is not None
    assert "; im2col without a: 1.2x ..., not kept" in race.line
    assert yaml.safe_load(outcome.recipe.read_text())["graph"] == graph
