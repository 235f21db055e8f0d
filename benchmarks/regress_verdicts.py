"""How often the gate comes out PASS, INCONCLUSIVE or worse on an unchanged build.

Runs ``tdsched regress BASELINE --json`` ``--runs`` times (``--entry`` and ``--target``
select entries as the command does) and counts each entry's verdicts. ``--load N``
keeps N busy processes spinning beside the gate (a loaded machine: another job on the
cores the gate times on); 0 is the quiet machine. Issue 57's aim: on a quiet machine an
unchanged build is PASS (not INCONCLUSIVE) in at least 9 of 10 gate runs.

    python benchmarks/regress_verdicts.py tests/perf/ci_baseline.yaml --target x86 \
        --runs 10 --out benchmarks/results/regress_verdicts_quiet.json
    python benchmarks/regress_verdicts.py tests/perf/ci_baseline.yaml --target x86 \
        --runs 10 --load 1 --out benchmarks/results/regress_verdicts_loaded.json
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

from tdsched.targets.cpu_isa import cpu_description


def spin() -> None:
    """A busy loop: one core's worth of another job."""
    while True:
        pass


def gate_run(args: argparse.Namespace) -> dict[str, str]:
    """One ``tdsched regress`` run: each entry's verdict."""
    command = [sys.executable, "-m", "tdsched.schedules.cli.main", "regress", str(args.baseline)]
    command += ["--json", *(f"--entry={e}" for e in args.entry)]
    command += [f"--target={args.target}"] if args.target else []
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1, 3):
        sys.exit(f"tdsched regress failed ({done.returncode}):\n{done.stderr}")
    report = json.loads(done.stdout)
    return {e["entry"]: e["status"] for e in report["entries"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the gate")
    parser.add_argument("--entry", action="append", default=[])
    parser.add_argument("--target")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.load)]
    for process in spinners:
        process.start()
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    start = time.monotonic()
    try:
        for run in range(args.runs):
            for entry, status in gate_run(args).items():
                counts[entry][status] += 1
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    finally:
        for process in spinners:
            process.terminate()
    runs = args.runs * len(counts)
    every = collections.Counter[str]()
    for found in counts.values():
        every.update(found)
    result = {
        "benchmark": "regress_verdicts",
        "command": " ".join(sys.argv),
        "cpu": cpu_description(),
        "load": args.load,
        "runs": args.runs,
        "seconds": round(time.monotonic() - start, 1),
        "verdicts": dict(every),
        "pass_share": every["pass"] / runs if runs else None,
        "inconclusive_share": every["inconclusive"] / runs if runs else None,
        "entries": {entry: dict(found) for entry, found in sorted(counts.items())},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
