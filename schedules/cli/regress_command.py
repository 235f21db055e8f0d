"""``tdsched regress [BASELINE] [--update]``: perf regression gates from a baseline file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tdsched.targets.target import TARGET_NAMES

from ..regress.adding import with_added
from ..regress.baseline_file import load_baseline
from ..regress.history import git_commit, record_run
from ..regress.output import as_json, markdown, table
from ..regress.runner import (
    EXIT_FAILED,
    EXIT_INCONCLUSIVE,
    EntryResult,
    blessed_file,
    exit_status,
    run_baseline,
    write_baseline,
)
from ..regress.verdict import GateStatus
from .args import add_trust_options, positive_float, trust_from
from .output_paths import reads, recipe_file, writes

DEFAULT_BASELINE = Path("tdsched-baseline.yaml")

DESCRIPTION = f"""\
Gate recipes against a committed baseline file: for each entry (recipe, target,
parameters), compile it with its schedule and require every schedule step to apply,
check its results against the reference on seeded random inputs, then time it and IREE
default interleaved, round after round, until the speedup's 95% interval is within
'precision' or clears the gate, or 'time_cap_s' runs out. A calibration kernel is timed
before and after; if its time moved more than 'calibration_tolerance', the machine's
load changed: the speedup's interval is widened by that change, and the entry is
inconclusive unless the widened interval still clears the gate on one side. Each entry
runs in a process of its own.

An entry fails when its speedup is below expected_speedup x (1 - tolerance), its results
are wrong, a schedule step matched nothing ("not applied"), it does not build or run,
or it has no expected_speedup yet. --update re-blesses: each entry measured cleanly and
precisely gets its measured speedup (and its numerics tolerance) written back.

exit status: 0 all passed (or blessed); {EXIT_FAILED} a failure; {EXIT_INCONCLUSIVE} no failure but
something inconclusive (noisy machine); 2 bad input (the baseline file, a recipe).
"""

EPILOG = """\
examples:
  tdsched regress                                  gate ./tdsched-baseline.yaml
  tdsched regress perf.yaml --target x86           only the x86 entries
  tdsched regress perf.yaml --entry matmul --time-cap 10
  tdsched regress perf.yaml --update               re-bless after an intended change
  tdsched regress perf.yaml --json > regress.json
  tdsched regress perf.yaml --markdown "$GITHUB_STEP_SUMMARY"
  tdsched regress perf.yaml --record history.db    also append the run to a history
  tdsched regress history history.db               its change points (--help there)

baseline file (docs/commands/regress.md):
  defaults: {tolerance: 0.25, time_cap_s: 30}
  entries:
    - recipe: matmul_x86           # shipped name, or a path relative to the file
      target: x86
      params: {M: 256, N: 256, K: 256}
      expected_speedup: 1.42       # written by --update
"""


def add_parser(sub: Any) -> None:
    """Register ``regress`` on the ``tdsched`` subcommand parser."""
    p = sub.add_parser(
        "regress",
        help="perf regression gates: speedup vs IREE default against a baseline file",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    baseline = p.add_argument(
        "baseline",
        nargs="?",
        type=Path,
        default=DEFAULT_BASELINE,
        metavar="BASELINE",
        help=f"baseline file, .yaml or .json (default: {DEFAULT_BASELINE})",
    )
    reads(p, baseline)
    writes(p, baseline, when=("add", "update"))
    add = p.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="RECIPE",
        help="add an entry for RECIPE (e.g. a sweep's RECIPE.TARGET.best.yaml, by a path "
        "relative to BASELINE; a new file is created) and stop; with --update, then bless "
        "(repeatable)",
    )
    reads(p, add, recipe_file)
    p.add_argument(
        "--update",
        action="store_true",
        help="re-bless: write each cleanly measured entry's speedup into the file",
    )
    p.add_argument(
        "--entry",
        action="append",
        default=[],
        metavar="TEXT",
        help="only entries whose label (recipe@target params) contains TEXT (repeatable)",
    )
    p.add_argument("--target", choices=TARGET_NAMES, help="only entries that build for this target")
    p.add_argument(
        "--time-cap",
        type=positive_float,
        metavar="S",
        help="seconds of timing per entry (overrides)",
    )
    record = p.add_argument(
        "--record",
        type=Path,
        metavar="HISTORY.db",
        help="also append this run's measurements to the SQLite history HISTORY.db "
        "(created if missing); 'tdsched regress history HISTORY.db' finds its change points",
    )
    writes(p, record)
    p.add_argument("--json", action="store_true", help="print one JSON document, not a table")
    markdown = p.add_argument(
        "--markdown",
        metavar="PATH",
        help="also append a markdown summary to PATH ('-': stdout), e.g. a CI comment",
    )
    add_trust_options(p)
    writes(p, markdown, stdout=True)


def _progress(result: EntryResult) -> None:
    print(
        f"regress: {result.verdict.status.upper():<12} {result.entry.label}",
        file=sys.stderr,
        flush=True,
    )


def run(args: argparse.Namespace) -> int:
    if args.json and args.markdown == "-":
        raise ValueError("--json and --markdown - both write to stdout; give --markdown a file")
    if args.add:
        added = with_added(args.baseline, args.add, trust_from(args))
        write_baseline(added)
        count = len(args.add)
        print(
            f"regress: added {count} {'entry' if count == 1 else 'entries'} to {args.baseline}"
            + ("" if args.update else "; bless with 'tdsched regress BASELINE --update'"),
            file=sys.stderr,
        )
        if not args.update:
            return 0
    baseline = load_baseline(args.baseline)
    results = run_baseline(
        baseline,
        update=args.update,
        precise=args.record is not None,
        labels=args.entry,
        target=args.target,
        time_cap_s=args.time_cap,
        on_result=_progress,
        trust=trust_from(args),
    )
    if not results:
        raise ValueError(
            f"{args.baseline}: no entry matches the selection (--entry / --target); "
            f"entries: {', '.join(e.label for e in baseline.entries)}"
        )
    if args.record:
        commit = git_commit(args.baseline.resolve().parent)
        run_id = record_run(args.record, args.baseline, results, commit=commit)
        print(f"regress: recorded as run {run_id} in {args.record}", file=sys.stderr)
    blessed = sum(r.verdict.status is GateStatus.BLESSED for r in results)
    if blessed:
        write_baseline(blessed_file(baseline, results))
        noun = "entry" if blessed == 1 else "entries"
        print(f"regress: wrote {args.baseline} ({blessed} {noun} blessed)", file=sys.stderr)
    elif args.update:
        print(f"regress: nothing blessed; {args.baseline} is unchanged", file=sys.stderr)
    print(as_json(results, str(args.baseline), args.update) if args.json else table(results))
    if args.markdown:
        text = markdown(results)
        if args.markdown == "-":
            print(text)
        else:
            with open(args.markdown, "a") as stream:
                stream.write(text)
    return exit_status(results)
