"""The results database across versions: a database written before racing (schema 1)
opens, gains the new columns in place and keeps every recorded result."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tdsched.schedules.sweep.database import SCHEMA_VERSION, DatabaseError, ResultsDB

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
    finally:
        db.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (SCHEMA_VERSION,)


def test_a_database_from_a_newer_tdsched_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    ResultsDB(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema'")
    with pytest.raises(DatabaseError, match="schema 99, this tdsched reads 2; use a new --db"):
        ResultsDB(path)
