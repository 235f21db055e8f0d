"""The last whole-model race of ``tdsched tune`` on a CPU target: the model recipe
against IREE's best one-flag builds of the model.

A user who does not tune still has IREE's own configurations: its default, data tiling
(``--iree-opt-data-tiling``), and data tiling with microkernels
(:data:`~..measure.peers.IREE_PEERS`). A tuned recipe that loses to one of them has no
reason to exist, so once the model recipe has run correct, it runs again as
``tdsched run --peers`` does: the recipe and those IREE builds of the model, checked and
timed interleaved in one run. When an IREE configuration is faster than the recipe, the
recipe becomes that configuration: the model recipe (``OUT/<model>.tuned.yaml``) then
holds IREE's own pipeline with the configuration's flags and no schedules, and says so;
the schedules tune found stay in ``OUT/<model>.schedules.yaml``. The recipe that is kept
is then run as the final check. On GPU targets IREE has no such configurations to race.

The decision is recorded in ``OUT/``:data:`IREE_RACE_FILE` under the digest of the
schedules raced: a later run that writes the same schedules takes it up without racing
again (with ``--no-check`` too), as the layout race does (:mod:`.races`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..base.files import write_atomically
from ..frontends.yaml_writer import recipe_yaml
from ..measure.peers import IREE_PEERS
from ..measure.run_report import PeerResult, RunReport
from ..measure.status import Status
from .outcome import TuneOutcome
from .races import earlier_race, schedules_digest

Check = Callable[[Path], RunReport]
"""Runs a model recipe as ``tdsched run`` does (with ``--peers`` for the race)."""

LABELS = {
    "iree-data-tiling": "IREE data tiling",
    "iree-data-tiling-ukernels": "IREE data tiling + microkernels",
}
"""How the summary names each configuration of :data:`~..measure.peers.IREE_PEERS`."""
IREE_RACE_FILE = "iree-race.json"
"""Where the race's decision is kept, beside the model recipe."""
SCHEDULES = "schedules"
"""The recorded choice that keeps the schedules (the others: a configuration's name)."""
SCHEDULES_SUFFIX = ".schedules.yaml"
"""Where the tuned schedules go when an IREE configuration beats them: beside the model
recipe, ``<model>.schedules.yaml``."""


@dataclass(frozen=True)
class IreeRace:
    """What the race did: the kept recipe's report (the final check; None: nothing ran),
    a line saying what ran and what was kept (None: no race, none recorded), and the IREE
    configuration the recipe became (None: the schedules were kept)."""

    report: RunReport | None
    line: str | None
    configuration: str | None = None


def race_iree_configurations(
    outcome: TuneOutcome,
    report: RunReport | None,
    with_peers: Check | None,
    check: Check | None,
) -> IreeRace:
    """Race the model recipe ``outcome.recipe`` (whose final check gave ``report``)
    against IREE's one-flag configurations of the model (``with_peers`` runs it with the
    peers), and make it the fastest configuration when one beats it (see the module
    docstring); ``check`` runs the recipe kept. With ``with_peers`` None (``--no-check``)
    nothing runs: a recorded decision is still taken up."""
    recipe = outcome.recipe
    record = recipe.parent / IREE_RACE_FILE
    key = {"schedules": schedules_digest(recipe)}
    earlier = earlier_race(record, key, (SCHEDULES, *IREE_PEERS))
    ratio = earlier.get("schedules_speedup") if earlier is not None else None
    if earlier is not None and isinstance(ratio, float | int) and ratio > 0:
        line = f"{earlier['line']} (raced by an earlier run)"
        if earlier["kept"] == SCHEDULES:
            return IreeRace(report, line)
        _become(outcome, earlier["kept"], float(ratio))
        return IreeRace(check(recipe) if check is not None else None, line, earlier["kept"])
    if with_peers is None or check is None or report is None:
        return IreeRace(report, None)
    raced = _race(outcome, report, with_peers, check)
    if raced.schedules_speedup is not None:  # raced: record it
        race = raced.race
        document = {
            "key": key,
            "kept": race.configuration or SCHEDULES,
            "line": race.line,
            "schedules_speedup": raced.schedules_speedup,
        }
        write_atomically(record, json.dumps(document, indent=1).encode())
    return raced.race


def _race(outcome: TuneOutcome, report: RunReport, with_peers: Check, check: Check) -> _Raced:
    recipe = outcome.recipe
    raced = with_peers(recipe)
    if raced.status is not Status.OK:
        why = f"the recipe ran {raced.status} ({raced.error})"
        return _Raced(IreeRace(report, f"iree     not raced: {why}"))
    timed = [p for p in raced.peers or [] if p.name in IREE_PEERS and _timed(p)]
    if not timed:
        failed = "; ".join(f"{p.name}: {p.check.status}" for p in raced.peers or []) or "none"
        return _Raced(IreeRace(report, f"iree     not raced: no IREE configuration ran ({failed})"))
    standings = ", ".join(f"{_speedup(p):.2f}x {LABELS[p.name]}" for p in timed)
    best = min(timed, key=_speedup)
    if _speedup(best) >= 1.0:
        line = f"iree     the schedules run {standings} (same run): the schedules are kept"
        return _Raced(IreeRace(report, line), _speedup(best))
    schedules = _become(outcome, best.name, _speedup(best))
    line = (
        f"iree     the schedules run {standings} (same run): the recipe builds "
        f"{LABELS[best.name]} ({' '.join(IREE_PEERS[best.name])}); the schedules are in "
        f"{schedules}"
    )
    return _Raced(IreeRace(check(recipe), line, best.name), _speedup(best))


@dataclass(frozen=True)
class _Raced:
    race: IreeRace
    schedules_speedup: float | None = None
    """The schedules' speedup over the fastest configuration, when any ran."""


def _become(outcome: TuneOutcome, configuration: str, schedules_speedup: float) -> Path:
    """Keep the schedules in ``<model>.schedules.yaml`` and make the model recipe build
    ``configuration`` (:func:`write_configuration_recipe`); return the schedules' path."""
    recipe = outcome.recipe
    schedules = recipe.with_name(recipe.name.removesuffix(".tuned.yaml") + SCHEDULES_SUFFIX)
    shutil.copyfile(recipe, schedules)
    write_configuration_recipe(recipe, configuration, schedules_speedup, schedules)
    outcome.kernels = 0
    return schedules


def write_configuration_recipe(
    recipe: Path, configuration: str, schedules_speedup: float, schedules: Path
) -> None:
    """Rewrite the model ``recipe`` as IREE's own pipeline with ``configuration``'s flags
    (no graph steps, no kernel schedules), saying why; ``schedules_speedup`` is the
    schedules' speedup over it, ``schedules`` where they were kept."""
    document = yaml.safe_load(recipe.read_text())
    label = LABELS[configuration]
    document.pop("graph", None)
    document["compile_flags"] = list(IREE_PEERS[configuration])
    document["kernels"] = []
    document["description"] = (
        f"{document['name']}: {label}, which ran {1 / schedules_speedup:.2f}x as fast as "
        f"the schedules tdsched tune found (same run; they are in {schedules.name})"
    )
    document.setdefault("provenance", {})["iree_configuration"] = {
        "name": configuration,
        "schedules_speedup": round(schedules_speedup, 3),
        "schedules": schedules.name,
    }
    header = (
        f"# Written by tdsched tune: {label} beat every schedule tune found for this model,\n"
        f"# so this recipe builds it (the schedules are in {schedules.name}).\n"
        "# Run it with: tdsched run {this file}\n"
    )
    write_atomically(recipe, (header + recipe_yaml(document)).encode())


def _timed(peer: PeerResult) -> bool:
    return peer.check.status is Status.OK and peer.speedup is not None


def _speedup(peer: PeerResult) -> float:
    """The schedules' speedup over ``peer`` (below 1: the peer is faster)."""
    assert peer.speedup is not None
    return peer.speedup
