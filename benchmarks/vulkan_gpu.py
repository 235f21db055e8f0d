"""Benchmark: the shipped Vulkan recipes on a real GPU, built here and run on a machine
that has one (and no compiler).

Three steps, the first and last on the machine with tdsched, the second on the GPU one:

    .venv/bin/python benchmarks/vulkan_gpu.py prepare --out .gpu-run/full [--gpu ampere]
    python3 benchmarks/vulkan_gpu.py measure --dir .gpu-run/full --out results.json
    .venv/bin/python benchmarks/vulkan_gpu.py markdown results.json \
        [--update-docs docs/benchmarks.md]

``prepare`` plans every case (a shipped recipe that targets Vulkan, at its default size and
at larger matmul sizes) and compiles, per case: the scheduled build and IREE's default
build for IREE's generic Vulkan target (what ``tdsched run --target vulkan`` builds), the
same two for ``--gpu`` (``--iree-vulkan-target``, the GPU's architecture), and IREE's
default x86 build of the workload as the reference (generic x86-64-v3 code, so it runs on
any recent x86 host). It writes the modules and ``manifest.json``; nothing else travels.

``measure`` needs only ``iree.runtime``, numpy and ``tdsched.targets`` (no compiler, so
the GPU machine can run it from this checkout). Per case it draws the seeded inputs
(:func:`tdsched.targets.random_data.random_arrays`, the same draw ``tdsched run`` makes),
computes the reference on the CPU, runs every Vulkan build on the GPU and checks it by
tdsched's one rule within the recipe's tolerance, then times the builds that passed,
interleaved (``--repeats`` rounds, medians). It writes the JSON after every case, so a
run cut short keeps what it measured.

``markdown`` renders the tables that ``docs/benchmarks.md#vulkan-on-a-gpu`` shows.

``prepare --space SIZE`` builds, instead of the recipes, the points of matmul_vulkan's
tile space on a GPU (:func:`tile_space`) at SIZE^3, each beside IREE's default build for
the generic target; ``markdown`` lists them fastest first (``--section
vulkan-gpu-space`` for their docs section).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

from docs_sections import add_options, update_section

SEED = 0
REFERENCE_CPU = "x86-64-v3"
"""The LLVM CPU the reference's x86 build is compiled for: AVX2, which every x86 server
that hosts a GPU has."""
VARIANTS = ("tdsched", "iree-default")
"""The builds per Vulkan target: the recipe's schedule and IREE's own pipeline."""


@dataclass(frozen=True)
class Case:
    recipe: str
    params: dict[str, int] = field(default_factory=dict)
    candidate: bool = False
    """A point of a tile space (:func:`tile_space`): built for the generic target only."""

    @property
    def label(self) -> str:
        p = self.params
        size = f" {p['M']}x{p['N']}x{p['K']}" if {"M", "N", "K"} <= set(p) else ""
        rest = [f"{k}={v}" for k, v in p.items() if k not in ("M", "N", "K")]
        return self.recipe + size + (" " + ",".join(rest) if rest else "")


def _mnk(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k}


CASES = [
    *(Case("matmul_vulkan", _mnk(*s)) for s in [(512,) * 3, (2048,) * 3, (4096,) * 3]),
    Case("matmul_vulkan", _mnk(512, 4096, 1024)),
    *(Case("matmul_vulkan_config", _mnk(*s)) for s in [(512,) * 3, (2048,) * 3, (4096,) * 3]),
    Case("matmul_bias_relu_vulkan"),
    Case("matmul_bias_relu_vulkan", _mnk(2048, 2048, 2048)),
    Case("matmul_bias_relu_fuse_ext_vulkan"),
    Case("matmul_bias_relu_fuse_ext_vulkan", _mnk(2048, 2048, 2048)),
    Case("resnet_block_vulkan"),
    Case("small_cnn_vulkan"),
    Case("conv2d_x86"),
    Case("matmul_mmt4d_x86"),
    Case("elementwise_chain_x86"),
    Case("collapse_dims_x86"),
    Case("pad_fusion_x86"),
]
"""Every shipped recipe that targets Vulkan at its own parameters; the matmul ones also at
sizes a GPU is built for (up to 4096^3, and a 512-token 1024 -> 4096 projection)."""


def tile_space(size: int = 4096) -> list[Case]:
    """matmul_vulkan's tiles on a GPU at ``size``^3, beyond the space its recipe sweeps
    (tuned on lavapipe): workgroup tiles TM x TN of 64 or 128, thread tiles RM x RN of 4
    or 8, reduction tile TK of 4 to 16; the workgroup size follows (WX = TN / RN threads
    across, WY = TM / RM down), at most 1024 threads."""
    cases = []
    for tm, tn, rm, rn, tk in product((64, 128), (64, 128), (4, 8), (4, 8), (4, 8, 16)):
        wx, wy = tn // rn, tm // rm
        if wx * wy <= 1024:
            tiles = {"TM": tm, "TN": tn, "RM": rm, "RN": rn, "TK": tk, "WX": wx, "WY": wy}
            cases.append(Case("matmul_vulkan", {**_mnk(size, size, size), **tiles}, True))
    return cases


# ---------------------------------------------------------------- prepare (with tdsched)


def prepare(out: Path, gpu: str, quick: bool, space: int | None) -> None:
    """Compile every case's modules under ``out`` and write ``out/manifest.json``
    (``space``: the points of :func:`tile_space` at that size instead of :data:`CASES`)."""
    from tdsched.schedules.compile.build_target import BuildTarget
    from tdsched.schedules.compile.pipeline import compile_baseline, compile_default_workload, plan
    from tdsched.schedules.frontends.loading import load
    from tdsched.schedules.measure.evaluation import compile_scheduled
    from tdsched.targets import make_target
    from tdsched.targets.workload import input_types
    from tdsched.transform_lib.work import count_work_of_text

    out.mkdir(parents=True, exist_ok=True)
    cases = [c for c in CASES if not c.params][:3] if quick else CASES
    if space:
        cases = tile_space(space)[:4] if quick else tile_space(space)
    manifest: dict[str, Any] = {"gpu": gpu, "seed": SEED, "cases": []}
    for index, case in enumerate(cases):
        folder = out / f"case{index}"
        folder.mkdir(exist_ok=True)
        entry: dict[str, Any] = {"label": case.label, "recipe": case.recipe}
        entry["candidate"] = case.candidate
        entry.update(params=case.params, folder=folder.name, modules={}, errors={})
        started = time.perf_counter()
        for gpu_name in (None,) if case.candidate else (None, gpu):
            p = plan(load(case.recipe), BuildTarget("vulkan", gpu=gpu_name), case.params)
            suffix = f"@{gpu_name}" if gpu_name else ""
            builds = {
                "tdsched": lambda work, p=p: compile_scheduled(p, work)[1].output,
                "iree-default": lambda work, p=p: compile_baseline(p, work).output,
            }
            for variant, compile_one in builds.items():
                name = variant + suffix
                try:
                    entry["modules"][name] = _keep(folder, name, compile_one)
                except Exception as exc:  # a build that fails is reported, not fatal
                    entry["errors"][name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        workload = p.workload
        x86 = make_target("x86", cpu=REFERENCE_CPU)
        entry["reference"] = _keep(
            folder,
            "reference-x86",
            lambda work, w=workload, t=x86: compile_default_workload(w, t, work),
        )
        entry["function"] = workload.function
        entry["inputs"] = [[list(shape), elem] for shape, elem in input_types(workload)]
        entry["tolerance"] = {"atol": p.recipe.tolerance.atol, "rtol": p.recipe.tolerance.rtol}
        entry["flops"] = count_work_of_text(workload.mlir).ops
        manifest["cases"].append(entry)
        built = ", ".join(entry["modules"]) or "nothing"
        print(f"{case.label}: {built} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        for name, error in entry["errors"].items():
            print(f"  {name} failed: {error}", file=sys.stderr)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _keep(folder: Path, name: str, compile_one: Any) -> str:
    """Compile in a scratch folder and keep only the module, as ``folder/<name>.vmfb``."""
    with tempfile.TemporaryDirectory() as scratch:
        vmfb = Path(compile_one(Path(scratch)))
        shutil.copy(vmfb, folder / f"{name}.vmfb")
    return f"{name}.vmfb"


# ---------------------------------------------------------------- measure (runtime only)


def measure(folder: Path, out: Path, repeats: int) -> None:
    """Check and time every case of ``folder/manifest.json`` on the Vulkan device."""
    from tdsched.targets.random_data import random_arrays
    from tdsched.targets.result_check import compare_result
    from tdsched.targets.runtime import LoadedModule, configure_threads, keep_freed_memory
    from tdsched.targets.timing import time_interleaved

    manifest = json.loads((folder / "manifest.json").read_text())
    configure_threads(os.cpu_count() or 1)  # the CPU reference's workers
    keep_freed_memory()
    result: dict[str, Any] = {"machine": _machine(), "gpu": manifest["gpu"]}
    result.update(repeats=repeats, date=time.strftime("%Y-%m-%d"), cases=[])
    references: dict[str, tuple[list[Any], list[Any]]] = {}
    for case in manifest["cases"]:
        where = folder / case["folder"]
        module_bytes = (where / case["reference"]).read_bytes()
        workload = hashlib.sha256(module_bytes + json.dumps(case["inputs"]).encode()).hexdigest()
        if workload not in references:  # tile-space candidates share one workload
            inputs = random_arrays([(tuple(s), e) for s, e in case["inputs"]], manifest["seed"])
            reference = LoadedModule(where / case["reference"], "local-task", case["function"])
            references[workload] = inputs, reference.invoke(inputs)
        inputs, want = references[workload]
        atol, rtol = case["tolerance"]["atol"], case["tolerance"]["rtol"]
        fields = ("label", "recipe", "params", "flops", "candidate")
        point: dict[str, Any] = {k: case[k] for k in fields}
        point.update(builds={}, errors=dict(case["errors"]))
        runners = {}
        for name, file in case["modules"].items():
            try:
                module = LoadedModule(where / file, "vulkan", case["function"])
                got = module.invoke(inputs)
            except Exception as exc:  # a module the device rejects is reported
                point["errors"][name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                continue
            if len(got) != len(want):
                point["errors"][name] = f"{len(got)} results, expected {len(want)}"
                continue
            pairs = zip(got, want, strict=True)
            comparisons = [compare_result(g, w, atol, rtol) for g, w in pairs]
            problem = next((c.problem(atol, rtol) for c in comparisons if not c.ok), None)
            point["builds"][name] = {
                "status": "ok" if problem is None else "wrong",
                "max_abs_error": max(c.max_abs_error for c in comparisons),
                "error": problem,
            }
            if problem is None:
                runners[name] = module.runner(inputs)
        if runners:
            for name, timing in time_interleaved(runners, repeats).items():
                point["builds"][name]["time_ms"] = timing.as_dict()
        result["cases"].append(point)
        print(_line(point), file=sys.stderr, flush=True)
        out.write_text(json.dumps(result, indent=1))


def _machine() -> dict[str, Any]:
    """The host, the Vulkan devices IREE sees and, where there is one, nvidia-smi's view."""
    import iree.runtime as ireert

    devices = ireert.get_driver("vulkan").query_available_devices()
    info: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count()}
    info["vulkan_devices"] = [d.get("name", str(d)) for d in devices]
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
        info["nvidia_smi"] = subprocess.run(query, capture_output=True, text=True).stdout.strip()
    return info


def _line(point: dict[str, Any]) -> str:
    parts = []
    for name, build in point["builds"].items():
        time_ms = build.get("time_ms", {}).get("median")
        parts.append(f"{name} {build['status']}" + (f" {time_ms:.3f} ms" if time_ms else ""))
    parts += [f"{name} FAILED" for name in point["errors"]]
    return f"{point['label']}: " + ", ".join(parts)


# ---------------------------------------------------------------- markdown


def _time(point: dict[str, Any], name: str) -> float | None:
    build = point["builds"].get(name)
    if build is None or "time_ms" not in build:
        return None
    return float(build["time_ms"]["median"])


def _cell(point: dict[str, Any], name: str) -> str:
    """A build's cell: its median time and GFLOP/s, or why it has none."""
    if name in point["errors"]:
        return "fails: " + point["errors"][name].replace("|", "/")[:60]
    build = point["builds"].get(name)
    if build is None:
        return "-"
    if build["status"] != "ok":
        return f"**wrong** (max error {build['max_abs_error']:.2g})"
    time_ms = _time(point, name)
    assert time_ms is not None
    rate = f", {point['flops'] / (time_ms * 1e-3) / 1e12:.3g} TFLOP/s" if point["flops"] else ""
    return f"{time_ms:.3f} ms{rate}"


def _ratio(point: dict[str, Any], top: str, bottom: str) -> float | None:
    a, b = _time(point, top), _time(point, bottom)
    return b / a if a and b else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _geomean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in known) / len(known)) if known else None


def markdown(result: dict[str, Any]) -> str:
    """Per case: each build's time (or its failure) and tdsched's ratio over IREE default,
    for the generic Vulkan target and for the named GPU; then the tile-space candidates,
    if the run had any."""
    gpu = result["gpu"]
    machine = result["machine"]
    device = machine.get("nvidia_smi") or ", ".join(machine["vulkan_devices"])
    lines = [
        f"Measured {result['date']} on {device} ({machine['cpus']} CPU cores), "
        f"medians of {result['repeats']} interleaved rounds. *generic*: IREE's default "
        f"Vulkan target (what `tdsched run --target vulkan` builds); *{gpu}*: "
        f"`--iree-vulkan-target={gpu}`. Ratios are IREE default's time over tdsched's "
        "(above 1, the schedule is faster). Every build's results were checked on the GPU "
        "against IREE's x86 build on the same seeded inputs, within the recipe's tolerance.",
    ]
    recipes = [c for c in result["cases"] if not c.get("candidate")]
    candidates = [c for c in result["cases"] if c.get("candidate")]
    return "\n".join(lines + _recipe_table(recipes, gpu) + _space_table(candidates))


def _recipe_table(points: list[dict[str, Any]], gpu: str) -> list[str]:
    if not points:
        return []
    lines = [
        "",
        f"| case | tdsched, generic | IREE default, generic | ratio | tdsched, {gpu} "
        f"| IREE default, {gpu} | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios: dict[str, list[float | None]] = {"": [], f"@{gpu}": []}
    for point in points:
        cells = [point["label"]]
        for suffix in ratios:
            ratio = _ratio(point, "tdsched" + suffix, "iree-default" + suffix)
            ratios[suffix].append(ratio)
            cells += [_cell(point, "tdsched" + suffix), _cell(point, "iree-default" + suffix)]
            cells.append(_fmt(ratio))
        lines.append("| " + " | ".join(cells) + " |")
    return [
        *lines,
        "",
        f"Geomean of the ratios: generic {_fmt(_geomean(ratios['']))}, "
        f"{gpu} {_fmt(_geomean(ratios[f'@{gpu}']))}.",
    ]


def _space_table(candidates: list[dict[str, Any]]) -> list[str]:
    """The tile-space candidates, fastest first, each against IREE default (generic)
    timed in the same rounds."""
    if not candidates:
        return []
    lines = [
        "",
        "| tiles (generic target) | tdsched | IREE default | ratio |",
        "|---|---|---|---|",
    ]
    timed = sorted(candidates, key=lambda c: _time(c, "tdsched") or math.inf)
    for point in timed:
        tiles = ", ".join(f"{k}={v}" for k, v in point["params"].items() if k not in "MNK")
        cells = [tiles, _cell(point, "tdsched"), _cell(point, "iree-default")]
        lines.append(
            "| " + " | ".join([*cells, _fmt(_ratio(point, "tdsched", "iree-default"))]) + " |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="compile every case's modules (needs tdsched)")
    p.add_argument("--out", type=Path, required=True, help="folder for the modules")
    p.add_argument("--gpu", default="ampere", help="IREE Vulkan target of the GPU")
    p.add_argument("--quick", action="store_true", help="three default-size cases only")
    p.add_argument(
        "--space",
        type=int,
        metavar="SIZE",
        help="matmul_vulkan's tile space on a GPU at SIZE^3 instead of the recipes",
    )
    m = commands.add_parser("measure", help="check and time on the Vulkan device")
    m.add_argument("--dir", type=Path, required=True, help="the folder prepare wrote")
    m.add_argument("--out", type=Path, required=True, help="results JSON")
    m.add_argument("--repeats", type=int, default=9, help="interleaved rounds (default 9)")
    r = commands.add_parser("markdown", help="render a results JSON as docs tables")
    r.add_argument("results", type=Path)
    add_options(r, "vulkan-gpu")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.out, args.gpu, args.quick, args.space)
    elif args.command == "measure":
        measure(args.dir, args.out, args.repeats)
    else:
        section = markdown(json.loads(args.results.read_text()))
        if args.update_docs:
            update_section(args.update_docs, args.section, section)
        else:
            print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
