"""``tdsched report DB``: the command line of :mod:`tdsched.schedules.sweep.report`.

Reads a results database that ``tdsched sweep`` wrote (never creates or writes one) and
prints one sweep's header and ranked table, lists every sweep (``--all``), or exports one
sweep as CSV, JSON or a PNG plot.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tdsched.targets.cpu_isa import cpu_description
from tdsched.targets.target import DEFAULT_THREADS, make_target

from ..measure.evaluation import prepare_device
from ..measure.machine_peak import MachinePeak, machine_peak
from ..measure.roofline_plot import PlotError, require_matplotlib
from ..sweep.database import DatabaseError, ResultsDB, Sweep
from ..sweep.report import (
    ReportError,
    SweepData,
    as_json,
    plot,
    summary,
    sweeps_table,
    text_report,
    write_csv,
)
from ..sweep.report_roofline import plot_sweep_roofline
from .args import positive_int
from .output_paths import reads, writes

DESCRIPTION = """\
Report a sweep recorded in a results database (the --db of 'tdsched sweep').

By default: the newest sweep's header (recipe, target, strategy, start and end, status,
the space with what each constraint pruned, IREE default's time at the start and the end
and the drift between them) and its ranked table, the same one 'tdsched sweep' prints.
--csv, --json and --plot export the sweep; --roofline draws its candidates on this
machine's roofline (with --all: every sweep run under the newest one's conditions);
--all lists every sweep in the database.
"""

EPILOG = """\
examples:
  tdsched report tdsched-sweeps.db                     newest sweep: header and best 10
  tdsched report tdsched-sweeps.db --all               every sweep, with its best speedup
  tdsched report tdsched-sweeps.db --sweep 2 --top 25
  tdsched report tdsched-sweeps.db --csv results.csv   one row per candidate
  tdsched report tdsched-sweeps.db --json
  tdsched report tdsched-sweeps.db --plot tiles.png --x TM --y TN     heatmap
  tdsched report tdsched-sweeps.db --plot all.png                     scatter
  tdsched report tdsched-sweeps.db --roofline roof.png                 GFLOP/s vs the roof
  tdsched report tdsched-sweeps.db --all --roofline shapes.png         every sweep's column
"""


def add_parser(sub: Any) -> None:
    """Register ``report`` on the ``tdsched`` subcommand parser."""
    p = sub.add_parser(
        "report",
        help="tables, CSV/JSON and plots of a sweep database",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    db = p.add_argument("db", type=Path, metavar="DB", help="results database of tdsched sweep")
    reads(p, db)
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--sweep", type=positive_int, metavar="ID", help="sweep id (default: the newest)"
    )
    which.add_argument("--all", action="store_true", help="list every sweep in DB")
    p.add_argument(
        "--top", type=positive_int, default=10, metavar="N", help="rows of the table (10)"
    )
    csv = p.add_argument("--csv", metavar="FILE", help="write one row per candidate ('-': stdout)")
    writes(p, csv, stdout=True)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    plot = p.add_argument(
        "--plot", type=Path, metavar="PNG", help="write a plot (needs tdsched[plot])"
    )
    writes(p, plot)
    p.add_argument("--x", metavar="PARAM", help="plot: x axis parameter (default: index)")
    p.add_argument("--y", metavar="PARAM", help="plot: with --x, a heatmap over x and y")
    roofline = p.add_argument(
        "--roofline",
        type=Path,
        metavar="PNG",
        help="write the candidates' GFLOP/s on this machine's measured roofline "
        "(needs tdsched[plot]; measures the peak when it is not cached)",
    )
    writes(p, roofline)


def run(args: argparse.Namespace) -> int:
    """``tdsched report``. Exit 0 on success; errors raise :class:`ReportError`."""
    _check_options(args)
    if args.roofline is not None:
        try:
            require_matplotlib()
        except PlotError as exc:
            raise ReportError(str(exc).replace("--plot", "--roofline")) from exc
    db = _open(args.db)
    try:
        if args.all:
            sweeps = [_data(db, s) for s in _recorded(db)]
            if args.roofline is not None:
                _write(args.roofline, lambda: _roofline(sweeps, args.roofline))
            print(
                json.dumps([summary(d) for d in sweeps], indent=2)
                if args.json
                else sweeps_table(sweeps)
            )
            return 0
        data = _data(db, _pick(db, args.sweep))
    finally:
        db.close()
    # Files first: a bad --x/--y or output path stops the command before anything is printed.
    if args.plot is not None:
        _write(args.plot, lambda: plot(data, args.plot, args.x, args.y))
    if args.roofline is not None:
        _write(args.roofline, lambda: _roofline([data], args.roofline))
    if args.csv is not None and args.csv != "-":
        _write(Path(args.csv), lambda: _csv(data, args.csv))
    if args.json:
        print(json.dumps(as_json(data), indent=2))
    elif args.csv == "-":
        write_csv(data, sys.stdout)
    else:
        print(text_report(data, args.top))
    return 0


def _write(path: Path, writer: Callable[[], None]) -> None:
    """Run ``writer`` (which writes ``path``) and name the file on stderr."""
    try:
        writer()
    except OSError as exc:
        raise ReportError(f"{exc.filename or path}: cannot write: {exc.strerror}") from exc
    print(f"wrote {path}", file=sys.stderr)


def _csv(data: SweepData, path: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as stream:
        write_csv(data, stream)


def _roofline(sweeps: list[SweepData], path: Path) -> None:
    """Draw ``sweeps`` (those with recorded work, under the newest one's conditions) on
    the roofline of this machine, when they ran on it."""
    drawable = [d for d in sweeps if d.sweep.work is not None and d.sweep.work.intensity]
    if not drawable:
        missing = sweeps[-1].sweep
        why = (
            "was recorded before sweeps kept their workload's work; run it again"
            if missing.work is None
            else "does no arithmetic or moves no bytes: it has no intensity"
        )
        raise ReportError(f"--roofline: sweep {missing.id} ({missing.recipe}) {why}")
    conditions = drawable[-1].sweep.conditions
    drawn = [d for d in drawable if d.sweep.conditions == conditions]
    left = [d.sweep.id for d in sweeps if d not in drawn]
    notes = [f"not drawn (other conditions, or no work recorded): sweep {_ids(left)}"] * bool(left)
    peak, no_roof = _peak(drawn[-1])
    notes += [no_roof] if no_roof else []
    for note in notes:
        print(f"roofline: {note}", file=sys.stderr)
    plot_sweep_roofline(drawn, peak, path, "; ".join(notes) or None)


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)


def _peak(data: SweepData) -> tuple[MachinePeak | None, str | None]:
    """The roof of ``data``'s conditions on this machine (cached, or measured now), or
    why there is none: the sweep ran on another machine."""
    sweep, work = data.sweep, data.sweep.work
    assert work is not None
    here = cpu_description()
    if work.machine != here:
        return None, f"no roof: the sweep ran on {work.machine}, this machine is {here}"
    options = sweep.options
    target = make_target(
        sweep.target, cpu=options.get("cpu") or "host", cpu_features=options.get("cpu_features")
    )
    threads = options.get("threads") or DEFAULT_THREADS
    prepare_device(target, threads)
    return machine_peak(target, threads), None


def _check_options(args: argparse.Namespace) -> None:
    if args.top < 1:
        raise ReportError(f"--top {args.top}: give at least 1 row")
    if args.all and (args.csv or args.plot or args.x or args.y):
        raise ReportError(
            "--all lists the sweeps; --csv and --plot export one (use --sweep ID); "
            "--roofline draws them all"
        )
    if (args.x or args.y) and args.plot is None:
        raise ReportError("--x and --y choose the axes of --plot PNG; add --plot")
    if args.json and args.csv == "-":
        raise ReportError("--json and --csv - both print to stdout; write the CSV to a file")


def _open(path: Path) -> ResultsDB:
    """The database at ``path``, which must exist, opened read-only: a report never
    writes it (it may be on a read-only disk, another user's, or a sweep's in progress)."""
    if not path.is_file():
        raise ReportError(
            f"{path}: no such results database; give the --db file of a 'tdsched sweep' "
            "(default tdsched-sweeps.db)"
        )
    try:
        return ResultsDB(path, read_only=True)
    except DatabaseError as exc:
        raise ReportError(str(exc)) from exc


def _recorded(db: ResultsDB) -> list[Sweep]:
    sweeps = db.sweeps()
    if not sweeps:
        raise ReportError(
            f"{db.path}: no sweep recorded; run "
            f"{shlex.join(['tdsched', 'sweep', 'RECIPE', '--db', str(db.path)])} first"
        )
    return sweeps


def _pick(db: ResultsDB, sweep_id: int | None) -> Sweep:
    """Sweep ``sweep_id``, or the newest."""
    sweeps = _recorded(db)
    if sweep_id is None:
        return sweeps[-1]
    try:
        return db.sweep(sweep_id)
    except DatabaseError as exc:
        raise ReportError(f"{exc}; --all lists them") from exc


def _data(db: ResultsDB, sweep: Sweep) -> SweepData:
    return SweepData(sweep, db.results(sweep.id), db.baselines(sweep.id), db.bundle(sweep.id))
