"""A baseline entry's expectation per CPU: gated against the one blessed on the machine's
CPU (``by_cpu``), else its own; ``--update`` on another CPU adds one and keeps the first."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.measure.status import Status
from tdsched.schedules.regress.baseline_file import Entry, Settings, dump, load_baseline
from tdsched.schedules.regress.baseline_schema import baseline_schema
from tdsched.schedules.regress.measure import Measurement
from tdsched.schedules.regress.output import table
from tdsched.schedules.regress.runner import EntryResult, blessed_file
from tdsched.schedules.regress.verdict import GateStatus, Verdict
from tdsched.targets.timing import Ratio

BASELINE = """\
entries:
  - recipe: softmax_x86
    params: {M: 512, N: 1024}
    expected_speedup: 2.0
    blessed: {rounds: 8, cpu: znver5}
    by_cpu:
      cascadelake:
        expected_speedup: 1.5
        blessed: {rounds: 9, cpu: cascadelake}
  - recipe: matmul_x86
    expected_speedup: 1.4
"""


@pytest.fixture
def baseline_path(tmp_path: Path) -> Path:
    path = tmp_path / "b.yaml"
    path.write_text(BASELINE)
    return path


def test_an_entry_gates_on_the_expectation_of_the_machines_cpu(baseline_path: Path) -> None:
    baseline = load_baseline(baseline_path)
    softmax, matmul = baseline.entries
    on_cascadelake = softmax.on_machine("cascadelake")
    assert on_cascadelake.expected_speedup == 1.5
    assert on_cascadelake.gated_on == "cascadelake"
    assert on_cascadelake.threshold(Settings(tolerance=0.4)) == pytest.approx(0.9)
    for machine in ("znver5", "znver4", None):  # blessed there, never blessed, unknown
        assert softmax.on_machine(machine).expected_speedup == 2.0
        assert softmax.on_machine(machine).gated_on is None
    assert matmul.on_machine("cascadelake") is matmul
    assert load_baseline(_written(baseline_path, dump(baseline))).entries == baseline.entries
    jsonschema.validate(yaml.safe_load(BASELINE), baseline_schema())


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_blessing_on_another_cpu_keeps_the_first_expectation() -> None:
    own = Entry("m", expected_speedup=2.0, blessed={"cpu": "znver5"})
    there = own.blessed_on("cascadelake", 1.5, {"cpu": "cascadelake"})
    assert there.expected_speedup == 2.0
    assert there.by_cpu["cascadelake"].expected_speedup == 1.5
    again = there.blessed_on("cascadelake", 1.6, {"cpu": "cascadelake"})
    assert again.by_cpu["cascadelake"].expected_speedup == 1.6
    assert own.blessed_on("znver5", 2.1, {"cpu": "znver5"}).expected_speedup == 2.1
    assert not own.blessed_on("znver5", 2.1, {}).by_cpu
    # an expectation blessed before CPUs were recorded counts as another CPU's
    legacy = Entry("m", expected_speedup=2.0, blessed={"rounds": 8})
    assert legacy.blessed_on("znver4", 1.2, {}).by_cpu["znver4"].expected_speedup == 1.2
    # no expectation yet, or a CPU tdsched cannot name: the entry's own
    assert Entry("m").blessed_on("znver4", 1.2, {}).expected_speedup == 1.2
    assert own.blessed_on(None, 1.9, {}).expected_speedup == 1.9


def _result(entry: Entry, median: float, status: GateStatus) -> EntryResult:
    speedup = Ratio(median, median * 0.98, median * 1.02, 9, 1.0, "precise", {})
    measurement = Measurement(
        Status.OK, speedup=speedup, numerics={"atol": 1e-6, "rtol": 1e-4}, iree_version="3.13"
    )
    return EntryResult(entry, Settings(tolerance=0.4), measurement, Verdict(status, "measured"))


def test_update_writes_this_cpus_expectation_and_the_table_names_it(
    baseline_path: Path,
) -> None:
    baseline = load_baseline(baseline_path)
    softmax, matmul = (e.on_machine("cascadelake") for e in baseline.entries)
    results = [
        _result(softmax, 1.7, GateStatus.BLESSED),
        _result(matmul, 1.3, GateStatus.BLESSED),
    ]
    written = blessed_file(baseline, results, "cascadelake")
    new_softmax, new_matmul = written.entries
    assert new_softmax.expected_speedup == 2.0  # the Zen 5 expectation is kept
    assert new_softmax.by_cpu["cascadelake"].expected_speedup == 1.7
    assert new_softmax.by_cpu["cascadelake"].blessed["cpu"] == "cascadelake"  # type: ignore[index]
    assert new_matmul.by_cpu["cascadelake"].expected_speedup == 1.3  # legacy: kept at 1.4
    assert new_matmul.expected_speedup == 1.4
    gated = table([_result(softmax, 1.2, GateStatus.PASS)])
    assert ">= 0.900x (1.500x - 40%) on cascadelake" in gated


@pytest.mark.parametrize(
    ("by_cpu", "message"),
    [
        ("by_cpu: {znver4: {blessed: {}}}", "entries[0].by_cpu.znver4: missing required field"),
        ("by_cpu: {znver4: {expected_speedup: 0}}", "expected a positive speedup, got 0"),
        ("by_cpu: {znver4: {speedup: 1.2}}", "by_cpu.znver4.speedup: unknown field"),
        ("by_cpu: [znver4]", "entries[0].by_cpu: expected a mapping CPU:"),
    ],
)
def test_a_bad_per_cpu_expectation_names_its_line_and_field(
    tmp_path: Path, by_cpu: str, message: str
) -> None:
    path = _written(tmp_path / "b.yaml", f"entries:\n  - recipe: m\n    {by_cpu}\n")
    with pytest.raises(RecipeError) as caught:
        load_baseline(path)
    assert message in str(caught.value)
    assert "b.yaml:3" in str(caught.value)
