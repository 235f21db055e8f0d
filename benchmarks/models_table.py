"""Benchmark: whole models, tuned by ``tdsched tune``, against what a user runs instead:
IREE's default build, IREE's best one-flag configuration, and onnxruntime.

For each model (``--model NAME``, repeatable; default all of :data:`MODELS`) and each
thread count of ``--threads`` it runs, one at a time, as ``benchmarks/tune_workloads.py``
does for single workloads:

1. ``tdsched tune MODEL --threads T --budget B --out OUT/NAME-tT.tune -q --json``;
2. ``tdsched run OUT/NAME-tT.tune/NAME.tuned.yaml --threads T --peers --repeats R --json``:
   the tuned recipe, IREE default, IREE data tiling, data tiling + microkernels and
   onnxruntime (CPU execution provider, the same threads, graph optimizations on),
   built, checked against the model's reference and timed interleaved in one run.

The models (:data:`MODELS`): the onnx package's SqueezeNet 1.1 and ResNet-50 (its
``light`` test models, with seeded random weights written by
``benchmarks/onnx_random_weights.py`` into OUT), and the builder's ``mobilenet`` (v1
style, 224x224) and ``encoder_layer`` (BERT-base, 128 tokens), exported to ONNX. Each
ratio is a build's time over the tuned recipe's: above 1, tdsched is faster. "% peak" is
the tuned recipe's GFLOP/s over ``tdsched peak``'s FMA peak at the same thread count.

The JSON (``--json-out``, default ``OUT/models_table.json``) is rewritten after every
model, with the machine, the commands and per row the tune's graph race and IREE race;
``--update-docs docs/benchmarks.md --section models-table`` writes the table there.

    .venv/bin/python benchmarks/models_table.py [--model squeezenet --model mobilenet]
        [--threads 1 2] [--budget 4] [--budget-for resnet50=15] [--out .build/models]

It takes about budget + 3 minutes per model and thread count (the tune's races and the
final run; ResNet-50's builds take a minute each). Tunes resume, as tune_workloads'.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from docs_sections import add_options, update_section
from tune_workloads import (
    HERE,
    _ratio_of,
    _x,
    cpu_model,
    geomean,
    has_avx512f,
    measure,
    source_commit,
)

ONNX_LIGHT = Path("onnx/backend/test/data/light")
"""Where the onnx package keeps its light test models (under site-packages)."""
MODELS: dict[str, tuple[str, ...]] = {
    "squeezenet": ("onnx:light_squeezenet",),
    "mobilenet": ("mobilenet", "--via", "onnx"),
    "resnet50": ("onnx:light_resnet50",),
    "encoder_layer": ("encoder_layer", "--via", "onnx"),
}
"""Each model: what ``tdsched tune`` is given (``onnx:NAME``: the onnx package's light
model NAME with seeded random weights)."""
RATIOS = (
    ("speedup_vs_default", "x IREE default"),
    ("best_iree_configuration", "x best IREE"),
    ("onnxruntime", "x onnxruntime"),
)


def model_arguments(spec: Sequence[str], out: Path) -> list[str]:
    """``spec`` as ``tdsched tune`` arguments, an ``onnx:NAME`` model written (seeded
    weights) into ``out`` first."""
    if not spec[0].startswith("onnx:"):
        return list(spec)
    import onnx

    name = spec[0].removeprefix("onnx:")
    source = Path(onnx.__file__).parent.parent / ONNX_LIGHT / f"{name}.onnx"
    seeded = out / f"{name.removeprefix('light_')}.onnx"
    if not seeded.is_file():
        subprocess.run(
            [sys.executable, str(HERE / "onnx_random_weights.py"), str(source), str(seeded)],
            check=True,
            capture_output=True,
        )
    return [str(seeded), *spec[1:]]


def row_cells(row: dict[str, Any]) -> list[str]:
    """One table row: model, threads, status, time, ratios, % peak, tune minutes."""
    run = row.get("run") or {}
    time_ms = run.get("time_ms")
    peak = row.get("fraction_of_fma_peak")
    return [
        row["name"].rsplit("-t", 1)[0],
        str(row.get("threads")),
        str(row.get("status")),
        "-" if not isinstance(time_ms, int | float) else f"{time_ms:.2f}",
        *(_x(_ratio_of(row, ratio)) for ratio, _ in RATIOS),
        "-" if not isinstance(peak, int | float) else f"{100 * peak:.0f}%",
        f"{(row.get('tune') or {}).get('wall_s', 0) / 60:.1f}",
    ]


def markdown(result: dict[str, Any]) -> str:
    """The docs section: the command, the machine, the table and the geomeans."""
    header = ["model", "threads", "status", "tdsched ms", *(label for _, label in RATIOS)]
    header += ["% peak", "tune min"]
    lines = [
        f"`{result['command_line']}` on {result['date'][:10]}: {result['cpu']}, "
        f"{result['cores']} cores, AVX-512 {'yes' if result['avx512f'] else 'no'}; budgets "
        f"{result['budgets']}. Same-run medians of {result['repeats']} interleaved rounds; "
        "each ratio is the build's time over the tuned recipe's (**bold**: tdsched is "
        "slower).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in result["rows"]:
        cells = row_cells(row)
        for i, (ratio, _) in enumerate(RATIOS, start=4):
            value = _ratio_of(row, ratio)
            if value is not None and value < 1:
                cells[i] = f"**{cells[i]}**"
        lines.append("| " + " | ".join(cells) + " |")
    for ratio, label in RATIOS:
        values = [v for r in result["rows"] if (v := _ratio_of(r, ratio)) is not None]
        if values:
            lines.append(f"\nGeomean {label}: {geomean(values):.2f}x over {len(values)} runs.")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join((__doc__ or "").split("\n\n")[1:]),
    )
    parser.add_argument(
        "--model",
        action="append",
        choices=sorted(MODELS),
        help="only this model (repeatable; default all)",
    )
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default 1 2)"
    )
    parser.add_argument("--cpu", default="host", help="LLVM CPU to build for (default host)")
    parser.add_argument(
        "--budget", type=float, default=4.0, help="tune budget per model, minutes (default 4)"
    )
    parser.add_argument(
        "--budget-for",
        action="append",
        default=[],
        metavar="MODEL=MINUTES",
        help="another budget for one model (repeatable), e.g. resnet50=15",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".build/models"),
        help="folder for the models, tunes, logs and JSON (default .build/models)",
    )
    parser.add_argument(
        "--repeats", type=int, default=9, help="interleaved rounds of the final run (default 9)"
    )
    parser.add_argument("--json-out", type=Path, help="the JSON (default OUT/models_table.json)")
    add_options(parser, "models-table")
    return parser.parse_args(argv)


def budgets(args: argparse.Namespace, names: Sequence[str]) -> dict[str, float]:
    """Each model's tune budget in minutes."""
    chosen = dict.fromkeys(names, args.budget)
    for text in args.budget_for:
        name, _, minutes = text.partition("=")
        if name not in MODELS or not minutes:
            raise SystemExit(f"models_table: --budget-for {text!r}: give MODEL=MINUTES")
        chosen[name] = float(minutes)
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = args.model or list(MODELS)
    minutes = budgets(args, names)
    args.out.mkdir(parents=True, exist_ok=True)
    json_out: Path = args.json_out or args.out / "models_table.json"
    result: dict[str, Any] = {
        "benchmark": "models_table",
        "command_line": shlex.join(["python", "benchmarks/models_table.py", *sys.argv[1:]]),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "avx512f": has_avx512f(),
        "machine": platform.machine(),
        "build_cpu": args.cpu,
        "budgets": ", ".join(f"{name} {minutes[name]:g} min" for name in names),
        "repeats": args.repeats,
        "tdsched_commit": source_commit(),
        "rows": [],
    }
    started = time.monotonic()
    for name in names:
        model = model_arguments(MODELS[name], args.out)
        for threads in args.threads:
            print(f"{name}, {threads} thread(s): tuning", file=sys.stderr, flush=True)
            row = measure(
                f"{name}-t{threads}",
                model,
                argparse.Namespace(**{**vars(args), "threads": threads}),
                minutes[name],
            )
            result["rows"].append(row)
            print("  ".join(row_cells(row)), file=sys.stderr, flush=True)
            result["total_s"] = round(time.monotonic() - started, 1)
            json_out.write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    print(text)
    if args.update_docs:
        update_section(args.update_docs, args.section, text)
    return 0 if all(row.get("status") == "ok" for row in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
