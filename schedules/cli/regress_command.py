"""``tdsched regress [BASELINE] [--update]``: perf regression gates from a baseline file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tdsched.targets.cpu_model import host_cpu_model
from tdsched.targets.target import TARGET_NAMES

from ..regress.adding import with_added
from ..regress.baseline_file import Entry, load_baseline
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
from ..regress.verdict import GateStatus, slower_than_default
from .args import add_trust_options, open_fraction, positive_float, trust_from
from .output_paths import reads, recipe_file, writes

DEFAULT_BASELINE = Path("tdsched-baseline.yaml")

DESCRIPTION = f"""\
Gate recipes against a committed baseline file: for each entry (recipe, target,
parameters), compile it with its schedule and require every schedule step to apply,
check its results against the reference on seeded random inputs, then time it and IREE
default interleaved, round after round, until the speedup's 95% interval is within
'precision' or clears the gate, or 'time_cap_s' runs out. A calibration kernel is timed
before (once warmed up until two timings agree within 10%) and after; if its time moved
more than 'calibration_tolerance', the machine's load changed, and the timing is done
once more if the time cap leaves room, keeping the calmer attempt. If that one moved too
much as well, the speedup's interval is widened by the change, and the entry is
inconclusive unless the widened interval still clears the gate on one side. Each entry
runs in a process of its own.

An entry fails when its speedup is below expected_speedup x (1 - tolerance), its results
are wrong, a schedule step matched nothing ("not applied"), it does not build or run,
or it has no expected_speedup yet. --update re-blesses: each entry measured cleanly and
precisely gets its measured speedup (and its numerics tolerance) written back; one
measured slower than IREE default (below 1.0x) is not blessed but fails as "slower",
unless --allow-slower is given.

A speedup depends on the CPU it is measured on, so expectations are kept per CPU (LLVM's
name for this machine's, e.g. cascadelake, znver5): an entry gates against the one blessed
on this CPU (its 'by_cpu' expectation) and falls back to its own expected_speedup on a CPU
it was never blessed on. --update on a CPU other than the one the entry's own expectation
was blessed on adds a 'by_cpu' expectation for this CPU and keeps the other.

exit status: 0 all passed (or blessed); {EXIT_FAILED} a failure (with --update, also an entry
slower than IREE default without --allow-slower); {EXIT_INCONCLUSIVE} no failure but something
inconclusive (noisy machine); 2 bad input (the baseline file, a recipe).
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
        "--allow-slower",
        action="store_true",
        help="with --update: also bless entries measured slower than IREE default (below "
        "1.0x), with a warning; without it they are not blessed and fail as 'slower'",
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
    p.add_argument(
        "--precision",
        type=open_fraction,
        metavar="F",
        help="stop timing an entry once its speedup's 95%% interval is within F of it "
        "(overrides; e.g. 0.02 with --record and a larger --time-cap, for a history whose "
        "noise a small step clears)",
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


def _entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _added_line(
    baseline: Path, added: Sequence[Entry], results: Sequence[EntryResult] | None
) -> str:
    """What became of the entries ``--add`` wrote, once ``--update`` measured them
    (``results``: ``None`` when the run stopped before it measured them all)."""
    verdicts = {r.entry.identity: r.verdict.status for r in results or ()}
    outcomes = []
    for entry in added:
        status = verdicts.get(entry.identity)
        if status is GateStatus.BLESSED:
            outcome = "blessed"
        elif results is None:
            outcome = "not blessed: the run stopped first"
        elif status is None:
            outcome = "not blessed: not selected by --entry/--target"
        else:
            outcome = f"not blessed: {status}"
        outcomes.append(outcome if len(added) == 1 else f"{entry.label}: {outcome}")
    return f"regress: added {_entries(len(added))} to {baseline} ({'; '.join(outcomes)})"


def _unblessed_line(baseline: Path, added: Sequence[Entry]) -> str:
    """The ``--update`` line when nothing was blessed: the file is unchanged, unless
    ``--add`` wrote entries to it (which stay without an expected_speedup)."""
    if not added:
        return f"regress: nothing blessed; {baseline} is unchanged"
    which = "the added entry" if len(added) == 1 else f"the {len(added)} added entries"
    return f"regress: nothing blessed; {baseline} holds {which} without an expected_speedup"


def _warn_slower(results: Sequence[EntryResult]) -> None:
    """A warning for each entry blessed below 1.0x with ``--allow-slower``."""
    for r in results:
        speedup = r.measurement.speedup
        blessed = r.verdict.status is GateStatus.BLESSED
        if blessed and speedup and slower_than_default(speedup.median):
            print(
                f"regress: warning: blessed {r.entry.label} at {speedup.median:.3f}x, slower "
                "than IREE's own pipeline (--allow-slower)",
                file=sys.stderr,
            )


def run(args: argparse.Namespace) -> int:
    if args.json and args.markdown == "-":
        raise ValueError("--json and --markdown - both write to stdout; give --markdown a file")
    if args.allow_slower and not args.update:
        raise ValueError("--allow-slower only changes what --update blesses; give --update too")
    added: tuple[Entry, ...] = ()
    if args.add:
        with_new = with_added(args.baseline, args.add, trust_from(args))
        write_baseline(with_new)
        added = with_new.entries[-len(args.add) :]
        if not args.update:
            print(
                f"regress: added {_entries(len(added))} to {args.baseline}; bless with "
                "'tdsched regress BASELINE --update'",
                file=sys.stderr,
            )
            return 0
    baseline = load_baseline(args.baseline)
    machine = host_cpu_model()
    try:
        results = run_baseline(
            baseline,
            update=args.update,
            precise=args.record is not None,
            allow_slower=args.allow_slower,
            labels=args.entry,
            target=args.target,
            overrides={
                name: value
                for name, value in (("time_cap_s", args.time_cap), ("precision", args.precision))
                if value is not None
            },
            on_result=_progress,
            trust=trust_from(args),
            machine=machine,
        )
    except BaseException:  # bad input or Ctrl-C: say the added entries are in the file
        if added:
            print(_added_line(args.baseline, added, None), file=sys.stderr)
        raise
    if added:
        print(_added_line(args.baseline, added, results), file=sys.stderr)
    if not results:
        raise ValueError(
            f"{args.baseline}: no entry matches the selection (--entry / --target); "
            f"entries: {', '.join(e.label for e in baseline.entries)}"
        )
    if args.record:
        commit = git_commit(args.baseline.resolve().parent)
        run_id = record_run(args.record, args.baseline, results, commit=commit)
        print(f"regress: recorded as run {run_id} in {args.record}", file=sys.stderr)
    _warn_slower(results)
    blessed = sum(r.verdict.status is GateStatus.BLESSED for r in results)
    if blessed:
        write_baseline(blessed_file(baseline, results, machine))
        on = f" on {machine}" if machine else " on a CPU tdsched cannot name"
        print(f"regress: wrote {args.baseline} ({_entries(blessed)} blessed{on})", file=sys.stderr)
    elif args.update:
        print(_unblessed_line(args.baseline, added), file=sys.stderr)
    print(
        as_json(results, str(args.baseline), args.update, machine) if args.json else table(results)
    )
    if args.markdown:
        text = markdown(results)
        if args.markdown == "-":
            print(text)
        else:
            with open(args.markdown, "a") as stream:
                stream.write(text)
    return exit_status(results)
