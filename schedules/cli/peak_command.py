"""``tdsched peak``: this machine's measured FMA peak and memory bandwidth (cached)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tdsched.targets.cpu_isa import REGISTER_FILES
from tdsched.targets.cpu_model import build_cpu
from tdsched.targets.target import TARGET_NAMES, make_target

from ..measure.evaluation import prepare_device
from ..measure.machine_peak import cache_dir, machine_peak
from .args import add_cpu_options, add_threads_option


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "peak",
        help="measure (or show the cached) FMA peak and memory bandwidth of this machine",
        description="Measure the FMA throughput (GFLOP/s) and memory bandwidth (GB/s) of a "
        "target's device with IREE-built probes: independent FMA chains in L1, and a "
        "streaming triad over 3 x 64 MiB. 'tdsched run' reports GFLOP/s as a share of this "
        "peak. Results are cached per CPU, target, thread count and IREE version in "
        "$TDSCHED_CACHE_DIR (default ~/.cache/tdsched); --refresh measures again, e.g. "
        "after the machine was busy during the first measurement.",
    )
    p.add_argument(
        "--target", choices=TARGET_NAMES, default="x86", help="device to measure (default x86)"
    )
    add_threads_option(p)
    add_cpu_options(p)
    p.add_argument("--refresh", action="store_true", help="measure even when cached")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def vector_line(args: argparse.Namespace) -> str | None:
    """``avx512 (cascadelake): 32 registers of 16 f32``: the vector ISA of an x86 build
    for ``--cpu`` / ``--cpu-features`` and its register file (None: not x86 SIMD)."""
    cpu = build_cpu(args.cpu, args.cpu_features)
    if cpu.isa is None:
        return None
    registers, lanes = REGISTER_FILES[cpu.isa]
    model = f" ({cpu.model})" if cpu.model else ""
    return f"{cpu.isa}{model}: {registers} registers of {lanes} f32"


def run(args: argparse.Namespace) -> int:
    target = make_target(args.target, cpu=args.cpu, cpu_features=args.cpu_features)
    prepare_device(target, args.threads)
    peak = machine_peak(target, args.threads, refresh=args.refresh)
    if args.json:
        print(json.dumps(peak.as_dict(), indent=2))
        return 0
    threads = "" if peak.threads is None else f", {peak.threads} thread" + "s" * (peak.threads > 1)
    print(f"device     {peak.target} on {peak.cpu}{threads}")
    vector = vector_line(args) if args.target == "x86" else None
    if vector is not None:
        print(f"vector     {vector}")
    print(f"FMA peak   {peak.fma_gflops:.1f} GFLOP/s (f32)")
    if peak.fma_gflops_by_chains:
        measured = sorted(peak.fma_gflops_by_chains.items(), key=lambda item: int(item[0]))
        chains = ", ".join(f"{n}: {g:.1f}" for n, g in measured)  # by count, as measured
        print(f"           by FMA chains in the probe, GFLOP/s: {chains}")
    print(f"bandwidth  {peak.bandwidth_gbps:.1f} GB/s (streaming triad)")
    print(f"measured   {peak.measured_at} with IREE {peak.iree_version}")
    print(f"cache      {cache_dir() / 'machine_peak.json'}")
    return 0
