"""How well ``tdsched regress history`` finds a step, on histories drawn from real noise.

The noise is this machine's: the speedups a recorded history holds for one entry at one
commit (an unchanged build, gated again and again with ``tdsched regress BASELINE
--record HISTORY.db``), as ratios to their median. Each trial draws a synthetic history
of ``--runs`` points from them with replacement and

* **step**: multiplies the points from ``--at`` on by ``1 - --step`` (a regression of that
  size at a known run) and counts it found when exactly one change point lies within
  ``--within`` runs of it;
* **noise alone**: leaves them as drawn and counts a false alarm for any change point.

The issue's aims (issue 57): a 5% step found within ±2 runs in at least 9 of 10
histories, and 60 points of noise alone without a change point in at least 9 of 10.

    python benchmarks/change_points.py HISTORY.db --entry mm.yaml --commit d1fe1b4 \
        --trials 200 --out benchmarks/results/change_points_cascadelake.json

Without ``--entry``, every entry with at least 10 runs at the commit is measured, and a
Markdown row per entry (noise, step found, noise alone without a change) goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

import numpy as np
from tdsched.schedules.regress.change_points import Settings, change_points
from tdsched.schedules.regress.history import read_series
from tdsched.targets.cpu_isa import cpu_description


def noise_samples(history: Path, entry: str | None, commit: str | None) -> dict[str, list[float]]:
    """Each series' speedups at ``commit`` (all runs when None), as ratios to their
    median, by entry label: the series whose label holds ``entry`` (every series when
    None) with at least 10 such runs."""
    samples = {}
    for (label, _machine), points in read_series(history).items():
        if entry is not None and entry not in label:
            continue
        chosen = [
            p.median
            for p in points
            if p.median and (commit is None or (p.run.git_commit or "").startswith(commit))
        ]
        if len(chosen) >= 10:
            middle = statistics.median(chosen)
            samples[label] = [value / middle for value in chosen]
    if not samples:
        sys.exit(f"{history}: no series of {entry or 'any entry'} has 10 runs at {commit}")
    return samples


def trial(
    noise: list[float], rng: np.random.Generator, args: argparse.Namespace, step: bool
) -> bool:
    """One synthetic history; True when the detector did the right thing."""
    values = rng.choice(np.asarray(noise), size=args.runs, replace=True)
    if not step:
        return not change_points(values.tolist(), Settings())
    values[args.at :] *= 1.0 - args.step
    changes = change_points(values.tolist(), Settings())
    return len(changes) == 1 and abs(changes[0].index - args.at) <= args.within


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history", type=Path)
    parser.add_argument(
        "--entry", help="text in the entry's label (default: every entry with 10 runs)"
    )
    parser.add_argument("--commit", help="only runs recorded at this commit (prefix)")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--at", type=int, default=30)
    parser.add_argument("--step", type=float, default=0.05)
    parser.add_argument("--within", type=int, default=2)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for label, noise in noise_samples(args.history, args.entry, args.commit).items():
        found = sum(trial(noise, rng, args, step=True) for _ in range(args.trials))
        quiet = sum(trial(noise, rng, args, step=False) for _ in range(args.trials))
        logs = np.log(noise)
        rows.append(
            {
                "entry": label,
                "noise": {
                    "runs": len(noise),
                    "std_of_log": float(logs.std()),
                    "min": min(noise),
                    "max": max(noise),
                },
                "step_found": found / args.trials,
                "noise_without_change": quiet / args.trials,
            }
        )
    result = {
        "benchmark": "change_points",
        "command": " ".join(sys.argv),
        "cpu": cpu_description(),
        "python": platform.python_version(),
        "settings": vars(Settings()),
        "trials": args.trials,
        "step": {"size": args.step, "at": args.at, "of": args.runs, "within": args.within},
        "entries": rows,
    }
    text = json.dumps(result, indent=2)
    print(text)
    for row in rows:
        print(
            f"| {row['entry']} | {row['noise']['std_of_log']:.1%} | {row['step_found']:.1%} | "
            f"{row['noise_without_change']:.1%} |",
            file=sys.stderr,
        )
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
