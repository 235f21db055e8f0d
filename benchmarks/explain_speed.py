"""Benchmark: how long ``tdsched explain`` takes on every shipped recipe and target.

For each pair it times the trace (planning, the graph schedule and the one iree-compile
whose strategies print the dispatch after every step) and, separately, rendering the loop
nests of all snapshots (each step's nest is read from its IR and compared with the one
before it). Output: one JSON object; the target is a render time under 1 s per step.

    .venv/bin/python benchmarks/explain_speed.py [--repeats 3] [--out results.json]

Times are medians over ``--repeats`` runs, in seconds.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

import iree.compiler.version
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.compile.step_trace import trace
from tdsched.schedules.compile.step_views import explain_text
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.shipped import shipped_recipe_names
from tdsched.targets.cpu_isa import cpu_description


def measure(name: str, target: str, repeats: int) -> dict[str, Any]:
    """Median trace and render times of one recipe on one target."""
    traced, rendered, snapshots = [], [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        found = trace(plan(load(name), target, trace_steps=True))
        middle = time.perf_counter()
        explain_text(found, None)
        end = time.perf_counter()
        traced.append(middle - start)
        rendered.append(end - middle)
        snapshots = sum(len(unit.snapshots) for unit in found.units)
    render = statistics.median(rendered)
    return {
        "recipe": name,
        "target": target,
        "snapshots": snapshots,
        "trace_s": round(statistics.median(traced), 3),
        "render_s": round(render, 4),
        "render_per_step_s": round(render / snapshots, 4) if snapshots else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per pair (median)")
    parser.add_argument("--out", help="also write the JSON to this file")
    args = parser.parse_args()
    rows = [
        measure(name, target, args.repeats)
        for name in shipped_recipe_names()
        for target in load(name).targets
    ]
    per_step = [r["render_per_step_s"] for r in rows if r["render_per_step_s"] is not None]
    result = {
        "machine": {"cpu": cpu_description(), "python": platform.python_version()},
        "iree": iree.compiler.version.VERSION,
        "rows": rows,
        "worst_render_per_step_s": max(per_step),
        "worst_trace_s": max(r["trace_s"] for r in rows),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
