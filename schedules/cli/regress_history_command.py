"""``tdsched regress history HISTORY.db``: change points in a recorded gate history.

The command line spells it as a word after ``regress``; :func:`.main.main` routes
``regress history`` here (``regress``'s own first argument is a baseline file).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..regress.change_points import ALPHA, MIN_CHANGE, PENALTY, Settings
from ..regress.history_plot import plot_series
from ..regress.history_report import analyse, check_since, text
from .args import positive_float
from .commands import REGRESS_HISTORY
from .output_paths import reads, writes

NAME = REGRESS_HISTORY

DESCRIPTION = """\
Find the change points in a gate history that 'tdsched regress BASELINE --record
HISTORY.db' appended to: for each entry on each machine, the runs where its speedup over
IREE default stepped, with the median speedup before and after, the commits between which
it happened, and its significance. Candidates come from PELT (ruptures, a change of the
median) on the log of the speedups with a penalty scaled by the series' own noise; each
is kept when a Mann-Whitney test of the runs before it against those after gives
p <= --alpha and the median moved by at least --min-change
(docs/commands/regress_history.md).

exit status: 0 no series has regressed; 1 some series' last change is a regression with a
commit between its runs (with --since: one after that run); 2 bad input (no such history,
an unknown --since).
"""

EPILOG = """\
examples:
  tdsched regress perf.yaml --record history.db        record a gate run (CI: every run)
  tdsched regress history history.db                   change points of every series
  tdsched regress history history.db --entry matmul --plot charts/
  tdsched regress history history.db --since v0.3.0-commit --json
"""


def add_parser(sub: Any) -> None:
    """Register ``regress history`` (as :data:`NAME`) on the subcommand parser."""
    p = sub.add_parser(
        NAME,
        prog="tdsched regress history",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    history = p.add_argument("history", type=Path, metavar="HISTORY.db", help="a recorded history")
    reads(p, history)
    p.add_argument(
        "--entry",
        action="append",
        default=[],
        metavar="TEXT",
        help="only series whose entry label contains TEXT (repeatable)",
    )
    p.add_argument(
        "--machine", metavar="TEXT", help="only series recorded on a machine containing TEXT"
    )
    p.add_argument(
        "--since",
        metavar="REF",
        help="exit 1 only for a regression after this run: a date YYYY-MM-DD or a recorded "
        "commit (prefix), e.g. the last release's",
    )
    p.add_argument(
        "--alpha",
        type=positive_float,
        default=ALPHA,
        help=f"largest p-value of a change (default {ALPHA})",
    )
    p.add_argument(
        "--min-change",
        type=positive_float,
        default=MIN_CHANGE,
        metavar="F",
        help=f"smallest relative step of the median speedup (default {MIN_CHANGE}: 2%%)",
    )
    p.add_argument(
        "--penalty",
        type=positive_float,
        default=PENALTY,
        help=f"PELT's penalty, times the noise (sigma) and log(runs) (default {PENALTY})",
    )
    plot = p.add_argument(
        "--plot", type=Path, metavar="DIR", help="write one PNG per series into DIR"
    )
    writes(p, plot, folder=True)
    p.add_argument("--json", action="store_true", help="print one JSON document, not text")


def run(args: argparse.Namespace) -> int:
    settings = Settings(penalty=args.penalty, alpha=args.alpha, min_change=args.min_change)
    reports = analyse(args.history, args.entry, args.machine, settings)
    if not reports:
        raise ValueError(f"{args.history}: no recorded series matches --entry / --machine")
    if args.since is not None:
        check_since(args.since, reports)
    regressed = [r for r in reports if r.regressed_since(args.since)]
    if args.plot:
        for report in reports:
            print(f"regress: wrote {plot_series(report, args.plot)}", file=sys.stderr)
    if args.json:
        document = {
            "history": str(args.history),
            "settings": vars(settings),
            "series": [r.as_dict(args.since) for r in reports],
            "regressed": len(regressed),
        }
        print(json.dumps(document, indent=2))
    else:
        print(text(reports, args.history, args.since))
    return 1 if regressed else 0
