"""The ``tdsched`` pytest plugin: perf regression tests as ordinary pytest tests.

Registered through the ``pytest11`` entry point, so installing tdsched enables it::

    @pytest.mark.tdsched_perf(recipe="matmul_x86", params={"M": 256}, min_speedup=1.1)
    def test_matmul_stays_fast(tdsched_perf):
        assert tdsched_perf.measurement.max_abs_error < 1e-4   # optional extra checks

Before the test body runs, the marked recipe is built (every schedule step must apply),
checked against its reference and timed against IREE default exactly as ``tdsched
regress`` does, in a process of its own. The test fails when the speedup is below the
gate, the results are wrong or the schedule did not apply; an inconclusive measurement
(a noisy machine) is skipped, or per ``--tdsched-inconclusive``. The ``tdsched_perf``
fixture is the :class:`EntryResult` (``None`` in unmarked tests), and every result is
listed in the terminal summary. Disable the plugin with ``-p no:tdsched``.
"""

from __future__ import annotations

import dataclasses
import shlex
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tdsched.targets.target import DEFAULT_THREADS

from ..base.errors import RecipeError
from .baseline_file import Entry, Settings, load_baseline, recipe_beside, setting_problem
from .output import table
from .runner import EntryResult, measure_entry
from .verdict import GateStatus

MARKER_HELP = (
    "tdsched_perf(recipe, target=None, params=None, cpu=None, gpu=None, min_speedup=None, "
    "expected_speedup=None, tolerance=0.25, atol=None, rtol=None, time_cap_s=30, "
    "precision=0.05, calibration_tolerance=0.25, "
    f"threads={DEFAULT_THREADS}, seed=0): fail the test when "
    "the recipe's speedup over IREE default falls below min_speedup (or "
    "expected_speedup x (1 - tolerance)), when its results are wrong, or when its "
    "schedule does not apply; or tdsched_perf(baseline=FILE, entry=TEXT): the entry of "
    "the baseline file FILE (relative to the test file) whose label contains TEXT, gated "
    "as tdsched regress gates it"
)
_SETTINGS = ("precision", "time_cap_s", "calibration_tolerance", "threads", "seed")
_RESULT = pytest.StashKey[EntryResult]()
_RESULTS = pytest.StashKey[list[EntryResult]]()
_CACHE = pytest.StashKey[tempfile.TemporaryDirectory[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tdsched", "tdsched perf regression tests")
    group.addoption(
        "--tdsched-inconclusive",
        choices=("skip", "fail", "pass"),
        default="skip",
        help="what an inconclusive (noisy) measurement makes of a tdsched_perf test "
        "(default: skip)",
    )
    group.addoption(
        "--tdsched-time-cap",
        type=float,
        metavar="S",
        help="seconds of timing per tdsched_perf test (overrides the markers)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    config.stash[_RESULTS] = []


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = config.stash.get(_CACHE, None)
    if cache is not None:
        cache.cleanup()


def entry_from_marker(marker: pytest.Mark) -> Entry:
    """The baseline entry a ``tdsched_perf`` marker describes; a usage error says what
    is wrong with it."""
    args: dict[str, Any] = dict(marker.kwargs)
    if marker.args:
        if len(marker.args) > 1 or "recipe" in args:
            raise pytest.UsageError("tdsched_perf: pass the recipe once, e.g. recipe='matmul_x86'")
        args["recipe"] = marker.args[0]
    allowed = {
        "recipe", "target", "params", "cpu", "gpu", "min_speedup", "expected_speedup",
        "tolerance", "atol", "rtol", *_SETTINGS,
    }  # fmt: skip
    unknown = sorted(set(args) - allowed)
    if unknown or "recipe" not in args:
        problem = f"unknown {', '.join(unknown)}" if unknown else "missing recipe"
        raise pytest.UsageError(f"tdsched_perf: {problem}; usage: {MARKER_HELP}")
    if ("min_speedup" in args) == ("expected_speedup" in args):
        raise pytest.UsageError("tdsched_perf: give exactly one of min_speedup, expected_speedup")
    if "min_speedup" in args and "tolerance" in args:
        raise pytest.UsageError(
            "tdsched_perf: min_speedup is the gate itself; tolerance goes with expected_speedup"
        )
    speedup = args.get("min_speedup", args.get("expected_speedup"))
    if isinstance(speedup, bool) or not isinstance(speedup, int | float) or speedup <= 0:
        raise pytest.UsageError(
            f"tdsched_perf: the speedup must be a positive number, not {speedup!r}"
        )
    overrides = {k: args[k] for k in _SETTINGS if k in args}
    overrides["tolerance"] = args.get("tolerance", 0.25 if "expected_speedup" in args else 0)
    for name, value in overrides.items():
        issue = setting_problem(name, value)
        if issue is not None:
            raise pytest.UsageError(f"tdsched_perf: {name}: {issue}")
    numerics: dict[str, float] = {k: float(args[k]) for k in ("atol", "rtol") if k in args}
    return Entry(
        recipe=str(args["recipe"]),
        target=args.get("target"),
        params=dict(args.get("params") or {}),
        cpu=args.get("cpu"),
        gpu=args.get("gpu"),
        expected_speedup=float(speedup),
        numerics=numerics or None,
        overrides=overrides,
    )


def entry_from_baseline(marker: pytest.Mark, folder: Path) -> tuple[str, Entry, Settings]:
    """The recipe, entry and settings that ``tdsched_perf(baseline=FILE, entry=TEXT)``
    names: so the expected speedups live in the baseline file that ``tdsched regress``
    gates and ``--update`` blesses, not in the test."""
    unknown = sorted(set(marker.kwargs) - {"baseline", "entry"})
    if marker.args or unknown or "entry" not in marker.kwargs:
        raise pytest.UsageError(
            "tdsched_perf: with baseline=FILE give only entry=TEXT (part of the entry's "
            "label, e.g. 'matmul_x86@x86')"
        )
    try:
        baseline = load_baseline(folder / str(marker.kwargs["baseline"]))
    except RecipeError as exc:
        raise pytest.UsageError(f"tdsched_perf: {exc}") from exc
    text = str(marker.kwargs["entry"])
    found = [e for e in baseline.entries if text in e.label]
    labels = ", ".join(e.label for e in baseline.entries) or "none"
    if len(found) != 1:
        how = "no entry" if not found else f"{len(found)} entries"
        raise pytest.UsageError(
            f"tdsched_perf: {how} of {baseline.path} match {text!r}; entries: {labels}"
        )
    (entry,) = found
    if entry.expected_speedup is None:
        raise pytest.UsageError(
            f"tdsched_perf: {baseline.path}: {entry.label} is not blessed yet; bless it with "
            f"{shlex.join(['tdsched', 'regress', str(baseline.path), '--update'])}"
        )
    return baseline.resolve_recipe(entry), entry, entry.settings(baseline.defaults)


def _cache_dir(config: pytest.Config) -> Path:
    if _CACHE not in config.stash:
        config.stash[_CACHE] = tempfile.TemporaryDirectory(prefix="tdsched-perf-")
    return Path(config.stash[_CACHE].name)


@pytest.fixture(autouse=True)
def tdsched_perf(request: pytest.FixtureRequest) -> EntryResult | None:
    """The measurement of the test's ``tdsched_perf`` marker (``None`` without one)."""
    marker = request.node.get_closest_marker("tdsched_perf")
    if marker is None:
        return None
    here = Path(request.node.path).parent
    if "baseline" in marker.kwargs:
        recipe, entry, settings = entry_from_baseline(marker, here)
    else:
        entry = entry_from_marker(marker)
        settings = entry.settings(Settings())
        recipe = recipe_beside(here, entry.recipe)
    time_cap = request.config.getoption("--tdsched-time-cap")
    if time_cap is not None:
        settings = dataclasses.replace(settings, time_cap_s=time_cap)
    result = measure_entry(recipe, entry, settings, _cache_dir(request.config))
    request.node.stash[_RESULT] = result
    request.config.stash[_RESULTS].append(result)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Apply the gate before the test body runs."""
    result = item.stash.get(_RESULT, None)
    if result is None:
        return
    status, reason = result.verdict.status, result.verdict.reason
    if status is GateStatus.INCONCLUSIVE:
        policy = item.config.getoption("--tdsched-inconclusive")
        if policy == "skip":
            pytest.skip(f"tdsched_perf inconclusive: {reason}")
        if policy == "fail":
            pytest.fail(f"tdsched_perf inconclusive: {reason}", pytrace=False)
    elif status is not GateStatus.PASS:
        pytest.fail(f"tdsched_perf {status}: {result.entry.label}: {reason}", pytrace=False)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    results = config.stash.get(_RESULTS, [])
    if results:
        terminalreporter.write_sep("=", "tdsched perf")
        terminalreporter.write_line(table(results))
