"""Benchmark: how far a recipe's speedup over IREE default moves from one process to the
next when each build is timed in one placement in memory, or in several (each sample
the mean over them; docs/commands/run.md).

    .venv/bin/python benchmarks/placements.py RECIPE [--param NAME=VALUE ...] [--threads 1]
        [--processes 8] [--placements 1 4] [--repeats 9]

The scheduled build and IREE's default build are compiled once; then, for each placement
count, ``--processes`` fresh processes each load both, time them interleaved
(``--repeats`` rounds) and report the ratio of their medians. Prints one JSON object:
per placement count, the ratios and their range.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def child(
    scheduled: Path, baseline: Path, inputs: Path, function: str, k: int, threads: int, repeats: int
) -> None:
    """In this process: both builds in ``k`` placements, timed; print the ratio."""
    from tdsched.targets import runtime
    from tdsched.targets.runtime import LoadedModule, configure_threads
    from tdsched.targets.timing import time_interleaved

    configure_threads(threads)
    runtime.TIMING_PLACEMENTS = k
    driver = runtime.cpu_driver("local-task", threads)
    arrays = list(np.load(inputs).values())
    variants = {
        name: LoadedModule(path, driver, function).timing_runner(arrays)
        for name, path in (("scheduled", scheduled), ("baseline", baseline))
    }
    times = time_interleaved(variants, repeats=repeats)
    print(times["baseline"].median / times["scheduled"].median)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe")
    parser.add_argument("--param", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--placements", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()

    from tdsched.schedules.compile.build_target import BuildTarget
    from tdsched.schedules.compile.pipeline import compile_baseline, plan
    from tdsched.schedules.dsl.params import parse_override
    from tdsched.schedules.frontends.loading import load
    from tdsched.schedules.measure.evaluation import compile_scheduled
    from tdsched.targets.workload import random_inputs

    overrides = dict(parse_override(text) for text in args.param)
    p = plan(load(args.recipe), BuildTarget("x86", threads=args.threads), overrides)
    results: dict[str, object] = {"recipe": args.recipe, "params": overrides}
    with tempfile.TemporaryDirectory(prefix="tdsched-placements-") as tmp:
        work = Path(tmp)
        scheduled = Path(compile_scheduled(p, work)[1].output)
        baseline = Path(compile_baseline(p, work).output)
        inputs = work / "inputs.npz"
        np.savez(inputs, *random_inputs(p.workload, 0))
        for k in args.placements:
            ratios = []
            for _ in range(args.processes):
                command = [sys.executable, __file__, "--child", str(scheduled), str(baseline)]
                command += [str(inputs), p.workload.function, str(k), str(args.threads)]
                out = subprocess.run(
                    [*command, str(args.repeats)], capture_output=True, text=True, check=True
                )
                ratios.append(round(float(out.stdout.strip().splitlines()[-1]), 3))
            results[f"placements_{k}"] = {"ratios": ratios, "range": [min(ratios), max(ratios)]}
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        scheduled, baseline, inputs, function, k, threads, repeats = sys.argv[2:9]
        child(
            Path(scheduled), Path(baseline), Path(inputs), function, int(k), int(threads),
            int(repeats),
        )  # fmt: skip
    else:
        sys.exit(main())
