"""Compile here, benchmark elsewhere: ``tdsched sweep --bundle`` writes a bench bundle,
its ``bench.py`` checks and times it in a process that cannot import the compiler or
tdsched, and ``--import`` records the results in the sweep, on x86 and on Vulkan.

Real IREE compiles and runs; the runner runs as a user runs it on the device's machine
(``python DIR/bench.py``), with ``iree.compiler`` and ``tdsched`` made unimportable."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tdsched.schedules.cli.main import main
from tdsched.schedules.sweep.database import ResultsDB

pytestmark = pytest.mark.usefixtures("iree")

SWEEPS = {
    "x86": ["matmul_x86", "--param", "LAYOUT=rowmajor", "--threads", "1"],
    "vulkan": ["matmul_vulkan", "--target", "vulkan"],
}
SMALL = ["--param", "M=64", "--param", "N=64", "--param", "K=64"]
SAMPLED = ["--strategy", "random", "--samples", "2", "--jobs", "2", "--repeats", "3", "-q"]

# The device's machine has no compiler and no tdsched: the runner must not need them.
RUN_WITHOUT_COMPILER = (
    "import runpy, sys\n"
    "for name in ('iree.compiler', 'tdsched', 'yaml'):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def _bench(bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The bundle's own runner, as on a machine with only iree-base-runtime and numpy."""
    return subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_COMPILER, str(bundle / "bench.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _sweep(target: str, db: Path, *args: str) -> list[str]:
    return ["sweep", *SWEEPS[target], *SMALL, *SAMPLED, "--db", str(db), *args]


def test_a_bundle_is_timed_by_its_own_runner_and_imported_into_its_sweep(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, bundle = tmp_path / "s.db", tmp_path / "bundle"
    assert main(_sweep(target, db, "--bundle", str(bundle))) == 0
    out = capsys.readouterr().out
    assert f"wrote the bench bundle {bundle}: 2 candidates" in out
    assert f"python {bundle / 'bench.py'}" in out and "--import" in out
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert len(manifest["builds"]) == 2
    assert manifest["driver"] == ("local-task" if target == "x86" else "vulkan")
    assert manifest["threads"] == (1 if target == "x86" else None)
    opened = ResultsDB(db)
    (sweep,) = opened.sweeps()
    assert sweep.status == "running" and opened.results(sweep.id) == []  # nothing timed
    opened.close()
    assert main(["report", str(db)]) == 0
    assert f"its bench bundle {bundle} waits to be run on the device" in capsys.readouterr().out

    ran = _bench(bundle)
    assert ran.returncode == 0, ran.stderr
    assert "bench: [2/2] ok" in ran.stdout and "bench: race " in ran.stdout
    results = json.loads((bundle / "results.json").read_text())
    assert results["bundle"] == manifest["bundle"]
    peers = {"iree-data-tiling", "iree-data-tiling-ukernels"} if target == "x86" else set()
    assert {p["key"] for p in manifest["peers"]} == set(results["peers"]) == peers
    assert {p["status"] for p in results["peers"].values()} <= {"ok"}
    assert {r["outcome"]["status"] for r in results["results"]} == {"ok"}
    assert set(results["baseline"]) == {"start", "end"}
    if target == "vulkan":
        assert results["device"]["device"]  # the driver names its device (llvmpipe here)

    assert main(_sweep(target, db, "--import", str(bundle / "results.json"))) == 0
    out = capsys.readouterr().out
    assert "2 timed, 0 failed" in out and "by the bench bundle's runner" in out
    assert "race: " in out  # the race the runner ran, as a local sweep shows it
    if peers:
        assert "peers    measured on the device, vs IREE default: iree-data-tiling " in out
    assert results["race"]["result"]["standings"]
    best = tmp_path / f"{SWEEPS[target][0]}.{target}.best.yaml"
    assert best.is_file() and "best recipe:" in out
    opened = ResultsDB(db)
    (sweep,) = opened.sweeps()
    assert sweep.status == "done"
    measured = {r.key: r for r in opened.results(sweep.id)}
    opened.close()
    for entry in results["results"]:
        assert measured[entry["key"]].speedup == entry["outcome"]["speedup"][0]
    for standing in results["race"]["result"]["standings"]:
        assert measured[standing["key"]].confirmed_speedup == standing["speedup"][0]

    assert main(["report", str(db)]) == 0  # the report says where it was measured
    assert f"device    {results['device']['driver']} (" in capsys.readouterr().out

    # imported once: a second import is refused, naming the sweep
    assert main(_sweep(target, db, "--import", str(bundle / "results.json"))) == 2
    assert "is finished (its results were imported already)" in capsys.readouterr().err


def test_results_of_another_bundle_or_sweep_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    assert main(_sweep("x86", db, "--bundle", str(tmp_path / "a"))) == 0
    capsys.readouterr()
    assert _bench(tmp_path / "a").returncode == 0
    results = json.loads((tmp_path / "a" / "results.json").read_text())

    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**results, "bundle": "0" * 24}))
    assert main(_sweep("x86", db, "--import", str(forged))) == 2
    err = capsys.readouterr().err
    assert f"--import {forged}: these are results of bundle {'0' * 24}" in err
    assert "run the runner on the bundle that sweep wrote" in err

    # another command line than the --bundle one: not this sweep
    other = _sweep("x86", db, "--import", str(tmp_path / "a" / "results.json"))
    other[other.index("M=64")] = "M=32"
    assert main(other) == 2
    assert "which this command does not describe" in capsys.readouterr().err

    assert main(_sweep("x86", db, "--bundle", str(tmp_path / "a"))) == 2  # not a new folder
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert main(_sweep("x86", db, "--bundle", str(tmp_path / "b"), "--strategy", "adaptive")) == 2
    assert "--bundle and --import take --strategy grid or random" in capsys.readouterr().err


def test_the_runner_refuses_a_changed_bundle_and_goes_on_after_a_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, bundle = tmp_path / "s.db", tmp_path / "bundle"
    assert main(_sweep("x86", db, "--bundle", str(bundle))) == 0
    capsys.readouterr()
    manifest = json.loads((bundle / "manifest.json").read_text())
    first, second = (b["file"] for b in manifest["builds"])

    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    (copy / first).write_bytes((copy / first).read_bytes()[:-10])  # a copy cut short
    ran = _bench(copy)
    assert ran.returncode == 2
    assert f"bench: error: {copy / first}: its SHA-256 differs from the manifest's" in ran.stderr

    # a run that died in the second build: the first is kept, the second is not run again
    assert _bench(bundle).returncode == 0
    results = json.loads((bundle / "results.json").read_text())
    key = results["results"][1]["key"]
    cut = {**results, "results": results["results"][:1], "running": key, "finished": None}
    cut["race"] = None
    (bundle / "results.json").write_text(json.dumps(cut))
    assert main(_sweep("x86", db, "--import", str(bundle / "results.json"))) == 2
    err = capsys.readouterr().err
    assert "the runner has not finished (1 of 2 builds measured, no race yet)" in err
    ran = _bench(bundle)
    assert ran.returncode == 0 and f"bench: {key}: crashed in an earlier run" in ran.stdout
    again = json.loads((bundle / "results.json").read_text())
    assert [r["outcome"]["status"] for r in again["results"]] == ["ok", "crashed"]
    assert second.endswith(f"{key}.vmfb")
