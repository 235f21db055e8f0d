"""Benchmark of ``tdsched sweep`` itself, on the matmul 512^3 x86 space (JSON out).

1. The full grid, timed: candidates per minute (compile on --jobs workers, then time).
2. The finished sweep re-run as a user would (a new ``tdsched sweep`` process): seconds.
3. The adaptive strategy with a 30% budget, and a random sample of the same size, for
   several seeds, replayed on the grid's database (every candidate they pick was
   measured by the grid, so they are judged on the same measurements): the best speedup
   each finds as a fraction of the grid's best.

Usage: python benchmarks/sweep_strategies.py --db bench.db [--seeds 10] [--out r.json]
Run on a quiet machine: the grid's rate and timings are only as good as the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SPACE = ["matmul_x86", "--param", "M=512", "--param", "N=512", "--param", "K=512"]


def sweep(db: Path, *extra: str) -> tuple[dict[str, Any], float]:
    """Run ``tdsched sweep`` in a new process; its JSON report and wall seconds."""
    command = [sys.executable, "-m", "tdsched.schedules.cli.main", "sweep", *SPACE, "--db", str(db)]
    command += ["--json", "-q", "--best-out", str(db.with_suffix(".best.yaml")), *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout), time.perf_counter() - start


def best_speedup(report: dict[str, Any]) -> float:
    return max(r["speedup"] for r in report["ranked"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="results database (new or grid)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=0.3)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()

    grid, grid_s = sweep(args.db)
    rerun, rerun_s = sweep(args.db)
    best = best_speedup(grid)
    result: dict[str, Any] = {
        "space": grid["space"],
        "grid": {
            "evaluated": grid["evaluated"],
            "compiled": grid["compiled"],
            "timed": grid["timed"],
            "wall_s": grid_s,
            "candidates_per_minute": grid["timed"] / grid_s * 60 if grid["timed"] else None,
            "best_speedup": best,
            "best_params": grid["best"]["params"],
            "baseline_ms": grid["baseline_ms"],
            "drift": grid["drift"],
        },
        "rerun": {"wall_s": rerun_s, "reused": rerun["reused"], "timed": rerun["timed"]},
        "strategies": [],
    }
    for seed in range(args.seeds):
        adaptive, _ = sweep(
            args.db, "--strategy", "adaptive", "--budget", str(args.budget), "--seed", str(seed)
        )
        samples = str(adaptive["evaluated"])
        random, _ = sweep(
            args.db, "--strategy", "random", "--samples", samples, "--seed", str(seed)
        )
        result["strategies"].append(
            {
                "seed": seed,
                "evaluations": adaptive["evaluated"],
                "fraction_of_grid_evaluations": adaptive["evaluated"] / grid["evaluated"],
                "adaptive_of_grid_best": best_speedup(adaptive) / best,
                "random_of_grid_best": best_speedup(random) / best,
            }
        )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
