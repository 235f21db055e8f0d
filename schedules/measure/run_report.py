"""``tdsched run``: evaluate one plan and report it (:class:`RunReport`, JSON or text).

Builds the scheduled module and IREE's default (with the recipe's baseline flags), checks
the scheduled results against the reference and times both, interleaved in one process,
so the speedup holds however the machine's speed drifts. A graph schedule that leaves
host-level loops cannot be compiled: its module is checked with the numpy IR evaluator
and not timed.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import iree.compiler.version
import numpy as np
from tdsched.recipes.workloads.bandwidth_probe import bandwidth_probe
from tdsched.targets.compiler import stack_crash_hint
from tdsched.targets.ir_eval import evaluate_fills, evaluate_reference
from tdsched.targets.runtime import LoadedModule
from tdsched.targets.target import DEFAULT_THREADS
from tdsched.targets.timing import Timing, speedup, time_interleaved, time_rounds
from tdsched.targets.workload import input_types, random_inputs
from tdsched.transform_lib.work import count_work_of_text

from ..compile.build_folders import build_folder
from ..compile.pipeline import Plan, apply_graph, compile_default_workload
from .evaluation import (
    EVALUATION_ERRORS,
    build_and_check,
    compare_outputs,
    prepare_device,
    status_of,
)
from .isolation import ChildFailure, Progress, call_isolated
from .machine_peak import MachinePeak, machine_peak
from .peers import build_peers
from .profile_report import PROFILE_FOLDER, DispatchProfile, measure_profile, prepare_profile
from .request import Request
from .status import Check, Status


@dataclass(frozen=True)
class Bandwidth:
    """GB/s on the workload's compulsory traffic (inputs read once, outputs written once)
    of the scheduled and baseline builds and of a memory-bound probe of the same size."""

    traffic_bytes: int
    scheduled_gbps: float
    baseline_gbps: float
    probe_gbps: float
    probe: str
    fraction_of_probe: float


@dataclass(frozen=True)
class Throughput:
    """GFLOP/s of the scheduled and baseline builds on the workload's arithmetic work
    (:mod:`tdsched.transform_lib.work`), against the machine's measured FMA peak."""

    flops: int
    uncounted: list[str]
    """Ops whose work is not in ``flops`` (dynamic shapes, softmax): then a lower bound."""
    scheduled_gflops: float
    baseline_gflops: float
    peak: MachinePeak
    fraction_of_fma_peak: float
    """Scheduled GFLOP/s over the measured FMA peak at the run's thread count."""

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Throughput:
        return Throughput(**{**data, "peak": MachinePeak(**data["peak"])})


@dataclass(frozen=True)
class PeerResult:
    """One peer (:mod:`.peers`) timed in the same run: ``speedup`` is the peer's time
    over the scheduled build's (above 1: the schedule is faster)."""

    name: str
    check: Check
    """How its build and its results against the reference went."""
    time_ms: Timing | None = None
    speedup: float | None = None
    gflops: float | None = None

    @staticmethod
    def from_dict(data: dict[str, Any]) -> PeerResult:
        """The peer :meth:`as_dict` gave as ``data``."""
        time_ms = Timing(**data["time_ms"]) if data.get("time_ms") else None
        check = Check(Status(data["status"]), data["max_abs_error"], data["error"])
        return PeerResult(data["name"], check, time_ms, data["speedup"], data["gflops"])

    def as_dict(self) -> dict[str, Any]:
        """The peer as JSON values: its check's fields flat beside its timing."""
        return {
            "name": self.name,
            **self.check.as_dict(),
            "time_ms": self.time_ms.as_dict() if self.time_ms else None,
            "speedup": self.speedup,
            "gflops": self.gflops,
        }


@dataclass
class RunReport:
    """What ``tdsched run`` found for one recipe on one target (see docs/commands/run.md)."""

    recipe: str
    target: str
    workload: str
    parameters: dict[str, Any]
    threads: int | None
    """x86 worker threads (``None`` on GPU targets)."""
    baseline: str
    """What the scheduled build is timed against, e.g. ``iree-default``."""
    iree_version: str = iree.compiler.version.VERSION
    status: Status = Status.ERROR
    error: str | None = None
    max_abs_error: float | None = None
    reference: str | None = None
    reference_note: str | None = None
    """Why a workload without its own reference was not checked against the numpy IR
    evaluator (:attr:`~.evaluation.Reference.note`)."""
    baseline_check: dict[str, Any] | None = None
    """The baseline's results against the workload's own reference (``Check.as_dict``);
    absent when IREE default is the reference."""
    evaluated_by: str | None = None
    compile_command: list[str] | None = None
    time_ms: Timing | None = None
    baseline_ms: Timing | None = None
    speedup: float | None = None
    """The schedule's time over IREE default's, the median of per-round ratios."""
    speedup_interval: list[float] | None = None
    """The 95% interval of :attr:`speedup` (``[low, high]``, distribution-free)."""
    bandwidth: Bandwidth | None = None
    throughput: Throughput | None = None
    peers: list[PeerResult] | None = None
    shape_entry: dict[str, Any] | None = None
    """The ``shapes`` table entry the parameters came from (:mod:`.shape_table`)."""
    applied: list[str] | None = None
    """The graph steps and kernel schedules the build applies (``Recipe.applied``)."""
    skipped: list[str] | None = None
    """The steps and kernel schedules left out by their ``when`` (:mod:`.conditions`)."""
    profile: DispatchProfile | None = None
    """Per-dispatch times of both builds (``--profile``, :mod:`.profile_report`)."""

    @staticmethod
    def from_json(data: dict[str, Any]) -> RunReport:
        """The report :meth:`to_json` wrote (read back from a child process)."""
        fields = {f.name for f in dataclasses.fields(RunReport)}
        report = RunReport(**{k: v for k, v in data.items() if k in fields})
        report.status = Status(data["status"])
        for name in ("time_ms", "baseline_ms"):
            if data.get(name):
                setattr(report, name, Timing(**data[name]))
        if data.get("bandwidth"):
            report.bandwidth = Bandwidth(**data["bandwidth"])
        if data.get("throughput"):
            report.throughput = Throughput.from_dict(data["throughput"])
        if data.get("peers") is not None:
            report.peers = [PeerResult.from_dict(peer) for peer in data["peers"]]
        return report

    def take(self, check: Check) -> None:
        """Record a numerics check."""
        self.status, self.max_abs_error, self.error = check.status, check.max_abs_error, check.error

    def to_json(self) -> dict[str, Any]:
        """The JSON object of ``tdsched run --json``: every key always present except
        ``compile_command``, ``reference``, ``baseline_check``, ``error``,
        ``evaluated_by``, ``bandwidth``,
        ``throughput``, ``peers``, ``shape_entry``, ``applied``, ``skipped`` and
        ``profile``, which appear when known."""
        data: dict[str, Any] = {
            "recipe": self.recipe,
            "target": self.target,
            "workload": self.workload,
            "parameters": self.parameters,
            "iree_version": self.iree_version,
            "threads": self.threads,
            "status": str(self.status),
            "max_abs_error": self.max_abs_error,
            "time_ms": self.time_ms.as_dict() if self.time_ms else None,
            "baseline": self.baseline,
            "baseline_ms": self.baseline_ms.as_dict() if self.baseline_ms else None,
            "speedup": self.speedup,
        }
        optional = {
            "speedup_interval": self.speedup_interval,
            "compile_command": self.compile_command,
            "reference": self.reference,
            "reference_note": self.reference_note,
            "baseline_check": self.baseline_check,
            "error": self.error,
            "evaluated_by": self.evaluated_by,
            "bandwidth": dataclasses.asdict(self.bandwidth) if self.bandwidth else None,
            "throughput": dataclasses.asdict(self.throughput) if self.throughput else None,
            "peers": [peer.as_dict() for peer in self.peers] if self.peers is not None else None,
            "shape_entry": self.shape_entry,
            "applied": self.applied,
            "skipped": self.skipped,
            "profile": self.profile.as_dict() if self.profile else None,
        }
        data.update({k: v for k, v in optional.items() if v is not None})
        return data


def run(
    p: Plan,
    *,
    threads: int = DEFAULT_THREADS,
    repeats: int = 7,
    seed: int = 0,
    out_dir: Path | None = None,
    time_it: bool = True,
    peers: bool = False,
    peak: bool = True,
    stage: Callable[[RunReport, str], None] | None = None,
    profile_folder: Path | None = None,
) -> RunReport:
    """Evaluate ``p``: compile, check against the reference and time vs the baseline
    (and vs the :mod:`.peers` when ``peers``; GFLOP/s against the machine's measured
    FMA peak when ``peak`` and the workload does arithmetic).

    With ``profile_folder``, builds that were timed are set up there for
    :func:`~.profile_report.measure_profile`, which runs once this process has let go
    of the device (:func:`run_isolated` does both). ``out_dir`` must then be given: the
    builds must outlive this call.

    Never raises for schedule, compile or runtime failures: they become the report's
    status (:func:`~.evaluation.status_of`) and error. ``stage`` hears which stage
    starts (``building and checking``, ``timing``), with the report so far.
    """
    if profile_folder is not None and out_dir is None:
        raise ValueError("profiling needs an out_dir: the builds are profiled after run")
    stage = stage or (lambda report, name: None)
    report = RunReport(
        recipe=p.recipe.name,
        target=p.target.name,
        workload=p.workload.name,
        parameters=dict(p.recipe.parameters),
        threads=threads if not p.target.is_gpu else None,
        baseline=p.recipe.baseline.label,
    )
    choice = p.recipe.shape_choice
    if choice is not None:
        report.shape_entry = {**choice.as_dict(), "description": choice.describe()}
    report.applied = list(p.recipe.applied) or None
    if p.recipe.skipped:
        report.skipped = [skipped.describe() for skipped in p.recipe.skipped]
    with tempfile.TemporaryDirectory(prefix="tdsched-") as tmp:
        work = out_dir or Path(tmp)
        try:
            if p.scripts.has_host_loops:
                _evaluate_payload(p, seed, report)
                return report
            input_types(p.workload)  # static shapes, or the error saying what to do
            stage(report, "building and checking")
            prepare_device(p.target, threads)
            compiled, checked = build_and_check(p, work, seed)
            report.compile_command = compiled.command
            report.reference = checked.reference.kind
            report.reference_note = checked.reference.note
            if checked.baseline_check is not None:
                report.baseline_check = checked.baseline_check.as_dict()
            report.take(checked.check)
            if time_it and checked.check.status is Status.OK:
                variants = checked.runners()
                after: dict[str, Any] = {}
                if peers:
                    stage(report, "building and checking the peers")
                    report.peers = _add_peers(p, checked.reference, work, threads, variants, after)
                stage(report, "timing")
                _time(p, variants, checked.reference.inputs, checked.got, repeats, work, report)
                _time_peers_after(after, repeats, report)
                if peak:
                    stage(report, "measuring the machine's peak")
                    report.throughput = _throughput(p, threads, report)
                if profile_folder is not None:
                    stage(report, "preparing the profile")
                    roofs = _profile_peak(p, threads, peak, report)
                    prepare_profile(
                        p, checked, compiled.output, report.threads, roofs, profile_folder
                    )
        except EVALUATION_ERRORS as exc:
            report.status, report.error = status_of(exc), str(exc)
    return report


def _time(
    p: Plan,
    variants: dict[str, Any],
    inputs: list[np.ndarray],
    got: list[np.ndarray],
    repeats: int,
    work: Path,
    report: RunReport,
) -> None:
    """Time the variants interleaved (plus the bandwidth probe when asked)."""
    probe = None
    if "bandwidth" in p.recipe.metrics:
        probe, probe_inputs = bandwidth_probe(inputs, got)
        probe_vmfb = compile_default_workload(probe, p.target, work)
        variants["probe"] = LoadedModule(probe_vmfb, p.target.driver, probe.function).runner(
            probe_inputs
        )
    samples = time_rounds(variants, repeats=repeats)
    times = {name: Timing.of(values) for name, values in samples.items()}
    report.time_ms, report.baseline_ms = times["scheduled"], times["baseline"]
    found = speedup(samples, "scheduled", "baseline")
    report.speedup, report.speedup_interval = found.median, [found.low, found.high]
    _record_peer_times(times, report, samples)
    if probe is not None:
        report.bandwidth = _bandwidth(inputs, got, times, probe.name)


def _time_peers_after(after: dict[str, Any], repeats: int, report: RunReport) -> None:
    """Time the peers that must not interleave with IREE's builds, in a block of their own."""
    if after and report.time_ms is not None:
        _record_peer_times(time_interleaved(after, repeats=repeats), report)


def _record_peer_times(
    times: Mapping[str, Timing],
    report: RunReport,
    samples: Mapping[str, Sequence[float]] | None = None,
) -> None:
    """Record the peers' times and the schedule's speedup over each: per round
    (:func:`~tdsched.targets.timing.speedup`) for a peer timed in the scheduled build's
    rounds (``samples``), else the ratio of the medians of the two blocks it was timed in
    (numpy, kept out of IREE's rounds)."""
    if report.peers is None or report.time_ms is None:
        return
    scheduled = report.time_ms.median

    def over(name: str) -> float:
        if samples is not None and name in samples:
            return speedup(samples, "scheduled", name).median
        return times[name].median / scheduled

    report.peers = [
        dataclasses.replace(peer, time_ms=times[peer.name], speedup=over(peer.name))
        if peer.name in times
        else peer
        for peer in report.peers
    ]


def _add_peers(
    p: Plan,
    reference: Any,
    work: Path,
    threads: int,
    variants: dict[str, Any],
    after: dict[str, Any],
) -> list[PeerResult]:
    """Build and check the peers; those that are right join the interleaved
    ``variants``, or the block timed ``after`` them (:mod:`.peers` says why)."""
    results = []
    for built in build_peers(p, reference, work, threads):
        if built.run is not None:
            (variants if built.interleaved else after)[built.name] = built.run
        results.append(PeerResult(built.name, built.check))
    return results


def _throughput(p: Plan, threads: int, report: RunReport) -> Throughput | None:
    """GFLOP/s and % of the measured FMA peak, for workloads that do arithmetic."""
    work = count_work_of_text(p.workload.mlir)
    if work.ops == 0 or report.time_ms is None or report.baseline_ms is None:
        return None

    def gflops(timing: Timing) -> float:
        return work.ops / (timing.median * 1e-3) / 1e9

    timed = [report.time_ms, report.baseline_ms, *(q.time_ms for q in report.peers or [])]
    fastest = max(gflops(t) for t in timed if t is not None)
    peak = machine_peak(p.target, threads, exceeded=fastest)

    if report.peers:
        report.peers = [
            dataclasses.replace(peer, gflops=gflops(peer.time_ms)) if peer.time_ms else peer
            for peer in report.peers
        ]
    scheduled = gflops(report.time_ms)
    return Throughput(
        flops=work.ops,
        uncounted=list(work.uncounted),
        scheduled_gflops=scheduled,
        baseline_gflops=gflops(report.baseline_ms),
        peak=peak,
        fraction_of_fma_peak=scheduled / peak.fma_gflops,
    )


def _profile_peak(p: Plan, threads: int, peak: bool, report: RunReport) -> MachinePeak | None:
    """The peak the profile's roofs come from: the one the throughput used, or measured
    now for a workload without arithmetic (its dispatches still move bytes)."""
    if not peak:
        return None
    return report.throughput.peak if report.throughput else machine_peak(p.target, threads)


def _bandwidth(
    inputs: list[np.ndarray], outputs: list[np.ndarray], times: Mapping[str, Timing], probe: str
) -> Bandwidth:
    traffic = sum(a.nbytes for a in inputs) + sum(a.nbytes for a in outputs)

    def gbps(name: str) -> float:
        return traffic / (times[name].median * 1e-3) / 1e9

    return Bandwidth(
        traffic_bytes=traffic,
        scheduled_gbps=gbps("scheduled"),
        baseline_gbps=gbps("baseline"),
        probe_gbps=gbps("probe"),
        probe=probe,
        fraction_of_probe=gbps("scheduled") / gbps("probe"),
    )


def _evaluate_payload(p: Plan, seed: int, report: RunReport) -> None:
    """Numerics of a graph schedule that left host loops, by evaluating IR in numpy."""
    after = apply_graph(p).module
    inputs = random_inputs(p.workload, seed)
    undefined = None
    if p.workload.reference is not None:
        want = p.workload.reference(inputs)
    else:
        want, undefined = evaluate_reference(p.workload.mlir, p.workload.function, inputs)
    # Under every fill of uninitialized data: a read one fill hides shows under another.
    checks = [
        compare_outputs(got, want, p.recipe.tolerance, undefined)
        for got in evaluate_fills(after, p.workload.function, inputs)
    ]
    report.reference = p.workload.reference_kind if p.workload.reference else "numpy-ir-evaluator"
    report.evaluated_by = (
        "numpy IR evaluator: the graph schedule leaves host-level loops, which IREE cannot "
        "compile, so it is checked but not timed"
    )
    report.take(next((c for c in checks if c.status is not Status.OK), checks[0]))


class PlanError(ValueError):
    """The recipe did not plan (in the child process): the message is the error's own."""


@dataclass(frozen=True)
class RunRequest:
    """What ``tdsched run`` evaluates: the :class:`~.request.Request` and how to run it,
    as plain JSON values (it crosses to a child)."""

    request: Request
    """The recipe, its build (target None: the recipe's first), parameters and seed."""
    repeats: int
    time_it: bool
    peers: bool = False
    peak: bool = True
    out_dir: str | None = None
    """Where the build files go and stay (``--keep-temps``); ``None``: a temporary folder."""
    profile: bool = False
    """Profile each dispatch of both builds after the child exits (``--profile``)."""

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "request": self.request.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRequest:
        """The request :meth:`to_json` gave as ``data``."""
        return cls(**{**data, "request": Request.from_json(data["request"])})


ENTRY = "tdsched.schedules.measure.run_report:run_json"


def run_isolated(request: RunRequest) -> RunReport:
    """Plan and :func:`run` ``request`` in a child process: a module that crashes (an
    out-of-bounds write: SIGSEGV) gives a ``crashed`` report naming the stage it died
    in, not a dead command. A recipe that does not plan raises its RecipeError here.

    With ``request.profile``, builds that were timed are then profiled in this process,
    after the child has exited (:mod:`.profile_report` says why); the build files go to
    ``request.out_dir`` or a temporary folder. A failed profile raises ProfileError.
    """
    if not request.profile:
        return _run_child(request)
    kept = Path(request.out_dir) if request.out_dir else None
    with build_folder(kept, "tdsched-run-") as folder:
        report = _run_child(dataclasses.replace(request, out_dir=str(folder)))
        if report.status is Status.OK and report.time_ms is not None:
            timed = {"scheduled": report.time_ms.median}
            if report.baseline_ms is not None:
                timed["baseline"] = report.baseline_ms.median
            report.profile = measure_profile(folder / PROFILE_FOLDER, request.repeats, timed)
    return report


def run_recipe(request: RunRequest, recipe: Path) -> RunReport:
    """``request`` run on the recipe file ``recipe`` (:func:`run_isolated`): how a command
    that writes recipes (``tune``) checks and times each with one set of run settings."""
    on = dataclasses.replace(request.request, recipe=str(recipe))
    return run_isolated(dataclasses.replace(request, request=on))


def _run_child(request: RunRequest) -> RunReport:
    result = call_isolated(ENTRY, request.to_json())
    if isinstance(result, ChildFailure):
        progress = result.progress or {}
        if "report" not in progress:
            raise PlanError(f"{request.request.recipe}: while planning, {result.message}")
        report = RunReport.from_json(progress["report"])
        report.status = result.status
        report.error = f"while {progress['stage']}, {result.message}"
        if "SIGSEGV" in result.message and progress.get("hint"):
            report.error += f"\nlikely cause: {progress['hint']}"
        return report
    if "plan_error" in result:
        raise PlanError(result["plan_error"])
    return RunReport.from_json(result)


def run_json(request: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The child's side of :func:`run_isolated`: plan, then run, reporting each stage."""
    r = RunRequest.from_json(request)
    try:
        p = r.request.plan()
    except EVALUATION_ERRORS as exc:
        return {"plan_error": str(exc)}

    threads = r.request.build.run_threads
    hint = stack_crash_hint(p.recipe.compile_flags, threads)

    def stage(report: RunReport, name: str) -> None:
        progress({"report": report.to_json(), "stage": name, "hint": hint})

    report = run(
        p,
        threads=threads,
        repeats=r.repeats,
        seed=r.request.seed,
        time_it=r.time_it,
        peers=r.peers,
        peak=r.peak,
        out_dir=Path(r.out_dir) if r.out_dir else None,
        stage=stage,
        profile_folder=Path(r.out_dir) / PROFILE_FOLDER if r.profile and r.out_dir else None,
    )
    return report.to_json()
