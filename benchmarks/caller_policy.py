"""Benchmark: how the calling thread's scheduling policy changes a local-task call.

Why tdsched's timing processes run the calling thread under ``SCHED_BATCH`` when x86
modules run on 2 or more worker threads (``tdsched.targets.runtime.defer_caller_to_workers``,
docs/commands/run.md "Threads and the CPU runtime driver"): when a call ends, the
worker that finishes it wakes the calling thread, which spins until that worker has
marked the wake-up done. With as many workers as cores, the woken caller can preempt
that very worker, and spin until the scheduler hands the core back.

    .venv/bin/python benchmarks/caller_policy.py [--shapes 128x3072x768 1024x1024x1024]
        [--threads 2] [--rounds 9] [--sample-s 0.3]

IREE's default build of the ``matmul`` generator's workload at each MxNxK, on
``--threads`` local-task workers, in a fresh process per sample whose calling thread is
set to ``SCHED_OTHER`` (Linux's default) or ``SCHED_BATCH`` before the device is created,
as tdsched sets it up; numpy's ``a @ b`` with as many BLAS threads, also a process per
sample, under either policy (tdsched times numpy on the same calling thread). Each round
runs every variant once, the order alternating between rounds; a sample is ms per call
over ``--sample-s`` of back-to-back calls after a warm-up, with the calling thread's CPU
time over that wall time (what it spends spinning). Prints one JSON
object: per shape and variant, the median, min and max over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

VARIANTS = ["iree_other", "iree_batch", "numpy", "numpy_batch"]
POLICIES = {
    "iree_other": "SCHED_OTHER",
    "iree_batch": "SCHED_BATCH",
    "numpy": "SCHED_OTHER",
    "numpy_batch": "SCHED_BATCH",
}


def sample(call: Callable[[], object], seconds: float) -> dict[str, float]:
    """ms per call of ``call`` over ``seconds`` of back-to-back calls, after a warm-up,
    and the calling thread's CPU time over that wall time."""
    warm = time.perf_counter()
    while time.perf_counter() - warm < seconds / 4:
        call()
    calls, wall, cpu = 0, time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall < seconds:
        call()
        calls += 1
    elapsed = time.perf_counter() - wall
    return {"ms": elapsed / calls * 1e3, "caller_cpu_share": (time.thread_time() - cpu) / elapsed}


def child(variant: str, vmfb: str, function: str, shape: str, threads: int, seconds: float) -> None:
    """One sample, printed as JSON: this process runs ``variant`` only."""
    import numpy as np

    m, n, k = (int(v) for v in shape.split("x"))
    rng = np.random.default_rng(0)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    os.sched_setscheduler(0, getattr(os, POLICIES[variant]), os.sched_param(0))
    if variant.startswith("numpy"):
        print(json.dumps(sample(lambda: a @ b, seconds)))
        return
    import iree.runtime as runtime

    runtime.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    config = runtime.Config("local-task")
    context = runtime.SystemContext(config=config)
    module = runtime.VmModule.copy_buffer(context.instance, Path(vmfb).read_bytes())
    context.add_vm_module(module)
    call = context.modules[module.name][function]
    on_device = [runtime.asdevicearray(config.device, x) for x in (a, b)]
    print(json.dumps(sample(lambda: call(*on_device), seconds)))


def build(shape: str, folder: Path) -> tuple[Path, str]:
    """IREE's default x86 build of the matmul at ``shape``: (vmfb, function)."""
    import iree.compiler as compiler
    from tdsched.recipes.workloads.generators import matmul
    from tdsched.targets.target import make_target

    m, n, k = (int(v) for v in shape.split("x"))
    target = make_target("x86")
    workload = matmul(m, n, k)
    vmfb = folder / f"matmul_{shape}.vmfb"
    vmfb.write_bytes(
        compiler.compile_str(
            workload.mlir, target_backends=[target.backend], extra_args=list(target.flags)
        )
    )
    return vmfb, workload.function


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["128x3072x768", "1024x1024x1024"])
    parser.add_argument("--threads", type=int, default=2, help="local-task workers")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sample-s", type=float, default=0.3, help="seconds per sample")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, vmfb, function, shape = args.child
        child(variant, vmfb, function, shape, args.threads, args.sample_s)
        return 0
    env = {
        **os.environ,
        "OPENBLAS_NUM_THREADS": str(args.threads),
        "OMP_NUM_THREADS": str(args.threads),
    }
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            vmfb, function = build(shape, Path(tmp))
            samples: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
            for index in range(args.rounds):
                for variant in VARIANTS if index % 2 == 0 else reversed(VARIANTS):
                    command = [sys.executable, __file__, "--child", variant, str(vmfb), function]
                    command += [shape, "--threads", str(args.threads)]
                    command += ["--sample-s", str(args.sample_s)]
                    proc = subprocess.run(
                        command, capture_output=True, text=True, env=env, check=True
                    )
                    samples[variant].append(json.loads(proc.stdout))
            points.append({"shape": shape, **{v: summary(s) for v, s in samples.items()}})
    print(
        json.dumps(
            {
                "benchmark": "caller_policy",
                "command": "python " + " ".join(sys.argv),
                "threads": args.threads,
                "cores": os.cpu_count(),
                "points": points,
            },
            indent=2,
        )
    )
    return 0


def summary(samples: list[dict[str, float]]) -> dict[str, float]:
    """Median, min and max ms per call over the rounds, and the median caller CPU share."""
    ms = [s["ms"] for s in samples]
    share = statistics.median(s["caller_cpu_share"] for s in samples)
    return {
        "median_ms": round(statistics.median(ms), 4),
        "min_ms": round(min(ms), 4),
        "max_ms": round(max(ms), 4),
        "caller_cpu_share": round(share, 3),
    }


if __name__ == "__main__":
    sys.exit(main())
