"""The machine's measured peak: FMA throughput and memory bandwidth, cached per machine.

"% of peak" says how much of the machine a schedule uses, which a speedup over IREE's
default cannot. The peak is measured here, on the machine at hand, never taken from a
data sheet: the CPU changes from one machine to the next, and a VM's clock is unknown.

* **FMA peak** (GFLOP/s): IREE's default build of the FMA-throughput probe
  (:mod:`tdsched.recipes.workloads.fma_probe`), independent FMA chains in L1, built with
  each of its chain counts (how many fit the vector registers depends on the ISA); the
  fastest counts.
* **Memory bandwidth** (GB/s): IREE's default build of a streaming triad (two inputs
  read, one output written, 3 x 64 MiB, far beyond the caches), bytes moved per second.

Both run on the target's device with the process's thread count, interleaved, and the
fastest of ``ROUNDS`` samples is kept: noise only slows a probe down, so the fastest
sample is the best estimate of what the machine can do (STREAM reports the same). The
result is cached in ``$TDSCHED_CACHE_DIR`` (default ``~/.cache/tdsched``) under a key of
the CPU, target, compile flags, thread count, IREE version and :data:`PROBE_METHOD`;
``tdsched peak --refresh`` measures again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import iree.compiler.version
import numpy as np
from tdsched.recipes.workloads.bandwidth_probe import bandwidth_probe
from tdsched.recipes.workloads.fma_probe import CHAIN_COUNTS, fma_probe
from tdsched.targets.cpu_isa import cpu_description, cpuinfo
from tdsched.targets.runtime import LoadedModule
from tdsched.targets.target import Target
from tdsched.targets.timing import time_interleaved
from tdsched.transform_lib.work import count_work_of_text

from ..base.files import write_atomically
from ..compile.pipeline import compile_default_workload

STREAM_ELEMENTS = 16 * 1024 * 1024
"""f32 elements per triad array (64 MiB each)."""
FMA_ELEMENTS = 262144
"""f32 elements of the FMA probe (1 MiB in and out: each core's share stays in L2);
smaller calls measured lower, the fixed cost of a dispatch weighing more."""
ROUNDS = 9


@dataclass(frozen=True)
class MachinePeak:
    """The measured peak of one target's device at one thread count."""

    target: str
    threads: int | None
    """x86 worker threads; ``None`` on GPU targets."""
    cpu: str
    iree_version: str
    fma_gflops: float
    bandwidth_gbps: float
    measured_at: str
    """UTC time of the measurement, ISO 8601."""
    fma_gflops_by_chains: dict[str, float] = field(default_factory=dict)
    """The FMA probe's GFLOP/s per chain count (``fma_gflops`` is the highest); empty
    in peaks measured before it was recorded."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cache_dir() -> Path:
    """Where tdsched keeps per-machine measurements."""
    configured = os.environ.get("TDSCHED_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tdsched"


PROBE_METHOD = 3
"""How the probes are timed; a new value measures again instead of reading the cache.
2: on 2 or more threads, the calling thread no longer preempts the workers
(:func:`~tdsched.targets.runtime.defer_caller_to_workers`), which raised the 2-thread
streaming bandwidth measured on a 2-core Zen 4 VM from 27.1 to 44.0 GB/s (the FMA peak,
the fastest sample, stayed). 3: the FMA probe is built with each of
:data:`~tdsched.recipes.workloads.fma_probe.CHAIN_COUNTS` and the fastest counts: built
for AVX2 (``--cpu haswell``), its 12 chains spilled AVX2's 16 registers and measured 62
GFLOP/s on a Zen 4 core, 7 chains 101 (AVX-512 builds: unchanged, 115-117)."""


def _key(target: Target, threads: int | None) -> str:
    flags = "" if target.is_gpu else cpuinfo().get("flags", "")
    text = "|".join(
        [
            cpu_description(),
            flags,
            target.name,
            *target.flags,
            str(threads),
            _version(),
            f"method {PROBE_METHOD}",
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _version() -> str:
    return str(iree.compiler.version.VERSION)


def machine_peak(
    target: Target, threads: int, *, refresh: bool = False, exceeded: float | None = None
) -> MachinePeak:
    """The peak of ``target``'s device with ``threads`` workers: from the cache, or
    measured now (a few seconds) and cached.

    ``exceeded``: GFLOP/s just measured on this machine. A cached FMA peak below it was
    measured while the machine was busy: it is measured again, and the higher of the
    two measurements of each figure is kept.

    Precondition: this process's device is set up with ``threads`` workers
    (:func:`~.evaluation.prepare_device`), as timing needs anyway.
    """
    used_threads = None if target.is_gpu else threads
    path = cache_dir() / "machine_peak.json"
    key = _key(target, used_threads)
    cached = _read(path)
    stale = exceeded is not None and key in cached and cached[key]["fma_gflops"] < exceeded
    if not refresh and key in cached and not stale:
        return MachinePeak(**cached[key])
    peak = measure_peak(target, used_threads)
    if stale:
        old = MachinePeak(**cached[key])
        peak = dataclasses.replace(
            peak,
            fma_gflops=max(peak.fma_gflops, old.fma_gflops),
            bandwidth_gbps=max(peak.bandwidth_gbps, old.bandwidth_gbps),
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    cached = _read(path)  # another run may have written meanwhile
    cached[key] = peak.as_dict()
    write_atomically(path, json.dumps(cached, indent=2, sort_keys=True).encode())
    return peak


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def measure_peak(target: Target, threads: int | None) -> MachinePeak:
    """Build the probes (the FMA probe once per chain count) with IREE's default pipeline
    and time them interleaved."""
    fma = {str(chains): fma_probe(FMA_ELEMENTS, chains) for chains in CHAIN_COUNTS}
    fma_flops = {chains: count_work_of_text(w.mlir).ops for chains, w in fma.items()}
    stream = np.empty(STREAM_ELEMENTS, dtype=np.float32)
    triad, triad_inputs = bandwidth_probe([stream, stream], [stream])
    triad_bytes = 3 * stream.nbytes
    ones = [np.ones(FMA_ELEMENTS, dtype=np.float32)]
    probes = [*((name, w, ones) for name, w in fma.items()), ("triad", triad, triad_inputs)]
    with tempfile.TemporaryDirectory(prefix="tdsched-peak-") as tmp:
        variants = {}
        for name, workload, inputs in probes:
            vmfb = compile_default_workload(workload, target, Path(tmp))
            module = LoadedModule(vmfb, target.driver, workload.function)
            variants[name] = module.runner(inputs)
        times = time_interleaved(variants, repeats=ROUNDS)
    by_chains = {
        chains: flops / (times[chains].min * 1e-3) / 1e9 for chains, flops in fma_flops.items()
    }
    return MachinePeak(
        target=target.name,
        threads=threads,
        cpu=cpu_description(),
        iree_version=_version(),
        fma_gflops=max(by_chains.values()),
        bandwidth_gbps=triad_bytes / (times["triad"].min * 1e-3) / 1e9,
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        fma_gflops_by_chains=by_chains,
    )
