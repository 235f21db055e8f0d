"""Benchmark: the matmul_x86 recipe vs IREE's default build, 512^3 and 1024^3 f32.

Each (size, threads) point runs ``tdsched run --json`` in its own process (IREE fixes the
thread count when a device is created), which times the scheduled module and IREE's
default build interleaved in the same process and reports medians. Output: one JSON
object with every point (GFLOP/s and speedup) on stdout.

    .venv/bin/python benchmarks/matmul_vs_default.py [--repeats 9] [--param TK=128 ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any


def point(size: int, threads: int, repeats: int, recipe: str, params: list[str]) -> dict[str, Any]:
    """Run one measurement and summarize it."""
    command = [
        sys.executable,
        "-m",
        "tdsched.schedules.cli.main",
        "run",
        recipe,
        "--json",
        "--threads",
        str(threads),
        "--repeats",
        str(repeats),
        "--param",
        f"M={size}",
        "--param",
        f"N={size}",
        "--param",
        f"K={size}",
    ]
    for param in params:
        command += ["--param", param]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if not proc.stdout.strip():
        return {"size": size, "threads": threads, "status": "error", "error": proc.stderr.strip()}
    report = json.loads(proc.stdout)
    flops = 2.0 * size**3
    summary: dict[str, Any] = {
        "size": size,
        "threads": threads,
        "status": report["status"],
        "max_abs_error": report["max_abs_error"],
    }
    if report.get("time_ms"):
        summary.update(
            {
                "tdsched_ms": report["time_ms"],
                "default_ms": report["baseline_ms"],
                "tdsched_gflops": flops / report["time_ms"]["median"] / 1e6,
                "default_gflops": flops / report["baseline_ms"]["median"] / 1e6,
                "speedup": report["speedup"],
            }
        )
    else:
        summary["error"] = report.get("error")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default="matmul_x86")
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    points = [
        point(size, threads, args.repeats, args.recipe, args.param)
        for size in args.sizes
        for threads in args.threads
    ]
    print(json.dumps({"recipe": args.recipe, "params": args.param, "points": points}, indent=2))
    return 0 if all(p["status"] == "ok" for p in points) else 1


if __name__ == "__main__":
    sys.exit(main())
