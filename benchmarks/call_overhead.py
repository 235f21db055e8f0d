"""Benchmark: what one call of a compiled module costs on each CPU runtime driver.

Why ``tdsched run --threads 1`` runs on IREE's ``local-sync`` driver (docs/commands/run.md,
"Threads and the CPU runtime driver"): a call on ``local-task`` wakes a worker thread and
waits for it, a cost paid before any work, which a tiny matmul (8x8) shows alone and a
128^3 matmul shows beside numpy's time for the same product.

    .venv/bin/python benchmarks/call_overhead.py [--sizes 8 128] [--calls 500] [--rounds 9]

Each configuration runs in a process of its own (IREE reads the thread count when the
device is created): IREE's default build of the ``matmul`` generator's workload, called
back to back ``--calls`` times per round on inputs already on the device; the median
over ``--rounds`` of microseconds per call. numpy's ``a @ b`` is timed the same way with
BLAS limited to the configuration's thread count. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

CONFIGS = [("local-task", 1), ("local-sync", 1), ("local-task", 2)]
"""(driver, threads): 1 worker thread, the calling thread alone, 2 worker threads."""


def per_call_us(call: Callable[[], object], calls: int, rounds: int) -> float:
    for _ in range(calls // 10 + 1):
        call()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def measure(driver: str, threads: int, size: int, calls: int, rounds: int) -> dict[str, object]:
    """In this process: IREE's call and numpy's product at ``size``^3, in microseconds."""
    import iree.compiler as compiler
    import iree.runtime as runtime
    import numpy as np
    from tdsched.recipes.workloads.generators import matmul
    from tdsched.targets.target import make_target

    runtime.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    target = make_target("x86")
    workload = matmul(size, size, size)
    vmfb = compiler.compile_str(
        workload.mlir, target_backends=[target.backend], extra_args=list(target.flags)
    )
    config = runtime.Config(driver)
    context = runtime.SystemContext(config=config)
    module = runtime.VmModule.copy_buffer(context.instance, vmfb)
    context.add_vm_module(module)
    function = context.modules[module.name][workload.function]
    a, b = (np.random.default_rng(0).random((size, size), dtype=np.float32) for _ in range(2))
    on_device = [runtime.asdevicearray(config.device, x) for x in (a, b)]
    return {
        "driver": driver,
        "threads": threads,
        "size": size,
        "iree_us": round(per_call_us(lambda: function(*on_device), calls, rounds), 2),
        "numpy_us": round(per_call_us(lambda: a @ b, calls, rounds), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 128])
    parser.add_argument("--calls", type=int, default=500, help="calls per round")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--child", nargs=3, metavar=("DRIVER", "THREADS", "SIZE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        driver, threads, size = args.child[0], int(args.child[1]), int(args.child[2])
        print(json.dumps(measure(driver, threads, size, args.calls, args.rounds)))
        return 0
    points = []
    for driver, threads in CONFIGS:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
        for size in args.sizes:
            command = [sys.executable, __file__, "--child", driver, str(threads), str(size)]
            command += ["--calls", str(args.calls), "--rounds", str(args.rounds)]
            proc = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
            points.append(json.loads(proc.stdout))
    print(
        json.dumps(
            {
                "benchmark": "call_overhead",
                "command": "python " + " ".join(sys.argv),
                "points": points,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
