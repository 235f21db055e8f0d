"""``tdsched run --profile``: where each build's time goes, dispatch by dispatch.

The scheduled build and IREE's default are profiled with IREE's HAL profiling
(:mod:`tdsched.targets.dispatch_profile`). Each dispatch is joined with what it does
(:mod:`tdsched.transform_lib.dispatch_work`: FLOP, bytes moved, the kernel schedule that
built it) and with the machine's measured peak (:mod:`.machine_peak`), and the
dispatches of the two builds are paired (:func:`pair_dispatches`).

It happens on either side of ``tdsched run``'s child process:

* :func:`prepare_profile`, in the child (it has the plan): writes the inputs, and what
  each build's dispatches do, into the build folder (:data:`SETUP_FILE`);
* :func:`measure_profile`, in the parent once the child has exited: profiles both builds
  and joins. The child holds the target's device open, and an open lavapipe device keeps
  two cores busy: profiled beside one, Vulkan ran 1.5x and x86 2.5x slower.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tdsched.targets.compiler import CompileRequest, run_compile
from tdsched.targets.dispatch_profile import ModuleProfile, ProfiledModule, profile_modules
from tdsched.targets.target import make_target, run_conditions
from tdsched.targets.timing import Timing
from tdsched.transform_lib.dispatch_work import CONFIGURED_FLAGS, DispatchWork, read_dispatch_work

from ..base.text_table import aligned
from ..compile.pipeline import Plan
from .evaluation import CheckedBuild
from .machine_peak import MachinePeak

PROFILE_FOLDER = "profile"
"""The subfolder of a run's build folder that the profile's files go to."""
SETUP_FILE = "setup.json"
"""The file that tells :func:`measure_profile` what to profile."""
_NAME = re.compile(r"_dispatch_(\d+)(?:_(.*))?$")


@dataclass(frozen=True)
class _ProfiledBuild:
    vmfb: str
    configured: str
    """The build's iree-compile output stopped after kernel configuration."""


@dataclass(frozen=True)
class ProfileSetup:
    """What :func:`measure_profile` needs from the run's child (JSON in the build folder)."""

    target: str
    threads: int | None
    function: str
    inputs: tuple[str, ...]
    builds: dict[str, _ProfiledBuild]
    peak: MachinePeak | None

    def write(self, folder: Path) -> None:
        (folder / SETUP_FILE).write_text(json.dumps(dataclasses.asdict(self), indent=2))

    @staticmethod
    def read(folder: Path) -> ProfileSetup:
        data = json.loads((folder / SETUP_FILE).read_text())
        peak = MachinePeak(**data["peak"]) if data["peak"] else None
        builds = {name: _ProfiledBuild(**files) for name, files in data["builds"].items()}
        inputs = tuple(data["inputs"])
        return ProfileSetup(**{**data, "inputs": inputs, "builds": builds, "peak": peak})


def prepare_profile(
    p: Plan,
    checked: CheckedBuild,
    scheduled_vmfb: Path,
    threads: int | None,
    peak: MachinePeak | None,
    folder: Path,
) -> None:
    """Write what profiling the two builds of ``checked`` needs into ``folder``: the
    inputs (``.npy``), each build compiled again up to kernel configuration (its dispatches
    as they run, :mod:`tdsched.transform_lib.dispatch_work`) and :data:`SETUP_FILE`.

    ``folder`` must outlive this process: the builds are profiled after it exits.
    """
    folder.mkdir(parents=True, exist_ok=True)
    inputs = []
    for index, array in enumerate(checked.reference.inputs):
        path = folder / f"input{index}.npy"
        np.save(path, array)
        inputs.append(str(path))
    baseline_source = folder / "baseline.input.mlir"
    baseline_source.write_text(p.workload.mlir)
    requests = {
        "scheduled": (
            checked.files.input_file,
            checked.files.kernel_library,
            p.recipe.compile_flags,
        ),
        "baseline": (baseline_source, None, p.recipe.baseline.flags),
    }
    vmfbs = {"scheduled": scheduled_vmfb, "baseline": checked.baseline_vmfb}
    builds = {}
    for name, (source, library, flags) in requests.items():
        configured = folder / f"{name}.configured.mlir"
        run_compile(
            CompileRequest(source, p.target, configured, library, (*flags, *CONFIGURED_FLAGS))
        )
        builds[name] = _ProfiledBuild(str(vmfbs[name]), str(configured))
    setup = ProfileSetup(p.target.name, threads, p.workload.function, tuple(inputs), builds, peak)
    setup.write(folder)


@dataclass(frozen=True)
class DispatchRow:
    """One dispatch of one build: its time per call and what it does at that speed."""

    function: str
    kernel: str | None
    """The kernel schedule that built it; ``None``: IREE's own configuration."""
    time_ms: float
    """Median time per call (:class:`~tdsched.targets.dispatch_profile.DispatchTime`)."""
    per_call: int
    calls: int
    share: float
    """Of the build's median call."""
    flops: int | None
    """Per call (every run of it in a call); ``None`` when its work is unknown."""
    uncounted: tuple[str, ...]
    traffic_bytes: int | None
    gflops: float | None
    gbps: float | None
    fraction_of_roof: float | None
    """Of the roofline at its arithmetic intensity: the FMA peak, or the bandwidth peak
    times its FLOP per byte, whichever is lower (``bound`` says which)."""
    bound: str | None
    """``FMA`` or ``bandwidth``: the roof that is lower at its intensity."""

    @property
    def label(self) -> str:
        """``#N what``: the dispatch's number and IREE's description of it."""
        ordinal, what = _name_parts(self.function)
        return f"#{ordinal} {what}".rstrip()

    @property
    def intensity(self) -> float | None:
        """FLOP per byte moved; ``None`` without both."""
        if not self.flops or not self.traffic_bytes:
            return None
        return self.flops / self.traffic_bytes


def _name_parts(function: str) -> tuple[str, str]:
    """(N, description) of ``<function>_dispatch_<N>_<description>``; a name IREE did not
    form that way is all description."""
    found = _NAME.search(function)
    return (found.group(1), found.group(2) or "") if found else ("?", function)


def join_dispatches(
    profile: ModuleProfile, work: Mapping[str, DispatchWork], peak: MachinePeak | None
) -> list[DispatchRow]:
    """Each profiled dispatch with its work (by function name; a dispatch without is
    shown with time only) and its share of the roof under ``peak``."""
    call = profile.call_ms.median
    rows = []
    for timed in profile.dispatches:
        done = work.get(timed.function)
        seconds = timed.median_ms * 1e-3
        flops = done.work.ops * timed.per_call if done else None
        traffic = done.traffic_bytes * timed.per_call if done and done.traffic_bytes else None
        gflops = flops / seconds / 1e9 if flops else None
        gbps = traffic / seconds / 1e9 if traffic else None
        fraction, bound = _roof(gflops, gbps, peak)
        rows.append(
            DispatchRow(
                function=timed.function,
                kernel=done.kernel if done else None,
                time_ms=timed.median_ms,
                per_call=timed.per_call,
                calls=timed.calls,
                share=timed.median_ms / call,
                flops=flops,
                uncounted=done.work.uncounted if done else (),
                traffic_bytes=traffic,
                gflops=gflops,
                gbps=gbps,
                fraction_of_roof=fraction,
                bound=bound,
            )
        )
    return rows


def _roof(
    gflops: float | None, gbps: float | None, peak: MachinePeak | None
) -> tuple[float | None, str | None]:
    """The fraction of the roof and which roof: the larger of GFLOP/s over the FMA peak
    and GB/s over the bandwidth peak is the fraction of the lower roof."""
    if peak is None:
        return None, None
    fractions = []
    if gflops:
        fractions.append((gflops / peak.fma_gflops, "FMA"))
    if gbps:
        fractions.append((gbps / peak.bandwidth_gbps, "bandwidth"))
    if not fractions:
        return None, None
    fraction, bound = max(fractions)
    return fraction, bound


@dataclass(frozen=True)
class DispatchPair:
    """A dispatch of the scheduled build and the dispatch of IREE's default that does the
    same thing, or one of them alone (see :func:`pair_dispatches`)."""

    scheduled: DispatchRow | None
    baseline: DispatchRow | None
    paired_by: str
    """``description`` or ``work`` (:func:`pair_dispatches`), or ``unpaired``."""

    @property
    def speedup(self) -> float | None:
        """IREE default's time over the schedule's (above 1: the schedule is faster)."""
        if self.scheduled is None or self.baseline is None:
            return None
        return self.baseline.time_ms / self.scheduled.time_ms

    def as_dict(self) -> dict[str, Any]:
        def row(r: DispatchRow | None) -> dict[str, Any] | None:
            return {**dataclasses.asdict(r), "label": r.label} if r else None

        return {
            "paired_by": self.paired_by,
            "speedup": self.speedup,
            "scheduled": row(self.scheduled),
            "baseline": row(self.baseline),
        }


def _same_description(scheduled: DispatchRow, baseline: DispatchRow) -> bool:
    return _name_parts(scheduled.function)[1] == _name_parts(baseline.function)[1]


def _same_work(scheduled: DispatchRow, baseline: DispatchRow) -> bool:
    return bool(scheduled.flops) and scheduled.flops == baseline.flops


_PAIRING_RULES: tuple[tuple[str, Callable[[DispatchRow, DispatchRow], bool]], ...] = (
    ("description", _same_description),
    ("work", _same_work),
)
""":func:`pair_dispatches`'s rules, in the order they are tried."""


def pair_dispatches(
    scheduled: Sequence[DispatchRow], baseline: Sequence[DispatchRow]
) -> list[DispatchPair]:
    """Pair the dispatches of the two builds.

    1. By description: IREE names a dispatch ``<function>_dispatch_<N>_<description>``
       after its root op and shape (``conv_56x56x64x3x3x64_f32``); equal descriptions
       pair in the order the builds run them (N may differ: a graph schedule can add or
       merge dispatches before it).
    2. The rest by work: equal, non-zero FLOP per call is the same computation under
       another name (e.g. a convolution a graph schedule turned into a matmul).
    3. What is left stands alone (``unpaired``): a dispatch one build has and the other
       does not (fused away, or a pack a graph schedule added).

    Pairs come in the scheduled build's order; default dispatches left alone come last.
    """
    free = list(baseline)
    matched: dict[int, tuple[DispatchRow, str]] = {}
    for rule, same in _PAIRING_RULES:
        for index, row in enumerate(scheduled):
            if index in matched:
                continue
            partner = next((b for b in free if same(row, b)), None)
            if partner is not None:
                free.remove(partner)
                matched[index] = (partner, rule)
    pairs = [
        DispatchPair(row, *matched[index])
        if index in matched
        else DispatchPair(row, None, "unpaired")
        for index, row in enumerate(scheduled)
    ]
    return pairs + [DispatchPair(None, row, "unpaired") for row in free]


@dataclass(frozen=True)
class BuildProfile:
    """One build's profile: its function per call and its dispatches."""

    call_ms: Timing
    """The whole function per call, one sample per round (the benchmark's mean)."""
    dispatches: tuple[DispatchRow, ...]
    timed_ms: float | None = None
    """The run's own median of the whole function (timed without profiling, interleaved
    with the other build), when the profile comes from ``tdsched run``."""

    @property
    def in_dispatches_ms(self) -> float:
        return sum(d.time_ms for d in self.dispatches)

    @property
    def fraction_in_dispatches(self) -> float:
        """The dispatches' times over the median call: below 1, the rest went outside
        dispatches (the host's calls, allocations, waits; queue fills and copies)."""
        return self.in_dispatches_ms / self.call_ms.median

    @property
    def fraction_of_timed(self) -> float | None:
        """The dispatches' times over :attr:`timed_ms` (profiling's own cost left out)."""
        return self.in_dispatches_ms / self.timed_ms if self.timed_ms else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "call_ms": self.call_ms.as_dict(),
            "in_dispatches_ms": self.in_dispatches_ms,
            "fraction_in_dispatches": self.fraction_in_dispatches,
            "timed_ms": self.timed_ms,
            "fraction_of_timed": self.fraction_of_timed,
        }


@dataclass(frozen=True)
class DispatchProfile:
    """Both builds' dispatches, timed the same way, paired, against the machine's peak."""

    target: str
    threads: int | None
    mode: str
    """IREE's profiling mode (``--device_profiling_mode``) that timed the dispatches."""
    rounds: int
    peak: MachinePeak | None
    builds: dict[str, BuildProfile]
    """``scheduled`` and ``baseline``."""
    pairs: tuple[DispatchPair, ...]

    def as_dict(self) -> dict[str, Any]:
        """The ``profile`` object of ``tdsched run --json`` (docs/commands/run.md)."""
        return {
            "tool": "iree-benchmark-module",
            "profiling_mode": self.mode,
            "statistic": "median",
            "rounds": self.rounds,
            "threads": self.threads,
            "peak": self.peak.as_dict() if self.peak else None,
            "builds": {name: build.as_dict() for name, build in self.builds.items()},
            "dispatches": [pair.as_dict() for pair in self.pairs],
        }


def measure_profile(
    folder: Path, rounds: int, timed_ms: Mapping[str, float] | None = None
) -> DispatchProfile:
    """Profile the builds that :func:`prepare_profile` set up in ``folder`` in ``rounds``
    interleaved rounds and join their dispatches with their work. ``timed_ms``: each
    build's median whole-function time from the run's own timing (by build name), kept
    beside the profiled calls (:attr:`BuildProfile.timed_ms`).

    Precondition: no process holds the target's device open (module docstring).
    """
    setup = ProfileSetup.read(folder)
    target = make_target(setup.target)
    inputs = tuple(Path(path) for path in setup.inputs)
    modules = {
        name: ProfiledModule(Path(files.vmfb), setup.function, inputs)
        for name, files in setup.builds.items()
    }
    profiles = profile_modules(modules, target, setup.threads, rounds, folder / "runs")
    builds = {}
    for name, files in setup.builds.items():
        work = {d.function: d for d in read_dispatch_work(Path(files.configured).read_text())}
        rows = join_dispatches(profiles[name], work, setup.peak)
        timed = (timed_ms or {}).get(name)
        builds[name] = BuildProfile(profiles[name].call_ms, tuple(rows), timed)
    pairs = pair_dispatches(builds["scheduled"].dispatches, builds["baseline"].dispatches)
    return DispatchProfile(
        setup.target, setup.threads, target.profiling_mode, rounds, setup.peak, builds, tuple(pairs)
    )


def profile_lines(profile: DispatchProfile) -> list[str]:
    """``tdsched run``'s text for a profile: a heading, one row per dispatch of each build
    (the schedule's first, IREE default's under it), and where each call's time went."""
    where = run_conditions(profile.target, profile.threads)
    lines = [
        f"profile  each dispatch's median time per call, {profile.rounds} rounds ({where}; "
        f"IREE HAL profiling, {profile.mode}); share: of the median call"
    ]
    header = ["dispatch", "build", "kernel", "ms", "share", "GFLOP/s", "GB/s", "roof", "speedup"]
    rows = [header]
    for pair in profile.pairs:
        speedup = f"{pair.speedup:.2f}x" if pair.speedup is not None else ""
        if pair.scheduled is not None:
            rows.append(_cells(pair.scheduled, "scheduled", pair.scheduled.kernel, speedup))
        if pair.baseline is not None:
            mark = " *" if pair.paired_by == "work" else ""
            rows.append(_cells(pair.baseline, "default", None, "", mark))
    lines.extend(aligned(rows))
    if any(pair.paired_by == "work" for pair in profile.pairs):
        lines.append("* paired by equal FLOP per call (IREE describes the two differently)")
    calls = []
    for name, build in profile.builds.items():
        line = (
            f"{'IREE default' if name == 'baseline' else name} {build.call_ms.median:.3f} ms "
            f"per call, {build.fraction_in_dispatches:.0%} in dispatches"
        )
        if build.timed_ms is not None and build.fraction_of_timed is not None:
            line += f" ({build.fraction_of_timed:.0%} of the {build.timed_ms:.3f} ms timed)"
        calls.append(line)
    lines.append("calls    " + "; ".join(calls))
    return lines


def _cells(
    row: DispatchRow, build: str, kernel: str | None, speedup: str, mark: str = ""
) -> list[str]:
    roof = ""
    if row.fraction_of_roof is not None:
        roof = f"{row.fraction_of_roof:.0%} {'FMA' if row.bound == 'FMA' else 'BW'}"
    runs = f" (x{row.per_call} per call)" if row.per_call > 1 else ""
    return [
        row.label + runs + mark,
        build,
        kernel or "IREE default",
        _milliseconds(row.time_ms),
        f"{row.share:.0%}",
        f"{row.gflops:.1f}" if row.gflops else "-",
        f"{row.gbps:.1f}" if row.gbps else "-",
        roof,
        speedup,
    ]


def _milliseconds(value: float) -> str:
    """At least three decimals and three significant digits: 40.744, 0.0210, 0.000412."""
    decimals = 3 if value <= 0 else max(3, 2 - math.floor(math.log10(value)))
    return f"{value:.{decimals}f}"
