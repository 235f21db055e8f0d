"""A gate's history: every ``tdsched regress --record HISTORY.db`` run appended to SQLite.

One row per run (when, the project's git commit, tdsched's and IREE's versions, the
machine) and one per entry measured in it (its label, target and threads, its verdict, the
speedup's median and 95% interval, both sides' median times, the calibration drift).
Rows are only ever added, each run in one transaction, so a run that crashes half-way
leaves the history as it was; :mod:`.change_points` reads the series back.

Preconditions: the file is a history this module wrote (or does not exist yet); an
unrelated SQLite file is refused with a clear error, never altered.
"""

from __future__ import annotations

import datetime
import sqlite3
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import iree.compiler.version
from tdsched.targets.cpu_isa import cpu_description

from .runner import EntryResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    recorded TEXT NOT NULL,
    git_commit TEXT,
    tdsched_version TEXT,
    iree_version TEXT,
    machine TEXT NOT NULL,
    baseline TEXT
);
CREATE TABLE IF NOT EXISTS measurements (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    entry TEXT NOT NULL,
    target TEXT,
    threads INTEGER,
    status TEXT NOT NULL,
    median REAL,
    low REAL,
    high REAL,
    rounds INTEGER,
    scheduled_ms REAL,
    baseline_ms REAL,
    calibration_drift REAL
);
CREATE TABLE IF NOT EXISTS history_format (version INTEGER NOT NULL);
"""
FORMAT = 1


class HistoryError(ValueError):
    """The history file cannot be used (not a history, a newer format, unreadable)."""


@dataclass(frozen=True)
class Run:
    """One recorded gate run."""

    id: int
    recorded: str
    """UTC, ISO 8601 to the second."""
    git_commit: str | None
    tdsched_version: str | None
    iree_version: str | None
    machine: str


@dataclass(frozen=True)
class Point:
    """One entry's measurement in one run."""

    run: Run
    status: str
    median: float | None
    low: float | None
    high: float | None


def open_history(path: Path, *, create: bool) -> sqlite3.Connection:
    """The history at ``path`` (created when ``create`` and missing), its format checked."""
    if not create and not path.is_file():
        raise HistoryError(
            f"{path}: no such history file; record one with "
            f"'tdsched regress BASELINE --record {path}'"
        )
    try:
        db = sqlite3.connect(path)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{path}: not a tdsched history ({exc})") from exc
    if tables and "history_format" not in tables:
        db.close()
        raise HistoryError(
            f"{path}: an SQLite file that is not a tdsched history (tables: "
            f"{', '.join(sorted(tables))}); give --record a new file"
        )
    db.executescript(SCHEMA)
    found = db.execute("SELECT version FROM history_format").fetchone()
    if found is None:
        db.execute("INSERT INTO history_format VALUES (?)", (FORMAT,))
        db.commit()
    elif found[0] > FORMAT:
        db.close()
        raise HistoryError(
            f"{path}: written by a newer tdsched (history format {found[0]}, this one reads "
            f"{FORMAT}); upgrade tdsched"
        )
    return db


def record_run(
    path: Path,
    baseline: Path,
    results: Sequence[EntryResult],
    *,
    commit: str | None,
    machine: str | None = None,
) -> int:
    """Append one run of ``baseline``'s ``results`` to the history at ``path``; its id.

    ``commit``: the project's (:func:`git_commit` of the baseline's folder); ``machine``
    defaults to this machine's CPU (:func:`cpu_description`)."""
    db = open_history(path, create=True)
    try:
        with db:
            cursor = db.execute(
                "INSERT INTO runs (recorded, git_commit, tdsched_version, iree_version, "
                "machine, baseline) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    commit,
                    _tdsched_version(),
                    iree.compiler.version.VERSION,
                    machine or cpu_description(),
                    str(baseline),
                ),
            )
            run_id = cursor.lastrowid
            assert run_id is not None
            db.executemany(
                "INSERT INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [_row(run_id, result) for result in results],
            )
        return run_id
    finally:
        db.close()


def _row(run_id: int, result: EntryResult) -> tuple[object, ...]:
    m = result.measurement
    ratio = m.speedup
    times = ratio.times if ratio else {}
    scheduled, baseline = times.get("scheduled"), times.get("iree_default")
    return (
        run_id,
        result.entry.label,
        m.target or result.entry.target,
        result.settings.threads,
        str(result.verdict.status),
        ratio.median if ratio else None,
        ratio.low if ratio else None,
        ratio.high if ratio else None,
        ratio.rounds if ratio else None,
        scheduled.median if scheduled else None,
        baseline.median if baseline else None,
        m.calibration.drift if m.calibration else None,
    )


def read_series(path: Path) -> dict[tuple[str, str], list[Point]]:
    """Every (entry, machine)'s measurements, oldest run first."""
    db = open_history(path, create=False)
    try:
        rows = db.execute(
            "SELECT r.id, r.recorded, r.git_commit, r.tdsched_version, r.iree_version, "
            "r.machine, m.entry, m.status, m.median, m.low, m.high "
            "FROM measurements m JOIN runs r ON r.id = m.run_id ORDER BY r.id"
        ).fetchall()
    finally:
        db.close()
    series: dict[tuple[str, str], list[Point]] = {}
    for run_id, recorded, commit, tdsched, iree_v, machine, entry, status, *ratio in rows:
        run = Run(run_id, recorded, commit, tdsched, iree_v, machine)
        series.setdefault((entry, machine), []).append(Point(run, status, *ratio))
    return series


def git_commit(folder: Path) -> str | None:
    """The commit checked out in the git work tree holding ``folder`` (``+`` appended when
    the tree has uncommitted changes); None outside a work tree or without git."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, timeout=30
        )

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def _tdsched_version() -> str | None:
    try:
        return version("tdsched")
    except PackageNotFoundError:
        return None
