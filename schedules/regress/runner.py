"""Running a baseline file: measure each entry, judge it, and re-bless on ``--update``.

Exit statuses (:func:`exit_status`): 0 every entry passed (or was blessed); 1 an entry
regressed, computed wrong results, did not apply, failed to build or run, is not
blessed yet, or (``--update``) measured slower than IREE default without
``--allow-slower``; 3 no failure but some entry was inconclusive (a noisy machine).
"""

from __future__ import annotations

import dataclasses
import datetime
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import RecipeError
from ..base.files import write_atomically
from ..compile.pipeline import plan
from ..frontends.loading import load
from ..frontends.recipe_trust import UNTRUSTED, Trust
from ..frontends.shipped import find_recipe
from ..measure.request import Request
from .baseline_file import BaselineFile, Entry, Settings, dump
from .isolation import measure_isolated
from .measure import Measurement, MeasureRequest
from .verdict import FAILING, GateStatus, Verdict, judge

EXIT_OK, EXIT_FAILED, EXIT_INCONCLUSIVE = 0, 1, 3
COMPILE_ALLOWANCE_S = 900.0
"""Time an entry may spend building (both builds and the calibration kernel) and
checking, on top of its timing cap, before its process is killed."""


@dataclass(frozen=True)
class EntryResult:
    entry: Entry
    settings: Settings
    measurement: Measurement
    verdict: Verdict

    @property
    def gate(self) -> float | None:
        return self.entry.threshold(self.settings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry.label,
            "recipe": self.entry.recipe,
            "target": self.measurement.target or self.entry.target,
            "params": self.entry.params,
            "status": str(self.verdict.status),
            "reason": self.verdict.reason,
            "expected_speedup": self.entry.expected_speedup,
            "expected_on": self.entry.gated_on,
            "gate": self.gate,
            "tolerance": self.settings.tolerance,
            "measurement": self.measurement.to_json(),
        }


def request_for(
    recipe: str,
    entry: Entry,
    settings: Settings,
    cache_dir: Path,
    bless: bool,
    trust: Trust = UNTRUSTED,
) -> MeasureRequest:
    """What to measure for ``entry``, whose recipe is found at ``recipe`` (``bless``: no
    early stop against the gate, as for blessing; ``trust``: what the command line granted
    recipe files)."""
    return MeasureRequest(
        Request(
            recipe=recipe,
            build=entry.build(settings.threads),
            params=dict(entry.params),
            seed=settings.seed,
            tolerance=dict(entry.numerics) if entry.numerics is not None else None,
            trust=trust,
        ),
        precision=settings.precision,
        threshold=None if bless else entry.threshold(settings),
        time_cap_s=settings.time_cap_s,
        cache_dir=str(cache_dir),
        calibration_tolerance=settings.calibration_tolerance,
    )


def run_baseline(
    baseline: BaselineFile,
    *,
    update: bool = False,
    precise: bool = False,
    allow_slower: bool = False,
    labels: Sequence[str] = (),
    target: str | None = None,
    overrides: Mapping[str, float] | None = None,
    on_result: Callable[[EntryResult], None] = lambda result: None,
    trust: Trust = UNTRUSTED,
    machine: str | None = None,
) -> list[EntryResult]:
    """Measure and judge entries, one at a time, each in its own process.

    ``update`` blesses; ``update`` or ``precise`` (a run recorded into a history) times
    every entry until its ``precision`` or cap, never stopping once its gate is decided.
    Only entries whose label contains one of ``labels`` (all when empty) and that build
    for ``target`` (all when ``None``) are run. Every one is validated first (see
    :func:`entry_target`), so bad input stops the run before anything is measured.
    ``overrides`` replace those settings of every entry (``time_cap_s``, ``precision``:
    the command line's); ``on_result`` sees each result as soon
    as it is known (progress output); ``trust``: what the command line granted the
    entries' recipe files (:mod:`..recipe_trust`); ``allow_slower``: with ``update``,
    bless entries measured slower than IREE default too (:func:`~.verdict.judge`);
    ``machine``: the LLVM name of this machine's CPU, whose ``by_cpu`` expectations gate
    (:meth:`~.baseline_file.Entry.on_machine`).
    """
    chosen = [e for e in baseline.entries if not labels or any(t in e.label for t in labels)]
    selected = [e for e in chosen if target in (None, entry_target(baseline, e, trust))]
    results = []
    with tempfile.TemporaryDirectory(prefix="tdsched-regress-cache-") as cache:
        for entry in selected:
            settings = entry.settings(baseline.defaults, overrides or {})
            recipe = baseline.resolve_recipe(entry)
            result = measure_entry(
                recipe,
                entry.on_machine(machine),
                settings,
                Path(cache),
                bless=update,
                precise=precise,
                allow_slower=allow_slower,
                trust=trust,
            )
            on_result(result)
            results.append(result)
    return results


def entry_target(baseline: BaselineFile, entry: Entry, trust: Trust = UNTRUSTED) -> str:
    """The target ``entry`` builds for, after checking that its recipe loads and plans
    with its parameters (no compile); a :class:`RecipeError` names the entry."""
    try:
        recipe = find_recipe(baseline.resolve_recipe(entry))
    except RecipeError as exc:
        raise RecipeError(
            entry.where.child("recipe"),
            f"{entry.recipe!r} is neither a file beside the baseline nor a shipped "
            f"recipe ({exc.message.removeprefix('no such recipe file; ')})",
        ) from exc
    try:
        return plan(load(str(recipe), trust), entry.build(), entry.params).target.name
    except ValueError as exc:
        raise RecipeError(entry.where, f"this entry's recipe does not plan: {exc}") from exc


def measure_entry(
    recipe: str,
    entry: Entry,
    settings: Settings,
    cache_dir: Path,
    *,
    bless: bool = False,
    precise: bool = False,
    allow_slower: bool = False,
    trust: Trust = UNTRUSTED,
) -> EntryResult:
    """Measure ``entry`` in a process of its own and judge it (``precise``: timed to the
    entry's precision even once its gate is decided)."""
    request = request_for(recipe, entry, settings, cache_dir, bless or precise, trust)
    measurement = measure_isolated(request, settings.time_cap_s + COMPILE_ALLOWANCE_S)
    verdict = judge(
        measurement, entry.expected_speedup, settings, bless=bless, allow_slower=allow_slower
    )
    return EntryResult(entry, settings, measurement, verdict)


def blessed_file(
    baseline: BaselineFile, results: Sequence[EntryResult], machine: str | None
) -> BaselineFile:
    """``baseline`` with every blessed entry's expectation on CPU ``machine`` (the one
    measured on) replaced by its measurement, as :meth:`~.baseline_file.Entry.blessed_on`
    places it, and its numerics tolerance written out; other entries unchanged."""
    today = datetime.date.today().isoformat()
    replaced: dict[tuple[str, str | None, str | None, str | None, str], Entry] = {}
    blessed = [r for r in results if r.verdict.status is GateStatus.BLESSED]
    for entry in baseline.entries:
        result = next((r for r in blessed if r.entry.identity == entry.identity), None)
        if result is None:
            continue
        m = result.measurement
        assert m.speedup is not None and m.numerics is not None
        description: dict[str, Any] = {
            "interval": [round(m.speedup.low, 3), round(m.speedup.high, 3)],
            "rounds": m.speedup.rounds,
            "iree": m.iree_version,
            "date": today,
        } | ({"cpu": machine} if machine is not None else {})
        on_cpu = entry.blessed_on(machine, round(m.speedup.median, 3), description)
        replaced[entry.identity] = dataclasses.replace(on_cpu, numerics=m.numerics)
    entries = tuple(replaced.get(e.identity, e) for e in baseline.entries)
    return dataclasses.replace(baseline, entries=entries)


def write_baseline(baseline: BaselineFile) -> None:
    write_atomically(baseline.path, dump(baseline).encode())


def exit_status(results: Sequence[EntryResult]) -> int:
    statuses = {r.verdict.status for r in results}
    if statuses & FAILING:
        return EXIT_FAILED
    if GateStatus.INCONCLUSIVE in statuses:
        return EXIT_INCONCLUSIVE
    return EXIT_OK
