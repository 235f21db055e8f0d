"""Benchmark: fuse_ext tile-and-fuse is linear in chain length; upstream fuse is exponential.

The payload is one function over ``tensor<SxSxf32>`` with N residual blocks
``x_{i+1} = x_i + f(x_i)``: ``f`` is an elementwise ``linalg.generic`` (``tanh(2*x)``) and
the add another elementwise ``linalg.generic`` that reads both ``x_i`` and ``f(x_i)``. The
last add (marked ``{tdsched.bench_root}``) is tiled by [16, 32] and every other generic is
fused into its loop nest. Every ``x_i`` feeds two consumers, so upstream
``transform.structured.fuse``, which fuses along each use-def path separately, clones
block i's ops once per path to the root: 2^(N+1)-2 generics in the loop for N blocks.
fuse_ext fuses each op once (2N generics), one transform step per op.

Each (contender, N) point runs in its own subprocess (one untimed warm-up call on a
one-block payload, then ``--repeats`` timed calls); each call is capped at ``--timeout``
seconds, and once upstream exceeds the cap its larger N are skipped. Prints two tables
(the main N sweep; upstream alone on small N, where it still finishes) and, with
``--json``, writes every number with the machine and IREE version.

    /work/venv/bin/python benchmarks/fuse_ext_linear_time.py --json /tmp/fuse_ext_linear.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

ROOT_ATTR = "tdsched.bench_root"
UPSTREAM_ENTRY = "__bench"
MAP = "affine_map<(d0, d1) -> (d0, d1)>"
LOOP_OPS = ("scf.forall", "scf.for")

EPILOG = f"""\
what is measured (seconds, per call, median and min over --repeats):
  fuse_ext   wall time of tdsched.transform_lib.fuse_ext.fuse_ext(payload_text, options):
             parsing the payload, every transform step (one per fused op, each with CSE),
             cleanup, verification and printing the result; "internal" is the time
             fuse_ext reports itself (report.seconds: the same work minus the printing).
  upstream   wall time of tdsched.transform_lib.interpreter.apply_script(payload, script):
             parsing, one `transform.structured.fuse %root tile_sizes [...]`, verification
             and printing the result (which holds every clone).
  Both run in fresh subprocesses (interpreter start-up and imports are not timed). A call
  that exceeds --timeout is killed and recorded as timed out; upstream's larger N are then
  skipped. Upstream stops repeating after a call that takes more than --slow-after seconds.

checks (not timed): the result is re-parsed and the linalg.generic ops are counted inside
the top-level loop nest(s) and outside them. fuse_ext must give 2N inside and none outside
(each block op fused exactly once); upstream gives 2^(N+1)-2 inside (one clone per path)
and leaves the 2N-1 original producers outside, dead.

growth: time(N2)/time(N1) between successive N, and per block (ratio ** (1/(N2-N1))).
Linear work gives ratio ~ N2/N1; doubling per block gives a per-block factor ~ 2.

the payload's root op carries the unit attribute {{{ROOT_ATTR}}}.
"""


# --- payload and scripts ------------------------------------------------------------------


def residual_chain(blocks: int, size: int) -> str:
    """A function with ``blocks`` residual blocks ``x + tanh(2x)``; the last add is the root."""
    t = f"tensor<{size}x{size}xf32>"
    par = '["parallel", "parallel"]'
    lines = [f"func.func @residual_chain(%x0: {t}) -> {t} {{"]
    for i in range(blocks):
        root = f", {ROOT_ATTR}" if i == blocks - 1 else ""
        lines += [
            f"  %fe{i} = tensor.empty() : {t}",
            f"  %f{i} = linalg.generic {{indexing_maps = [{MAP}, {MAP}], iterator_types = {par}}}",
            f"      ins(%x{i} : {t}) outs(%fe{i} : {t}) {{",
            "  ^bb0(%in: f32, %out: f32):",
            "    %two = arith.constant 2.0 : f32",
            "    %scaled = arith.mulf %in, %two : f32",
            "    %tanh = math.tanh %scaled : f32",
            "    linalg.yield %tanh : f32",
            f"  }} -> {t}",
            f"  %xe{i + 1} = tensor.empty() : {t}",
            f"  %x{i + 1} = linalg.generic {{indexing_maps = [{MAP}, {MAP}, {MAP}],",
            f"      iterator_types = {par}{root}}}",
            f"      ins(%x{i}, %f{i} : {t}, {t}) outs(%xe{i + 1} : {t}) {{",
            "  ^bb0(%a: f32, %b: f32, %out: f32):",
            "    %sum = arith.addf %a, %b : f32",
            "    linalg.yield %sum : f32",
            f"  }} -> {t}",
        ]
    lines += [f"  return %x{blocks} : {t}", "}", ""]
    return "\n".join(lines)


def upstream_script(tile_sizes: tuple[int, ...]) -> str:
    """``transform.structured.fuse`` on the root (one loop result per non-zero size)."""
    n_loops = sum(1 for s in tile_sizes if s)
    results = ", ".join(["!transform.any_op"] * (1 + n_loops))
    sizes = ", ".join(str(s) for s in tile_sizes)
    return f"""\
module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @{UPSTREAM_ENTRY}(%arg0: !transform.any_op {{transform.consumed}}) {{
    %root = transform.structured.match attributes {{{ROOT_ATTR}}} in %arg0
        : (!transform.any_op) -> !transform.any_op
    %fused:{1 + n_loops} = transform.structured.fuse %root tile_sizes [{sizes}]
        : (!transform.any_op) -> ({results})
    transform.yield
  }}
}}
"""


def count_generics(module_text: str) -> dict[str, int]:
    """``linalg.generic`` ops inside the functions' top-level loops, and outside them."""
    from iree.compiler import ir

    counts = {"loops": 0, "inside": 0, "outside": 0}

    def visit(op: Any) -> Any:
        if op.name == "linalg.generic":
            counts["inside"] += 1
        return ir.WalkResult.ADVANCE

    with ir.Context():
        module = ir.Module.parse(module_text)
        for func in module.body.operations:
            if func.operation.name != "func.func":
                continue
            for child in func.operation.regions[0].blocks[0].operations:
                op = child.operation
                if op.name in LOOP_OPS:
                    counts["loops"] += 1
                    op.walk(visit)
                elif op.name == "linalg.generic":
                    counts["outside"] += 1
    return counts


# --- the worker: one (contender, N) point, in its own process -----------------------------


def _emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def worker(args: argparse.Namespace) -> int:
    """Time ``args.worker`` on an N-block chain; one JSON line per timed call, then counts.

    Each call runs under ``SIGALRM`` with its default action, so a call that exceeds the
    cap kills this process wherever it is (inside MLIR too); the parent sees the signal.
    """
    from tdsched.transform_lib.fuse_ext import FuseExtOptions, fuse_ext
    from tdsched.transform_lib.interpreter import apply_script
    from tdsched.transform_lib.match import OpCriteria

    options = FuseExtOptions(root=OpCriteria(attributes=(ROOT_ATTR,)), tile_sizes=args.tile_sizes)
    script = upstream_script(args.tile_sizes)

    def call(payload: str) -> tuple[str, float | None, dict[str, Any]]:
        if args.worker == "fuse_ext":
            text, report = fuse_ext(payload, options)
            extra = {"fused": len(report.fused), "kept_outside": len(report.outside)}
            return text, report.seconds, extra
        text, _ = apply_script(payload, script, UPSTREAM_ENTRY)
        return text, None, {}

    call(residual_chain(1, args.size))  # warm-up: imports, dialect loading
    payload = residual_chain(args.worker_blocks, args.size)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    text = ""
    extra: dict[str, Any] = {}
    for run in range(args.repeats):
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        start = time.perf_counter()
        text, internal, extra = call(payload)
        wall = time.perf_counter() - start
        signal.setitimer(signal.ITIMER_REAL, 0)
        _emit({"run": run, "wall_s": wall, "internal_s": internal})
        if args.worker == "upstream" and wall > args.slow_after:
            break
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    _emit({"counts": count_generics(text), "output_mb": len(text) / 1e6, "max_rss_gb": rss_gb})
    _emit({"extra": extra})
    return 0


# --- the parent -----------------------------------------------------------------------------


def _summary(values: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(values), "min_s": min(values)}


def measure(contender: str, blocks: int, args: argparse.Namespace) -> dict[str, Any]:
    """Run one worker and summarize it (``timed_out`` / ``error`` instead of numbers)."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        contender,
        "--worker-blocks",
        str(blocks),
        "--size",
        str(args.size),
        "--tile-sizes",
        ",".join(map(str, args.tile_sizes)),
        "--repeats",
        str(args.repeats),
        "--timeout",
        str(args.timeout),
        "--slow-after",
        str(args.slow_after),
    ]
    # The worker caps each call itself; this only guards the untimed parts (re-parsing).
    backstop = args.timeout * args.repeats + 600
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=backstop)
    except subprocess.TimeoutExpired:
        return {"blocks": blocks, "error": f"worker did not finish in {backstop} s"}
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    runs = [r for r in records if "run" in r]
    result: dict[str, Any] = {"blocks": blocks, "generics": 2 * blocks}
    if proc.returncode == -signal.SIGALRM:
        result.update({"timed_out": True, "limit_s": args.timeout})
        if runs:
            result["completed_runs_s"] = [r["wall_s"] for r in runs]
        return result
    if proc.returncode != 0:
        result["error"] = proc.stderr.strip()[-2000:] or f"exit status {proc.returncode}"
        return result
    result["runs"] = len(runs)
    result["wall"] = _summary([r["wall_s"] for r in runs])
    if runs and runs[0]["internal_s"] is not None:
        result["internal"] = _summary([r["internal_s"] for r in runs])
    for r in records:
        if "counts" in r:
            result.update(r)
        if "extra" in r:
            result.update(r.pop("extra"))
    return result


def sweep(contender: str, blocks: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Measure each N in turn; after a timeout, larger N are recorded as skipped."""
    results: list[dict[str, Any]] = []
    capped_at: int | None = None
    for n in blocks:
        if capped_at is not None:
            results.append(
                {
                    "blocks": n,
                    "skipped": True,
                    "reason": f"N={capped_at} exceeded the {args.timeout:g} s cap",
                }
            )
            continue
        print(f"  {contender} N={n} ...", file=sys.stderr, flush=True)
        result = measure(contender, n, args)
        results.append(result)
        if result.get("timed_out") or "error" in result:
            capped_at = n
    return results


def check(contender: str, r: dict[str, Any]) -> None:
    """Add the expected counts and whether the result matches them."""
    if "counts" not in r:
        return
    n, counts = r["blocks"], r["counts"]
    if contender == "fuse_ext":
        expected = {"loops": 1, "inside": 2 * n, "outside": 0}
        r["ok"] = counts == expected and r.get("fused") == 2 * n - 1 and not r.get("kept_outside")
    else:
        expected = {"loops": 1, "inside": 2 ** (n + 1) - 2, "outside": 2 * n - 1}
        r["ok"] = counts == expected
    r["expected_counts"] = expected


def growth(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """time(N2)/time(N1) between successive finished points, also per added block."""
    done = [r for r in results if "wall" in r]
    out = []
    for a, b in itertools.pairwise(done):
        ratio = b["wall"]["median_s"] / a["wall"]["median_s"]
        out.append(
            {
                "from": a["blocks"],
                "to": b["blocks"],
                "ratio": ratio,
                "blocks_ratio": b["blocks"] / a["blocks"],
                "per_block": ratio ** (1 / (b["blocks"] - a["blocks"])),
            }
        )
    return out


def _time_cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if r.get("timed_out"):
        return f"> {r['limit_s']:g} (timed out)"
    if r.get("skipped"):
        return "skipped"
    if "error" in r:
        return "error"
    one_run = "" if r["runs"] > 1 else "*"
    return f"{r['wall']['median_s']:.3f}{one_run}"


def _growth_cell(table: list[dict[str, Any]], n: int) -> str:
    g = next((g for g in table if g["to"] == n), None)
    return "" if g is None else f"x{g['ratio']:.2f}"


def _counts_cell(r: dict[str, Any] | None) -> str:
    if r is None or "counts" not in r:
        return "-"
    c = r["counts"]
    mark = "ok" if r.get("ok") else "UNEXPECTED"
    return f"{c['inside']}/{c['outside']} {mark}"


def render(doc: dict[str, Any]) -> str:
    o = doc["options"]
    fx = {r["blocks"]: r for r in doc["fuse_ext"]}
    up = {r["blocks"]: r for r in doc["upstream"]}
    lines = [
        f"fuse_ext vs transform.structured.fuse: N residual blocks x + tanh(2x) on "
        f"tensor<{o['size']}x{o['size']}xf32>, tile sizes {o['tile_sizes']}",
        f"{doc['machine']['platform']}, {doc['machine']['cpu_count']} CPUs, "
        f"IREE {doc['iree_version']}; seconds per call, median of {o['repeats']} "
        f"(* = a single run: upstream stops repeating after a call > {o['slow_after']:g} s)",
        "generics = linalg.generic inside loop / outside "
        "(fuse_ext: 2N/0; upstream: 2^(N+1)-2 / 2N-1 dead originals)",
        "",
        f"{'N':>4} {'ops':>4} | {'fuse_ext s':>10} {'min s':>7} {'internal':>8} {'growth':>6} "
        f"{'generics':>12} | {'upstream s':>20} {'growth':>6} {'generics':>16}",
    ]
    for n in o["blocks"]:
        f, u = fx.get(n), up.get(n)
        fmin = f"{f['wall']['min_s']:.3f}" if f and "wall" in f else "-"
        fint = f"{f['internal']['median_s']:.3f}" if f and "internal" in f else "-"
        lines.append(
            f"{n:>4} {2 * n:>4} | {_time_cell(f):>10} {fmin:>7} {fint:>8} "
            f"{_growth_cell(doc['growth']['fuse_ext'], n):>6} {_counts_cell(f):>12} | "
            f"{_time_cell(u):>20} {_growth_cell(doc['growth']['upstream'], n):>6} "
            f"{_counts_cell(u):>16}"
        )
    small = doc["upstream_small"]
    if small:
        lines += [
            "",
            "upstream alone, small N (where it still finishes):",
            f"{'N':>4} | {'upstream s':>20} {'min s':>7} {'growth':>6} {'per block':>9} "
            f"{'generics in loop':>16} {'max RSS GB':>10}",
        ]
        table = doc["growth"]["upstream_small"]
        for r in small:
            n = r["blocks"]
            g = next((g for g in table if g["to"] == n), None)
            per_block = "" if g is None else f"x{g['per_block']:.2f}"
            umin = f"{r['wall']['min_s']:.3f}" if "wall" in r else "-"
            rss = f"{r['max_rss_gb']:.2f}" if "max_rss_gb" in r else "-"
            inside = f"{r['counts']['inside']}" if "counts" in r else "-"
            lines.append(
                f"{n:>4} | {_time_cell(r):>20} {umin:>7} {_growth_cell(table, n):>6} "
                f"{per_block:>9} {inside:>16} {rss:>10}"
            )
    bad = [
        f"{name} N={r['blocks']}"
        for name in ("fuse_ext", "upstream", "upstream_small")
        for r in doc[name]
        if "counts" in r and not r.get("ok")
    ]
    errors = [
        f"{name} N={r['blocks']}: {r['error']}"
        for name in ("fuse_ext", "upstream", "upstream_small")
        for r in doc[name]
        if "error" in r
    ]
    if bad:
        lines += ["", "UNEXPECTED generic counts: " + ", ".join(bad)]
    if errors:
        lines += ["", "errors:", *errors]
    return "\n".join(lines)


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--blocks",
        type=_int_list,
        default=[8, 16, 32, 64],
        metavar="N,N,...",
        help="chain lengths for both contenders (default 8,16,32,64)",
    )
    parser.add_argument(
        "--upstream-blocks",
        type=_int_list,
        default=[2, 4, 6, 8, 10, 12, 14],
        metavar="N,N,...",
        help="small chain lengths for upstream alone, to show it doubling per block "
        "(default 2,4,...,14; '' to skip)",
    )
    parser.add_argument("--size", type=int, default=64, help="tensor is SIZExSIZE (default 64)")
    parser.add_argument(
        "--tile-sizes",
        type=lambda s: tuple(_int_list(s)),
        default=(16, 32),
        metavar="T,T",
        help="tile sizes of the root (default 16,32)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per point (default 5)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="cap in seconds on one call; upstream's larger N are skipped past it (default 60)",
    )
    parser.add_argument(
        "--slow-after",
        type=float,
        default=5.0,
        help="upstream repeats only while a call takes at most this many seconds (default 5)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    parser.add_argument("--worker", choices=("fuse_ext", "upstream"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-blocks", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    if args.worker:
        return worker(args)
    from iree.compiler.version import VERSION

    started = time.perf_counter()
    doc: dict[str, Any] = {
        "benchmark": "fuse_ext_linear_time",
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "iree_version": VERSION,
        "options": {
            "blocks": args.blocks,
            "upstream_blocks": args.upstream_blocks,
            "size": args.size,
            "tile_sizes": list(args.tile_sizes),
            "repeats": args.repeats,
            "timeout_s": args.timeout,
            "slow_after": args.slow_after,
        },
        "upstream_script": upstream_script(args.tile_sizes),
    }
    doc["fuse_ext"] = sweep("fuse_ext", args.blocks, args)
    doc["upstream"] = sweep("upstream", args.blocks, args)
    doc["upstream_small"] = sweep("upstream", args.upstream_blocks, args)
    for name in ("fuse_ext", "upstream", "upstream_small"):
        for r in doc[name]:
            check("fuse_ext" if name == "fuse_ext" else "upstream", r)
    doc["growth"] = {name: growth(doc[name]) for name in ("fuse_ext", "upstream", "upstream_small")}
    doc["total_seconds"] = time.perf_counter() - started
    print(render(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(f"\nJSON: {args.json}")
    points = [r for name in ("fuse_ext", "upstream", "upstream_small") for r in doc[name]]
    failed = any("error" in r or ("counts" in r and not r["ok"]) for r in points)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
