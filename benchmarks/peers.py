"""Benchmark: every shipped x86 recipe against what a user would pick instead, at every
size of its grid, 1 and 2 threads.

For each point it runs ``tdsched run RECIPE --peers --json`` in a process of its own
(IREE fixes the thread count when a device is created), which builds, checks and times
in one interleaved run: the scheduled build, IREE default, IREE data tiling with and
without microkernels, numpy where the workload has an equivalent, and onnxruntime for
models (where it is installed: ``tdsched[onnx]``); GFLOP/s come with
the share of the machine's measured FMA peak (``tdsched peak``). Output: one JSON object
(every point, the machine, the peak) and, with ``--markdown``, the tables that
``docs/benchmarks.md#peers`` shows (``--update-docs`` rewrites that section in place).

    .venv/bin/python benchmarks/peers.py [--threads 1 2] [--repeats 9] [--quick]
        [--case matmul_x86] [--cpu haswell] [--out results.json]
        [--update-docs docs/benchmarks.md]

Ratios are same-run medians (the peer's median time over the schedule's: above 1, the
schedule is faster). Two threads on a 2-core VM are noisy; read the 1-thread rows for
decisions and re-run a point to see its spread.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import iree.compiler.version
from docs_sections import add_options, update_section
from tdsched.targets.cpu_isa import cpu_description, vector_isa

SQUARE = [128, 256, 512, 1024, 2048]
FFN = [(128, 3072, 768), (128, 768, 3072), (512, 4096, 1024)]
"""Transformer FFN matmuls (M x N x K): BERT-base's up and down projections at 128
tokens, and a 512-token 1024 -> 4096 projection."""
MATMUL_GRID = [(n, n, n) for n in SQUARE] + FFN
RESNET_BLOCK_GRID = [(56, 256, 64), (28, 512, 128), (14, 1024, 256)]
"""ResNet-50's bottleneck sizes (H = W, C channels, inner width M) in its stages 1-3."""
SOFTMAX_GRID = [(1536, 128), (512, 1024), (6144, 512), (128, 4096), (64, 1000), (64, 16384)]
"""Row softmax (M rows of N): BERT-base attention scores (12 heads x 128 tokens over 128
keys; 12 x 512 over 512), a 512 x 1024 matrix, long 4096- and 16384-wide rows, and a
classifier's 1000 logits for a batch of 64."""
CONV_GRID = [
    (56, 64, 64, 3),
    (28, 128, 128, 3),
    (14, 256, 256, 3),
    (56, 64, 256, 1),
    (28, 128, 512, 1),
    (14, 256, 1024, 1),
]
"""NHWC convolutions (H = W, C -> F channels, KS x KS filter; 1x1 unpadded): ResNet-50's
3x3 layers and 1x1 expansions in its stages 1-3."""
ROW_NORM_GRID = [
    ("layernorm", 512, 768),
    ("rmsnorm", 512, 768),
    ("layernorm", 128, 4096),
    ("rmsnorm", 128, 4096),
]
"""Row norms (NORM, M rows of N): BERT-base's layernorm at 512 tokens, and a 4096-wide
hidden state (an LLM's) at 128 tokens, each as layernorm and as rmsnorm."""
ATTENTION_GRID = [(12, 128, 64), (12, 512, 64), (8, 256, 128)]
"""Attention (H heads, S tokens, head dimension D): BERT-base at 128 and 512 tokens, and
8 heads of 128 over 256 tokens."""
BATCH_MATMUL_GRID = [(16, 256, 256, 256), (12, 128, 128, 64), (8, 512, 64, 512)]
"""Batch matmuls (B x M x N x K): 16 square 256³ ones, attention's per-head products at
BERT-base's 128 tokens (Q Kᵀ: 128 x 128 over 64) and a 512-token P V (512 x 64 over 512)."""
FFN_ACTIVATIONS = ["gelu", "silu"]
"""The epilogues the FFN grid runs again through matmul_bias_relu_x86 (``ACT``)."""
DEFAULT_SIZE_RECIPES = [
    "matmul_mmt4d_x86",
    "matmul_bias_relu_fuse_ext_x86",
    "matmul_chain_x86",
    "matmul_chain_cross_layer_x86",
    "resnet_block_cross_layer_x86",
    "small_cnn_x86",
    "elementwise_chain_x86",
    "collapse_dims_x86",
    "pad_fusion_x86",
]
"""Shipped x86 recipes without a size grid yet: benchmarked at their own parameters."""
ODD_SHAPES: list[tuple[str, dict[str, int | str]]] = [
    ("matmul_x86", {"M": 196, "N": 512, "K": 512, "WEIGHTS": "constant"}),
    ("matmul_x86", {"M": 100, "N": 500, "K": 256}),
    ("matmul_x86", {"M": 300, "N": 1000, "K": 768, "WEIGHTS": "constant"}),
    ("matmul_x86", {"M": 1000, "N": 1000, "K": 1000}),
    ("matmul_bias_relu_x86", {"M": 100, "N": 1000, "K": 384}),
    ("matmul_bias_relu_x86", {"M": 196, "N": 768, "K": 768, "ACT": "gelu"}),
    ("batch_matmul_x86", {"B": 4, "M": 100, "N": 200, "K": 64}),
    ("batch_matmul_x86", {"B": 6, "M": 120, "N": 96, "K": 64}),
    ("matmul_chain_x86", {"M": 100, "N": 200, "K": 300, "P": 100}),
    ("matmul_chain_cross_layer_x86", {"M": 100, "N": 200, "K": 300, "P": 100}),
    ("attention_x86", {"H": 6, "S": 200, "D": 48}),
    ("attention_x86", {"H": 12, "S": 300, "D": 64}),
    ("row_norm_x86", {"NORM": "layernorm", "M": 100, "N": 1000}),
    ("row_norm_x86", {"NORM": "rmsnorm", "M": 300, "N": 1000}),
    ("softmax_x86", {"M": 100, "N": 1000}),
    ("softmax_x86", {"M": 300, "N": 3000}),
    ("conv2d_x86", {"H": 27, "W": 27, "C": 96, "F": 100, "KS": 3}),
    ("conv2d_x86", {"H": 57, "W": 57, "C": 64, "F": 96, "KS": 3, "STRIDE": 2}),
    ("conv2d_x86", {"H": 28, "W": 28, "C": 100, "F": 200, "KS": 1, "PAD": 0}),
    ("resnet_block_x86", {"H": 20, "W": 20, "C": 100, "M": 50}),
    ("pad_fusion_x86", {"H": 30, "W": 30, "C": 50, "M": 70}),
    ("elementwise_chain_x86", {"M": 1000, "N": 3000}),
]
"""Shapes of a user's own, which no shipped table was tuned at and no power of two divides
(``--odd``): what a recipe does where its tables' tiles do not fit (its constraints keep
partial tiles out, else IREE's pipeline runs; docs/recipes.md#shape-tables)."""


@dataclass(frozen=True)
class Case:
    recipe: str
    params: dict[str, int | str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        params = {k: v for k, v in self.params.items() if k != "WEIGHTS"}
        weights = " constant weights" if self.params.get("WEIGHTS") == "constant" else ""
        if not params:
            return self.recipe + weights
        if set(params) == {"M", "N", "K"}:
            return f"{self.recipe} {params['M']}x{params['N']}x{params['K']}{weights}"
        return f"{self.recipe} " + ",".join(f"{k}={v}" for k, v in params.items()) + weights


def cases(quick: bool) -> list[Case]:
    """The benchmark's points: matmul recipes, the ResNet block, softmax and the
    convolution over their grids, the rest at their defaults (``quick``: the 256³ and
    1024³ matmuls, the 56² ResNet block, the 512x1024 softmax and the 56² 3x3
    convolution only); the FFN matmuls again with GELU and SiLU epilogues, the row norms
    attention and the batch matmuls over their grids (``quick``: the first FFN shape,
    BERT-base's norms and attention at 128 tokens, the 256³ batch matmul); matmul_x86 over
    the grid and matmul_mmt4d_x86 again with constant weights (``WEIGHTS=constant``: B
    inside the function, as in an inference graph)."""
    grid = [(256, 256, 256), (1024, 1024, 1024)] if quick else MATMUL_GRID
    found = [
        Case(recipe, {"M": m, "N": n, "K": k})
        for recipe in ("matmul_x86", "matmul_bias_relu_x86")
        for m, n, k in grid
    ]
    constant: dict[str, int | str] = {"WEIGHTS": "constant"}
    found += [Case("matmul_x86", {"M": m, "N": n, "K": k, **constant}) for m, n, k in grid]
    found.append(Case("matmul_mmt4d_x86", constant))
    blocks = RESNET_BLOCK_GRID[:1] if quick else RESNET_BLOCK_GRID
    found += [Case("resnet_block_x86", {"H": h, "W": h, "C": c, "M": m}) for h, c, m in blocks]
    rows = SOFTMAX_GRID[1:2] if quick else SOFTMAX_GRID
    found += [Case("softmax_x86", {"M": m, "N": n}) for m, n in rows]
    convs = CONV_GRID[:1] if quick else CONV_GRID
    found += [
        Case(
            "conv2d_x86",
            {"H": h, "W": h, "C": c, "F": f, "KS": ks, **({"PAD": 0} if ks == 1 else {})},
        )
        for h, c, f, ks in convs
    ]
    found += [
        Case("matmul_bias_relu_x86", {"M": m, "N": n, "K": k, "ACT": act})
        for m, n, k in (FFN[:1] if quick else FFN)
        for act in FFN_ACTIVATIONS
    ]
    norms = ROW_NORM_GRID[:2] if quick else ROW_NORM_GRID
    found += [Case("row_norm_x86", {"NORM": norm, "M": m, "N": n}) for norm, m, n in norms]
    heads = ATTENTION_GRID[:1] if quick else ATTENTION_GRID
    found += [Case("attention_x86", {"H": h, "S": s, "D": d}) for h, s, d in heads]
    batches = BATCH_MATMUL_GRID[:1] if quick else BATCH_MATMUL_GRID
    found += [Case("batch_matmul_x86", {"B": b, "M": m, "N": n, "K": k}) for b, m, n, k in batches]
    return found + ([] if quick else [Case(r) for r in DEFAULT_SIZE_RECIPES])


def measure(case: Case, threads: int, repeats: int, cpu: str = "host") -> dict[str, Any]:
    """One ``tdsched run --peers --json`` of ``case`` built for LLVM CPU ``cpu``,
    summarized."""
    command = [sys.executable, "-m", "tdsched.schedules.cli.main", "run", case.recipe, "--json"]
    command += ["--peers", "--threads", str(threads), "--repeats", str(repeats), "--cpu", cpu]
    for name, value in case.params.items():
        command += ["--param", f"{name}={value}"]
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    point: dict[str, Any] = {"case": case.label, "recipe": case.recipe, "params": case.params}
    point.update(threads=threads, seconds=round(time.monotonic() - started, 1))
    if not proc.stdout.strip():
        return {**point, "status": "error", "error": proc.stderr.strip().splitlines()[-1:]}
    report = json.loads(proc.stdout)
    point.update(status=report["status"], speedup_vs_default=report.get("speedup"))
    peers = {p["name"]: p for p in report.get("peers") or []}
    point["vs"] = {name: p.get("speedup") for name, p in peers.items()}
    tiling = [
        peers[n]["speedup"] for n in peers if n.startswith("iree-data") if peers[n]["speedup"]
    ]
    point["vs_best_data_tiling"] = min(tiling) if tiling else None
    throughput = report.get("throughput")
    if throughput:
        point.update(
            gflops=throughput["scheduled_gflops"],
            default_gflops=throughput["baseline_gflops"],
            fraction_of_fma_peak=throughput["fraction_of_fma_peak"],
            fma_peak_gflops=throughput["peak"]["fma_gflops"],
            peer_gflops={name: p.get("gflops") for name, p in peers.items()},
        )
    if report.get("error"):
        point["error"] = report["error"]
    return point


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(points: list[dict[str, Any]], threads: int) -> dict[str, Any]:
    """Per thread count: geomean vs IREE default, and how many points lose to each peer."""
    ok = [p for p in points if p["threads"] == threads and p["status"] == "ok"]
    default = [p["speedup_vs_default"] for p in ok if p["speedup_vs_default"]]
    tiling = [p["vs_best_data_tiling"] for p in ok if p["vs_best_data_tiling"]]
    numpy = [p["vs"]["numpy"] for p in ok if p["vs"].get("numpy")]
    return {
        "threads": threads,
        "points": len([p for p in points if p["threads"] == threads]),
        "ok": len(ok),
        "geomean_vs_default": geomean(default),
        "slower_than_default": sorted(p["case"] for p in ok if p["speedup_vs_default"] < 1),
        "geomean_vs_best_data_tiling": geomean(tiling),
        "slower_than_data_tiling": sorted(
            p["case"] for p in ok if (p["vs_best_data_tiling"] or 2) < 1
        ),
        "geomean_vs_numpy": geomean(numpy),
        "slower_than_numpy": sorted(p["case"] for p in ok if (p["vs"].get("numpy") or 2) < 1),
        "slower_than_onnxruntime": sorted(
            p["case"] for p in ok if (p["vs"].get("onnxruntime") or 2) < 1
        ),
    }


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    text = f"{value:.2f}x"
    return f"**{text}**" if value < 1 else text


def markdown(result: dict[str, Any]) -> str:
    """The docs section: command, machine, peak, one table per thread count, summary."""
    built = result.get("build_cpu", "host")
    built_for = (
        ""
        if built == "host"
        else f" Every IREE build (the schedule's and its IREE peers') targets `--cpu {built}` "
        f"({result['build_isa']}); numpy runs as installed."
    )
    lines = [
        f"`{result['command']}` on {result['date']}: {result['cpu']}, IREE "
        f"{result['iree_version']}. Same-run medians of {result['repeats']} interleaved "
        "rounds; each ratio is the peer's time over the schedule's (**bold**: the schedule "
        f"is slower). Peak: `tdsched peak` at the same thread count.{built_for}",
        "",
    ]
    for threads in result["threads"]:
        s = next(x for x in result["summary"] if x["threads"] == threads)
        lines += [
            f"**{threads} thread{'s' if threads > 1 else ''}**: geomean "
            f"{_ratio(s['geomean_vs_default'])} "
            f"vs IREE default, {_ratio(s['geomean_vs_best_data_tiling'])} vs IREE data "
            f"tiling (its faster variant), {_ratio(s['geomean_vs_numpy'])} vs numpy; "
            f"{len(s['slower_than_default'])} of {s['ok']} points slower than IREE default; "
            f"slower than onnxruntime: {', '.join(s['slower_than_onnxruntime']) or 'none'}.",
            "",
            "| case | status | GFLOP/s | % FMA peak | vs default | vs data tiling | "
            "vs data tiling + ukernels | vs numpy | vs onnxruntime |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for p in result["points"]:
            if p["threads"] != threads:
                continue
            vs = p.get("vs", {})
            gflops = f"{p['gflops']:.1f}" if p.get("gflops") else "-"
            peak = f"{p['fraction_of_fma_peak']:.0%}" if p.get("fraction_of_fma_peak") else "-"
            lines.append(
                f"| {p['case']} | {p['status']} | {gflops} | {peak} | "
                f"{_ratio(p.get('speedup_vs_default'))} | {_ratio(vs.get('iree-data-tiling'))} | "
                f"{_ratio(vs.get('iree-data-tiling-ukernels'))} | {_ratio(vs.get('numpy'))} | "
                f"{_ratio(vs.get('onnxruntime'))} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=9, help="interleaved rounds per run")
    parser.add_argument("--quick", action="store_true", help="a 7-point subset")
    parser.add_argument(
        "--odd",
        action="store_true",
        help="the shapes of ODD_SHAPES instead of the grids: shapes of a user's own that no "
        "table was tuned at and no power of two divides",
    )
    parser.add_argument("--case", action="append", help="only these recipes (repeatable)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--markdown", type=Path, help="write the docs section here")
    parser.add_argument(
        "--cpu",
        default="host",
        help="LLVM CPU to build for (tdsched run --cpu), e.g. haswell for AVX2 (default: host)",
    )
    add_options(parser, "peers")  # a --case run may keep its own section
    args = parser.parse_args(argv)
    grid = [Case(r, dict(p)) for r, p in ODD_SHAPES] if args.odd else cases(args.quick)
    chosen = [c for c in grid if not args.case or c.recipe in args.case]
    points = []
    for threads in args.threads:
        for case in chosen:
            point = measure(case, threads, args.repeats, args.cpu)
            print(
                f"{case.label} t={threads}: {point['status']} {point.get('speedup_vs_default')}",
                file=sys.stderr,
            )
            points.append(point)
    result = {
        "benchmark": "peers",
        "command": "python benchmarks/peers.py " + " ".join(argv or sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "cpu": cpu_description(),
        "machine": platform.machine(),
        "iree_version": iree.compiler.version.VERSION,
        "repeats": args.repeats,
        "threads": args.threads,
        "build_cpu": args.cpu,
        "build_isa": vector_isa(args.cpu),
        "points": points,
        "summary": [summary(points, t) for t in args.threads],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    section = markdown(result)
    if args.markdown:
        args.markdown.write_text(section)
    if args.update_docs:
        update_section(args.update_docs, args.section, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
