"""The results database of ``tdsched sweep``: one SQLite file, safe to kill at any moment.

SQLite in WAL mode; every record is written in its own transaction, so a sweep killed
with ``kill -9`` loses at most the candidate it was working on and never leaves a half
record. Results are keyed by a content hash of what was built (workload, scripts, target,
flags, IREE version: see :func:`tdsched.schedules.sweep.candidates.content_key`), so a
re-run, another sweep over an overlapping space or a resumed sweep reuses them instead of
recording duplicates.

Tables:

* ``sweeps``: one row per sweep (recipe, target, strategy, options, space and pruning,
  status ``running`` / ``done``, start and end time, and the race that picked the best:
  ``decision``, JSON).
* ``results``: one row per content key: parameters, status (a
  :class:`~..evaluation.Status`; databases written before it may hold ``mismatch`` for
  ``wrong``), median time, the baseline median measured by the same sweep, the
  screening speedup and its 95% interval, the speedup it last raced at
  (``confirmed_speedup``), error text, artifact path.

Databases of schema 1 (before racing) are upgraded in place when opened.
* ``sweep_results``: which results each sweep evaluated (a key once per sweep).
* ``baselines``: IREE default's median per sweep, measured at the start and the end.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tdsched.targets.target import make_target, run_conditions

SCHEMA_VERSION = "2"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY,
    recipe TEXT NOT NULL,
    source TEXT,
    target TEXT NOT NULL,
    strategy TEXT NOT NULL,
    signature TEXT NOT NULL,
    options TEXT NOT NULL,
    space TEXT NOT NULL,
    status TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    decision TEXT
);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    recipe TEXT NOT NULL,
    target TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL,
    time_ms REAL,
    timing TEXT,
    baseline_ms REAL,
    speedup REAL,
    confirmed_speedup REAL,
    max_abs_error REAL,
    error TEXT,
    compile_s REAL,
    artifact TEXT,
    iree_version TEXT NOT NULL,
    recorded REAL NOT NULL,
    speedup_low REAL,
    speedup_high REAL,
    timing_s REAL
);
CREATE TABLE IF NOT EXISTS sweep_results (
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    key TEXT NOT NULL REFERENCES results(key),
    PRIMARY KEY (sweep_id, key)
);
CREATE TABLE IF NOT EXISTS baselines (
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    phase TEXT NOT NULL,
    median_ms REAL NOT NULL,
    timing TEXT NOT NULL,
    recorded REAL NOT NULL,
    PRIMARY KEY (sweep_id, phase)
);
"""
_MIGRATIONS = {
    "1": [
        "ALTER TABLE sweeps ADD COLUMN decision TEXT",
        "ALTER TABLE results ADD COLUMN speedup_low REAL",
        "ALTER TABLE results ADD COLUMN speedup_high REAL",
        "ALTER TABLE results ADD COLUMN timing_s REAL",
    ]
}
"""Schema version → the statements that bring it to :data:`SCHEMA_VERSION` (added columns
only: every recorded result is kept)."""
OK = "ok"


class DatabaseError(ValueError):
    """The path is not (and cannot become) a tdsched results database, or the database is
    from another schema version. A ValueError: bad input, reported in one line."""


@dataclass(frozen=True)
class Result:
    """One evaluated candidate, as recorded."""

    key: str
    recipe: str
    target: str
    params: dict[str, Any]
    status: str
    time_ms: float | None = None
    timing: dict[str, Any] | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    """Screening: the median of the per-round ratios IREE default / candidate."""
    confirmed_speedup: float | None = None
    """The race's median speedup, when the candidate raced (see :mod:`.racing`)."""
    max_abs_error: float | None = None
    error: str | None = None
    compile_s: float | None = None
    artifact: str | None = None
    iree_version: str = ""
    speedup_low: float | None = None
    speedup_high: float | None = None
    """The screening speedup's 95% interval (None in databases from before racing)."""
    timing_s: float | None = None
    """Wall seconds the screening timing took."""

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "recipe": self.recipe,
            "target": self.target,
            "params": self.params,
            "status": self.status,
            "time_ms": self.time_ms,
            "baseline_ms": self.baseline_ms,
            "speedup": self.speedup,
            "speedup_low": self.speedup_low,
            "speedup_high": self.speedup_high,
            "confirmed_speedup": self.confirmed_speedup,
            "max_abs_error": self.max_abs_error,
            "error": self.error,
            "compile_s": self.compile_s,
            "iree_version": self.iree_version,
        }


@dataclass(frozen=True)
class Sweep:
    """A recorded sweep."""

    id: int
    recipe: str
    source: str | None
    target: str
    strategy: str
    signature: str
    options: dict[str, Any]
    space: dict[str, Any]
    status: str
    started: float
    finished: float | None
    decision: dict[str, Any] | None = None
    """The race that picked the best (a :class:`~.racing.Decision` as a dict)."""

    @property
    def conditions(self) -> str:
        """Where its candidates ran: ``x86, 2 threads`` or ``vulkan``."""
        gpu = make_target(self.target).is_gpu
        threads = self.options.get("threads")
        return run_conditions(self.target, None if gpu or not isinstance(threads, int) else threads)


class ResultsDB:
    """A results database file (created on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.is_dir():
            raise DatabaseError(
                f"{path}: is a folder; give a database file, e.g. {path / 'tdsched-sweeps.db'}"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(
                f"{path}: cannot create the folder it goes in ({exc.strerror}: {exc.filename})"
            ) from exc
        try:
            self._conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                row = self._conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is None:
                    self._conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                elif row[0] in _MIGRATIONS:
                    for statement in _MIGRATIONS[row[0]]:
                        self._conn.execute(statement)
                    self._conn.execute(
                        "UPDATE meta SET value=? WHERE key='schema'", (SCHEMA_VERSION,)
                    )
                elif row[0] != SCHEMA_VERSION:
                    raise DatabaseError(
                        f"{path}: results database schema {row[0]}, this tdsched reads "
                        f"{SCHEMA_VERSION}; use a new --db file"
                    )
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"{path}: not a tdsched results database ({exc})") from exc

    @property
    def artifacts(self) -> Path:
        """Where compiled candidates are kept, next to the database file."""
        return self.path.with_name(self.path.name + ".artifacts")

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- sweeps ---------------------------------------------------------------------

    def start_sweep(
        self,
        *,
        recipe: str,
        source: str | None,
        target: str,
        strategy: str,
        signature: str,
        options: Mapping[str, Any],
        space: Mapping[str, Any],
    ) -> int:
        """Record a new sweep; returns its id."""
        with self._transaction():
            cursor = self._conn.execute(
                "INSERT INTO sweeps (recipe, source, target, strategy, signature, options,"
                " space, status, started) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?)",
                (
                    recipe,
                    source,
                    target,
                    strategy,
                    signature,
                    json.dumps(dict(options), sort_keys=True),
                    json.dumps(dict(space), sort_keys=True),
                    time.time(),
                ),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def finish_sweep(self, sweep_id: int) -> None:
        with self._transaction():
            self._conn.execute(
                "UPDATE sweeps SET status='done', finished=? WHERE id=?", (time.time(), sweep_id)
            )

    def unfinished_sweep(self, signature: str) -> Sweep | None:
        """The newest sweep with this signature that never finished (for ``--resume``)."""
        row = self._conn.execute(
            "SELECT * FROM sweeps WHERE signature=? AND status='running' ORDER BY id DESC",
            (signature,),
        ).fetchone()
        return _sweep(row) if row else None

    def sweeps(self) -> list[Sweep]:
        return [_sweep(r) for r in self._conn.execute("SELECT * FROM sweeps ORDER BY id")]

    def sweep(self, sweep_id: int) -> Sweep:
        row = self._conn.execute("SELECT * FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
        if row is None:
            known = ", ".join(str(s.id) for s in self.sweeps()) or "none"
            raise DatabaseError(f"{self.path}: no sweep {sweep_id} (recorded: {known})")
        return _sweep(row)

    # -- results --------------------------------------------------------------------

    def record(self, result: Result, sweep_id: int | None = None) -> None:
        """Insert or replace ``result`` and link it to ``sweep_id``, in one transaction."""
        with self._transaction():
            self._conn.execute(
                f"INSERT OR REPLACE INTO results ({', '.join(_RESULT_COLUMNS)}) VALUES "
                f"({', '.join('?' * len(_RESULT_COLUMNS))})",
                (
                    result.key,
                    result.recipe,
                    result.target,
                    json.dumps(result.params, sort_keys=True),
                    result.status,
                    result.time_ms,
                    json.dumps(result.timing) if result.timing is not None else None,
                    result.baseline_ms,
                    result.speedup,
                    result.confirmed_speedup,
                    result.max_abs_error,
                    result.error,
                    result.compile_s,
                    result.artifact,
                    result.iree_version,
                    time.time(),
                    result.speedup_low,
                    result.speedup_high,
                    result.timing_s,
                ),
            )
            if sweep_id is not None:
                self._link(sweep_id, result.key)

    def link(self, sweep_id: int, key: str) -> None:
        """Count an already recorded result as evaluated by ``sweep_id``."""
        with self._transaction():
            self._link(sweep_id, key)

    def _link(self, sweep_id: int, key: str) -> None:
        self._conn.execute("INSERT OR IGNORE INTO sweep_results VALUES (?, ?)", (sweep_id, key))

    def record_raced(self, key: str, speedup: float) -> None:
        """Store the speedup ``key`` raced at."""
        with self._transaction():
            self._conn.execute("UPDATE results SET confirmed_speedup=? WHERE key=?", (speedup, key))

    def record_decision(self, sweep_id: int, decision: Mapping[str, Any]) -> None:
        """Store how the sweep's race ended (replacing an earlier race of the sweep)."""
        with self._transaction():
            self._conn.execute(
                "UPDATE sweeps SET decision=? WHERE id=?",
                (json.dumps(dict(decision), sort_keys=True), sweep_id),
            )

    def result(self, key: str) -> Result | None:
        row = self._conn.execute("SELECT * FROM results WHERE key=?", (key,)).fetchone()
        return _result(row) if row else None

    def results(self, sweep_id: int | None = None) -> list[Result]:
        """All results, or those a sweep evaluated."""
        if sweep_id is None:
            rows = self._conn.execute("SELECT * FROM results ORDER BY recorded")
        else:
            rows = self._conn.execute(
                "SELECT r.* FROM results r JOIN sweep_results s ON r.key = s.key "
                "WHERE s.sweep_id=? ORDER BY r.recorded",
                (sweep_id,),
            )
        return [_result(r) for r in rows]

    # -- baselines ------------------------------------------------------------------

    def record_baseline(self, sweep_id: int, phase: str, timing: Mapping[str, Any]) -> None:
        """IREE default's timing at ``phase`` (``start`` or ``end``) of a sweep."""
        with self._transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?)",
                (sweep_id, phase, timing["median"], json.dumps(dict(timing)), time.time()),
            )

    def baselines(self, sweep_id: int) -> dict[str, float]:
        rows = self._conn.execute(
            "SELECT phase, median_ms FROM baselines WHERE sweep_id=?", (sweep_id,)
        )
        return {phase: median for phase, median in rows}


_RESULT_COLUMNS = (
    "key",
    "recipe",
    "target",
    "params",
    "status",
    "time_ms",
    "timing",
    "baseline_ms",
    "speedup",
    "confirmed_speedup",
    "max_abs_error",
    "error",
    "compile_s",
    "artifact",
    "iree_version",
    "recorded",
    "speedup_low",
    "speedup_high",
    "timing_s",
)


def drift(baselines: Mapping[str, float]) -> float | None:
    """Relative change of IREE default's median from a sweep's start to its end."""
    start, end = baselines.get("start"), baselines.get("end")
    return end / start - 1.0 if start and end else None


def _sweep(row: tuple[Any, ...]) -> Sweep:
    return Sweep(
        id=row[0],
        recipe=row[1],
        source=row[2],
        target=row[3],
        strategy=row[4],
        signature=row[5],
        options=json.loads(row[6]),
        space=json.loads(row[7]),
        status=row[8],
        started=row[9],
        finished=row[10],
        decision=json.loads(row[11]) if row[11] else None,
    )


def _result(row: tuple[Any, ...]) -> Result:
    return Result(
        key=row[0],
        recipe=row[1],
        target=row[2],
        params=json.loads(row[3]),
        status=row[4],
        time_ms=row[5],
        timing=json.loads(row[6]) if row[6] else None,
        baseline_ms=row[7],
        speedup=row[8],
        confirmed_speedup=row[9],
        max_abs_error=row[10],
        error=row[11],
        compile_s=row[12],
        artifact=row[13],
        iree_version=row[14],
        speedup_low=row[16],
        speedup_high=row[17],
        timing_s=row[18],
    )
