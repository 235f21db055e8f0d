"""Per-dispatch times of compiled modules, from IREE's own HAL profiling.

iree-benchmark-module calls a module's function back to back with HAL profiling on
(``--device_profiling_mode``: the target's :attr:`~.target.Target.profiling_mode`) and
writes an ``.ireeprof`` bundle; ``iree-profile dispatch --dispatch_events --format=jsonl``
lists every dispatch it ran: the dispatch function (``<function>_dispatch_<N>_<what>``),
the queue submission it ran in and its duration. The Python runtime cannot record a
bundle (``HalDevice.begin_profiling`` answers "requires a profile sink and is not exposed
by the runtime bindings", IREE 3.13), so the tools shipped beside it do.

Modules are profiled in rounds, as :class:`~.timing.RoundTimer` times them: each round
runs every module once, in alternating order, each in a fresh iree-benchmark-module
process that warms up and then times back-to-back calls for at least
:data:`~.timing.MIN_SAMPLE_S`, with the worker threads, caller policy and malloc
settings of in-process timing (:mod:`.runtime`). A round's sample of the whole function
is the benchmark's wall time per call; only the calls of that timed run count for the
dispatches too (warm-up and sizing calls are dropped), so both come from the same calls.
One call is one queue submission: tdsched's modules record one command buffer per call.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .runtime import cpu_driver, defer_caller_to_workers, keep_freed_memory_env, thread_flags
from .target import Target
from .timing import MIN_SAMPLE_S, Timing, round_order

TOOL_TIMEOUT_S = 600.0
"""Longest one profiled benchmark (or its listing) may run: lavapipe is slow."""
_EVENT_TYPES = frozenset({"dispatch_event", "host_dispatch_event"})
"""iree-profile's records of one dispatch execution: device-timed, host-timed."""
_TIME_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


class ProfileError(RuntimeError):
    """A module could not be profiled: an IREE tool is missing or failed (the message
    says which and why, in one line)."""


@dataclass(frozen=True)
class DispatchEvent:
    """One execution of a dispatch function in a profile."""

    function: str
    call: tuple[int, int]
    """(run, queue submission): the call it ran in, unique over the runs of a profile."""
    index: int
    """Its position in the call's command buffer."""
    duration_ns: int


@dataclass(frozen=True)
class DispatchTime:
    """One dispatch function's time per call of the module."""

    function: str
    median_ms: float
    """The median over the profiled calls of its time in a call (every execution of the
    function in that call, summed)."""
    per_call: int
    """How many times it runs in a call (IREE dispatches one function more than once
    where it deduplicated identical dispatches)."""
    calls: int
    """How many profiled calls the median is over."""


@dataclass(frozen=True)
class ModuleProfile:
    """A module's function per call (one sample per round) and each of its dispatches,
    in the order they run."""

    call_ms: Timing
    dispatches: tuple[DispatchTime, ...]


@dataclass(frozen=True)
class ProfiledModule:
    """A compiled module, the function to call and its inputs as ``.npy`` files."""

    vmfb: Path
    function: str
    inputs: tuple[Path, ...]


def parse_dispatch_events(listing: str, run: int = 0) -> list[DispatchEvent]:
    """The valid dispatch executions in ``iree-profile dispatch --dispatch_events
    --format=jsonl`` output (device- or host-timed), numbered as run ``run``."""
    events = []
    for line in listing.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("type") in _EVENT_TYPES and record.get("valid"):
            events.append(
                DispatchEvent(
                    record["key"],
                    (run, int(record["submission_id"])),
                    int(record["command_index"]),
                    int(record["duration_ns"]),
                )
            )
    return events


def parse_benchmark(results: str) -> tuple[int, float]:
    """(calls, milliseconds per call) of the timed run in iree-benchmark-module's JSON
    results (``--benchmark_out_format=json``): its last non-aggregate row."""
    rows = [r for r in json.loads(results)["benchmarks"] if r.get("run_type") == "iteration"]
    if not rows:
        raise ProfileError("iree-benchmark-module reported no timed run")
    row = rows[-1]
    return int(row["iterations"]), float(row["real_time"]) * _TIME_UNITS_MS[row["time_unit"]]


def last_calls(events: Sequence[DispatchEvent], calls: int) -> list[DispatchEvent]:
    """The events of the last ``calls`` calls: those of the timed run, after warm-up."""
    kept = set(sorted({e.call for e in events})[-calls:])
    return [e for e in events if e.call in kept]


def dispatch_times(events: Iterable[DispatchEvent]) -> tuple[DispatchTime, ...]:
    """Each dispatch function's time per call (:class:`DispatchTime`), in the order they
    first run in a call."""
    per_call: dict[str, dict[tuple[int, int], list[int]]] = defaultdict(lambda: defaultdict(list))
    first: dict[str, int] = {}
    for e in events:
        per_call[e.function][e.call].append(e.duration_ns)
        first[e.function] = min(first.get(e.function, e.index), e.index)
    times = []
    for function, calls in per_call.items():
        totals = [sum(durations) for durations in calls.values()]
        runs = Counter(len(durations) for durations in calls.values()).most_common(1)[0][0]
        times.append(DispatchTime(function, statistics.median(totals) / 1e6, runs, len(calls)))
    return tuple(sorted(times, key=lambda t: first[t.function]))


def profile_modules(
    modules: Mapping[str, ProfiledModule],
    target: Target,
    threads: int | None,
    rounds: int,
    folder: Path,
) -> dict[str, ModuleProfile]:
    """Profile each of ``modules`` in ``rounds`` interleaved rounds (see the module
    docstring) on ``target``'s device with ``threads`` CPU workers (``None`` on GPU
    targets); the bundles and benchmark results are written under ``folder``.

    Precondition: no process holds a lavapipe Vulkan device open meanwhile; its threads
    spin and slowed these runs 1.5x (Vulkan) to 2.5x (x86) when one did.
    """
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    folder.mkdir(parents=True, exist_ok=True)
    samples: dict[str, list[float]] = {name: [] for name in modules}
    events: dict[str, list[DispatchEvent]] = {name: [] for name in modules}
    for index in range(rounds):
        for name in round_order(list(modules), index):
            call_ms, measured = _profile_once(
                modules[name], target, threads, folder / f"{name}-{index}", index
            )
            samples[name].append(call_ms)
            events[name].extend(measured)
    return {
        name: ModuleProfile(Timing.of(samples[name]), dispatch_times(events[name]))
        for name in modules
    }


def _profile_once(
    module: ProfiledModule, target: Target, threads: int | None, stem: Path, run: int
) -> tuple[float, list[DispatchEvent]]:
    """One iree-benchmark-module run with profiling: ms per call, and the dispatches of
    the timed calls."""
    bundle, results = stem.with_suffix(".ireeprof"), stem.with_suffix(".benchmark.json")
    driver = cpu_driver(target.driver, threads)
    if driver == "local-task":
        defer_caller_to_workers()  # the tool inherits it, as timing in process has it
    command = [
        str(tool_path("iree-benchmark-module")),
        f"--module={module.vmfb}",
        f"--device={driver}",
        f"--function={module.function}",
        *(f"--input=@{path}" for path in module.inputs),
        *(thread_flags(threads) if threads is not None else ()),
        f"--device_profiling_mode={target.profiling_mode}",
        f"--device_profiling_output={bundle}",
        f"--benchmark_min_warmup_time={MIN_SAMPLE_S}",
        f"--benchmark_min_time={MIN_SAMPLE_S}s",
        f"--benchmark_out={results}",
        "--benchmark_out_format=json",
    ]
    _run_tool(command)
    calls, call_ms = parse_benchmark(results.read_text())
    profile = str(tool_path("iree-profile"))
    listing = _run_tool([profile, "dispatch", "--dispatch_events", "--format=jsonl", str(bundle)])
    measured = last_calls(parse_dispatch_events(listing, run), calls)
    if not measured:
        raise ProfileError(
            f"the profile of {module.vmfb.name} on {driver} ({target.profiling_mode}) "
            "holds no dispatch"
        )
    return call_ms, measured


def tool_path(name: str) -> Path:
    """An IREE runtime tool, from the iree-base-runtime wheel (beside
    iree-benchmark-module, where :mod:`iree.runtime.benchmark` finds it)."""
    from iree.runtime.benchmark import benchmark_exe

    folder = Path(benchmark_exe()).resolve().parent
    path = folder / name
    if not path.is_file():
        raise ProfileError(f"{name} is not in {folder}; reinstall iree-base-runtime")
    return path


def _run_tool(command: list[str]) -> str:
    """Run an IREE tool and return its stdout; a failure is a one-line ProfileError."""
    name = Path(command[0]).name
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            env=keep_freed_memory_env(os.environ),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ProfileError(f"{name} ran longer than {TOOL_TIMEOUT_S:.0f} s") from exc
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        reason = lines[-1] if lines else "no output"
        raise ProfileError(f"{name} failed (exit {proc.returncode}): {reason}")
    return proc.stdout
