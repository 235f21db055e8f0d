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
  ``wrong``), compile time and artifact path (what was built), and the latest
  measurement of it: median time, the baseline median timed beside it, the screening
  speedup and its 95% interval, the speedup it last raced at (``confirmed_speedup``),
  error text, and which sweep measured it (``measured_by``).
* ``sweep_results``: which results each sweep evaluated (a key once per sweep), each
  with that sweep's own measurement (the :data:`MEASUREMENT` columns): what it measured,
  or, for a result it reused, the numbers it reused (``measured_by`` names the sweep
  that measured them) and its own race. Sweeps sharing a database therefore never
  overwrite each other's numbers: ``results(sweep_id)`` reads that sweep's.
* ``baselines``: IREE default's median per sweep, measured at the start and the end.

A sweep also records its workload's ``work`` (JSON, :class:`SweepWork`): arithmetic
work, compulsory traffic and the machine it ran on, which ``tdsched report`` turns into
GFLOP/s and a roofline.

Databases of earlier schemas (1: before racing; 2: one measurement per result; 3: no
workload work) are upgraded in place when opened; every recorded result is kept.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from tdsched.targets.target import run_conditions

from ..measure.status import Status

SCHEMA_VERSION = "4"
_MEASUREMENT_TYPES = {
    "measured_by": "INTEGER",
    "status": "TEXT",
    "time_ms": "REAL",
    "timing": "TEXT",
    "baseline_ms": "REAL",
    "speedup": "REAL",
    "speedup_low": "REAL",
    "speedup_high": "REAL",
    "confirmed_speedup": "REAL",
    "max_abs_error": "REAL",
    "error": "TEXT",
    "timing_s": "REAL",
}
MEASUREMENT = tuple(_MEASUREMENT_TYPES)
"""The columns of one sweep's measurement of a result, kept per sweep in
``sweep_results`` (the latest also in ``results``)."""
_MEASUREMENT_COLUMNS = "".join(f"    {c} {kind},\n" for c, kind in _MEASUREMENT_TYPES.items())
_SCHEMA = f"""
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
    decision TEXT,
    work TEXT
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
    timing_s REAL,
    measured_by INTEGER
);
CREATE TABLE IF NOT EXISTS sweep_results (
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    key TEXT NOT NULL REFERENCES results(key),
    recorded REAL,
{_MEASUREMENT_COLUMNS}    PRIMARY KEY (sweep_id, key)
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
Migration = Callable[[sqlite3.Connection], None]


def _per_sweep_races(conn: sqlite3.Connection) -> None:
    """Schema 2 → 3, after the link rows took their result's numbers: each sweep that
    recorded a race gets the speedups its own race measured (its standings), and no
    confirmed speedup for the results it did not race. A sweep without a recorded race
    keeps the result's (schema 1 confirmed the best in the result row)."""
    for sweep_id, decision in conn.execute("SELECT id, decision FROM sweeps").fetchall():
        if not decision:
            continue
        raced = {s["key"]: s["speedup"][0] for s in json.loads(decision).get("standings", [])}
        conn.execute(
            "UPDATE sweep_results SET confirmed_speedup=NULL WHERE sweep_id=?", (sweep_id,)
        )
        for key, speedup in raced.items():
            conn.execute(
                "UPDATE sweep_results SET confirmed_speedup=? WHERE sweep_id=? AND key=?",
                (speedup, sweep_id, key),
            )


_MIGRATIONS: dict[str, tuple[str, Sequence[str | Migration]]] = {
    "1": (
        "2",
        [
            "ALTER TABLE sweeps ADD COLUMN decision TEXT",
            "ALTER TABLE results ADD COLUMN speedup_low REAL",
            "ALTER TABLE results ADD COLUMN speedup_high REAL",
            "ALTER TABLE results ADD COLUMN timing_s REAL",
        ],
    ),
    "2": (
        "3",
        [
            "ALTER TABLE results ADD COLUMN measured_by INTEGER",
            "UPDATE results SET measured_by = "
            "(SELECT MIN(sweep_id) FROM sweep_results s WHERE s.key = results.key)",
            "ALTER TABLE sweep_results ADD COLUMN recorded REAL",
            *(
                f"ALTER TABLE sweep_results ADD COLUMN {column} {kind}"
                for column, kind in _MEASUREMENT_TYPES.items()
            ),
            f"UPDATE sweep_results SET (recorded, {', '.join(MEASUREMENT)}) = "
            f"(SELECT r.recorded, {', '.join('r.' + c for c in MEASUREMENT)} FROM results r "
            "WHERE r.key = sweep_results.key)",
            _per_sweep_races,
        ],
    ),
    "3": ("4", ["ALTER TABLE sweeps ADD COLUMN work TEXT"]),
}
"""Schema version → the next version and the steps that bring a database to it (added
columns and tables, filled from what was recorded: every recorded result is kept). A
schema 2 database knew one measurement per result, its latest: each sweep that
evaluated it is given that one (``measured_by`` the first of them)."""


class DatabaseError(ValueError):
    """The path is not (and cannot become) a tdsched results database, the database is
    from another schema version, or a row does not hold what tdsched records. A
    ValueError: bad input, reported in one line."""


@dataclass(frozen=True)
class Result:
    """One evaluated candidate, as recorded."""

    key: str
    recipe: str
    target: str
    params: dict[str, Any]
    status: Status
    """How it ended (a string from JSON or the database becomes the enum)."""
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
    measured_by: int | None = None
    """The sweep that measured these numbers (another sweep's, for a result reused)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "recipe": self.recipe,
            "target": self.target,
            "params": self.params,
            "status": str(self.status),
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
            "measured_by": self.measured_by,
        }


@dataclass(frozen=True)
class SweepWork:
    """What the swept workload does, recorded with the sweep so that its candidates'
    times become GFLOP/s and points on a roofline."""

    flops: int
    """Arithmetic work (:func:`~tdsched.transform_lib.work.count_work`)."""
    uncounted: list[str]
    """Ops whose work is not in ``flops``: then it is a lower bound."""
    traffic_bytes: int
    """Compulsory traffic: every argument read once, every result written once."""
    machine: str
    """The machine the sweep ran on (:func:`~tdsched.targets.cpu_isa.cpu_description`): a peak
    measured on another one does not bound these candidates."""

    @property
    def intensity(self) -> float | None:
        """FLOP per byte of compulsory traffic (``None`` without FLOP or bytes)."""
        return self.flops / self.traffic_bytes if self.flops and self.traffic_bytes else None

    def gflops(self, time_ms: float | None) -> float | None:
        """GFLOP/s of a call that took ``time_ms`` (``None`` without FLOP or a time)."""
        return self.flops / (time_ms * 1e-3) / 1e9 if self.flops and time_ms else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "intensity": self.intensity}

    @classmethod
    def from_json(cls, value: Any) -> SweepWork:
        """The work recorded as ``value`` (decoded JSON, the fields by name); a ValueError
        says what does not fit."""
        names = [f.name for f in fields(cls)]
        if not isinstance(value, dict) or sorted(value) != sorted(names):
            raise ValueError(f"expected an object with {', '.join(names)}, got {value!r:.80}")
        for name, hint in get_type_hints(cls).items():
            kind, items = get_origin(hint) or hint, get_args(hint)
            field = value[name]
            if (
                not isinstance(field, kind)
                or isinstance(field, bool)
                or any(not isinstance(item, items) for item in (field if items else ()))
            ):
                kind_name = hint.__name__ if isinstance(hint, type) else hint
                raise ValueError(f"{name} must be {kind_name}, got {field!r:.80}")
        return cls(**value)


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
    work: SweepWork | None = None
    """The workload's work; ``None`` for sweeps recorded before tdsched kept it."""

    @property
    def method(self) -> str:
        """The strategy, with the cost model an adaptive sweep used (:func:`method`)."""
        return method(self.strategy, self.options.get("cost_model"))

    @property
    def conditions(self) -> str:
        """Where its candidates ran: ``x86, 2 threads`` or ``vulkan``."""
        threads = self.options.get("threads")
        return run_conditions(self.target, threads if isinstance(threads, int) else None)


def method(strategy: str, cost_model: object) -> str:
    """How a sweep chose its candidates, for headers: ``grid``, ``model``, or with the
    cost model an adaptive sweep used, ``adaptive, learned cost model``."""
    if strategy == "adaptive" and cost_model in ("learned", "additive"):
        return f"adaptive, {cost_model} cost model"
    return strategy


class ResultsDB:
    """A results database file (created on first use; ``read_only``: one that must
    exist, opened so that nothing is ever written to it)."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        if path.is_dir():
            raise DatabaseError(
                f"{path}: is a folder; give a database file, e.g. {path / 'tdsched-sweeps.db'}"
            )
        if not read_only:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseError(
                    f"{path}: cannot create the folder it goes in ({exc.strerror}: {exc.filename})"
                ) from exc
        try:
            self._conn = _reader(path) if read_only else _writer(path)
            self._conn.row_factory = sqlite3.Row
            if read_only:
                self._upgrade()
            else:
                with self._transaction():
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            self._conn.execute(statement)
                    self._upgrade()
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"{path}: not a tdsched results database ({exc})") from exc

    def _upgrade(self) -> None:
        """Stamp a new database with :data:`SCHEMA_VERSION`, or bring an older one to it
        one version at a time (:data:`_MIGRATIONS`); refuse one from a newer tdsched."""
        row = self._conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None:
            self._conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            return
        version = row[0]
        while version in _MIGRATIONS:
            version, steps = _MIGRATIONS[version]
            for step in steps:
                if isinstance(step, str):
                    self._conn.execute(step)
                else:
                    step(self._conn)
            self._conn.execute("UPDATE meta SET value=? WHERE key='schema'", (version,))
        if version != SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.path}: results database schema {version}, this tdsched reads "
                f"{SCHEMA_VERSION}; use a new --db file"
            )

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

    def record_bundle(self, sweep_id: int, bundle: Mapping[str, Any]) -> None:
        """Record the bench bundle a sweep wrote (:mod:`.bundle`), replacing an earlier one."""
        with self._transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (f"bundle:{sweep_id}", json.dumps(dict(bundle), sort_keys=True)),
            )

    def bundle(self, sweep_id: int) -> dict[str, Any] | None:
        """The bench bundle sweep ``sweep_id`` wrote last (None: it wrote none)."""
        row = self._conn.execute(
            "SELECT value FROM meta WHERE key=?", (f"bundle:{sweep_id}",)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def unfinished_sweep(self, signature: str) -> Sweep | None:
        """The newest sweep with this signature that never finished (for ``--resume``)."""
        row = self._conn.execute(
            "SELECT * FROM sweeps WHERE signature=? AND status='running' ORDER BY id DESC",
            (signature,),
        ).fetchone()
        return _sweep(row, self.path) if row else None

    def sweeps(self) -> list[Sweep]:
        return [
            _sweep(r, self.path) for r in self._conn.execute("SELECT * FROM sweeps ORDER BY id")
        ]

    def sweep(self, sweep_id: int) -> Sweep:
        row = self._conn.execute("SELECT * FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
        if row is None:
            known = ", ".join(str(s.id) for s in self.sweeps()) or "none"
            raise DatabaseError(f"{self.path}: no sweep {sweep_id} (recorded: {known})")
        return _sweep(row, self.path)

    # -- results --------------------------------------------------------------------

    def record(self, result: Result, sweep_id: int | None = None) -> None:
        """Record ``result`` as measured by ``sweep_id`` (the latest measurement of its
        key, and that sweep's own), in one transaction. A result recorded again without
        a compile time (timed again, not built again) keeps the one recorded."""
        row = _row(result, sweep_id)
        updates = ", ".join(f"{c}=excluded.{c}" for c in row if c not in ("key", "compile_s"))
        with self._transaction():
            self._conn.execute(
                f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join('?' * len(row))}) "
                f"ON CONFLICT(key) DO UPDATE SET {updates}, "
                "compile_s=COALESCE(excluded.compile_s, compile_s)",
                tuple(row.values()),
            )
            if sweep_id is not None:
                own = ("sweep_id", "key", "recorded", *MEASUREMENT)
                self._conn.execute(
                    f"INSERT OR REPLACE INTO sweep_results ({', '.join(own)}) "
                    f"VALUES ({', '.join('?' * len(own))})",
                    (sweep_id, *(row[c] for c in own[1:])),
                )

    def link(self, sweep_id: int, key: str) -> None:
        """Count an already recorded result as evaluated by ``sweep_id``, with the
        numbers recorded for it (its latest measurement, ``measured_by`` the sweep that
        made it) and no race of its own yet; a result the sweep already has stays as it is."""
        copied = ", ".join("NULL" if c == "confirmed_speedup" else c for c in MEASUREMENT)
        with self._transaction():
            self._conn.execute(
                f"INSERT OR IGNORE INTO sweep_results (sweep_id, key, recorded, "
                f"{', '.join(MEASUREMENT)}) SELECT ?, key, ?, {copied} FROM results WHERE key=?",
                (sweep_id, time.time(), key),
            )

    def record_raced(self, sweep_id: int, key: str, speedup: float) -> None:
        """Store the speedup ``key`` raced at in sweep ``sweep_id`` (and as its latest)."""
        with self._transaction():
            self._conn.execute(
                "UPDATE sweep_results SET confirmed_speedup=? WHERE sweep_id=? AND key=?",
                (speedup, sweep_id, key),
            )
            self._conn.execute("UPDATE results SET confirmed_speedup=? WHERE key=?", (speedup, key))

    def record_work(self, sweep_id: int, work: SweepWork) -> None:
        """Store the work of the workload sweep ``sweep_id`` swept."""
        with self._transaction():
            self._conn.execute(
                "UPDATE sweeps SET work=? WHERE id=?",
                (json.dumps(asdict(work), sort_keys=True), sweep_id),
            )

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
        """Every result with its latest measurement, or those a sweep evaluated with
        that sweep's own numbers, in the order the sweep recorded them."""
        if sweep_id is None:
            rows = self._conn.execute("SELECT * FROM results ORDER BY recorded")
        else:
            columns = ", ".join(
                f"{'s' if c in MEASUREMENT else 'r'}.{c} AS {c}" for c in _RESULT_COLUMNS
            )
            rows = self._conn.execute(
                f"SELECT {columns} FROM results r JOIN sweep_results s ON r.key = s.key "
                "WHERE s.sweep_id=? ORDER BY s.recorded, s.rowid",
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
    "measured_by",
)


def _row(result: Result, sweep_id: int | None) -> dict[str, Any]:
    """``result`` as a row of ``results`` (:data:`_RESULT_COLUMNS`), measured by ``sweep_id``."""
    return {
        "key": result.key,
        "recipe": result.recipe,
        "target": result.target,
        "params": json.dumps(result.params, sort_keys=True),
        "status": str(result.status),
        "time_ms": result.time_ms,
        "timing": json.dumps(result.timing) if result.timing is not None else None,
        "baseline_ms": result.baseline_ms,
        "speedup": result.speedup,
        "confirmed_speedup": result.confirmed_speedup,
        "max_abs_error": result.max_abs_error,
        "error": result.error,
        "compile_s": result.compile_s,
        "artifact": result.artifact,
        "iree_version": result.iree_version,
        "recorded": time.time(),
        "speedup_low": result.speedup_low,
        "speedup_high": result.speedup_high,
        "timing_s": result.timing_s,
        "measured_by": sweep_id,
    }


def _writer(path: Path) -> sqlite3.Connection:
    """A connection that records: WAL, so that readers never wait for a sweep."""
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _reader(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path`` (``tdsched report``: a database on a
    read-only disk, another user's, or one a sweep is writing). A database of an older
    schema is copied into memory, where :meth:`ResultsDB._upgrade` brings it up to date;
    the file stays as it was."""
    uri = path.resolve().as_uri()
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA schema_version")
    except sqlite3.OperationalError:
        # A WAL database whose -shm index is gone (its last writer closed it) cannot be
        # opened read-only where that index cannot be created again (a read-only folder):
        # then nobody writes it either, and it can be read as immutable.
        conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)
    version = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    if version is None or version[0] not in _MIGRATIONS:
        return conn
    memory = sqlite3.connect(":memory:", isolation_level=None)
    conn.backup(memory)
    conn.close()
    return memory


def measured_by_others(results: Sequence[Result], sweep_id: int) -> dict[int, int]:
    """Of a sweep's ``results``, how many each other sweep measured (the sweep reused
    them with that sweep's numbers), by sweep id."""
    counts: dict[int, int] = {}
    for r in results:
        if r.measured_by is not None and r.measured_by != sweep_id:
            counts[r.measured_by] = counts.get(r.measured_by, 0) + 1
    return dict(sorted(counts.items()))


def drift(baselines: Mapping[str, float]) -> float | None:
    """Relative change of IREE default's median from a sweep's start to its end."""
    start, end = baselines.get("start"), baselines.get("end")
    return end / start - 1.0 if start and end else None


def _sweep(row: sqlite3.Row, path: Path) -> Sweep:
    return Sweep(
        id=row[0],
        recipe=row[1],
        source=row[2],
        target=row[3],
        strategy=row[4],
        signature=row[5],
        options=_column(row, "options", path),
        space=_column(row, "space", path),
        status=row[8],
        started=row[9],
        finished=row[10],
        decision=_column(row, "decision", path),
        work=_column(row, "work", path, SweepWork.from_json),
    )


def _column(
    row: sqlite3.Row, column: str, path: Path, read: Callable[[Any], Any] = lambda value: value
) -> Any:
    """A JSON column of a sweep's row, decoded by ``read`` (``None`` when it is NULL); one
    that does not hold what tdsched records (a database edited by hand, or damaged) is a
    DatabaseError naming the sweep and the column."""
    if row[column] is None:
        return None
    try:
        return read(json.loads(row[column]))
    except ValueError as exc:
        clear = f"UPDATE sweeps SET {column}=NULL WHERE id={row['id']}"
        raise DatabaseError(
            f"{path}: sweep {row['id']}: column {column!r} is not what tdsched records "
            f"({exc}); restore the database, record the sweep again into a new --db"
            + (f", or clear it ({clear})" if column in _NULLABLE else "")
        ) from None


_NULLABLE = ("work", "decision")
"""The JSON columns a sweep may leave NULL: a report without them lacks only a line."""


def _result(row: sqlite3.Row) -> Result:
    return Result(
        key=row["key"],
        recipe=row["recipe"],
        target=row["target"],
        params=json.loads(row["params"]),
        status=row["status"],
        time_ms=row["time_ms"],
        timing=json.loads(row["timing"]) if row["timing"] else None,
        baseline_ms=row["baseline_ms"],
        speedup=row["speedup"],
        confirmed_speedup=row["confirmed_speedup"],
        max_abs_error=row["max_abs_error"],
        error=row["error"],
        compile_s=row["compile_s"],
        artifact=row["artifact"],
        iree_version=row["iree_version"],
        speedup_low=row["speedup_low"],
        speedup_high=row["speedup_high"],
        timing_s=row["timing_s"],
        measured_by=row["measured_by"],
    )
