"""The results database across versions and between sweeps: a database written before
racing (schema 1) or before per-sweep measurements (schema 2) opens, is upgraded in place
and keeps every recorded result; sweeps sharing a database keep their own numbers."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tdsched.schedules.cli.main import main
from tdsched.schedules.sweep.database import (
    SCHEMA_VERSION,
    DatabaseError,
    Result,
    ResultsDB,
    SweepWork,
    measured_by_others,
)

SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sweeps (id INTEGER PRIMARY KEY, recipe TEXT NOT NULL, source TEXT,
    target TEXT NOT NULL, strategy TEXT NOT NULL, signature TEXT NOT NULL,
    options TEXT NOT NULL, space TEXT NOT NULL, status TEXT NOT NULL,
    started REAL NOT NULL, finished REAL);
CREATE TABLE results (key TEXT PRIMARY KEY, recipe TEXT NOT NULL, target TEXT NOT NULL,
    params TEXT NOT NULL, status TEXT NOT NULL, time_ms REAL, timing TEXT,
    baseline_ms REAL, speedup REAL, confirmed_speedup REAL, max_abs_error REAL,
    error TEXT, compile_s REAL, artifact TEXT, iree_version TEXT NOT NULL,
    recorded REAL NOT NULL);
CREATE TABLE sweep_results (sweep_id INTEGER NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (sweep_id, key));
CREATE TABLE baselines (sweep_id INTEGER NOT NULL, phase TEXT NOT NULL,
    median_ms REAL NOT NULL, timing TEXT NOT NULL, recorded REAL NOT NULL,
    PRIMARY KEY (sweep_id, phase));
INSERT INTO meta VALUES ('schema', '1');
"""


def _schema_1(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
        conn.execute(
            "INSERT INTO sweeps VALUES (1, 'matmul_x86', NULL, 'x86', 'grid', 's', '{}', "
            "?, 'done', 1.0, 2.0)",
            (json.dumps({"names": ["TM"]}),),
        )
        conn.execute(
            "INSERT INTO results VALUES ('k1', 'matmul_x86', 'x86', '{\"TM\": 8}', 'ok', "
            "1.0, NULL, 1.5, 1.5, 1.4, 1e-6, NULL, 0.5, NULL, '3.13.0', 1.0)"
        )
        conn.execute("INSERT INTO sweep_results VALUES (1, 'k1')")


def test_a_schema_1_database_is_migrated_and_keeps_its_results(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _schema_1(path)
    db = ResultsDB(path)
    try:
        (result,) = db.results(1)
        assert (result.key, result.speedup, result.confirmed_speedup) == ("k1", 1.5, 1.4)
        assert result.speedup_low is None and result.timing_s is None
        assert db.sweep(1).decision is None
        db.record_decision(1, {"verdict": "alone"})
        assert db.sweep(1).decision == {"verdict": "alone"}
        assert db.sweep(1).work is None  # recorded before sweeps kept their work
        work = SweepWork(flops=8, uncounted=["linalg.softmax"], traffic_bytes=4, machine="m")
        db.record_work(1, work)
        assert db.sweep(1).work == work and work.intensity == 2.0
    finally:
        db.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (SCHEMA_VERSION,)


def test_a_database_from_a_newer_tdsched_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    ResultsDB(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema'")
    message = f"schema 99, this tdsched reads {SCHEMA_VERSION}; use a new --db"
    with pytest.raises(DatabaseError, match=message):
        ResultsDB(path)


SCHEMA_2 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sweeps (id INTEGER PRIMARY KEY, recipe TEXT NOT NULL, source TEXT,
    target TEXT NOT NULL, strategy TEXT NOT NULL, signature TEXT NOT NULL,
    options TEXT NOT NULL, space TEXT NOT NULL, status TEXT NOT NULL,
    started REAL NOT NULL, finished REAL, decision TEXT);
CREATE TABLE results (key TEXT PRIMARY KEY, recipe TEXT NOT NULL, target TEXT NOT NULL,
    params TEXT NOT NULL, status TEXT NOT NULL, time_ms REAL, timing TEXT,
    baseline_ms REAL, speedup REAL, confirmed_speedup REAL, max_abs_error REAL,
    error TEXT, compile_s REAL, artifact TEXT, iree_version TEXT NOT NULL,
    recorded REAL NOT NULL, speedup_low REAL, speedup_high REAL, timing_s REAL);
CREATE TABLE sweep_results (sweep_id INTEGER NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (sweep_id, key));
CREATE TABLE baselines (sweep_id INTEGER NOT NULL, phase TEXT NOT NULL,
    median_ms REAL NOT NULL, timing TEXT NOT NULL, recorded REAL NOT NULL,
    PRIMARY KEY (sweep_id, phase));
INSERT INTO meta VALUES ('schema', '2');
"""


def _race(*standings: tuple[str, float]) -> str:
    """A recorded race (as ``sweeps.decision``) with these keys' median speedups."""
    return json.dumps({"standings": [{"key": key, "speedup": [s, s, s]} for key, s in standings]})


def _schema_2(path: Path) -> None:
    """Sweep 1 evaluated k1 and raced it at 1.4; sweep 2 evaluated k1 and k2 and raced
    only k2 (1.1), and its race was the last to write k1's confirmed speedup (1.2)."""
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_2)
        for sweep_id, decision in ((1, _race(("k1", 1.4))), (2, _race(("k2", 1.1)))):
            conn.execute(
                "INSERT INTO sweeps VALUES (?, 'matmul_x86', NULL, 'x86', 'grid', 's', '{}', "
                "?, 'done', 1.0, 2.0, ?)",
                (sweep_id, json.dumps({"names": ["TM"]}), decision),
            )
        for key, tm, confirmed, recorded in (("k1", 8, 1.2, 1.0), ("k2", 16, 1.1, 2.0)):
            conn.execute(
                "INSERT INTO results VALUES (?, 'matmul_x86', 'x86', ?, 'ok', 1.0, NULL, 1.5, "
                "1.5, ?, 1e-6, NULL, 0.5, NULL, '3.13.0', ?, 1.3, 1.7, 0.2)",
                (key, json.dumps({"TM": tm}), confirmed, recorded),
            )
        conn.executemany(
            "INSERT INTO sweep_results VALUES (?, ?)", [(1, "k1"), (2, "k1"), (2, "k2")]
        )


def test_a_schema_2_database_gets_per_sweep_numbers_from_what_it_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    _schema_2(path)
    db = ResultsDB(path)
    try:
        (first,) = db.results(1)
        assert (first.key, first.speedup, first.speedup_low) == ("k1", 1.5, 1.3)
        assert (first.confirmed_speedup, first.measured_by, first.compile_s) == (1.4, 1, 0.5)
        second = {r.key: r for r in db.results(2)}
        assert list(second) == ["k1", "k2"]  # in recorded order
        # Sweep 2 did not race k1: the 1.2 the result row held is not its number.
        assert (second["k1"].confirmed_speedup, second["k1"].measured_by) == (None, 1)
        assert (second["k2"].confirmed_speedup, second["k2"].measured_by) == (1.1, 2)
        assert measured_by_others(db.results(2), 2) == {1: 1}
        db.record(_result("k3", 2.0), 2)  # the upgraded tables take new records
        assert [r.key for r in db.results(2)] == ["k1", "k2", "k3"]
    finally:
        db.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (SCHEMA_VERSION,)


def _result(key: str, speedup: float, **extra: float) -> Result:
    return Result(
        key=key,
        recipe="matmul_x86",
        target="x86",
        params={"TM": 8},
        status="ok",
        time_ms=1.0 / speedup,
        baseline_ms=1.0,
        speedup=speedup,
        speedup_low=speedup - 0.1,
        speedup_high=speedup + 0.1,
        max_abs_error=1e-6,
        **extra,
    )


def _start(db: ResultsDB, signature: str) -> int:
    return db.start_sweep(
        recipe="matmul_x86",
        source=None,
        target="x86",
        strategy="grid",
        signature=signature,
        options={},
        space={"names": ["TM"], "total": 1, "valid": 1, "pruned": []},
    )


def test_sweeps_sharing_a_database_keep_their_own_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.db"
    db = ResultsDB(path)
    try:
        first, second, third = (_start(db, name) for name in ("a", "b", "c"))
        db.record(_result("k", 1.5, compile_s=2.0), first)
        db.record_raced(first, "k", 1.4)
        db.record(_result("k", 0.9), second)  # --rebench: timed again, not built again
        db.record_raced(second, "k", 0.8)
        db.link(third, "k")  # reused as recorded, not raced yet
        db.link(first, "k")  # a resumed sweep keeps its own numbers
        mine = {sweep: db.results(sweep)[0] for sweep in (first, second, third)}
        latest = db.result("k")
    finally:
        db.close()
    assert (mine[first].speedup, mine[first].speedup_low, mine[first].confirmed_speedup) == (
        1.5,
        1.4,
        1.4,
    )
    assert (mine[second].speedup, mine[second].confirmed_speedup) == (0.9, 0.8)
    assert (mine[third].speedup, mine[third].confirmed_speedup) == (0.9, None)
    assert [mine[s].measured_by for s in (first, second, third)] == [first, second, second]
    assert mine[first].compile_s == mine[second].compile_s == 2.0  # what was built stays
    assert latest is not None and (latest.speedup, latest.measured_by) == (0.9, second)

    # The report of the first sweep shows its numbers, not the later sweep's.
    assert main(["report", str(path), "--sweep", str(first), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["best"]["speedup"], report["best"]["confirmed_speedup"]) == (1.5, 1.4)
    assert report["reused_from"] == {}
    assert main(["report", str(path), "--sweep", str(third)]) == 0
    out = capsys.readouterr().out
    assert "reused 1 result measured by sweep 2 (shown with its numbers)" in out


def test_a_read_only_open_upgrades_an_older_schema_in_memory_only(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _schema_2(path)
    db = ResultsDB(path, read_only=True)
    try:
        assert [r.key for r in db.results(2)] == ["k1", "k2"]
        assert db.results(1)[0].confirmed_speedup == 1.4
    finally:
        db.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("2",)
