"""Shape-aware recipes: tuned parameter sets keyed by the workload's shape.

The best tile sizes of a matmul at 256³ are not those at 2048³. A recipe's ``shapes``
table (cf. Triton's autotune ``key``) holds one tuned parameter set per shape, keyed by
some of the recipe's integer parameters (``key: [M, N, K]``), and by string-valued ones
where the best values depend on them too (``key: [M, N, K, WEIGHTS]``: constant weights
are packed at compile time, input weights in the timed call); ``tdsched sweep --shape``
fills it. When a recipe is resolved, the shape it runs at (its parameters after
``--param`` overrides) selects an entry:

* an entry with exactly that shape; else, with ``rule: nearest`` (the default), the
  entry nearest in log2 space (the sum over the integer keys of ``|log2(entry /
  shape)|``; ties go to the entry listed first) among those whose parameters satisfy the
  recipe's ``constraints`` at this shape (``K % TK == 0``...), taken from the entries
  whose string keys match the run's values where there are any (else from those that
  differ in the fewest of them: an entry tuned for input weights serves constant ones
  when none was tuned for those); with ``rule: exact``, none;
* no entry: the recipe's own parameter defaults, and the choice says so.

An entry may say which CPU thread count it was tuned for (``threads: 1``; ``sweep --shape``
writes the sweep's): the best tiles on one thread are not those on two. The thread count
is one more dimension of the distance (``|log2(entry threads / run threads)|``), so an
entry tuned for the run's thread count at its shape is exact, and one for another count is
as far as a shape twice as large. An entry without ``threads`` serves every count at
distance 0; among entries equally near, one for the run's thread count wins over one
without. On a GPU target (no CPU threads) the thread counts are ignored.

An entry may also say which x86 vector ISA it was tuned for (``isa: avx512``, ``avx2`` or
``sse``; ``sweep --shape`` writes the build's, see :mod:`tdsched.targets.cpu_isa`): a
register tile for AVX-512's 32 registers spills on AVX2's 16. An entry for another ISA
than the build's counts like a string key that differs: it serves only where no entry for
the build's ISA (or without ``isa``) does, and the choice says so. On a GPU target, or a
CPU whose ISA is unknown, ``isa`` is ignored.

Within an ISA, CPU models differ too (Zen 4 runs AVX-512 at half width, Zen 5 at full
width; see :mod:`tdsched.targets.cpu_model`), so an entry may say which CPU model it was
tuned on (``cpu: znver5``, LLVM's CPU name; ``sweep --shape`` writes the build's). An
entry for another model than the build's is as far as a shape twice as large (like one
for another thread count), so it serves where nothing nearer does; among entries equally
near, one for the build's model wins over one without ``cpu``, which wins over one for
another model. A table can so keep entries for several CPUs of one ISA side by side. On
a GPU target, or where the build's model is unknown, ``cpu`` is ignored.

On Vulkan, the best workgroup and thread tiles of one GPU are not those of another, and
a build for a named GPU (``--gpu ampere``) may use features the generic Vulkan target
lacks. An entry may so say which Vulkan GPU it was tuned for (``gpu: ampere``, as
``--gpu`` names it, or ``gpu: generic`` for IREE's generic Vulkan target; ``sweep --shape
--target vulkan`` writes the build's). Like an entry for another ISA, one for another GPU
than the build's serves only where no entry for the build's GPU (or without ``gpu``)
does, and the choice says so; an entry with ``gpu`` never serves an x86 build unless
nothing else does. Among entries equally near, one for the build's GPU wins over one
without ``gpu``.

The entry's values replace the defaults; parameters given with ``--param`` win over both.
An entry may select IREE's own pipeline (``iree_default: true``) where no schedule won at
that shape: the recipe's schedules are then left out, and ``run``/``show`` say so. Giving
a tuned parameter with ``--param`` (one the table's entries set, or one the recipe's
``space`` sweeps) asks for a schedule, so it sets such an entry aside: the schedules run
with the defaults and the given values (as every candidate of ``sweep --shape`` does), and
the choice names the parameters that set it aside. A value the entry holds itself (the
``PAD: 0`` its sweep was run with) asks for nothing else and sets nothing aside.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tdsched.targets.cpu_isa import ISAS
from tdsched.targets.cpu_model import BuildCpu
from tdsched.targets.target import BuildGpu, BuildMachine

from ..base.errors import RecipeError, Where
from .build_names import gpu_name
from .constraints import ConstraintError
from .space import Constraint, ParamValue

RULES: tuple[str, ...] = ("nearest", "exact")
ENTRY_OPTIONS = {
    "iree_default": "true: IREE's own pipeline runs at this shape, unscheduled",
    "threads": "the CPU thread count the entry was tuned for (default: any)",
    "isa": "the x86 vector ISA the entry was tuned for: avx512, avx2 or sse (default: any)",
    "cpu": "the CPU model the entry was tuned on, as LLVM names it (znver5; default: any)",
    "gpu": "the Vulkan GPU the entry was tuned for, as --gpu names it (ampere), or generic "
    "(default: any)",
    "note": "where the entry came from (informational)",
}
"""An entry's fields besides its key values and tuned parameter values."""
Rule = Literal["nearest", "exact"]
KeyValue = int | str
"""A key parameter's value: a size, or a string such as ``constant``."""
Shape = tuple[tuple[str, KeyValue], ...]
"""Key parameter names and values, in key order."""


@dataclass(frozen=True)
class ShapeEntry:
    """Tuned parameter values for one shape."""

    shape: Shape
    """The key parameters' values, in key order."""
    params: tuple[tuple[str, ParamValue], ...] = ()
    iree_default: bool = False
    """At this shape IREE's own pipeline beat every schedule: run it unscheduled."""
    note: str = ""
    """Where the entry came from (e.g. the sweep's verdict and interval); informational."""
    threads: int | None = None
    """The CPU thread count it was tuned for; None: any."""
    isa: str | None = None
    """The x86 vector ISA it was tuned for (:data:`~tdsched.targets.cpu_isa.ISAS`); None: any."""
    cpu: str | None = None
    """The CPU model it was tuned on (LLVM's name, ``znver5``); None: any."""
    gpu: str | None = None
    """The Vulkan GPU it was tuned for (``--gpu``'s name, or ``generic``); None: any."""
    where: Where = field(default_factory=Where)

    @property
    def shape_label(self) -> str:
        return ",".join(f"{name}={value}" for name, value in self.shape)

    @property
    def label(self) -> str:
        tuned_for = (
            [] if self.threads is None else [f"{self.threads} thread" + "s" * (self.threads != 1)]
        )
        tuned_for += [part for part in (self.isa, self.cpu, self.gpu) if part is not None]
        return f"{self.shape_label} ({', '.join(tuned_for)})" if tuned_for else self.shape_label

    def distance(
        self, shape: Shape, threads: int | None, machine: BuildMachine | None = None
    ) -> tuple[int, float]:
        """How far this entry is from ``shape`` run on ``threads`` CPU threads (None: a
        GPU) built for ``machine`` (None: unknown): the string keys, the ISA and the GPU
        it differs in, then log2 steps, another CPU model counting as one (see the module
        docstring)."""
        differ, far = 0, 0.0
        for (_, mine), (_, theirs) in zip(self.shape, shape, strict=True):
            if isinstance(mine, str) or isinstance(theirs, str):
                differ += mine != theirs
            else:
                far += abs(math.log2(mine / theirs))
        if self.threads is not None and threads is not None:
            far += abs(math.log2(self.threads / threads))
        if isinstance(machine, BuildCpu):
            if self.isa is not None and machine.isa is not None:
                differ += self.isa != machine.isa
            differ += self.gpu is not None
            far += self.model_rank(machine.model) == 2
        elif isinstance(machine, BuildGpu):
            differ += self.gpu_rank(machine) == 2
        return differ, far

    def model_rank(self, model: str | None) -> int:
        """0 for an entry tuned on CPU ``model``, 1 without ``cpu`` (or ``model``
        unknown), 2 for another model: the tie-break among equally near entries."""
        if self.cpu is None or model is None:
            return 1
        return 0 if self.cpu == model else 2

    def gpu_rank(self, machine: BuildMachine | None) -> int:
        """0 for an entry tuned for the Vulkan GPU ``machine`` is built for, 1 without
        ``gpu`` (or ``machine`` no GPU build), 2 for another GPU: the tie-break among
        equally near entries."""
        if self.gpu is None or not isinstance(machine, BuildGpu):
            return 1
        return 0 if self.gpu == gpu_name(machine) else 2


@dataclass(frozen=True)
class ShapeChoice:
    """Which entry a resolved recipe used, and how it was found."""

    shape: Shape
    entry: ShapeEntry | None
    how: Literal["exact", "nearest", "none"]
    skipped: tuple[str, ...] = ()
    """Nearer entries left out because their parameters break a constraint here."""
    threads: int | None = None
    """The CPU thread count the choice was made for (None: a GPU target)."""
    isa: str | None = None
    """The vector ISA the choice was made for (None: a GPU target, or unknown)."""
    model: str | None = None
    """The CPU model the choice was made for (None: no entry names one, a GPU target, or
    unknown)."""
    gpu: str | None = None
    """The Vulkan GPU the choice was made for (``generic`` without ``--gpu``; None: an
    x86 build, or no entry names one)."""
    set_aside_by: tuple[str, ...] = ()
    """Tuned parameters given as overrides that set an ``iree_default`` entry aside."""
    defaults_break: str | None = None
    """Where no entry serves the shape: the constraint the recipe's defaults (with the
    overrides) break there, such as a register tile that does not divide the image. They
    still run (a tile larger than its loop is whole, a smaller one leaves a partial tile,
    which is slow), and the choice line says so, with the sweep that would tune it."""
    falls_back: bool = False
    """Where the defaults break a constraint (``defaults_break``) and no tuned parameter
    was given: IREE's own pipeline runs, as for an ``iree_default`` entry, instead of the
    partial tiles the defaults would leave (a row-major matmul kernel whose workgroup
    tile does not divide M runs all of it scalar: 0.04x IREE default at 196x512x512)."""

    @property
    def runs_iree_default(self) -> bool:
        """Whether the recipe's schedules are left out for IREE's own pipeline."""
        if self.falls_back:
            return True
        return self.entry is not None and self.entry.iree_default and not self.set_aside_by

    def describe(self) -> str:
        here = shape = ",".join(f"{name}={value}" for name, value in self.shape)
        if self.threads is not None:
            here += f" on {self.threads} thread" + "s" * (self.threads != 1)
        built_for = ", ".join(part for part in (self.isa, self.model, self.gpu) if part)
        if built_for:
            here += f" ({built_for})"
        if self.entry is None:
            reason = (
                f"no entry fits {here} (skipped {', '.join(self.skipped)}: constraints fail)"
                if self.skipped
                else f"no entry for {here}"
            )
            if self.falls_back:
                return (
                    f"shape table: {reason}; the recipe's parameter defaults break "
                    f"{self.defaults_break!r} at this shape (a partial tile runs slowly), so "
                    f"IREE's own pipeline runs (no schedule): sweep it (tdsched sweep RECIPE "
                    f"--shape {shape}) or give tuned values with --param"
                )
            text = f"shape table: {reason}; the recipe's parameter defaults are used"
            if self.defaults_break is not None:
                text += (
                    f", though they break {self.defaults_break!r} at this shape (a partial "
                    f"tile runs slowly): sweep it (tdsched sweep RECIPE --shape {shape}) "
                    "or give tuned values with --param"
                )
            return text
        if self.set_aside_by:
            what = (
                "IREE's own pipeline, set aside: "
                f"{', '.join(self.set_aside_by)} given, so the schedules run with the "
                "recipe's defaults and the given values"
            )
        elif self.entry.iree_default:
            what = "IREE's own pipeline (no schedule)"
        else:
            what = "its parameters"
        how = "exact match" if self.how == "exact" else f"nearest to {here}"
        if self.entry.isa is not None and self.isa is not None and self.entry.isa != self.isa:
            how += f"; tuned for {self.entry.isa}, none for this build's {self.isa}"
        if self.entry.model_rank(self.model) == 2:
            how += f"; tuned on {self.entry.cpu}, this build's CPU is {self.model}"
        if self.entry.gpu is not None and self.gpu is None:
            how += f"; tuned for the Vulkan GPU {self.entry.gpu}, this is no Vulkan build"
        elif self.entry.gpu is not None and self.entry.gpu != self.gpu:
            how += f"; tuned for {self.entry.gpu}, this build's GPU is {self.gpu}"
        text = f"shape table: entry {self.entry.label} ({how}): {what}"
        if self.skipped:
            text += f"; skipped {', '.join(self.skipped)} (constraints fail at {here})"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "shape": dict(self.shape),
            "threads": self.threads,
            "entry": self.entry.shape_label if self.entry else None,
            "entry_threads": self.entry.threads if self.entry else None,
            "isa": self.isa,
            "entry_isa": self.entry.isa if self.entry else None,
            "cpu": self.model,
            "entry_cpu": self.entry.cpu if self.entry else None,
            "gpu": self.gpu,
            "entry_gpu": self.entry.gpu if self.entry else None,
            "how": self.how,
            "iree_default": self.runs_iree_default,
            "params": dict(self.entry.params) if self.entry else {},
            "skipped": list(self.skipped),
            "set_aside_by": list(self.set_aside_by),
            "defaults_break": self.defaults_break,
            "falls_back": self.falls_back,
        }


@dataclass(frozen=True)
class ShapeTable:
    """The ``shapes`` field of a recipe (see the module docstring)."""

    key: tuple[str, ...]
    entries: tuple[ShapeEntry, ...]
    rule: Rule = "nearest"
    where: Where = field(default_factory=Where)

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.key, self.entries, self.rule, self.where))

    def __hash__(self) -> int:
        """Computed once: a table is a key of the caches below, asked for every candidate
        of a sweep."""
        return self._hash

    def check(self, parameters: Mapping[str, ParamValue]) -> None:
        """Raise a RecipeError at the offending field unless every key and entry
        parameter is declared, key values have their parameter's type (positive integers
        for an integer key, strings for a string key) and shapes are unique. A table and
        parameters that passed are remembered (a recipe is re-made, and so re-checked,
        for every candidate a sweep resolves)."""
        _check_once(self, tuple(parameters.items()))

    def _check(self, parameters: Mapping[str, ParamValue]) -> None:
        for name in self.key:
            if name not in parameters:
                raise RecipeError(
                    self.where.child("key"),
                    f"key parameter {name!r} is not declared under 'parameters'",
                )
            if not isinstance(parameters[name], int | str) or isinstance(parameters[name], bool):
                raise RecipeError(
                    self.where.child("key"),
                    f"key parameter {name!r} must have an integer or string default, "
                    f"got {parameters[name]!r}",
                )
        seen: dict[tuple[Shape, int | None, str | None, str | None, str | None], ShapeEntry] = {}
        for entry in self.entries:
            if [name for name, _ in entry.shape] != list(self.key):
                raise RecipeError(entry.where, f"give exactly the key {list(self.key)}")
            for name, value in entry.shape:
                _check_key_value(name, value, parameters[name], entry.where)
            if entry.threads is not None and entry.threads <= 0:
                raise RecipeError(entry.where, "threads must be a positive integer")
            if entry.isa is not None and entry.isa not in ISAS:
                raise RecipeError(
                    entry.where, f"isa must be one of {', '.join(ISAS)}, got {entry.isa!r}"
                )
            if entry.cpu is not None and (not entry.cpu or entry.cpu == "host"):
                raise RecipeError(
                    entry.where,
                    "cpu names the CPU model the entry was tuned on, as LLVM names it "
                    f"(znver4, sapphirerapids), got {entry.cpu!r}",
                )
            if entry.gpu is not None and not entry.gpu.strip():
                raise RecipeError(
                    entry.where,
                    "gpu names the Vulkan GPU the entry was tuned for, as --gpu names it "
                    "(ampere, rdna3), or generic for IREE's generic Vulkan target",
                )
            place = (entry.shape, entry.threads, entry.isa, entry.cpu, entry.gpu)
            if place in seen:
                first = seen[place].where.line
                raise RecipeError(entry.where, f"a second entry for {entry.label} (line {first})")
            seen[place] = entry
            for name, _ in entry.params:
                if name in self.key:
                    raise RecipeError(entry.where, f"{name} is part of the key, not a tuned value")
                if name not in parameters:
                    known = ", ".join(sorted(set(parameters) - set(self.key)))
                    raise RecipeError(
                        entry.where,
                        f"unknown parameter {name!r}; tuned values must be declared "
                        f"parameters ({known})",
                    )

    def _string_key(self, index: int) -> bool:
        """Whether the key's ``index``-th parameter takes strings (as its entries' values
        do; a table without entries: integers)."""
        return any(isinstance(e.shape[index][1], str) for e in self.entries)

    @property
    def tuned_names(self) -> frozenset[str]:
        """The parameters some entry sets."""
        return frozenset(name for entry in self.entries for name, _ in entry.params)

    def choose(
        self,
        values: Mapping[str, ParamValue],
        constraints: tuple[Constraint, ...] = (),
        threads: int | None = None,
        machine: BuildMachine | None = None,
    ) -> ShapeChoice:
        """The entry for the shape in ``values`` (all the recipe's parameters) run on
        ``threads`` CPU threads (None: a GPU target) built for ``machine`` (the x86 CPU or
        the Vulkan GPU; None: unknown), per ``rule``; an entry whose parameters break a
        constraint at this shape is skipped."""
        shape: list[tuple[str, KeyValue]] = []
        for index, name in enumerate(self.key):
            value = values[name]
            string = self._string_key(index)
            if isinstance(value, bool | float) or isinstance(value, str) != string:
                kind = "a string" if string else "an integer"
                raise RecipeError(
                    self.where.child("key"),
                    f"{name} selects the shape table entry and must be {kind}, got {value!r}",
                )
            shape.append((name, value))
        here = tuple(shape)

        cpu = machine if isinstance(machine, BuildCpu) else None
        isa = cpu.isa if cpu is not None else None
        # the choice names the build's model (GPU) only where an entry names one
        cpu_named = any(entry.cpu is not None for entry in self.entries)
        model = cpu.model if cpu is not None and cpu_named else None
        gpu_named = any(entry.gpu is not None for entry in self.entries)
        gpu = gpu_name(machine) if isinstance(machine, BuildGpu) and gpu_named else None

        ranked, exact = _ranked(self, here, threads, machine, model)
        if exact:
            return ShapeChoice(here, ranked[0], "exact", (), threads, isa, model, gpu)
        skipped: list[str] = []
        if self.rule == "nearest":
            for entry in ranked:
                if entry.iree_default or not _broken({**values, **dict(entry.params)}, constraints):
                    return ShapeChoice(
                        here, entry, "nearest", tuple(skipped), threads, isa, model, gpu
                    )
                skipped.append(entry.label)
        broken = _broken(values, constraints)
        return ShapeChoice(here, None, "none", tuple(skipped), threads, isa, model, gpu, (), broken)


@functools.lru_cache(maxsize=64)
def _check_once(table: ShapeTable, parameters: tuple[tuple[str, ParamValue], ...]) -> None:
    table._check(dict(parameters))  # a RecipeError is raised, never remembered


@functools.lru_cache(maxsize=256)
def _ranked(
    table: ShapeTable,
    here: Shape,
    threads: int | None,
    machine: BuildMachine | None,
    model: str | None,
) -> tuple[tuple[ShapeEntry, ...], bool]:
    """``table``'s entries, nearest first to the shape ``here`` run on ``threads``
    threads built for ``machine`` (its CPU ``model`` where an entry names one), and
    whether the first is an exact match. It depends on nothing else, so a sweep's
    candidates of one shape rank once."""

    def nearness(entry: ShapeEntry) -> tuple[tuple[int, float], int, int, bool, bool]:
        return (
            entry.distance(here, threads, machine),
            entry.model_rank(model),
            entry.gpu_rank(machine),
            entry.threads is None,
            entry.isa is None,
        )

    ranked = sorted(table.entries, key=nearness)  # stable: ties keep the listed order
    return tuple(ranked), bool(ranked) and nearness(ranked[0])[0] == (0, 0.0)


def _check_key_value(name: str, value: KeyValue, default: ParamValue, where: Where) -> None:
    """Raise at ``where`` unless ``value`` has the type of the key parameter's default."""
    if isinstance(default, str):
        if not isinstance(value, str):
            raise RecipeError(where, f"{name} is a string key: give a string, got {value!r}")
    elif isinstance(value, str | bool) or value <= 0:
        raise RecipeError(where, f"key values must be positive integers here ({name}={value!r})")


def _broken(values: Mapping[str, ParamValue], constraints: tuple[Constraint, ...]) -> str | None:
    """The text of the first of ``constraints`` that ``values`` break (or that cannot be
    evaluated for them); None when they meet them all."""
    for constraint in constraints:
        try:
            if not constraint.expression.holds(values):
                return constraint.text
        except ConstraintError:
            return constraint.text
    return None
