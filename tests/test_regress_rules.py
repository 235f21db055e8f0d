"""``tdsched regress`` without timing anything: baseline files and verdict rules.

The rules are pure functions of the numbers, so each is pinned here with made-up
measurements; the end-to-end behaviour with the real compiler and runtime is in
test_regress.py.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.cli.main import main
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.measure.request import Request
from tdsched.schedules.measure.status import Status
from tdsched.schedules.regress.baseline_file import Settings, dump, load_baseline
from tdsched.schedules.regress.calibration import CalibrationDrift, settled, warm_up
from tdsched.schedules.regress.isolation import measure_isolated
from tdsched.schedules.regress.measure import (
    Attempt,
    Measurement,
    MeasureRequest,
    second_attempt_cap,
)
from tdsched.schedules.regress.pytest_plugin import entry_from_marker
from tdsched.schedules.regress.runner import entry_target, request_for
from tdsched.schedules.regress.verdict import judge
from tdsched.targets.timing import Ratio, Timing, median_interval

SETTINGS = Settings(tolerance=0.25, precision=0.05, calibration_tolerance=0.25)


def measured(median: float, low: float, high: float, drift: float = 0.0) -> Measurement:
    calibration = CalibrationDrift(Timing(1.0, 1.0, 1.0, 5), Timing(1.0 + drift, 1.0, 1.0, 5))
    speedup = Ratio(median, low, high, rounds=40, seconds=30.0, stopped="decided", times={})
    return Measurement(Status.OK, speedup=speedup, calibration=calibration)


@pytest.mark.parametrize(
    ("median", "low", "high", "status"),
    [
        (1.00, 0.80, 1.30, "pass"),  # interval wholly above the gate 0.75
        (0.60, 0.50, 0.70, "regressed"),  # wholly below
        (0.74, 0.72, 0.76, "regressed"),  # straddles, precise: the median decides
        (0.76, 0.74, 0.78, "pass"),
        (0.76, 0.50, 1.10, "inconclusive"),  # straddles, too wide: noise, not a verdict
    ],
)
def test_the_gate_is_expected_times_one_minus_tolerance(
    median: float, low: float, high: float, status: str
) -> None:
    assert judge(measured(median, low, high), 1.0, SETTINGS).status == status


@pytest.mark.parametrize(
    ("median", "low", "high", "status"),
    [
        (0.50, 0.49, 0.51, "inconclusive"),  # widened to [0.294, 0.850]: may reach 0.75
        (0.20, 0.19, 0.21, "regressed"),  # widened high 0.35 is still below the gate
        (2.00, 1.90, 2.10, "pass"),  # widened low 1.14 still clears it
        (0.80, 0.78, 0.82, "inconclusive"),  # precise, but the load change could flip it
    ],
)
def test_a_moving_calibration_kernel_widens_the_interval_by_its_change(
    median: float, low: float, high: float, status: str
) -> None:
    verdict = judge(measured(median, low, high, drift=-0.4), 1.0, SETTINGS)
    assert verdict.status == status, verdict.reason
    assert "calibration kernel took 1.000 ms before and 0.600 ms after (-40%" in verdict.reason
    if status == "regressed":
        assert "widened to [0.114, 0.350]" in verdict.reason


def test_any_load_change_blocks_blessing() -> None:
    verdict = judge(measured(5.0, 4.99, 5.01, drift=0.3), None, SETTINGS, bless=True)
    assert verdict.status == "inconclusive" and "(+30%, allowed ±25%)" in verdict.reason


def test_failures_of_the_build_come_before_timing() -> None:
    not_applied = Measurement(Status.NOT_APPLIED, "r.yaml:27: kernels[0].schedule[0].match: ...")
    assert judge(not_applied, 1.0, SETTINGS).status == "not_applied"
    assert judge(Measurement(Status.WRONG, "results differ"), 1.0, SETTINGS).status == "wrong"
    crashed = judge(Measurement(Status.CRASHED, "killed by SIGSEGV"), 1.0, SETTINGS)
    assert crashed.status == "error" and "crashed" in crashed.reason


def test_blessing_needs_a_precise_measurement_and_a_missing_expectation_fails() -> None:
    assert judge(measured(1.2, 1.18, 1.22), None, SETTINGS, bless=True).status == "blessed"
    assert judge(measured(1.2, 0.9, 1.5), None, SETTINGS, bless=True).status == "inconclusive"
    unblessed = judge(measured(1.2, 1.18, 1.22), None, SETTINGS)
    assert unblessed.status == "unblessed" and "--update" in unblessed.reason


def test_much_faster_than_expected_passes_and_suggests_reblessing() -> None:
    verdict = judge(measured(2.0, 1.9, 2.1), 1.0, SETTINGS)
    assert verdict.status == "pass" and "re-bless" in verdict.reason


def test_median_interval_uses_binomial_order_statistics() -> None:
    values = [float(v) for v in range(1, 11)]
    assert median_interval(values) == (2.0, 9.0)  # P(B(10,1/2) <= 1) = 1.1% <= 2.5%
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few: the whole range


BASELINE = """\
# header comment, kept
defaults: {tolerance: 0.3, time_cap_s: 20}
entries:
  - recipe: matmul_x86
    target: x86
    params: {M: 256, N: 256, K: 256}
    expected_speedup: 1.2
    numerics: {atol: 0.001, rtol: 0.0001}
  - recipe: matmul_vulkan
    target: vulkan
    precision: 0.1
"""


def test_a_baseline_file_round_trips_with_its_header(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(BASELINE)
    baseline = load_baseline(path)
    first, second = baseline.entries
    assert first.threshold(baseline.defaults) == pytest.approx(1.2 * 0.7)
    assert second.settings(baseline.defaults).precision == 0.1
    assert second.expected_speedup is None
    text = dump(baseline)
    assert text.startswith("# header comment, kept\n")
    path.write_text(text)
    assert load_baseline(path).entries == baseline.entries
    as_json = tmp_path / "b.json"
    as_json.write_text(json.dumps({"entries": [{"recipe": "matmul_x86"}]}))
    assert json.loads(dump(load_baseline(as_json))) == {"entries": [{"recipe": "matmul_x86"}]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "entries:\n  - recipe: m\n    speedup: 1\n",
            "b.yaml:3: entries[0].speedup: unknown field",
        ),
        ("entries:\n  - target: x86\n", "b.yaml:2: entries[0]: missing required field 'recipe'"),
        (
            "entries:\n  - {recipe: m, tolerance: 1.5}\n",
            "entries[0].tolerance: expected a fraction in [0, 1)",
        ),
        ("entries:\n  - {recipe: m, target: arm}\n", "entries[0].target: got 'arm'; allowed"),
        (
            "entries:\n  - {recipe: m}\n  - {recipe: m}\n",
            "b.yaml:3: entries[1]: duplicate of the entry at line 2",
        ),
        ("", "the baseline file is empty"),
        ("entries: [\n", "b.yaml:2: not valid YAML/JSON"),
    ],
)
def test_baseline_errors_name_the_line_and_the_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as caught:
        load_baseline(path)
    assert message in str(caught.value)


@pytest.mark.process
def test_bad_input_exits_2_with_the_file_line_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("entries:\n  - recipe: matmul_x68\n")
    error = main_error(path)
    assert "Traceback" not in error
    assert (
        f"tdsched: error: {path}:2: entries[0].recipe: 'matmul_x68' is neither a file "
        "beside the baseline nor a shipped recipe (shipped recipes: attention_x86"
    ) in error
    missing = main_error(tmp_path / "none.yaml")
    assert "cannot read the baseline file" in missing and "--update" in missing


def main_error(path: Path) -> str:
    """``tdsched regress PATH``'s stderr; it must exit 2 (bad input)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tdsched.schedules.cli.main", "regress", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    return proc.stderr


@pytest.mark.parametrize(
    ("field", "value", "recipe", "default", "elsewhere", "refusal"),
    [
        (
            "cpu", "haswell", "matmul_x86", "host", "matmul_vulkan",
            "--cpu / --cpu-features (haswell) choose the x86 CPU to build for, but this "
            "build targets vulkan",
        ),
        (
            "gpu", "ampere", "matmul_vulkan", None, "matmul_x86",
            "--gpu ampere names the Vulkan GPU to build for, but this build targets x86",
        ),
    ],
)  # fmt: skip
def test_an_entry_can_build_for_another_machine_and_says_so(
    tmp_path: Path,
    field: str,
    value: str,
    recipe: str,
    default: str | None,
    elsewhere: str,
    refusal: str,
) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(
        f"entries:\n  - {{recipe: {recipe}, params: {{M: 512}}}}\n"
        f"  - {{recipe: {recipe}, params: {{M: 512}}, {field}: {value}}}\n"
    )
    baseline = load_baseline(path)  # not duplicates: they build for different machines
    here, there = baseline.entries
    assert (getattr(here, field), getattr(there, field)) == (None, value)
    assert there.label == f"{recipe} M=512 {field}={value}"
    assert f"{field}: {value}" in dump(baseline) and load_baseline(path).entries == baseline.entries
    settings = there.settings(baseline.defaults)
    assert (
        getattr(request_for(recipe, there, settings, tmp_path, bless=False).request.build, field)
        == value
    )
    assert (
        getattr(request_for(recipe, here, settings, tmp_path, bless=False).request.build, field)
        == default
    )
    marker = pytest.mark.tdsched_perf(recipe, **{field: value}, min_speedup=1.1).mark
    assert getattr(entry_from_marker(marker), field) == value
    # the option on an entry that builds for the other target (its recipe's first) is
    # refused, naming the entry
    path.write_text(f"entries:\n  - {{recipe: {elsewhere}, {field}: {value}}}\n")
    other = load_baseline(path)
    with pytest.raises(RecipeError) as caught:
        entry_target(other, other.entries[0])
    assert f"{path}:2: entries[0]: this entry's recipe does not plan: {refusal}" in str(
        caught.value
    )


def test_entries_select_by_the_target_they_build_for(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(
        "entries:\n  - recipe: matmul_vulkan\n  - {recipe: matmul_x86, params: {Q: 1}}\n"
    )
    baseline = load_baseline(path)
    assert entry_target(baseline, baseline.entries[0]) == "vulkan"  # the recipe's first
    with pytest.raises(RecipeError) as caught:
        entry_target(baseline, baseline.entries[1])
    assert f"{path}:3: entries[1]: this entry's recipe does not plan:" in str(caught.value)
    assert "'Q'" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "crashed", "SIGSEGV"),
        ("import time\ntime.sleep(600)\n", "timeout", "no result within 15 s"),
    ],
)
@pytest.mark.process
def test_a_crashing_or_hanging_measurement_fails_only_its_entry(
    tmp_path: Path, body: str, status: str, message: str
) -> None:
    # A Python recipe runs when the measuring process loads it: here it kills that
    # process, or never returns.
    recipe = tmp_path / "bad.py"
    recipe.write_text(body)
    request = MeasureRequest(
        Request(recipe=str(recipe), build=BuildTarget(None, threads=1)),
        precision=0.05,
        threshold=None,
        time_cap_s=1.0,
        cache_dir=str(tmp_path / "cache"),
    )
    # 15 s: a loaded 2-core machine took over 3 s to start the child and import tdsched,
    # so the crash came out as a timeout.
    measurement = measure_isolated(request, timeout_s=15.0)
    assert measurement.status == status
    assert message in (measurement.error or "")


def timings(*medians: float) -> Callable[[], Timing]:
    """A calibration timer whose successive medians are ``medians``."""
    queue = iter(medians)
    return lambda: Timing(next(queue), 0.0, 0.0, 5)


@pytest.mark.parametrize(
    ("medians", "taken"),
    [
        ((1.0, 1.05), 2),  # the first two agree within 10%: done
        ((20.3, 4.9, 1.9, 1.6, 1.62), 5),  # a loaded machine warming up: until it settles
        ((1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2), 10),  # never: capped
    ],
)
def test_the_calibration_warm_up_goes_on_until_two_medians_agree(
    medians: tuple[float, ...], taken: int
) -> None:
    warm = warm_up(timings(*medians), clock=lambda: 0.0)
    assert [t.median for t in warm] == list(medians[:taken])


def test_the_calibration_warm_up_stops_at_its_time_budget() -> None:
    clock = iter([0.0, 0.9, 1.9, 2.1, 99.0])  # at the start, then after each timing
    warm = warm_up(timings(10.0, 5.0, 2.5, 1.2, 0.6), budget_s=2.0, clock=lambda: next(clock))
    assert [t.median for t in warm] == [10.0, 5.0, 2.5]  # 2.1 s had passed: stop
    assert settled(1.0, 1.09) and settled(1.09, 1.0) and not settled(1.0, 1.11)


def attempt(drift: float, seconds: float, rounds: int = 10) -> Attempt:
    ratio = Ratio(1.0, 0.9, 1.1, rounds=rounds, seconds=seconds, stopped="precise", times={})
    return Attempt(ratio, CalibrationDrift(Timing(1.0, 1.0, 1.0, 5), Timing(1.0 + drift, 1, 1, 5)))


def test_a_drifting_calibration_gets_a_second_attempt_within_the_time_cap() -> None:
    assert second_attempt_cap([attempt(0.1, 2.0)], 0.25, 10.0) is None  # calm: no need
    assert second_attempt_cap([attempt(0.4, 2.0)], 0.25, 10.0) == 8.0  # the cap's rest
    assert second_attempt_cap([attempt(-0.4, 9.0)], 0.25, 10.0) is None  # 8 rounds: 7.2 s
    assert second_attempt_cap([attempt(0.4, 10.5)], 0.25, 10.0) is None  # cap spent
    both = [attempt(0.4, 2.0), attempt(0.5, 2.0)]
    assert second_attempt_cap(both, 0.25, 10.0) == 6.0  # both count against the cap


def test_a_measurement_timed_twice_round_trips_and_says_so() -> None:
    twice = dataclasses.replace(measured(1.2, 1.18, 1.22, drift=0.1), attempts=2)
    back = Measurement.from_json(json.loads(json.dumps(twice.to_json())))
    assert back == twice and back.attempts == 2
    assert Measurement.from_json({**twice.to_json(), "attempts": 1}).attempts == 1
    old = {k: v for k, v in twice.to_json().items() if k != "attempts"}
    assert Measurement.from_json(old).attempts == 1  # JSON written before attempts
    verdict = judge(twice, 1.0, SETTINGS)
    assert verdict.status == "pass"
    assert verdict.reason.endswith(
        "(timed twice: the calibration kernel drifted more than ±25% in the first attempt; "
        "this is the attempt in which it drifted least)"
    )
    assert "timed" not in judge(measured(1.2, 1.18, 1.22), 1.0, SETTINGS).reason


def test_a_measure_request_carries_the_calibration_tolerance(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("defaults: {calibration_tolerance: 0.4}\nentries:\n  - recipe: matmul_x86\n")
    baseline = load_baseline(path)
    (entry,) = baseline.entries
    request = request_for("matmul_x86", entry, entry.settings(baseline.defaults), tmp_path, False)
    assert request.calibration_tolerance == 0.4
    back = MeasureRequest.from_json(json.loads(json.dumps(request.to_json())))
    assert back == request


def test_blessing_below_iree_default_needs_allow_slower() -> None:
    slow = measured(0.568, 0.56, 0.575)
    refused = judge(slow, None, SETTINGS, bless=True)
    assert refused.status == "slower"
    assert refused.reason == (
        "0.568x, 95% interval [0.560, 0.575]: the schedule is slower than IREE's own "
        "pipeline, so it is not blessed; bless it anyway with --update --allow-slower"
    )
    allowed = judge(slow, 1.2, SETTINGS, bless=True, allow_slower=True)
    assert allowed.status == "blessed"
    assert allowed.reason.endswith(
        "expected_speedup set to 0.568, slower than IREE's own pipeline (--allow-slower)"
    )
    # noise still comes first: an imprecise or drifting measurement is inconclusive
    assert judge(measured(0.5, 0.2, 0.9), None, SETTINGS, bless=True).status == "inconclusive"
    drifting = measured(0.5, 0.49, 0.51, drift=0.5)
    assert judge(drifting, None, SETTINGS, bless=True).status == "inconclusive"
    # not blessing: the rule does not apply; at 1.0x and above there is nothing to allow
    assert judge(slow, 0.6, SETTINGS).status == "pass"
    assert judge(measured(1.0, 0.99, 1.01), None, SETTINGS, bless=True).status == "blessed"
    # as blessing writes it: 0.9996 is 1.000x, blessed; 0.9994 is 0.999x, slower
    assert judge(measured(0.9996, 0.99, 1.01), None, SETTINGS, bless=True).status == "blessed"
    assert judge(measured(0.9994, 0.99, 1.01), None, SETTINGS, bless=True).status == "slower"


def test_allow_slower_without_update_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("entries:\n  - recipe: matmul_x86\n")
    assert main(["regress", str(path), "--allow-slower"]) == 2
    assert capsys.readouterr().err == (
        "tdsched: error: --allow-slower only changes what --update blesses; give --update too\n"
    )
