"""``tdsched sweep --executor ray``: real sweeps on a local Ray instance the tests start,
with the real IREE compiler and runtime; a candidate whose Ray worker crashes fails alone."""

from __future__ import annotations

import json
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import iree.compiler.version
import pytest
from onnx_models import mlp_model
from tdsched.recipes import RECIPES_DIR
from tdsched.schedules.cli.main import main
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.measure.request import Request
from tdsched.schedules.sweep.database import ResultsDB
from tdsched.schedules.sweep.messages import CompileJob, SweepContext
from tdsched.schedules.sweep.ray_executor import (
    RayExecutor,
    RayUnavailable,
    ShippedRecipe,
    build_remote,
    start_local,
    unzip_folder,
    worker_error,
)

# Ray's workers run niced and the tests give them time limits: one at a time (.ci/test)
pytestmark = pytest.mark.serial

try:
    import ray
except ImportError:  # pragma: no cover - the test extra installs Ray
    ray = None

needs_ray = pytest.mark.skipif(
    ray is None, reason="Ray is not installed (pip install tdsched[ray])"
)

SIZES = ["--param", "M=128", "--param", "N=128", "--param", "K=128"]
RAY = ["--executor", "ray", "--jobs", "2", "--repeats", "2", "--race-time", "2", "--json", "-q"]
RECIPE = RECIPES_DIR / "matmul_x86.yaml"
IREE = str(iree.compiler.version.VERSION)


def _sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """Run ``tdsched sweep matmul_x86`` on Ray; its JSON (stdout must hold only that)."""
    code = main(["sweep", "matmul_x86", *SIZES, *args, *RAY, "--db", str(tmp_path / "s.db")])
    out = capsys.readouterr().out
    assert code == 0, out
    report: dict[str, Any] = json.loads(out)
    return report


@pytest.fixture
def no_ray_left() -> Iterator[None]:
    """Whatever a test does, no Ray instance outlives it."""
    yield
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@needs_ray
@pytest.mark.usefixtures("iree")
def test_ray_sweep_records_what_it_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_ray_left: None
) -> None:
    assert not ray.is_initialized()
    bench_folders = set(Path(tempfile.gettempdir()).glob("tdsched-ray-bench-*"))
    # row-major only: packed candidates ignore the row-major tiles, so random draws of
    # them may build the same thing (the sweep keys by what is built)
    args = ("--param", "LAYOUT=rowmajor", "--param", "UNPACK=separate")
    args += ("--strategy", "random", "--samples", "3")
    report = _sweep(tmp_path, capsys, *args, "--race", "1")
    assert not ray.is_initialized(), "the executor stops the Ray instance it started"
    # The benchmark actor (on this machine) removed its folder before it was stopped.
    assert set(Path(tempfile.gettempdir()).glob("tdsched-ray-bench-*")) <= bench_folders
    assert (report["evaluated"], report["compiled"], report["timed"]) == (3, 3, 3)
    assert report["failed"] == [] and len(report["ranked"]) == 3
    db = ResultsDB(tmp_path / "s.db")
    try:
        recorded = {r.key: r for r in db.results(report["sweep"])}
        baselines = db.baselines(report["sweep"])
    finally:
        db.close()
    assert set(recorded) == {r["key"] for r in report["ranked"]}
    assert baselines == report["baseline_ms"] and set(baselines) == {"start", "end"}
    for row in report["ranked"]:
        result = recorded[row["key"]]
        shown = {k: v for k, v in row.items() if k not in ("race", "ignored")}
        assert shown == result.as_dict() and isinstance(row["ignored"], list)
        assert result.status == "ok" and result.max_abs_error is not None
        # IREE default is timed interleaved with each candidate: its own denominator.
        assert result.baseline_ms is not None and result.time_ms is not None
        assert result.speedup_low is not None and result.speedup_high is not None
        assert result.speedup_low <= (result.speedup or 0.0) <= result.speedup_high
        assert result.compile_s is not None and result.compile_s > 0
        artifact = Path(result.artifact or "")
        # Written by the driver from the bytes the compile task returned, then shipped
        # back to the benchmark actor, which ran it correctly.
        assert artifact.is_file() and artifact.stat().st_size > 0
    # --race 1: the field (those screening could not separate) is cut to 1 after 5 rounds.
    raced = [r["race"] for r in report["ranked"] if r["race"] is not None]
    assert [s["eliminated_after"] for s in raced].count(None) == 1
    assert not list((tmp_path / "s.db.artifacts").glob("*.partial"))
    assert Path(report["best_recipe"]).is_file()


@needs_ray
@pytest.mark.process
def test_an_address_nothing_answers_at_is_a_clear_cli_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_ray_left: None
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"  # free once closed
    args = ["sweep", "matmul_x86", *SIZES, "--db", str(tmp_path / "s.db")]
    assert main([*args, "--executor", "ray", "--ray-address", address]) == 2
    err = capsys.readouterr().err
    assert f"tdsched: error: --ray-address {address}: no Ray cluster answers there" in err
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def running_ray(iree: str) -> Iterator[None]:
    """One Ray instance for the fault tests, started before their fault rules are set:
    the rules must reach the workers through the tasks' runtime environment. Its workers
    compile with IREE."""
    start_local(2)
    yield
    ray.shutdown()


# Only TM is swept (8, 16, 32, 64, 128): every candidate is known.
ONLY_TM = ["--param", "TN=32", "--param", "TK=32", "--param", "RN=32", "--param", "LAYOUT=rowmajor"]
"""Five candidates, TM = 8 ... 128 (the packed layout's candidates hold TM at one value,
which a fault rule on TM would hit eight times over)."""


def _statuses(report: dict[str, Any]) -> dict[int, str]:
    return {r["params"]["TM"]: r["status"] for r in report["ranked"] + report["failed"]}


@needs_ray
def test_a_crashing_compile_worker_fails_only_its_candidate(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    running_ray: None,
) -> None:
    monkeypatch.setenv("TDSCHED_SWEEP_FAULTS", "compile:crash:TM=32")
    report = _sweep(tmp_path, capsys, *ONLY_TM, "--race", "1")
    assert ray.is_initialized(), "a Ray connection made before the sweep stays open"
    assert _statuses(report) == {8: "ok", 16: "ok", 32: "crashed", 64: "ok", 128: "ok"}
    (crashed,) = report["failed"]
    assert "worker died" in crashed["error"] and crashed["speedup"] is None
    assert all(r["speedup"] for r in report["ranked"])


@needs_ray
def test_hangs_time_out_and_a_dead_benchmark_actor_is_replaced(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    running_ray: None,
) -> None:
    faults = "compile:hang:TM=64;run:crash:TM=16;run:hang:TM=8"
    monkeypatch.setenv("TDSCHED_SWEEP_FAULTS", faults)
    limits = ["--compile-timeout", "8", "--run-timeout", "6"]
    report = _sweep(tmp_path, capsys, *ONLY_TM, *limits, "--race", "2")
    assert _statuses(report) == {8: "timeout", 16: "crashed", 32: "ok", 64: "timeout", 128: "ok"}
    errors = {r["params"]["TM"]: r["error"] for r in report["failed"]}
    assert errors[64] == "no result within 8 s" and errors[8] == "no answer within 6 s"
    assert "benchmark actor died" in errors[16]
    # The actor killed or crashed by the last of them was replaced: IREE default was
    # timed again at the end and the race was run.
    assert set(report["baseline_ms"]) == {"start", "end"}
    assert report["best"]["race"] and report["best"]["key"] == report["decision"]["best"]


@needs_ray
def test_an_exception_raised_in_a_task_reads_as_in_the_local_pool(running_ray: None) -> None:
    def fails() -> None:
        raise KeyError("TM")

    with pytest.raises(ray.exceptions.RayTaskError) as raised:
        ray.get(ray.remote(fails).remote())
    error = worker_error(raised.value)
    assert str(error) == "KeyError: 'TM'" and 'raise KeyError("TM")' in error.traceback


@needs_ray
def test_a_cluster_with_no_node_for_the_target_is_a_clear_error(running_ray: None) -> None:
    fix = r"""start the nodes that have the device with ray start --resources='\{"tdsched_npu": 1\}'"""
    with pytest.raises(RayUnavailable, match=fix):
        RayExecutor(2).start(SweepContext(Request(str(RECIPE), BuildTarget("npu"))))
    assert ray.is_initialized(), "a connection the executor did not make stays open"


@pytest.fixture
def node_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This "node"'s temporary folder (where shipped recipes land) inside the test's."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "node"))
    (tmp_path / "node").mkdir()


def _context(recipe: str, **fixed: int) -> SweepContext:
    return SweepContext(
        Request(
            recipe=recipe,
            build=BuildTarget("x86", threads=1),
            params={"M": 64, "N": 64, "K": 64, **fixed},
        )
    )


@pytest.mark.usefixtures("iree")
def test_a_node_without_the_recipe_file_builds_from_the_shipped_bytes(
    tmp_path: Path, node_tmp: None
) -> None:
    shipped = ShippedRecipe(str(tmp_path / "elsewhere" / RECIPE.name), RECIPE.read_bytes())
    job = CompileJob("k", {"TM": 16, "TN": 32, "TK": 32, "RN": 32}, "/driver/only/k.vmfb")
    outcome, built, kept = build_remote(_context(shipped.path), shipped, job, IREE)
    assert outcome.status == "ok", outcome.error
    assert built is not None and built[:2] == b"PK"  # a .vmfb is a zip archive
    assert kept is None  # no --keep-temps
    assert not Path(job.artifact).exists(), "the task returns the build, it writes nothing"
    _, default, _ = build_remote(_context(shipped.path), shipped, None, IREE)
    assert default is not None and default != built


@pytest.mark.usefixtures("iree")
def test_a_kept_build_folder_comes_back_from_the_node(tmp_path: Path, node_tmp: None) -> None:
    shipped = ShippedRecipe.read(str(RECIPE))
    driver = tmp_path / "driver" / "TM=16"
    job = CompileJob("k", {"TM": 16, "TN": 32, "TK": 32, "RN": 32}, "/unused.vmfb", str(driver))
    outcome, built, kept = build_remote(_context(shipped.path), shipped, job, IREE)
    assert outcome.status == "ok" and built is not None and kept is not None
    assert not driver.exists(), "the task returns the folder, it writes nothing"
    unzip_folder(kept, driver)
    assert (driver / "candidate.vmfb").read_bytes() == built
    assert any((driver / "executables").glob("*.s"))
    script = driver / "compile.sh"
    assert script.stat().st_mode & 0o111, "compile.sh stays executable"
    # It names the files where the driver keeps them, not the node's temporary folder.
    assert f"{driver}/matmul_x86.x86.input.mlir" in script.read_text()
    assert str(tmp_path / "node") not in script.read_text()


def test_shipped_recipe_uses_the_original_only_when_it_is_the_same(
    tmp_path: Path, node_tmp: None
) -> None:
    original = tmp_path / "r.yaml"
    original.write_text("name: a\n")
    assert ShippedRecipe.read(str(original)).local_path() == str(original)
    changed = ShippedRecipe(str(original), b"name: b\n")
    copy = Path(changed.local_path())
    assert copy.parent.is_relative_to(tmp_path / "node") and copy.name == "r.yaml"
    assert copy.read_bytes() == b"name: b\n"


def test_a_node_with_another_iree_refuses_to_build() -> None:
    shipped = ShippedRecipe.read(str(RECIPE))
    job = CompileJob("k", {"TM": 16}, "/unused.vmfb")
    outcome, built, kept = build_remote(_context(shipped.path), shipped, job, "0.0-other")
    assert outcome.status == "compile_failed" and built is None and kept is None
    assert "same IREE on every node" in (outcome.error or "")


def test_missing_ray_is_a_clear_cli_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray does
    with pytest.raises(RayUnavailable, match=r"pip install 'tdsched\[ray\]'"):
        RayExecutor(2)
    code = main(["sweep", "matmul_x86", *SIZES, "--executor", "ray", "--db", str(tmp_path / "d")])
    assert code == 2
    assert "tdsched: error: --executor ray needs Ray" in capsys.readouterr().err


@needs_ray
def test_tune_sweeps_its_tasks_on_ray(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    running_ray: None,
) -> None:
    started: list[str] = []
    start = RayExecutor.start

    def counted(self: RayExecutor, context: SweepContext) -> None:
        started.append(context.request.recipe)
        start(self, context)

    monkeypatch.setattr(RayExecutor, "start", counted)
    mlp_model(tmp_path / "mlp.onnx")
    args = ["tune", str(tmp_path / "mlp.onnx"), "--executor", "ray", "--jobs", "2"]
    args += ["--threads", "1", "--budget", "0.2", "--out", str(tmp_path / "mlp.tune")]
    args += ["--round-size", "2", "--min-share", "0", "--no-check", "--json", "-q"]
    assert main(args) == 0
    found = json.loads(capsys.readouterr().out)
    swept = [t for t in found["tasks"] if t["candidates"]]
    assert swept, found["tasks"]
    # Every round ran on the Ray executor, which left the connection it found open.
    assert started and all(Path(r).parent == tmp_path / "mlp.tune" / "tasks" for r in started)
    assert ray.is_initialized()
    db = ResultsDB(tmp_path / "mlp.tune" / "tune.db")
    try:
        assert len([r for r in db.results() if r.ok]) >= 2
    finally:
        db.close()
