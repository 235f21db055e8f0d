"""The regression baseline file: what each gated recipe is expected to achieve.

A YAML (or JSON) file meant to be committed next to the recipes it gates::

    # comments at the top are kept when --update rewrites the file
    defaults: {tolerance: 0.25, time_cap_s: 30}
    entries:
      - recipe: matmul_x86            # a shipped name, or a path relative to this file
        target: x86
        params: {M: 256, N: 256, K: 256}
        expected_speedup: 1.42        # vs IREE default, measured in the same run
        tolerance: 0.3                # optional: fail below 1.42 x (1 - 0.3)
        numerics: {atol: 1.0e-3, rtol: 1.0e-4}
        blessed: {interval: [1.38, 1.46], rounds: 12, iree: 3.13.0, date: 2026-11-21,
                  cpu: znver5}
        by_cpu:                       # expectations blessed on other CPUs (--update)
          cascadelake:
            expected_speedup: 1.21
            blessed: {interval: [1.18, 1.25], rounds: 9, iree: 3.13.0, date: 2026-11-29,
                      cpu: cascadelake}
        note: free text, kept by --update (comments inside entries are not)

A speedup over IREE default is a property of the CPU it is measured on as much as of the
schedule (a softmax table entry tuned on Zen 5 runs 2.0x there and 1.3-1.7x on a
Cascade Lake Xeon), so an entry gates against the expectation blessed on the machine's own
CPU (``by_cpu``, keyed by LLVM's name for it) and falls back to its own ``expected_speedup``
on a CPU it was never blessed on; see :meth:`Entry.on_machine` and :meth:`Entry.blessed_on`.

Loading validates every field (errors are ``file:line: field: problem``); :func:`dump`
writes one deterministic layout so re-blessing changes only the lines that changed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tdsched.targets.target import DEFAULT_THREADS, TARGET_NAMES

from ..base.errors import RecipeError, Where
from ..base.files import read_user_text
from ..compile.build_target import BuildTarget
from ..dsl.space import ParamValue
from ..frontends.yaml_nodes import Node, compose, optional
from ..frontends.yaml_writer import recipe_yaml


@dataclass(frozen=True)
class Settings:
    """How an entry is gated and measured (file-wide defaults, per-entry overrides)."""

    tolerance: float = 0.25
    """The gate: fail when the speedup is below ``expected_speedup * (1 - tolerance)``."""
    precision: float = 0.05
    """Stop timing once the speedup's 95% interval is within this fraction of it."""
    time_cap_s: float = 30.0
    """Stop timing after this long; an interval that still straddles the gate is
    inconclusive."""
    calibration_tolerance: float = 0.25
    """A calibration kernel timed before and after; a larger change in its time means
    the machine's load changed during the measurement: inconclusive, unless the speedup's
    interval widened by that change still clears the gate."""
    threads: int = DEFAULT_THREADS
    """x86 worker threads: the default every command shares, so a gate measures what
    ``run`` and ``sweep`` measured. On a small CI machine set 1 in the file's
    ``defaults``: as many workers as cores compete with the host thread and the OS, and the
    measured speedup wanders (a 256³ matmul on 2 cores: 0.59x to 1.39x over five runs with
    2 threads, 1.17x to 1.21x with 1)."""
    seed: int = 0
    """Seed of the random inputs."""

    def gate(self, expected: float) -> float:
        """The lowest passing speedup for an entry expecting ``expected``."""
        return expected * (1.0 - self.tolerance)


SETTINGS_FIELDS = {
    "tolerance": "allowed fractional drop below expected_speedup, e.g. 0.25",
    "precision": "target half-width of the speedup's 95% interval, e.g. 0.05",
    "time_cap_s": "seconds of timing per entry at most",
    "calibration_tolerance": "allowed change of the calibration kernel's time, e.g. 0.25",
    "threads": "x86 worker threads",
    "seed": "random input seed",
}
FLOAT_SETTINGS = ("tolerance", "precision", "time_cap_s", "calibration_tolerance")
"""Settings that take any number (the others are integers)."""
FRACTION_SETTINGS = ("tolerance", "precision", "calibration_tolerance")
"""Settings that are fractions in [0, 1)."""
POSITIVE_SETTINGS = ("time_cap_s", "threads")
"""Settings that must be above 0."""


@dataclass(frozen=True)
class CpuExpectation:
    """What an entry was blessed at on one CPU other than its own blessing's."""

    expected_speedup: float
    blessed: dict[str, Any] | None = None


@dataclass(frozen=True)
class Entry:
    """One gated (recipe, target, parameters) and what it is expected to achieve."""

    recipe: str
    """As written: a shipped recipe name or a path relative to the baseline file."""
    target: str | None = None
    params: dict[str, ParamValue] = field(default_factory=dict)
    cpu: str | None = None
    """x86: the LLVM CPU both builds target (``haswell`` gates a recipe's AVX2 entries on
    any AVX2 machine); ``None``: this machine's."""
    gpu: str | None = None
    """vulkan: IREE's Vulkan target both builds target (``ampere``); ``None``: the
    generic one."""
    expected_speedup: float | None = None
    """``None`` until blessed with ``--update``."""
    numerics: dict[str, float] | None = None
    """``atol`` / ``rtol`` for the check; what is not given is the recipe's (both are
    written here by ``--update``)."""
    overrides: dict[str, float | int] = field(default_factory=dict)
    """Settings fields this entry sets itself."""
    blessed: dict[str, Any] | None = None
    """What the blessing measurement saw (interval, rounds, IREE version, date)."""
    note: str | None = None
    """Free text kept across ``--update`` (comments inside the file are not)."""
    by_cpu: dict[str, CpuExpectation] = field(default_factory=dict)
    """Expectations blessed on other CPUs, by the LLVM name of the CPU measured on
    (``cascadelake``), not the one built for (``cpu``)."""
    gated_on: str | None = field(default=None, compare=False)
    """Set by :meth:`on_machine`: the ``by_cpu`` key ``expected_speedup`` was taken
    from (``None``: the entry's own)."""
    where: Where = field(default_factory=Where, compare=False)

    def on_machine(self, machine: str | None) -> Entry:
        """This entry as gated on a machine whose CPU LLVM names ``machine`` (``None``:
        unknown): its ``by_cpu`` expectation for that CPU, else its own."""
        mine = self.by_cpu.get(machine) if machine is not None else None
        if mine is None:
            return self
        return dataclasses.replace(
            self, expected_speedup=mine.expected_speedup, blessed=mine.blessed, gated_on=machine
        )

    def blessed_on(self, machine: str | None, speedup: float, blessed: dict[str, Any]) -> Entry:
        """This entry with ``speedup`` (measured on CPU ``machine``, described by
        ``blessed``) as its expectation there: its own when it has none yet, when its own
        was blessed on that CPU, or when the CPU is unknown; else ``by_cpu[machine]``, so
        blessing on a second kind of machine keeps the first's expectation (an own
        blessing that names no CPU counts as another CPU's)."""
        own = self.blessed or {}
        if self.expected_speedup is None or machine is None or own.get("cpu") == machine:
            return dataclasses.replace(self, expected_speedup=speedup, blessed=blessed)
        by_cpu = dict(self.by_cpu) | {machine: CpuExpectation(speedup, blessed)}
        return dataclasses.replace(self, by_cpu=dict(sorted(by_cpu.items())))

    def build(self, threads: int = DEFAULT_THREADS) -> BuildTarget:
        """The build this entry gates, run on ``threads`` CPU threads (the settings')."""
        return BuildTarget(self.target, cpu=self.cpu or "host", gpu=self.gpu, threads=threads)

    @property
    def label(self) -> str:
        """``recipe@target M=256,N=256`` (`` cpu=haswell``, `` gpu=ampere``): how tables
        and messages name the entry."""
        text = self.recipe + (f"@{self.target}" if self.target else "")
        if self.params:
            text += " " + ",".join(f"{k}={v}" for k, v in self.params.items())
        if self.cpu:
            text += f" cpu={self.cpu}"
        if self.gpu:
            text += f" gpu={self.gpu}"
        return text

    @property
    def identity(self) -> tuple[str, str | None, str | None, str | None, str]:
        """What no two entries of a file share: recipe, target, cpu, gpu and params."""
        params = json.dumps(self.params, sort_keys=True)
        return (self.recipe, self.target, self.cpu, self.gpu, params)

    def settings(self, defaults: Settings, command_line: Mapping[str, float] = {}) -> Settings:
        """The entry's settings: ``defaults`` with its own overrides, then the
        ``command_line``'s (``--time-cap``, ``--precision``)."""
        chosen = {**self.overrides, **command_line}
        return dataclasses.replace(defaults, **chosen)  # type: ignore[arg-type]

    def threshold(self, defaults: Settings) -> float | None:
        """The lowest passing speedup (``None`` when not blessed)."""
        if self.expected_speedup is None:
            return None
        return self.settings(defaults).gate(self.expected_speedup)


@dataclass(frozen=True)
class BaselineFile:
    path: Path
    header: str
    """The comment lines the file starts with (kept by :func:`dump`)."""
    defaults: Settings
    default_overrides: dict[str, float | int]
    """The ``defaults`` fields the file sets (only those are written back)."""
    entries: tuple[Entry, ...]

    def resolve_recipe(self, entry: Entry) -> str:
        """The recipe to load: a file beside the baseline, else the name as written."""
        return recipe_beside(self.path.parent, entry.recipe)


def recipe_beside(directory: Path, recipe: str) -> str:
    """``directory / recipe`` when that file exists, else ``recipe`` (a shipped name or
    a path from the working directory)."""
    beside = directory / recipe
    return str(beside) if beside.is_file() else recipe


FILE_FIELDS = {"defaults": "settings for every entry", "entries": "the gated recipes"}
NUMERICS_FIELDS = {"atol": "absolute tolerance", "rtol": "relative tolerance"}
ENTRY_FIELDS = {
    "recipe": "shipped recipe name or path relative to this file",
    "target": f"one of {', '.join(TARGET_NAMES)} (default: the recipe's first)",
    "params": "recipe parameter overrides, e.g. {M: 256}",
    "cpu": "x86: LLVM CPU to build for, e.g. haswell (AVX2) (default: this machine's)",
    "gpu": "vulkan: IREE's Vulkan target to build for, e.g. ampere (default: the generic one)",
    "expected_speedup": "speedup vs IREE default when blessed (written by --update)",
    "numerics": "{atol, rtol} for the check against the reference",
    "blessed": "what the blessing run measured (written by --update)",
    "by_cpu": "{CPU: {expected_speedup, blessed}} blessed on other CPUs (written by --update)",
    "note": "free text about the entry, kept by --update",
    **SETTINGS_FIELDS,
}


def load_baseline(path: str | Path) -> BaselineFile:
    """Read and validate a baseline file (``.yaml``, ``.yml`` or ``.json``)."""
    path = Path(path)
    if not path.exists():
        raise RecipeError(
            Where(str(path)),
            "cannot read the baseline file: no such file; create one with entries (see "
            "docs/commands/regress.md) and bless it with 'tdsched regress FILE --update'",
        )
    text = read_user_text(path, "baseline file")
    document = compose(text, str(path), "YAML/JSON")
    if document is None:
        raise RecipeError(Where(str(path)), "the baseline file is empty; it needs 'entries: [...]'")
    root = Node(document, Where(str(path), 1))
    fields = root.mapping(FILE_FIELDS, ("entries",))
    default_overrides = _settings(fields["defaults"]) if "defaults" in fields else {}
    defaults = Settings(**default_overrides)  # type: ignore[arg-type]
    entries = tuple(_entry(node) for node in fields["entries"].sequence())
    seen: dict[tuple[str, str | None, str | None, str | None, str], Entry] = {}
    for entry in entries:
        key = entry.identity
        if key in seen:
            raise RecipeError(
                entry.where,
                f"duplicate of the entry at line {seen[key].where.line}: one entry per "
                "(recipe, target, cpu, gpu, params)",
            )
        seen[key] = entry
    return BaselineFile(path, _header(text), defaults, default_overrides, entries)


def _header(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def setting_problem(name: str, value: object) -> str | None:
    """What is wrong with ``value`` for the setting ``name`` (``None``: nothing)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected a number, got {value!r}"
    if name not in FLOAT_SETTINGS and not isinstance(value, int):
        return f"expected an integer, got {value!r}"
    if name in FRACTION_SETTINGS and not 0 <= value < 1:
        return f"expected a fraction in [0, 1), got {value}"
    if name in POSITIVE_SETTINGS and value <= 0:
        return f"expected a positive number, got {value}"
    return None


def _settings(node: Node, fields: dict[str, Node] | None = None) -> dict[str, float | int]:
    fields = fields if fields is not None else node.mapping(SETTINGS_FIELDS)
    values: dict[str, float | int] = {}
    for name, item in fields.items():
        value = item.scalar()
        problem = setting_problem(name, value)
        if problem is not None:
            raise item.fail(problem)
        values[name] = int(value) if value == int(value) else value  # 30, not 30.0
    return values


def _entry(node: Node) -> Entry:
    f = node.mapping(ENTRY_FIELDS, ("recipe",))
    target = optional(f, "target", lambda n: n.choice(TARGET_NAMES), None)
    expected = optional(f, "expected_speedup", _positive_speedup, None)
    return Entry(
        recipe=f["recipe"].text(),
        target=target,
        params=_params(f["params"]) if "params" in f else {},
        cpu=optional(f, "cpu", Node.text, None),
        gpu=optional(f, "gpu", Node.text, None),
        expected_speedup=expected,
        numerics=_numerics(f["numerics"]) if "numerics" in f else None,
        overrides=_settings(node, {k: v for k, v in f.items() if k in SETTINGS_FIELDS}),
        blessed=_plain(f["blessed"]) if "blessed" in f else None,
        note=optional(f, "note", Node.text, None),
        by_cpu=_by_cpu(f["by_cpu"]) if "by_cpu" in f else {},
        where=node.where,
    )


CPU_EXPECTATION_FIELDS = {
    "expected_speedup": "speedup vs IREE default on this CPU",
    "blessed": "what the blessing run on this CPU measured",
}


def _by_cpu(node: Node) -> dict[str, CpuExpectation]:
    expectations = {}
    for cpu, item in node.entries("CPU: {expected_speedup, blessed}").items():
        f = item.mapping(CPU_EXPECTATION_FIELDS, ("expected_speedup",))
        expected = _positive_speedup(f["expected_speedup"])
        blessed = _plain(f["blessed"]) if "blessed" in f else None
        expectations[cpu] = CpuExpectation(expected, blessed)
    return expectations


def _positive_speedup(node: Node) -> float:
    value = node.number()
    if value <= 0:
        raise node.fail(f"expected a positive speedup, got {value}")
    return value


def _params(node: Node) -> dict[str, ParamValue]:
    values: dict[str, ParamValue] = {}
    for name, item in node.entries("NAME: value").items():
        value = item.scalar()
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise item.fail(f"expected a number or a string, got {value!r}")
        values[name] = value
    return values


def _numerics(node: Node) -> dict[str, float]:
    f = node.mapping(NUMERICS_FIELDS)
    return {name: item.number() for name, item in f.items()}


def _plain(node: Node) -> dict[str, Any]:
    value = yaml.safe_load(yaml.serialize(node.node))
    if not isinstance(value, dict):
        raise node.fail("expected a mapping (written by --update)")
    return value


def dump(baseline: BaselineFile) -> str:
    """The file's text: YAML with the original header comments, or JSON for ``.json``."""
    document: dict[str, Any] = {}
    if baseline.default_overrides:
        document["defaults"] = dict(baseline.default_overrides)
    document["entries"] = [_entry_document(e) for e in baseline.entries]
    if baseline.path.suffix == ".json":
        return json.dumps(document, indent=2) + "\n"
    body = recipe_yaml(document, width=100)
    return (baseline.header + "\n" if baseline.header else "") + body


def _entry_document(entry: Entry) -> dict[str, Any]:
    document: dict[str, Any] = {"recipe": entry.recipe}
    if entry.target:
        document["target"] = entry.target
    if entry.params:
        document["params"] = dict(entry.params)
    if entry.cpu:
        document["cpu"] = entry.cpu
    if entry.gpu:
        document["gpu"] = entry.gpu
    if entry.expected_speedup is not None:
        document["expected_speedup"] = entry.expected_speedup
    document.update(entry.overrides)
    if entry.numerics is not None:
        document["numerics"] = dict(entry.numerics)
    if entry.blessed is not None:
        document["blessed"] = entry.blessed
    if entry.by_cpu:
        document["by_cpu"] = {
            cpu: {"expected_speedup": e.expected_speedup}
            | ({"blessed": e.blessed} if e.blessed is not None else {})
            for cpu, e in entry.by_cpu.items()
        }
    if entry.note is not None:
        document["note"] = entry.note
    return document
