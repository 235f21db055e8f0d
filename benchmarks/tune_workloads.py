"""Benchmark: does ``tdsched tune`` beat the best IREE configuration a user gets with one
flag, on workloads whose shapes are in no shipped grid?

For each workload ``benchmarks/workloads/NAME.mlir`` (or those named with ``--only``) it
runs, one at a time:

1. ``tdsched tune NAME.mlir --threads T --budget B --out OUT/NAME.tune -q --json``, which
   tunes the workload and races the result against IREE data tiling with and without
   microkernels (its ``iree`` line says what the recipe kept);
2. ``tdsched run OUT/NAME.tune/NAME.tuned.yaml --threads T --peers --repeats R --json``,
   which builds, checks and times, interleaved in one run, the tuned recipe, IREE
   default, IREE data tiling (``--iree-opt-data-tiling``), data tiling + microkernels,
   and numpy where the workload has an equivalent (a plain matmul or batch matmul).

Each ratio is a peer's time over the tuned recipe's (the run's ``speedup`` against IREE
default, each peer's ``speedup``): above 1, the tuned recipe is faster. "x best IREE" is
the ratio against the fastest of the three IREE builds a user gets with at most one flag
(default, data tiling, data tiling + microkernels), i.e. the smallest of those ratios.
The JSON (``--json-out``, default ``OUT/tune_workloads.json``, rewritten after every
workload) holds per workload the tune's wall time, its ``iree`` line and configuration,
the run's status, speedups and peers, plus the machine (CPU model, AVX-512), threads,
budget, date and the command lines; a table and the geomeans are printed at the end. A
tune or run that fails is recorded with its exit status and the tail of its output.

    .venv/bin/python benchmarks/tune_workloads.py [--threads 1] [--cpu host] [--budget 2]
        [--out .build/tune_workloads] [--only mm_768 --only softmax_256x2048]
        [--repeats 9] [--json-out FILE]

It takes about budget + 1 minute per workload (12 workloads at ``--budget 1.5``: about
35-45 minutes on a 2-core VM). Tunes resume: running it again into the same ``--out``
with the same budget sweeps nothing new (see ``docs/commands/tune.md``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads"
TDSCHED = Path(sys.executable).with_name("tdsched")
IREE_PEERS = ("iree-data-tiling", "iree-data-tiling-ukernels")
TAIL = 2000
"""Characters of a failed command's output kept in the JSON."""


def cpu_model() -> str:
    """The CPU's model name, as lscpu prints it (``/proc/cpuinfo`` where lscpu is missing)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        if line.strip().lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    for line in _cpuinfo().splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def has_avx512f() -> bool:
    """Whether the CPU flags in ``/proc/cpuinfo`` list ``avx512f``."""
    for line in _cpuinfo().splitlines():
        if line.startswith("flags"):
            return "avx512f" in line.split(":", 1)[1].split()
    return False


def source_commit() -> str | None:
    """The git commit of the checkout this script is in (``+dirty`` with local changes),
    or None outside a git checkout."""
    root = HERE.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _tail(text: str) -> str:
    return text[-TAIL:].strip()


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a ``--json`` command printed, or None when it printed none."""
    text = text.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        start = text.find("{")
        if start < 0:
            return None
        try:
            value = json.loads(text[start:])
        except json.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None


def _command(args: Sequence[object]) -> list[str]:
    return [str(a) for a in args]


def run_command(command: list[str], log: Path) -> tuple[int, str, str, float]:
    """Run ``command``; keep its stdout and stderr in ``LOG.out`` and ``LOG.err``. Returns
    the exit status, stdout, stderr and wall seconds."""
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    log.with_name(log.name + ".out").write_text(proc.stdout)
    log.with_name(log.name + ".err").write_text(proc.stderr)
    return proc.returncode, proc.stdout, proc.stderr, seconds


def _tune_summary(report: dict[str, Any]) -> dict[str, Any]:
    """What the tune's JSON says that the benchmark keeps."""
    tasks = [
        {
            key: task.get(key)
            for key in ("task", "kind", "root", "share", "candidates", "speedup", "kept", "reason")
        }
        for task in report.get("tasks") or []
        if isinstance(task, dict)
    ]
    final = report.get("run") if isinstance(report.get("run"), dict) else None
    return {
        "recipe": report.get("recipe"),
        "call_ms": report.get("call_ms"),
        "spent_s": report.get("spent_s"),
        "estimated_speedup": report.get("estimated_speedup"),
        "graph": report.get("graph"),
        "layouts": report.get("layouts"),
        "blame": report.get("blame"),
        "tasks": tasks,
        "final_run": None
        if final is None
        else {key: final.get(key) for key in ("status", "speedup", "speedup_interval")},
    }


def _peer(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    for peer in report.get("peers") or []:
        if isinstance(peer, dict) and peer.get("name") == name:
            return peer
    return None


def best_iree(run_speedup: float | None, peers: dict[str, dict[str, Any]]) -> float | None:
    """The tuned recipe's speedup over the fastest IREE build with at most one flag: the
    smallest of the ratios against IREE default and the IREE peers that ran right.
    None when the run has no speedup over IREE default."""
    if run_speedup is None:
        return None
    ratios = [run_speedup]
    for name in IREE_PEERS:
        peer = peers.get(name)
        if peer and peer.get("status") == "ok" and isinstance(peer.get("speedup"), int | float):
            ratios.append(float(peer["speedup"]))
    return min(ratios)


def measure(
    name: str, model: Sequence[str], args: argparse.Namespace, budget: float | None = None
) -> dict[str, Any]:
    """Tune ``model`` (what ``tdsched tune`` takes: a file, or a model name and its
    options) for ``args.threads`` within ``budget`` minutes (default ``args.budget``), then
    run its tuned recipe with ``--peers``; one result row, ``name`` naming the files."""
    out_dir: Path = args.out / f"{name}.tune"
    row: dict[str, Any] = {"name": name, "workload": shlex.join(model), "threads": args.threads}
    minutes = args.budget if budget is None else budget
    tune = _command(
        [
            *(TDSCHED, "tune", *model, "--threads", args.threads, "--budget", minutes),
            *("--cpu", args.cpu, "--out", out_dir, "-q", "--json"),
        ]
    )
    code, stdout, stderr, seconds = run_command(tune, args.out / f"{name}.tune-log")
    report = _json_object(stdout)
    row["tune"] = {
        "command": shlex.join(tune),
        "exit_status": code,
        "wall_s": round(seconds, 1),
    }
    if report is None:
        row["tune"]["error"] = _tail(stderr or stdout)
    else:
        iree = report.get("iree") if isinstance(report.get("iree"), dict) else None
        row["tune"]["iree"] = iree
        row["tune"].update(_tune_summary(report))
        if code != 0:
            row["tune"]["error"] = _tail(stderr)
    recipes = sorted(out_dir.glob("*.tuned.yaml"))
    recipe = recipes[0] if recipes else out_dir / f"{name}.tuned.yaml"
    if not recipe.is_file():
        row["status"] = "tune_failed"
        row["run"] = None
        return row
    run = _command(
        [
            *(TDSCHED, "run", recipe, "--threads", args.threads, "--cpu", args.cpu, "--peers"),
            *("--repeats", args.repeats, "--json"),
        ]
    )
    code, stdout, stderr, seconds = run_command(run, args.out / f"{name}.run-log")
    report = _json_object(stdout)
    row["run"] = {"command": shlex.join(run), "exit_status": code, "wall_s": round(seconds, 1)}
    if report is None:
        row["status"] = "run_failed"
        row["run"]["error"] = _tail(stderr or stdout)
        return row
    row["status"] = report.get("status")
    if report.get("error"):
        row["run"]["error"] = report["error"]
    for key in ("time_ms", "baseline_ms"):
        value = report.get(key)
        row["run"][key] = value.get("median") if isinstance(value, dict) else value
    row["run"]["iree_version"] = report.get("iree_version")
    speedup = report.get("speedup")
    row["speedup_vs_default"] = speedup
    row["speedup_interval"] = report.get("speedup_interval")
    peers: dict[str, dict[str, Any]] = {}
    throughput = report.get("throughput")
    if isinstance(throughput, dict):
        row["fraction_of_fma_peak"] = throughput.get("fraction_of_fma_peak")
    for peer_name in (*IREE_PEERS, "numpy", "onnxruntime"):
        peer = _peer(report, peer_name)
        if peer is not None:
            peer_time = peer.get("time_ms")
            peers[peer_name] = {
                "status": peer.get("status"),
                "speedup": peer.get("speedup"),
                "time_ms": peer_time.get("median") if isinstance(peer_time, dict) else peer_time,
                "max_abs_error": peer.get("max_abs_error"),
            }
    row["peers"] = peers
    row["best_iree_configuration"] = best_iree(
        speedup if isinstance(speedup, int | float) else None, peers
    )
    return row


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _ok_ratios(rows: Sequence[dict[str, Any]], ratio: str) -> list[float]:
    found = []
    for row in rows:
        if row.get("status") != "ok":
            continue
        value = _ratio_of(row, ratio)
        if value is not None and value > 0:
            found.append(value)
    return found


def _ratio_of(row: dict[str, Any], ratio: str) -> float | None:
    if ratio in ("speedup_vs_default", "best_iree_configuration"):
        value = row.get(ratio)
    else:
        peer = (row.get("peers") or {}).get(ratio) or {}
        value = peer.get("speedup") if peer.get("status") == "ok" else None
    return float(value) if isinstance(value, int | float) else None


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Geomeans over the workloads whose run was ok, and how many lose to each build."""
    result: dict[str, Any] = {
        "workloads": len(rows),
        "ok": sum(1 for r in rows if r.get("status") == "ok"),
    }
    for key, ratio in (
        ("vs_default", "speedup_vs_default"),
        ("vs_data_tiling", "iree-data-tiling"),
        ("vs_data_tiling_ukernels", "iree-data-tiling-ukernels"),
        ("vs_best_iree_configuration", "best_iree_configuration"),
        ("vs_numpy", "numpy"),
    ):
        values = _ok_ratios(rows, ratio)
        result[f"geomean_{key}"] = geomean(values)
        result[f"n_{key}"] = len(values)
        result[f"slower_{key}"] = sorted(
            r["name"]
            for r in rows
            if r.get("status") == "ok" and (_ratio_of(r, ratio) or math.inf) < 1
        )
    return result


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _kept(row: dict[str, Any]) -> str:
    iree = (row.get("tune") or {}).get("iree")
    if not isinstance(iree, dict):
        return "-"
    configuration = iree.get("configuration")
    return "schedules" if configuration is None else str(configuration)


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = (
        "workload",
        "status",
        "tune s",
        "x default",
        "x DT",
        "x DT+uk",
        "x best IREE",
        "x numpy",
        "iree race kept",
    )
    lines = [header]
    for row in rows:
        lines.append(
            (
                row["name"],
                str(row.get("status")),
                f"{(row.get('tune') or {}).get('wall_s', 0):.0f}",
                _x(_ratio_of(row, "speedup_vs_default")),
                _x(_ratio_of(row, "iree-data-tiling")),
                _x(_ratio_of(row, "iree-data-tiling-ukernels")),
                _x(_ratio_of(row, "best_iree_configuration")),
                _x(_ratio_of(row, "numpy")),
                _kept(row),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join((__doc__ or "").split("\n\n")[1:]),
    )
    parser.add_argument("--threads", type=int, default=1, help="threads (default 1)")
    parser.add_argument(
        "--cpu",
        default="host",
        help="LLVM CPU to build for, e.g. haswell: AVX2 code on an AVX-512 machine (default host)",
    )
    parser.add_argument(
        "--budget", type=float, default=2.0, help="tune budget per workload, minutes (default 2)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/tune_workloads"),
        help="folder for the tunes, logs and JSON (default .build/tune_workloads)",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="only this workload (its file name without .mlir; repeatable)",
    )
    parser.add_argument(
        "--workloads",
        type=Path,
        default=WORKLOADS,
        help=f"folder of NAME.mlir workloads (default {WORKLOADS})",
    )
    parser.add_argument(
        "--repeats", type=int, default=9, help="interleaved rounds of the final run (default 9)"
    )
    parser.add_argument(
        "--json-out", type=Path, help="the JSON file (default OUT/tune_workloads.json)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    found = sorted(args.workloads.glob("*.mlir"))
    if args.only:
        missing = sorted(set(args.only) - {w.stem for w in found})
        if missing:
            print(f"tune_workloads: no such workload: {', '.join(missing)}", file=sys.stderr)
            return 2
        found = [w for w in found if w.stem in args.only]
    if not found:
        print(f"tune_workloads: no workloads in {args.workloads}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    json_out: Path = args.json_out or args.out / "tune_workloads.json"
    started = time.monotonic()
    result: dict[str, Any] = {
        "benchmark": "tune_workloads",
        "command": shlex.join([sys.executable, *sys.argv]),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "avx512f": has_avx512f(),
        "machine": platform.machine(),
        "threads": args.threads,
        "build_cpu": args.cpu,
        "budget_minutes": args.budget,
        "repeats": args.repeats,
        "tdsched": str(TDSCHED),
        "tdsched_commit": source_commit(),
        "workloads": [],
    }
    rows: list[dict[str, Any]] = result["workloads"]
    for index, workload in enumerate(found, 1):
        print(f"[{index}/{len(found)}] {workload.stem}: tuning", file=sys.stderr, flush=True)
        row = measure(workload.stem, [str(workload)], args)
        rows.append(row)
        print(
            f"[{index}/{len(found)}] {workload.stem}: {row.get('status')}, "
            f"{_x(_ratio_of(row, 'speedup_vs_default'))} IREE default, "
            f"{_x(_ratio_of(row, 'best_iree_configuration'))} best IREE configuration "
            f"(tune {row['tune']['wall_s']:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        result["summary"] = summary(rows)
        result["total_s"] = round(time.monotonic() - started, 1)
        json_out.write_text(json.dumps(result, indent=2) + "\n")
    s = result["summary"]
    print(table(rows))
    print()
    for key, label in (
        ("vs_default", "IREE default"),
        ("vs_data_tiling", "IREE data tiling"),
        ("vs_data_tiling_ukernels", "IREE data tiling + ukernels"),
        ("vs_best_iree_configuration", "best IREE configuration"),
        ("vs_numpy", "numpy"),
    ):
        print(f"geomean {_x(s[f'geomean_{key}'])} vs {label} ({s[f'n_{key}']} workloads)")
    print(f"{s['ok']} of {s['workloads']} ok; {result['total_s']:.0f} s; JSON: {json_out}")
    return 0 if s["ok"] == s["workloads"] else 1


if __name__ == "__main__":
    sys.exit(main())
