"""Bench bundles: a sweep's compiled candidates, made ready to be checked and timed on the
machine that has the device, and the results brought back.

``tdsched sweep ... --bundle DIR`` compiles the candidates here and :func:`write_bundle`
writes DIR: the modules, IREE default's build, the seeded inputs and the reference
outputs computed here, the tolerance and timing plan, and the runner itself
(:mod:`tdsched.targets.bench_runner` and the five modules it imports, as the package
``tdsched_bench``, with the launcher ``bench.py``), under a manifest of SHA-256 keys. On
the device's machine ``python DIR/bench.py`` writes ``DIR/results.json``;
``tdsched sweep ... --import results.json`` (:func:`read_results`) records those results
in the sweep that wrote the bundle, refusing results of any other bundle.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import iree.compiler.version
import numpy as np
from tdsched.targets import bench_runner
from tdsched.targets.bench_runner import (
    BUNDLE_FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    RESULTS_FORMAT,
    BundleError,
    sha256_of,
)
from tdsched.targets.runtime import LoadedModule

from ..base.files import write_atomically
from ..compile.pipeline import Plan
from ..measure.evaluation import Reference
from .database import ResultsDB
from .messages import SweepContext

RUNNER_MODULES = ("bench_runner", "runtime", "timing", "racing", "result_check", "cpu_isa")
"""The modules of :mod:`tdsched.targets` a bundle carries: the runner and what it imports."""
RUNNER_PACKAGE = "tdsched_bench"
LAUNCHER = '''"""Check and time this bench bundle's builds on this machine's device.

    python bench.py [--out RESULTS.json]

Needs only iree-base-runtime and numpy (pip install iree-base-runtime numpy). Written by
tdsched sweep --bundle; bring the results back with tdsched sweep ... --import.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tdsched_bench.bench_runner import main  # noqa: E402

sys.exit(main(default_folder=HERE))
'''


@dataclass(frozen=True)
class BundledBuild:
    """A compiled candidate to go into a bundle."""

    key: str
    params: dict[str, Any]
    artifact: Path
    compile_s: float | None
    shown: dict[str, Any]
    """The parameters its build reads (those a ``when`` left unused are not shown)."""


def check_bundle_folder(folder: Path) -> None:
    """Before a sweep compiles anything: ``folder`` is new or an empty folder, in a folder
    that exists (a bundle is never written over other files)."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BundleError(f"--bundle {folder}: exists and is not an empty folder; give a new one")
    if not folder.parent.is_dir():
        raise BundleError(f"--bundle {folder}: the folder {folder.parent} does not exist")


def write_bundle(
    folder: Path,
    builds: list[BundledBuild],
    baseline: Path,
    plan: Plan,
    context: SweepContext,
    origin: dict[str, Any],
    race: dict[str, Any],
    peers: dict[str, Path],
) -> dict[str, Any]:
    """Write the bundle of ``builds`` (and IREE default's build ``baseline``, and the
    ``peers``: name → IREE's other builds of the workload) into ``folder`` for ``plan``'s
    workload and target; its record for the results database
    (:meth:`~.database.ResultsDB.record_bundle`). The manifest is written last: a folder
    without one is a bundle cut short."""
    check_bundle_folder(folder)
    (folder / "builds").mkdir(parents=True, exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    files = {b.key: f"builds/{b.key}.vmfb" for b in builds}
    for build in builds:
        shutil.copyfile(build.artifact, folder / files[build.key])
    shutil.copyfile(baseline, folder / "builds" / "baseline.vmfb")
    for name, built in peers.items():
        shutil.copyfile(built, folder / "builds" / f"peer-{name}.vmfb")
    target = plan.target
    function = plan.workload.function
    with tempfile.TemporaryDirectory(prefix="tdsched-bundle-") as tmp:
        reference = Reference.make(
            plan,
            lambda: LoadedModule(baseline, target.driver, function),
            context.request.seed,
            Path(tmp),
        )
    for name, arrays in (("inputs", reference.inputs), ("reference", reference.want)):
        named: dict[str, Any] = {f"arg{i}": a for i, a in enumerate(arrays)}
        np.savez(folder / "data" / f"{name}.npz", **named)
    _copy_runner(folder)
    manifest: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "version": FORMAT_VERSION,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "iree_compiler": iree.compiler.version.VERSION,
        "origin": origin,
        "driver": target.driver,
        "threads": context.request.build.cpu_threads,
        "function": function,
        "tolerance": {"atol": plan.recipe.tolerance.atol, "rtol": plan.recipe.tolerance.rtol},
        "reference_kind": reference.kind,
        "timing": {"repeats": context.repeats, "sample_s": context.sample_s},
        "race": race,
        "data": {
            "inputs": "data/inputs.npz",
            "reference": "data/reference.npz",
            "sha256": {
                "inputs": sha256_of(folder / "data" / "inputs.npz"),
                "reference": sha256_of(folder / "data" / "reference.npz"),
            },
        },
        "baseline": _entry("baseline", "builds/baseline.vmfb", {}, folder),
        "builds": [_entry(b.key, files[b.key], b.shown, folder) for b in builds],
        "peers": [_entry(name, f"builds/peer-{name}.vmfb", {}, folder) for name in peers],
    }
    manifest["bundle"] = bundle_key(manifest)
    write_atomically(folder / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())
    return {
        "bundle": manifest["bundle"],
        "folder": str(folder.resolve()),
        "incumbent": race["incumbent"],
        "builds": {
            b.key: {"params": b.params, "artifact": str(b.artifact), "compile_s": b.compile_s}
            for b in builds
        },
    }


def _entry(key: str, file: str, params: dict[str, Any], folder: Path) -> dict[str, Any]:
    return {"key": key, "file": file, "sha256": sha256_of(folder / file), "params": params}


def bundle_key(manifest: dict[str, Any]) -> str:
    """What identifies a bundle: every setting of its manifest and every file's hash (the
    creation time and the key itself left out), hashed."""
    material = {k: v for k, v in manifest.items() if k not in ("bundle", "created")}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def _copy_runner(folder: Path) -> None:
    """The runner and the modules it imports, as the package ``tdsched_bench``, and the
    launcher ``bench.py``."""
    package = folder / RUNNER_PACKAGE
    package.mkdir()
    source = Path(bench_runner.__file__).parent
    for module in RUNNER_MODULES:
        shutil.copyfile(source / f"{module}.py", package / f"{module}.py")
    (package / "__init__.py").write_text('"""tdsched\'s bench runner, as a bundle carries it."""\n')
    (folder / "bench.py").write_text(LAUNCHER)


def read_results(path: Path, db: ResultsDB) -> dict[str, Any]:
    """The results file at ``path``, checked against the bundle record of the sweep of
    ``db`` that it names; a :class:`BundleError` naming the file when it cannot be read,
    is no results file, or holds the results of another bundle than that sweep wrote."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise BundleError(f"--import {path}: cannot read it ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise BundleError(f"--import {path}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise BundleError(
            f"--import {path}: not the results of a bench bundle (bench.py writes them)"
        )
    sweep_id = data["origin"]["sweep"]
    recorded = db.bundle(sweep_id)
    if recorded is None:
        raise BundleError(
            f"--import {path}: sweep {sweep_id} of this database wrote no bundle; import into "
            "the database the --bundle sweep used (--db)"
        )
    if data.get("bundle") != recorded["bundle"]:
        raise BundleError(
            f"--import {path}: these are results of bundle {data.get('bundle')}, but sweep "
            f"{sweep_id}'s bundle is {recorded['bundle']} ({recorded['folder']}): run the "
            "runner on the bundle that sweep wrote"
        )
    if data.get("finished") is None:
        done = len(data["results"])
        raise BundleError(
            f"--import {path}: the runner has not finished ({done} of "
            f"{len(recorded['builds'])} builds measured, no race yet): run it again with "
            "the same --out (it goes on where it stopped), then import"
        )
    unknown = [r["key"] for r in data["results"] if r["key"] not in recorded["builds"]]
    if unknown:
        raise BundleError(
            f"--import {path}: results for builds the bundle does not hold: {unknown}"
        )
    return data
