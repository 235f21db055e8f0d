"""``tdsched sweep`` end to end with the real IREE compiler and runtime.

The recipe below has candidates that are right (SPLITK=0) and candidates that compile
and run fast but compute the wrong answer (SPLITK=32 splits the reduction over
workgroups that each start from the fill): a sweep must record those as mismatches and
never rank them. Crashes and hangs are produced with TDSCHED_SWEEP_FAULTS.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tdsched.schedules.cli.main import main
from tdsched.schedules.sweep.distinct import SAME_BUILD

pytestmark = pytest.mark.usefixtures("iree")

RECIPE = """\
name: split_k
workload:
  generator: matmul
  args: {M: 64, N: 64, K: 64, dtype: f32}
targets: [x86, vulkan]
parameters: {TM: 16, SPLITK: 0}
space:
  TM: [8, 16, 32, 64]
  SPLITK: [0, 32]
kernels:
  - name: matmul
    match: {kind: contraction}
    schedule:
      - match: {op: linalg.fill, as: fill}
      - tile: {sizes: ["${TM}", 32, "${SPLITK}"], loop: forall, mapping: workgroup, loops: wg}
      - fuse_into: {producer: fill, loop: wg}
      - vectorize: {}
"""
FAST = ["--jobs", "2", "--repeats", "2", "--race", "2", "--race-time", "2", "-q"]


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "split_k.yaml"
    path.write_text(RECIPE)
    return path


def sweep(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["sweep", *args, *FAST, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def statuses(report: dict[str, Any]) -> dict[tuple[int, int], str]:
    every = report["ranked"] + report["failed"]
    return {(r["params"]["TM"], r["params"]["SPLITK"]): r["status"] for r in every}


def test_wrong_kernels_are_rejected_and_the_best_recipe_runs(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    code, report = sweep(capsys, str(recipe), "--db", str(db), "--param", "TM=16")
    assert code == 0
    assert statuses(report) == {(16, 0): "ok", (16, 32): "wrong"}
    assert [r["params"]["SPLITK"] for r in report["ranked"]] == [0]
    assert report["failed"][0]["max_abs_error"] > 1.0
    assert "results differ from the reference" in report["failed"][0]["error"]
    assert report["baseline_ms"]["start"] > 0 and report["baseline_ms"]["end"] > 0
    assert report["ranked"][0]["confirmed_speedup"] > 0
    assert report["decision"]["verdict"] == "alone"  # the only correct candidate
    assert report["build_files"] is None and not (tmp_path / "s.db.artifacts" / "builds").exists()
    best = Path(report["best_recipe"])
    assert best.suffix == ".yaml" and "provenance" in best.read_text()
    assert "space" not in best.read_text()
    assert main(["run", str(best), "--no-time"]) == 0
    assert "status   ok" in capsys.readouterr().out


def test_crashes_and_hangs_fail_only_their_candidate(
    recipe: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "TDSCHED_SWEEP_FAULTS", "compile:crash:TM=8;compile:hang:TM=16;run:hang:TM=32"
    )
    code, report = sweep(
        capsys,
        str(recipe),
        "--db",
        str(tmp_path / "s.db"),
        "--param",
        "SPLITK=0",
        "--compile-timeout",
        "10",
        "--run-timeout",
        "5",
    )
    assert code == 0
    assert statuses(report) == {
        (8, 0): "crashed",
        (16, 0): "timeout",
        (32, 0): "timeout",
        (64, 0): "ok",
    }
    crashed = next(r for r in report["failed"] if r["status"] == "crashed")
    assert "SIGSEGV" in crashed["error"]
    assert report["best"]["params"]["TM"] == 64


def test_rerun_reuses_records_and_rebench_times_again(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "s.db")
    args = (
        str(recipe),
        "--db",
        db,
        "--param",
        "SPLITK=0",
        "--strategy",
        "random",
        "--samples",
        "2",
    )
    _, first = sweep(capsys, *args)
    assert (first["compiled"], first["timed"], first["reused"]) == (2, 2, 0)
    _, again = sweep(capsys, *args)
    assert (again["compiled"], again["timed"], again["reused"]) == (0, 0, 2)
    assert {r["key"] for r in again["ranked"]} == {r["key"] for r in first["ranked"]}
    assert again["reused_from"] == {str(first["sweep"]): 2}
    _, rebench = sweep(capsys, *args, "--rebench")
    assert (rebench["compiled"], rebench["timed"]) == (0, 2)
    assert rebench["reused_from"] == {}
    # The later sweeps measured and raced the same keys again: the first keeps its numbers.
    assert main(["report", db, "--sweep", str(first["sweep"]), "--json"]) == 0
    reported = json.loads(capsys.readouterr().out)

    def numbers(report: dict[str, Any]) -> dict[str, tuple[float, float]]:
        return {r["key"]: (r["speedup"], r["confirmed_speedup"]) for r in report["ranked"]}

    assert numbers(reported) == numbers(first) != numbers(rebench)
    _, other_threads = sweep(capsys, *args, "--threads", "1")
    assert (other_threads["compiled"], other_threads["timed"]) == (0, 2)
    rows = (
        sqlite3.connect(db).execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM results").fetchone()
    )
    assert rows == (4, 4)


def test_resume_after_kill_9_loses_and_duplicates_nothing(recipe: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    command = [
        sys.executable,
        "-m",
        "tdsched.schedules.cli.main",
        "sweep",
        str(recipe),
        "--db",
        str(db),
    ]
    command += ["--param", "SPLITK=0", *FAST]
    env = {**os.environ, "TDSCHED_SWEEP_FAULTS": "run:hang:TM=64"}
    proc = subprocess.Popen(command, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    recorded = 0
    while recorded < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
        recorded = _recorded_so_far(db)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert recorded == 3, "the sweep did not record three candidates before the hang"
    assert _count(db, "SELECT COUNT(*) FROM sweeps WHERE status='running'") == 1

    done = subprocess.run([*command, "--resume", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sweep"] == 1
    assert (report["reused"], report["timed"]) == (3, 1)
    assert _count(db, "SELECT COUNT(*) FROM results") == 4
    assert _count(db, "SELECT COUNT(*) FROM sweep_results WHERE sweep_id=1") == 4
    assert _count(db, "SELECT COUNT(*) FROM sweeps WHERE status='done'") == 1
    assert "resuming sweep 1" in done.stderr or "-q" in FAST


def _recorded_so_far(db: Path) -> int:
    """Results in a database a running sweep is writing; 0 before its schema is committed
    (the file exists from the sweep's first connect, its tables from its first commit)."""
    if not db.exists():
        return 0
    try:
        return _count(db, "SELECT COUNT(*) FROM results")
    except sqlite3.OperationalError:
        return 0


def _count(db: Path, query: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(query).fetchone()[0])


def test_vulkan_sweep_and_its_best_recipe(
    vulkan: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = ["--param", "M=128", "--param", "N=128", "--param", "K=128"]
    code, report = sweep(
        capsys,
        "matmul_vulkan",
        *size,
        "--strategy",
        "random",
        "--samples",
        "2",
        "--db",
        str(tmp_path / "s.db"),
    )
    assert code == 0
    assert report["target"] == "vulkan"
    assert report["space"]["valid"] == 8
    assert [r["status"] for r in report["ranked"]] == ["ok", "ok"]
    best = Path(report["best_recipe"])
    assert "targets: [vulkan]" in best.read_text()
    assert main(["run", str(best), "--no-time"]) == 0
    assert "status   ok" in capsys.readouterr().out


def test_python_recipe_is_frozen_as_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = ["--param", "M=128", "--param", "N=128", "--param", "K=128"]
    code, report = sweep(
        capsys,
        "matmul_x86_py",
        *size,
        "--strategy",
        "random",
        "--samples",
        "1",
        "--db",
        str(tmp_path / "s.db"),
    )
    assert code == 0
    best = Path(report["best_recipe"])
    assert best.suffix == ".py"
    assert main(["run", str(best), "--no-time", "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert ran["status"] == "ok"
    chosen = report["best"]["params"]
    assert {k: ran["parameters"][k] for k in chosen} == chosen


def test_a_sweep_stopped_in_its_race_is_finished_on_resume(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    args = (str(recipe), "--db", str(db), "--param", "SPLITK=0", "--strategy", "random")
    _, first = sweep(capsys, *args, "--samples", "2")
    assert first["best"]["race"] and first["best"]["key"] == first["decision"]["best"]
    # What a kill during the race leaves: every candidate recorded, no end baseline, no
    # race result, the sweep still running.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE results SET confirmed_speedup=NULL")
        conn.execute("UPDATE sweep_results SET confirmed_speedup=NULL")
        conn.execute("UPDATE sweeps SET decision=NULL")
        conn.execute("DELETE FROM baselines WHERE phase='end'")
        conn.execute("UPDATE sweeps SET status='running', finished=NULL")
    _, resumed = sweep(capsys, *args, "--samples", "2", "--resume")
    assert (resumed["sweep"], resumed["reused"], resumed["timed"]) == (1, 2, 0)
    assert set(resumed["baseline_ms"]) == {"start", "end"}
    assert resumed["best"]["key"] == resumed["decision"]["best"]
    assert resumed["best"]["race"] and resumed["best"]["confirmed_speedup"]
    assert resumed["decision"]["rounds"] >= 5
    assert _count(db, "SELECT COUNT(*) FROM sweeps WHERE status='done'") == 1


def test_model_strategy_sweeps_with_what_the_database_holds(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    sweep(capsys, str(recipe), "--db", str(db), "--strategy", "random", "--samples", "3")
    code, report = sweep(
        capsys, str(recipe), "--db", str(db), "--strategy", "model", "--budget", "5"
    )
    assert code == 0
    assert report["evaluated"] == 5
    assert report["best"]["params"]["SPLITK"] == 0  # wrong candidates never win
    assert report["decision"]["verdict"] in {"decided", "tie", "undecided", "alone"}
    strategies = sqlite3.connect(db).execute("SELECT strategy FROM sweeps ORDER BY id").fetchall()
    assert strategies == [("random",), ("model",)]


def test_adaptive_sweep_names_its_cost_model(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """auto is the learned model where scikit-learn is installed (it is here), which
    learns from what the database holds; --cost-model additive keeps the additive one.
    The JSON, the summary header and the report all say which ran."""
    db = tmp_path / "s.db"
    sweep(capsys, str(recipe), "--db", str(db), "--strategy", "random", "--samples", "3")
    adaptive = (str(recipe), "--db", str(db), "--strategy", "adaptive", "--budget", "4")
    assert main(["sweep", *adaptive, *FAST[:-1]]) == 0
    out, err = capsys.readouterr()
    assert "adaptive: the learned cost model orders the candidates; it starts from 3 " in err
    assert "on x86, 2 threads (adaptive, learned cost model), 4 candidates evaluated" in out
    code, report = sweep(capsys, *adaptive, "--cost-model", "additive", "--seed", "1")
    assert code == 0 and report["evaluated"] == 4
    assert (report["strategy"], report["cost_model"]) == ("adaptive", "additive")
    assert main(["report", str(db), "--sweep", "2"]) == 0
    assert "(adaptive, learned cost model)" in capsys.readouterr().out


def test_keep_temps_keeps_a_build_folder_per_compiled_candidate(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    args = [str(recipe), "--db", str(db), "--param", "TM=16", "--keep-temps"]
    assert main(["sweep", *args, *FAST, "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    kept = Path(report["build_files"])
    assert kept == (tmp_path / "s.db.artifacts" / "builds" / f"sweep{report['sweep']}").resolve()
    assert f"tdsched: build files kept in {kept} (2 candidates compiled" in err
    # One folder per candidate, wrong ones too, named by the swept parameters.
    assert sorted(p.name for p in kept.iterdir()) == ["SPLITK=0", "SPLITK=32"]
    folder = kept / "SPLITK=0"
    names = {p.name for p in folder.iterdir()}
    assert {"split_k.x86.input.mlir", "split_k.x86.kernels.mlir", "compile.sh"} <= names
    assert any((folder / "executables").glob("*.s"))  # IREE's per-dispatch files
    built = folder / "candidate.vmfb"
    recorded = next(r for r in report["ranked"] if r["params"]["SPLITK"] == 0)
    assert built.read_bytes() == Path(_artifact(db, recorded["key"])).read_bytes()
    built.unlink()
    rebuilt = subprocess.run([str(folder / "compile.sh")], capture_output=True, text=True)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert built.read_bytes() == Path(_artifact(db, recorded["key"])).read_bytes()


def _artifact(db: Path, key: str) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT artifact FROM results WHERE key=?", (key,)).fetchone()[0])


def test_candidates_that_build_the_same_module_are_one_candidate(
    recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a ``when`` leaving out the only step TM feeds, the four TM candidates build one
    module: the space keeps the first, prunes the three others with the reason, and the
    one is compiled and timed once."""
    text = (
        RECIPE.replace("SPLITK: 0}", "SPLITK: 0, WIDE: 0}")
        .replace(
            "      - vectorize: {}\n",
            '      - vectorize: {}\n      - cleanup: {when: "WIDE == 1"}\n',
        )
        .replace(
            '      - tile: {sizes: ["${TM}", 32, "${SPLITK}"], loop: forall, mapping: workgroup, '
            "loops: wg}\n",
            '      - tile: {sizes: [16, 32, "${SPLITK}"], loop: forall, mapping: workgroup, '
            "loops: wg}\n"
            '      - tile: {sizes: ["${TM}", 0, 0], when: "WIDE == 1"}\n',
        )
    )
    assert text.count("WIDE == 1") == 2
    path = tmp_path / "same.yaml"
    path.write_text(text)
    args = (str(path), "--db", str(tmp_path / "s.db"), "--param", "SPLITK=0")
    code, out = sweep(capsys, *args, "--strategy", "grid")
    assert code == 0
    assert (out["compiled"], out["timed"], out["reused"]) == (1, 1, 0)
    assert out["space"]["valid"] == 1 and len(out["ranked"]) == 1
    assert out["space"]["pruned"] == [{"reason": SAME_BUILD, "count": 3}]


@pytest.mark.parametrize("splitk", [0, 32])
def test_a_sampling_sweep_measures_and_races_the_recipe_s_own_values(
    splitk: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the recipe's defaults are right (SPLITK=0) or wrong (SPLITK=32); 2 samples of 8
    path = tmp_path / "split_k.yaml"
    path.write_text(RECIPE.replace("SPLITK: 0}", f"SPLITK: {splitk}}}"))
    code, report = sweep(
        capsys, str(path), "--db", str(tmp_path / "s.db"), "--strategy", "random",
        "--samples", "2", "--seed", "5",
    )  # fmt: skip
    incumbent = report["incumbent"]
    assert incumbent["source"] == "its defaults"
    assert incumbent["params"] == {"TM": 16, "SPLITK": splitk}
    evaluated = {r["key"] for r in report["ranked"] + report["failed"]}
    assert incumbent["key"] in evaluated and report["evaluated"] == 2
    if splitk:
        assert incumbent["rank"] is None
        assert incumbent["line"] == (
            "the recipe's own values (its defaults): failed (see the failures above)"
        )
        return
    assert code == 0
    # it raced whatever its screening, and is the best where nothing was shown faster
    decision = report["decision"]
    assert incumbent["key"] in {s["key"] for s in decision["standings"]}
    kept = decision["kept"] == incumbent["key"]
    assert (report["best"]["key"] == incumbent["key"]) == (incumbent["rank"] == 1)
    assert kept == (decision["verdict"] in ("tie", "undecided") and incumbent["rank"] == 1)
    assert incumbent["line"].startswith("the recipe's own values (its defaults): ")
