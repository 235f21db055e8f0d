"""The bench runner: check and time the builds of a bench bundle on the machine that has
the device, where no compiler needs to be installed.

A **bench bundle** is a folder that ``tdsched sweep --bundle DIR`` writes after compiling
the candidates of a sweep here: the compiled modules, IREE default's build of the same
workload, the seeded inputs and the reference outputs (``.npz``), and ``manifest.json``
(:class:`Manifest`), which names every file with its SHA-256 and says how to check and
time them (tolerance, rounds, seconds per sample, threads). The runner

1. refuses a bundle whose files do not match the manifest (a copy cut short or edited);
2. checks IREE default's build and then every candidate against the reference outputs
   (tdsched's one rule, :func:`~.result_check.compare_results`), and times each candidate
   that is right interleaved with IREE default, round by round, as a local sweep screens
   it (:class:`~.timing.RoundTimer`; the speedup is the median of per-round ratios);
3. writes the results file (:data:`RESULTS_FORMAT`) after every build, atomically, so a
   run that is cut keeps what it measured; run again with the same ``--out`` it goes on
   where it stopped, and a build that was running when the process died is recorded as
   ``crashed`` instead of being run again.

It imports only iree.runtime, numpy and its sibling modules :mod:`.runtime`,
:mod:`.timing`, :mod:`.racing`, :mod:`.result_check` and :mod:`.cpu_isa` (none of which
imports the compiler or the MLIR bindings): the bundle carries a copy of the six files as the
package ``tdsched_bench`` with a launcher, ``bench.py``, so ``python DIR/bench.py`` runs on
a machine with ``pip install iree-base-runtime numpy`` alone. With tdsched installed,
``python -m tdsched.bench DIR`` is the same program.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import iree.runtime as ireert
import iree.runtime.version
import numpy as np

from .cpu_isa import cpu_description
from .racing import RaceSettings, entrants, run_race
from .result_check import compare_results
from .runtime import (
    DeviceError,
    LoadedModule,
    configure_threads,
    cpu_driver,
    keep_freed_memory,
)
from .timing import Interval, RoundTimer, Timing, speedup, time_interleaved

MANIFEST = "manifest.json"
BUNDLE_FORMAT = "tdsched-bench-bundle"
RESULTS_FORMAT = "tdsched-bench-results"
FORMAT_VERSION = 1
BASELINE = "baseline"
"""The name IREE default's build is timed under."""


class BundleError(ValueError):
    """The bundle or results file cannot be used; the message says which file and why."""


@dataclass(frozen=True)
class BuildFile:
    """One compiled module of the bundle."""

    key: str
    """The candidate's content key (IREE default's: ``baseline``)."""
    file: str
    """Its path relative to the bundle."""
    sha256: str
    params: dict[str, Any]
    """The swept values it was built with (labels only)."""


@dataclass(frozen=True)
class Manifest:
    """What a bundle holds and how to run it (``manifest.json``)."""

    bundle: str
    """The bundle's content key: a hash of every file's SHA-256 and the settings below,
    so results name exactly what they measured."""
    origin: dict[str, Any]
    """Where it came from (recipe, target, sweep id, database): for ``--import``."""
    driver: str
    """The IREE runtime driver (``local-task`` for x86, ``vulkan``)."""
    threads: int | None
    """x86 worker threads (None on a GPU)."""
    function: str
    tolerance: dict[str, float]
    """``atol`` and ``rtol``."""
    repeats: int
    """Rounds per candidate, each the candidate then IREE default (or back)."""
    sample_s: float
    """Seconds of back-to-back calls per timed sample."""
    race: dict[str, Any]
    """How the leaders race after screening: :class:`~.racing.RaceSettings`' fields,
    ``field`` (at most this many enter) and ``incumbent`` (a key that races whatever
    its screening: the recipe's own values, or None)."""
    inputs: str
    reference: str
    data_sha256: dict[str, str]
    """SHA-256 of the inputs and reference files."""
    baseline: BuildFile
    builds: tuple[BuildFile, ...]
    peers: tuple[BuildFile, ...] = ()
    """IREE's other builds of the workload a user could pick instead (x86: data tiling,
    with and without microkernels), keyed by name; checked and timed like a candidate."""

    @staticmethod
    def read(folder: Path) -> Manifest:
        """The manifest of the bundle in ``folder``; a :class:`BundleError` naming the
        file and field when it is missing, not JSON, of another format or incomplete."""
        path = folder / MANIFEST
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise BundleError(
                f"{path}: cannot read the bundle's manifest ({exc.strerror})"
            ) from exc
        except json.JSONDecodeError as exc:
            raise BundleError(f"{path}: not JSON ({exc})") from exc
        if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
            raise BundleError(
                f"{path}: not a tdsched bench bundle manifest (no 'format: {BUNDLE_FORMAT}')"
            )
        if data.get("version") != FORMAT_VERSION:
            raise BundleError(
                f"{path}: bundle format version {data.get('version')!r}; this runner reads "
                f"version {FORMAT_VERSION}: use the runner the bundle carries (python bench.py)"
            )
        try:
            return Manifest(
                bundle=data["bundle"],
                origin=data["origin"],
                driver=data["driver"],
                threads=data["threads"],
                function=data["function"],
                tolerance=data["tolerance"],
                repeats=int(data["timing"]["repeats"]),
                sample_s=float(data["timing"]["sample_s"]),
                race=data["race"],
                inputs=data["data"]["inputs"],
                reference=data["data"]["reference"],
                data_sha256=data["data"]["sha256"],
                baseline=BuildFile(**data["baseline"]),
                builds=tuple(BuildFile(**b) for b in data["builds"]),
                peers=tuple(BuildFile(**b) for b in data.get("peers", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{path}: incomplete manifest ({type(exc).__name__}: {exc})") from exc

    def files(self) -> dict[str, str]:
        """Every file the bundle needs → its SHA-256."""
        return {
            self.inputs: self.data_sha256["inputs"],
            self.reference: self.data_sha256["reference"],
            self.baseline.file: self.baseline.sha256,
            **{b.file: b.sha256 for b in (*self.builds, *self.peers)},
        }

    def verify(self, folder: Path) -> None:
        """Raise :class:`BundleError` unless every file is there with its recorded hash."""
        for name, digest in self.files().items():
            path = folder / name
            if not path.is_file():
                raise BundleError(f"{path}: missing from the bundle (copy the whole folder)")
            if sha256_of(path) != digest:
                raise BundleError(
                    f"{path}: its SHA-256 differs from the manifest's: the copy is incomplete "
                    "or the file was changed; copy the bundle again"
                )


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_arrays(path: Path) -> list[np.ndarray]:
    """The arrays of an ``.npz`` the bundle wrote (``arg0``, ``arg1``, ... in order)."""
    with np.load(path, allow_pickle=False) as data:
        return [data[f"arg{i}"] for i in range(len(data.files))]


def describe_device(driver: str) -> dict[str, str]:
    """The machine and device the results were measured on: the runtime driver, the
    device's name as the driver reports it (e.g. ``NVIDIA H100`` or ``llvmpipe`` on
    Vulkan; empty where it reports none), the host CPU, the host and the IREE runtime."""
    name = ""
    try:
        found = ireert.get_driver(driver).query_available_devices()
        name = str(found[0].get("name", "")) if found else ""
    except (RuntimeError, ValueError):
        pass
    return {
        "driver": driver,
        "device": "" if name == "default" else name,  # the CPU drivers' only name
        "cpu": cpu_description(),
        "host": platform.node(),
        "iree_runtime": iree.runtime.version.VERSION,
    }


class ResultsFile:
    """The results of one bundle, rewritten atomically after every build."""

    def __init__(self, path: Path, manifest: Manifest, device: dict[str, str]) -> None:
        self.path = path
        self.data: dict[str, Any] = {
            "format": RESULTS_FORMAT,
            "version": FORMAT_VERSION,
            "bundle": manifest.bundle,
            "origin": manifest.origin,
            "device": device,
            "started": _now(),
            "finished": None,
            "baseline": {},
            "baseline_check": None,
            "running": None,
            "results": [],
            "peers": {},
        }
        if path.exists():
            self._resume(manifest)

    def _resume(self, manifest: Manifest) -> None:
        try:
            earlier = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BundleError(
                f"{self.path}: exists and is not a results file ({exc}); give another --out"
            ) from exc
        if earlier.get("format") != RESULTS_FORMAT or earlier.get("bundle") != manifest.bundle:
            raise BundleError(
                f"{self.path}: holds results of another bundle (or is no results file); "
                "give another --out, or remove it to measure this bundle from the start"
            )
        self.data = earlier
        self.data["finished"] = None

    @property
    def done(self) -> set[str]:
        return {r["key"] for r in self.data["results"]}

    def record(self, key: str, outcome: dict[str, Any], seconds: float) -> None:
        self.data["results"].append({"key": key, "outcome": outcome, "timing_s": round(seconds, 3)})
        self.data["running"] = None
        self.save()

    def save(self) -> None:
        # write_atomically's way (schedules/base/files.py): the runner imports nothing
        # from schedules/, so that a bundle can carry it alone
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        temporary.write_text(json.dumps(self.data, indent=1) + "\n")
        os.replace(temporary, self.path)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _outcome(
    status: str,
    error: str | None = None,
    max_abs_error: float | None = None,
    timed: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """One build's outcome in the form of tdsched's ``Outcome.as_dict``."""
    timing = baseline = ratio = None
    if timed is not None:
        timing = Timing.of(timed["candidate"]).as_dict()
        baseline = Timing.of(timed[BASELINE]).as_dict()
        ratio = speedup(timed, "candidate", BASELINE).as_list()
    return {
        "status": status,
        "max_abs_error": max_abs_error,
        "error": error,
        "timing": timing,
        "baseline": baseline,
        "speedup": ratio,
    }


class Runner:
    """Checks and times the builds of one bundle in this process (module docstring)."""

    def __init__(self, folder: Path, manifest: Manifest) -> None:
        self.folder = folder
        self.manifest = manifest
        if manifest.threads is not None:
            configure_threads(manifest.threads)
        keep_freed_memory()
        self.inputs = read_arrays(folder / manifest.inputs)
        self.want = read_arrays(folder / manifest.reference)
        self.baseline = self.load(manifest.baseline)

    def load(self, build: BuildFile) -> LoadedModule:
        return LoadedModule(self.folder / build.file, self.manifest.driver, self.manifest.function)

    def check(self, module: LoadedModule) -> tuple[float | None, str | None]:
        """The largest error of ``module``'s results and why they do not pass (or None)."""
        tol = self.manifest.tolerance
        return compare_results(module.invoke(self.inputs), self.want, tol["atol"], tol["rtol"])

    def time_baseline(self) -> dict[str, float | int]:
        """IREE default's time per call, alone."""
        runner = {BASELINE: self.baseline.timing_runner(self.inputs)}
        timed = time_interleaved(runner, self.manifest.repeats, min_sample_s=self.manifest.sample_s)
        return timed[BASELINE].as_dict()

    def bench(self, build: BuildFile) -> dict[str, Any]:
        """Check ``build``; when right, time it interleaved with IREE default."""
        try:
            module = self.load(build)
            worst, problem = self.check(module)
            if problem is not None:
                return _outcome("wrong", problem, worst)
            timer = RoundTimer(
                {
                    "candidate": module.timing_runner(self.inputs),
                    BASELINE: self.baseline.timing_runner(self.inputs),
                },
                min_sample_s=self.manifest.sample_s,
            )
            timer.run(self.manifest.repeats)
        except (DeviceError, RuntimeError, ValueError) as exc:
            return _outcome("run_failed", str(exc))
        return _outcome("ok", None, worst, timer.samples)

    def race(self, results: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Race the screened leaders as a local sweep does (:mod:`.racing`); the race's
        result and who could not enter, or None when no build was right."""
        screened = [
            (r["key"], Interval.from_list(r["outcome"]["speedup"]))
            for r in results
            if r["outcome"]["status"] == "ok" and r["outcome"]["speedup"]
        ]
        if not screened:
            return None
        settings = dict(self.manifest.race)
        field, incumbent = settings.pop("field"), settings.pop("incumbent")
        racing, left_out = entrants(screened, field, incumbent)
        builds = {b.key: b for b in self.manifest.builds}
        runners = {key: self.load(builds[key]).timing_runner(self.inputs) for key in racing}
        baseline = self.baseline.timing_runner(self.inputs)
        result = run_race(runners, baseline, RaceSettings(**settings))
        return {"result": result.as_dict(), "left_out": left_out}


def run_bundle(folder: Path, out: Path, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Check and time every build of the bundle in ``folder`` into the results file
    ``out`` (going on from what ``out`` holds of this bundle); the results' data."""
    manifest = Manifest.read(folder)
    manifest.verify(folder)
    driver = cpu_driver(manifest.driver, manifest.threads)  # local-sync on one thread
    results = ResultsFile(out, manifest, describe_device(driver))
    runner = Runner(folder, manifest)
    device = results.data["device"]
    on = device["device"] or device["cpu"]
    say(f"bench: {len(manifest.builds)} builds on {device['driver']} ({on})")
    if results.data["baseline_check"] is None:
        worst, problem = runner.check(runner.baseline)
        results.data["baseline_check"] = {"max_abs_error": worst, "problem": problem}
    if "start" not in results.data["baseline"]:
        results.data["baseline"]["start"] = runner.time_baseline()
    results.save()
    crashed = results.data["running"]
    if crashed is not None and crashed not in results.done:
        error = "the runner's process died while running this build (a crash in the module?)"
        results.record(crashed, _outcome("crashed", error), 0.0)
        say(f"bench: {crashed}: crashed in an earlier run; not run again")
    for index, build in enumerate(manifest.builds, 1):
        if build.key in results.done:
            continue
        results.data["running"] = build.key
        results.save()
        start = time.perf_counter()
        outcome = runner.bench(build)
        results.record(build.key, outcome, time.perf_counter() - start)
        count = f"[{index}/{len(manifest.builds)}]"
        say(f"bench: {count} {outcome['status']:<10} {_label(build)}: {_shown(outcome)}")
    for peer in manifest.peers:
        if peer.key not in results.data.setdefault("peers", {}):
            results.data["peers"][peer.key] = runner.bench(peer)
            results.save()
            outcome = results.data["peers"][peer.key]
            say(f"bench: peer {peer.key}: {outcome['status']}, {_shown(outcome)}")
    results.data["baseline"]["end"] = runner.time_baseline()
    if results.data.get("race") is None:
        say("bench: racing the leaders against each other and IREE default")
        results.data["race"] = runner.race(results.data["results"])
        if results.data["race"] is not None:
            say(f"bench: race {results.data['race']['result']['verdict']}")
    results.data["finished"] = _now()
    results.save()
    say(f"bench: wrote {out}")
    return results.data


def _shown(outcome: dict[str, Any]) -> str:
    """An outcome in a progress line: its speedup, or why it has none."""
    if outcome["speedup"]:
        return f"{outcome['speedup'][0]:.3f}x IREE default"
    return str(outcome["error"])


def _label(build: BuildFile) -> str:
    return ", ".join(f"{k}={v}" for k, v in build.params.items()) or build.key


def main(argv: list[str] | None = None, default_folder: Path | None = None) -> int:
    """The runner's command line; exit status 0 when every build has its outcome in the
    results (whatever it is), 1 when the device cannot be set up, 2 on a bundle or
    results file that cannot be used (one line naming it)."""
    parser = argparse.ArgumentParser(
        prog="bench",
        description=(
            "Check and time the builds of a tdsched bench bundle on this machine's device "
            "(needs only iree-base-runtime and numpy). Bring the results back with "
            "'tdsched sweep --import RESULTS.json'."
        ),
    )
    parser.add_argument(
        "bundle",
        nargs="?" if default_folder else None,
        type=Path,
        default=default_folder,
        help="the bundle folder (default: the folder this launcher is in)"
        if default_folder
        else "the bundle folder",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=(
            "the results file (default: BUNDLE/results.json); one that holds results of "
            "this bundle already is continued, not started again"
        ),
    )
    args = parser.parse_args(argv)
    folder: Path = args.bundle
    out = args.out or folder / "results.json"
    try:
        run_bundle(folder, out)
    except BundleError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except DeviceError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    return 0
