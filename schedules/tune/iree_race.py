"""The last whole-model race of ``tdsched tune`` on a CPU target: the model recipe
against IREE's best one-flag builds of the model.

A user who does not tune still has IREE's own configurations (:data:`CONFIGURATIONS`):
its default, data tiling (``--iree-opt-data-tiling``), and data tiling with microkernels
(:data:`~..measure.peers.IREE_PEERS`). A tuned recipe that loses to one of them has no
reason to exist, so once the model recipe has run correct, it runs again as
``tdsched run --peers`` does: the recipe and those IREE builds of the model, checked and
timed interleaved in one run. Then the schedules with the flags of the faster of the two
flagged configurations (``OUT/<model>.<configuration>.yaml``) run the same way: a
configuration speeds up the matmuls no schedule took while the schedules speed up the
rest (a schedule whose op the flags change, a matmul's, does not apply then, and that
recipe fails). Where the schedules with the flags fail so, the graph steps alone with the
flags (``OUT/<model>.<configuration>.graph.yaml``) run in their place: the rewrites that
made the model's convolutions matmuls stay, and the flags take those matmuls, which
the kernel schedules no longer reach. Where the model-rewrite race ran in both layouts,
the steps it ended with in the layout it did not keep run with the flags too
(``OUT/<model>.<configuration>.other-layout.yaml``): the layout that wins with IREE's
default pipeline need not win with data tiling. Where such graph steps are the fastest
of these, their convolution rewrites are raced again by group with the flags (each group
left to IREE as a convolution where that wins, :func:`~.races.prune_conv_rewrites`),
and the steps so kept run with the peers in their place when faster.
Of the three, each timed against the configurations in its own run, the fastest is
kept, a challenger only when it is ``WIN`` (2%) faster than the schedules, so noise does
not flip the choice:

* the schedules: the model recipe stays as it is;
* the schedules with the flags: the model recipe gets the flags in its ``compile_flags``;
* the graph steps with the flags: the model recipe keeps its graph steps, gets the flags,
  and drops its kernel schedules (they stay in ``OUT/<model>.schedules.yaml``);
* the configuration: the model recipe (``OUT/<model>.tuned.yaml``) holds IREE's own
  pipeline with its flags and no schedules, and says so; the schedules tune found stay
  in ``OUT/<model>.schedules.yaml``.

The recipe that is kept is then run as the final check. On GPU targets IREE has no such
configurations to race. The decision is recorded in ``OUT/``:data:`IREE_RACE_FILE` under
the digest of the schedules raced: a later run that writes the same schedules takes it up
without racing again (with ``--no-check`` too), as the layout race does (:mod:`.races`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..base.files import write_atomically
from ..frontends.yaml_writer import recipe_yaml
from ..measure.peers import IREE_PEERS, ONNXRUNTIME
from ..measure.run_report import PeerResult, RunReport
from ..measure.status import Status
from .outcome import TuneOutcome
from .races import Pruned, earlier_race, schedules_digest
from .tuning import WIN

Check = Callable[[Path], RunReport]
"""Runs a model recipe as ``tdsched run`` does (with ``--peers`` for the race)."""

DEFAULT = "iree-default"
CONFIGURATIONS: dict[str, tuple[str, ...]] = {DEFAULT: (), **IREE_PEERS}
"""IREE's configurations a user gets with one flag or none: name → iree-compile flags."""
LABELS = {
    DEFAULT: "IREE default",
    "iree-data-tiling": "IREE data tiling",
    "iree-data-tiling-ukernels": "IREE data tiling + microkernels",
}
"""How the summary names each of :data:`CONFIGURATIONS`."""
IREE_RACE_FILE = "iree-race.json"
"""Where the race's decision is kept, beside the model recipe."""
SCHEDULES = "schedules"
"""The recorded choice that keeps the schedules."""
WITH = "schedules+"
"""The recorded choice that adds a configuration's flags to the schedules: this, then the
configuration's name (the other choices: a configuration's name alone)."""
WITH_GRAPH = "graph+"
"""The recorded choice that keeps the graph steps with a configuration's flags and drops
the kernel schedules: this, then the configuration's name."""
SCHEDULES_SUFFIX = ".schedules.yaml"
"""Where the tuned schedules go when an IREE configuration beats them: beside the model
recipe, ``<model>.schedules.yaml``."""


@dataclass(frozen=True)
class IreeRace:
    """What the race did: the kept recipe's report (the final check; None: nothing ran),
    a line saying what ran and what was kept (None: no race, none recorded), and what
    the recipe became: a configuration's name, :data:`WITH` and a name (the schedules
    with its flags), :data:`WITH_GRAPH` and a name (the graph steps with its flags), or
    None (the schedules as they were)."""

    report: RunReport | None
    line: str | None
    configuration: str | None = None


@dataclass(frozen=True)
class _Raced:
    race: IreeRace
    speedup: float | None = None
    """What the kept recipe's description quotes: the schedules' speedup over the
    configuration that replaced them, or the combined recipe's over the configuration;
    None: nothing was decided (no record)."""
    graph: list[Any] | None = None
    """With :data:`WITH_GRAPH`: the graph steps kept with the flags (the recipe's own or
    the other layout's)."""


Graph = Sequence[Mapping[str, Any]]
"""A recipe's graph steps, as its YAML writes them."""
Prune = Callable[[Graph, Path, float, str], Pruned]
"""Races the convolution rewrites of graph steps again under a configuration's flags
(:func:`~.races.prune_conv_rewrites` for the model tuned, its first three arguments
given): the steps, the recipe that runs them with the flags, its speedup over IREE
default, the stem of the recipes it writes."""


def race_iree_configurations(
    outcome: TuneOutcome,
    report: RunReport | None,
    with_peers: Check | None,
    check: Check | None,
    other_layout: Graph | None = None,
    prune: Prune | None = None,
) -> IreeRace:
    """Race the model recipe ``outcome.recipe`` (whose final check gave ``report``)
    against IREE's one-flag configurations of the model, and keep the fastest of the
    three candidates of the module docstring (``with_peers`` runs a recipe with the
    peers, ``check`` runs the recipe kept; ``other_layout``: the graph steps the
    model-rewrite race ended with in the layout it did not keep, tried with the flags
    beside the recipe's own; ``prune``: how the graph steps kept with the flags are
    raced again by convolution group). With ``with_peers`` None (``--no-check``) nothing
    runs: a recorded decision is still taken up."""
    recipe = outcome.recipe
    record = recipe.parent / IREE_RACE_FILE
    key = {"schedules": schedules_digest(recipe)}
    choices = (
        SCHEDULES,
        *CONFIGURATIONS,
        *(prefix + name for prefix in (WITH, WITH_GRAPH) for name in IREE_PEERS),
    )
    earlier = earlier_race(record, key, choices)
    ratio = earlier.get("speedup") if earlier is not None else None
    if earlier is not None and isinstance(ratio, float | int) and ratio > 0:
        line = f"{earlier['line']} (raced by an earlier run)"
        kept = earlier["kept"]
        if kept != SCHEDULES:
            graph = earlier.get("graph")
            _keep(outcome, kept, float(ratio), graph if isinstance(graph, list) else None)
            report = check(recipe) if check is not None else None
        return IreeRace(report, line, None if kept == SCHEDULES else kept)
    if with_peers is None or check is None or report is None:
        return IreeRace(report, None)
    raced = _race(outcome, report, with_peers, check, other_layout, prune)
    if raced.speedup is not None:
        race = raced.race
        document = {
            "key": key,
            "kept": race.configuration or SCHEDULES,
            "line": race.line,
            "speedup": raced.speedup,
            "graph": raced.graph,
        }
        write_atomically(record, json.dumps(document, indent=1).encode())
    return raced.race


def _race(
    outcome: TuneOutcome,
    report: RunReport,
    with_peers: Check,
    check: Check,
    other_layout: Graph | None,
    prune: Prune | None,
) -> _Raced:
    recipe = outcome.recipe
    # the final check ran with the peers already when no layout race ran the recipe
    raced = report if report.peers is not None else with_peers(recipe)
    if raced.status is not Status.OK:
        why = f"the recipe ran {raced.status} ({raced.error})"
        return _Raced(IreeRace(report, f"iree     not raced: {why}"))
    standings = {DEFAULT: raced.speedup} if raced.speedup is not None else {}
    standings |= {
        p.name: _speedup(p) for p in raced.peers or [] if p.name in IREE_PEERS and _timed(p)
    }
    if not standings:
        failed = "; ".join(f"{p.name}: {p.check.status}" for p in raced.peers or []) or "none"
        return _Raced(IreeRace(report, f"iree     not raced: no IREE configuration ran ({failed})"))
    name, schedules = min(standings.items(), key=lambda item: item[1])
    line = "iree     the schedules run " + ", ".join(
        f"{ratio:.2f}x {LABELS[other]}" for other, ratio in standings.items()
    )
    onnxruntime = next((p for p in raced.peers or [] if p.name == ONNXRUNTIME and _timed(p)), None)
    if onnxruntime is not None:  # what the user has, shown; not a build the recipe can take
        line += f", {_speedup(onnxruntime):.2f}x onnxruntime (a peer, not raced)"
    # Times relative to the schedules': a configuration's is the schedules' speedup over
    # it; the schedules with the flags of the fastest flagged one, F, take F's time over
    # their speedup over F (measured in a run of their own).
    flagged = {n: ratio for n, ratio in standings.items() if n != DEFAULT}
    combined = None
    if flagged:
        # the fastest whose flags the recipe's own do not contradict (tune's packed
        # kernels turn microkernels off, as data tiling does)
        own = yaml.safe_load(recipe.read_text()).get("compile_flags") or []
        open_to = {n: ratio for n, ratio in flagged.items() if not _clashes(own, n)} or flagged
        fastest = min(open_to, key=lambda n: open_to[n])
        combined = _combined_speedup(recipe, fastest, with_peers, other_layout, prune)
    if combined is not None:
        line += f"; with the flags of {LABELS[fastest]} {combined.said}"
    line += " (each against the configurations in its own run): "
    with_time = math.inf
    if combined is not None and combined.speedup > 0:
        with_time = flagged[fastest] / combined.speedup
    if with_time < schedules and with_time * WIN < 1.0:
        assert combined is not None
        _keep(outcome, combined.choice, combined.speedup, combined.graph)
        flags = f"the flags of {LABELS[fastest]} ({_flags(fastest)})"
        if combined.graph is not None:
            steps = "the other layout's graph steps" if combined.other else "its graph steps"
            line += (
                f"the recipe keeps {steps} with {flags} and no kernel schedule; "
                f"the schedules are in {_schedules_path(recipe)}"
            )
        else:
            line += f"the recipe adds {flags} to the schedules"
        race = IreeRace(check(recipe), line, combined.choice)
        return _Raced(race, combined.speedup, combined.graph)
    if schedules * WIN >= 1.0:
        return _Raced(IreeRace(report, line + "the schedules are kept"), schedules)
    _keep(outcome, name, schedules)
    line += (
        f"the recipe builds {LABELS[name]} ({_flags(name)}); the schedules are in "
        f"{_schedules_path(recipe)}"
    )
    return _Raced(IreeRace(check(recipe), line, name), schedules)


@dataclass(frozen=True)
class _Combination:
    """The schedules (or their graph steps) run with a configuration's flags: the recorded
    choice (:data:`WITH` or :data:`WITH_GRAPH`, then the configuration's name), the speedup
    over the configuration in their run (0: it did not run right) and what the line says."""

    choice: str
    speedup: float
    said: str
    graph: list[Any] | None = None
    """With :data:`WITH_GRAPH`: the graph steps run with the flags."""
    other: bool = False
    """Whether those are the other layout's."""


def _combined_speedup(
    recipe: Path,
    configuration: str,
    with_peers: Check,
    other_layout: Graph | None,
    prune: Prune | None = None,
) -> _Combination | None:
    """Run the schedules with ``configuration``'s flags (``OUT/<model>.<configuration>.yaml``)
    with the peers; where that does not run right, the recipe's graph steps alone with
    the flags (``OUT/<model>.<configuration>.graph.yaml``, where it has graph steps and
    kernel schedules); and ``other_layout``'s graph steps with them
    (``...other-layout.yaml``, where given, not empty and not the recipe's): the fastest.
    Where graph steps are the fastest, ``prune`` races their convolution rewrites again
    by group with the flags, and the steps it keeps run with the peers
    (``OUT/<model>.<configuration>.<graph|other-layout>.without-<n>.yaml``).
    None where the recipe holds no schedule (with the flags it would be the configuration
    itself: only noise could tell them apart) or its own flags set one of the
    configuration's options to another value."""
    document = yaml.safe_load(recipe.read_text())
    if not document.get("kernels") and not document.get("graph"):
        return None
    if _clashes(document.get("compile_flags") or [], configuration):
        return None
    stem = f"{_stem(recipe)}.{configuration}"
    speedup, how, _ = _run_with_flags(
        recipe.with_name(f"{stem}.yaml"), document, configuration, with_peers
    )
    said = f"they {how}"
    graphs: list[tuple[list[Any], str, str]] = []
    if speedup <= 0 and document.get("kernels") and document.get("graph"):
        graphs.append((list(document["graph"]), "graph", "their graph steps alone"))
    if other_layout and list(other_layout) != document.get("graph"):
        names = ", ".join(next(iter(step)) for step in other_layout)
        graphs.append((list(other_layout), "other-layout", f"the other layout's ({names})"))
    best = _Combination(WITH + configuration, speedup, said)
    best_path, over_default = recipe, 0.0
    for graph, suffix, what in graphs:
        path = recipe.with_name(f"{stem}.{suffix}.yaml")
        speedup, how, default = _run_with_flags(
            path, {**document, "graph": graph, "kernels": []}, configuration, with_peers
        )
        said += f"; {what} with the flags {how}"
        if speedup > best.speedup:
            other = suffix == "other-layout"
            best = _Combination(WITH_GRAPH + configuration, speedup, "", graph, other)
            best_path, over_default = path, default
    if prune is not None and best.graph is not None and over_default > 0:
        pruned = prune(best.graph, best_path, over_default, best_path.name.removesuffix(".yaml"))
        said += "".join(f"; {line.removeprefix('graph').strip()}" for line in pruned.lines)
        if pruned.graph != best.graph:
            speedup, how, _ = _ran_with_flags(pruned.recipe, configuration, with_peers)
            said += f"; the steps so kept with the flags {how}"
            if speedup > best.speedup:
                best = dataclasses.replace(best, speedup=speedup, graph=pruned.graph)
    return dataclasses.replace(best, said=said)


def _run_with_flags(
    path: Path, document: dict[str, Any], configuration: str, with_peers: Check
) -> tuple[float, str, float]:
    """Write ``document`` with ``configuration``'s flags to ``path`` and run it with the
    peers (:func:`_ran_with_flags`)."""
    write_atomically(path, recipe_yaml(_with_flags(document, configuration)).encode())
    return _ran_with_flags(path, configuration, with_peers)


def _ran_with_flags(path: Path, configuration: str, with_peers: Check) -> tuple[float, str, float]:
    """Run the recipe ``path`` (built with ``configuration``'s flags) with the peers: its
    speedup over the configuration in that run (0: it did not run right), how it went,
    for the line, and its speedup over IREE default (0: not timed)."""
    ran = with_peers(path)
    peer = next((p for p in ran.peers or [] if p.name == configuration and _timed(p)), None)
    if ran.status is not Status.OK or peer is None:
        return 0.0, f"ran {ran.status} ({_first_error(ran.error) or path})", 0.0
    return _speedup(peer), f"run {_speedup(peer):.2f}x it ({path})", ran.speedup or 0.0


def _first_error(error: str | None) -> str | None:
    """The line of ``error`` that says what went wrong: the first ``error:`` line of a
    compiler's output, else the first line."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    said = [line for line in lines if "error:" in line] or lines
    return said[0] if said else None


def _keep(
    outcome: TuneOutcome, choice: str, speedup: float, graph: list[Any] | None = None
) -> None:
    """Make the model recipe ``choice`` (a configuration, or :data:`WITH` or
    :data:`WITH_GRAPH` and one; ``graph``: the graph steps the latter keeps, None: the
    recipe's own); ``speedup`` is what its description quotes (see :class:`_Raced`)."""
    recipe = outcome.recipe
    if choice.startswith(WITH):
        name = choice.removeprefix(WITH)
        document = _with_flags(yaml.safe_load(recipe.read_text()), name)
        document["description"] = (
            f"{document.get('description') or document['name']}; built with the flags of "
            f"{LABELS[name]}, {speedup:.2f}x as fast as {LABELS[name]} alone (same run)"
        )
        _provenance(document, name, speedup, None)
        _write(recipe, document, f"its schedules with the flags of {LABELS[name]}")
        return
    if choice.startswith(WITH_GRAPH):
        name = choice.removeprefix(WITH_GRAPH)
        schedules = _schedules_path(recipe)
        shutil.copyfile(recipe, schedules)
        document = _with_flags(yaml.safe_load(recipe.read_text()), name)
        own = graph is None or graph == document.get("graph")
        document["graph"], document["kernels"] = document.get("graph") if own else graph, []
        steps = "its graph steps" if own else "the other layout's graph steps"
        document["description"] = (
            f"{document['name']}: {steps} built with the flags of {LABELS[name]}, "
            f"{speedup:.2f}x as fast as {LABELS[name]} alone (same run); the kernel "
            f"schedules tdsched tune found are in {schedules.name}"
        )
        _provenance(document, name, speedup, schedules.name)
        _write(recipe, document, f"{steps} with the flags of {LABELS[name]}")
        outcome.kernels = 0
        return
    schedules = _schedules_path(recipe)
    shutil.copyfile(recipe, schedules)
    write_configuration_recipe(recipe, choice, speedup, schedules)
    outcome.kernels = 0


def write_configuration_recipe(
    recipe: Path, configuration: str, schedules_speedup: float, schedules: Path
) -> None:
    """Rewrite the model ``recipe`` as IREE's own pipeline with ``configuration``'s flags
    (no graph steps, no kernel schedules), saying why; ``schedules_speedup`` is the
    schedules' speedup over it, ``schedules`` where they were kept."""
    document = yaml.safe_load(recipe.read_text())
    label = LABELS[configuration]
    document.pop("graph", None)
    document.pop("compile_flags", None)
    if CONFIGURATIONS[configuration]:
        document["compile_flags"] = list(CONFIGURATIONS[configuration])
    document["kernels"] = []
    document["description"] = (
        f"{document['name']}: {label}, which ran {1 / schedules_speedup:.2f}x as fast as "
        f"the schedules tdsched tune found (same run; they are in {schedules.name})"
    )
    _provenance(document, configuration, schedules_speedup, schedules.name)
    _write(recipe, document, f"{label}, which beat every schedule tune found for this model")


def _with_flags(document: dict[str, Any], configuration: str) -> dict[str, Any]:
    """``document`` with ``configuration``'s flags added to its ``compile_flags`` (one it
    has already is not repeated)."""
    own = list(document.get("compile_flags") or [])
    flags = [*own, *(flag for flag in IREE_PEERS[configuration] if flag not in own)]
    return {**document, "compile_flags": flags}


def _clashes(flags: list[str], configuration: str) -> bool:
    """Whether ``flags`` set one of ``configuration``'s options to another value (a recipe
    with ``--iree-llvmcpu-enable-ukernels=none`` clashes with the microkernels
    configuration, not with data tiling, which sets the same)."""
    values = dict(flag.partition("=")[::2] for flag in flags)
    return any(
        values.get(name, value) != value
        for name, value in (flag.partition("=")[::2] for flag in IREE_PEERS[configuration])
    )


def _provenance(
    document: dict[str, Any], configuration: str, speedup: float, schedules: str | None
) -> None:
    document.setdefault("provenance", {})["iree_configuration"] = {
        "name": configuration,
        "with_schedules": schedules is None,
        "speedup": round(speedup, 3),
        **({"schedules": schedules} if schedules else {}),
    }


def _write(recipe: Path, document: dict[str, Any], what: str) -> None:
    header = (
        f"# Written by tdsched tune: {what}\n"
        "# (raced against IREE's one-flag configurations; see provenance.iree_configuration).\n"
        "# Run it with: tdsched run {this file}\n"
    )
    write_atomically(recipe, (header + recipe_yaml(document)).encode())


def _stem(recipe: Path) -> str:
    return recipe.name.removesuffix(".tuned.yaml")


def _schedules_path(recipe: Path) -> Path:
    return recipe.with_name(_stem(recipe) + SCHEDULES_SUFFIX)


def _flags(configuration: str) -> str:
    return " ".join(CONFIGURATIONS[configuration]) or "no flags"


def _timed(peer: PeerResult) -> bool:
    return peer.check.status is Status.OK and peer.speedup is not None


def _speedup(peer: PeerResult) -> float:
    """The recipe's speedup over ``peer`` in their run (below 1: the peer is faster)."""
    assert peer.speedup is not None
    return peer.speedup
