"""Running compiled modules with iree.runtime.

One runtime device per driver and process: IREE reads the task-topology flags (thread
count) when a device is created, so :func:`configure_threads` must come first.

CPU modules on one thread run on IREE's ``local-sync`` driver, not ``local-task``
(:func:`cpu_driver`): the calling thread executes every dispatch inline, as numpy or any
single-threaded library does, instead of waking a worker thread and waiting for it.
Measured on a 2-core Zen 4 VM with IREE 3.13 (``benchmarks/call_overhead.py``): an 8x8
matmul call costs 5.4 us on local-sync and 24-75 us on local-task with one worker; a 128^3
matmul 43 us against 94 us.
Every variant of a run (schedule, IREE default, peers) runs on the same driver.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import iree.runtime as ireert
import numpy as np

from .timing import Placements

_CONFIGS: dict[str, ireert.Config] = {}
_THREADS: list[int] = []


class DeviceError(RuntimeError):
    """A runtime device or module could not be set up (no device, bad function, ...)."""


def configure_threads(threads: int) -> None:
    """Use ``threads`` CPU threads in this process: ``threads`` local-task workers, which
    the calling thread waits for without preempting them (:func:`defer_caller_to_workers`),
    or the calling thread alone on local-sync for one (:func:`cpu_driver`)."""
    if _THREADS and _THREADS[0] != threads:
        raise DeviceError(f"threads already set to {_THREADS[0]} in this process")
    if threads < 1:
        raise DeviceError(f"threads must be >= 1, got {threads}")
    if not _THREADS:
        ireert.flags.parse_flags(*thread_flags(threads))
        if cpu_driver("local-task", threads) == "local-task":
            defer_caller_to_workers()
        _THREADS.append(threads)


def cpu_driver(driver: str, threads: int | None) -> str:
    """The runtime driver that runs a module of a target whose driver is ``driver`` on
    ``threads`` CPU threads: ``local-sync`` (inline on the calling thread) for one thread,
    ``driver`` otherwise (a GPU driver, or ``local-task``'s worker threads)."""
    return "local-sync" if driver == "local-task" and threads == 1 else driver


def thread_flags(threads: int) -> tuple[str, ...]:
    """The IREE runtime flags that give CPU (local-task) execution ``threads`` workers, in
    this process (:func:`configure_threads`) or on an IREE tool's command line."""
    return (f"--task_topology_max_group_count={threads}",)


def defer_caller_to_workers() -> bool:
    """Make the calling thread (and the threads and processes it starts after) wait for
    ``local-task``'s workers without taking a core from them: Linux's ``SCHED_BATCH``
    policy, under which a thread that wakes up does not preempt the thread running on
    its core.

    Why: when a call's last dispatch ends, the worker that finishes it wakes the calling
    thread, which then spins (``pause``) until that worker has also marked its wake-up
    done. With as many workers as cores, the woken caller preempts that very worker and
    spins until the scheduler gives the core back. Measured on a 2-core Zen 4 VM, IREE
    3.13, IREE's default build of a 128x3072x768 matmul on 2 workers
    (``benchmarks/caller_policy.py``, median of 9 rounds): the calling thread took 18% of
    a core and a call 6.1 ms (4.8-7.8); with this policy 3% and 4.8 ms (4.1-7.3). The
    policy only drops the preemption on wake-up; the caller does no work while it waits.

    Returns whether the policy took (not where the OS has no ``SCHED_BATCH``). The
    policy stays on the calling thread; call it in processes that time CPU modules.
    """
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return False
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError:
        return False
    return True


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_KEPT_TRIM_THRESHOLD, _KEPT_MMAP_MAX = 2**31 - 1, 0


def keep_freed_memory() -> bool:
    """Make glibc keep freed memory in the process instead of returning it to the OS.

    Each call of a compiled function allocates its results; glibc serves allocations
    above 32 MB with fresh ``mmap`` pages and unmaps them when freed, so every call pays
    one page fault per 4 KiB of result (measured here: 73 ms instead of 17 ms for
    192 MB of traffic). Timing would measure the kernel's page faults, not its memory
    traffic, and equally for every variant. Returns whether the setting took (not on a
    non-glibc platform).
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, _KEPT_MMAP_MAX)) and bool(
        mallopt(_M_TRIM_THRESHOLD, _KEPT_TRIM_THRESHOLD)
    )


def keep_freed_memory_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with :func:`keep_freed_memory`'s settings for a child process (an IREE tool):
    glibc reads them from ``GLIBC_TUNABLES`` when the process starts. Measured with
    iree-benchmark-module on a 2 x 4096 x 4096 f32 elementwise module: 45.6 ms per call
    without them, 9.7 ms with them."""
    ours = (
        f"glibc.malloc.mmap_max={_KEPT_MMAP_MAX}:glibc.malloc.trim_threshold={_KEPT_TRIM_THRESHOLD}"
    )
    given = env.get("GLIBC_TUNABLES")
    return {**env, "GLIBC_TUNABLES": f"{given}:{ours}" if given else ours}


def _driver(target_driver: str) -> str:
    """The driver this process runs ``target_driver``'s modules on (its thread count set)."""
    return cpu_driver(target_driver, _THREADS[0] if _THREADS else None)


def _config(target_driver: str) -> ireert.Config:
    driver = _driver(target_driver)
    if driver not in _CONFIGS:
        try:
            # Not iree.runtime's own device cache, which would hold the device for the
            # process's life (see release_device).
            _CONFIGS[driver] = ireert.Config(device=ireert.get_device(driver, cache=False))
        except (ValueError, RuntimeError) as exc:
            hint = (
                " (on a machine without a GPU install Mesa's lavapipe: "
                "apt-get install mesa-vulkan-drivers)"
                if driver == "vulkan"
                else ""
            )
            raise DeviceError(f"cannot create IREE runtime device '{driver}': {exc}{hint}") from exc
    return _CONFIGS[driver]


def release_device(driver: str) -> None:
    """Let this process's device for ``driver`` close once no loaded module holds it: the
    next module loaded on ``driver`` opens a new one. A process that runs Vulkan modules
    now and then calls it between uses: an open lavapipe device keeps its threads spinning
    while idle (measured with IREE 3.13 on a 2-core Xeon VM: 3.7 CPU-seconds in 3 idle
    seconds; none once the device is released), which starves compiles beside it."""
    _CONFIGS.pop(_driver(driver), None)


def driver_available(driver: str) -> bool:
    """Whether a device for ``driver`` can be created here."""
    try:
        _config(driver)
    except DeviceError:
        return False
    return True


TIMING_PLACEMENTS = 4
"""Placements in memory a module is timed in on the CPU (:meth:`LoadedModule.timing_runner`).
Measured on a 2-core Zen 5 VM, IREE 3.13 (a 3x3 convolution, 14x14, 256 -> 256, 1
thread): six loads of one module in one process ran at 1.04-1.08 ms per call or at
1.35-1.52 ms, about one load in three in the slow mode, each load keeping its mode; the
filter passed as an input did the same, by where its device copy landed. IREE's default
build of it: 1.50 or 2.17 ms. Timed in one load, a run reported whichever mode that load
had; timed over four, each sample the mean over them, a run comes nearer what a load
gives on average (over 8 processes the ratio of the two spread over 1.11-2.04x with one
load, 1.24-1.77x with four, ``benchmarks/placements.py``; the rest varies with the
process)."""
PLACEMENT_BYTES = 256 * 2**20
"""At most this many bytes of extra module copies per timed module: a large model is
timed in fewer placements (down to one, its own load)."""


def timing_placements(driver: str, module_bytes: int = 0) -> int:
    """How many placements :meth:`LoadedModule.timing_runner` times a module of
    ``module_bytes`` in on ``driver``: :data:`TIMING_PLACEMENTS` on the CPU drivers
    (fewer where the copies would pass :data:`PLACEMENT_BYTES`); one on a GPU, whose
    memory is the driver's to place (and where each load compiles its pipelines again)."""
    if driver not in ("local-task", "local-sync"):
        return 1
    fits = PLACEMENT_BYTES // max(module_bytes, 1)
    return max(1, min(TIMING_PLACEMENTS, 1 + fits))


class LoadedModule:
    """A compiled module loaded on a driver's device, ready to invoke ``function``."""

    def __init__(self, vmfb: Path, driver: str, function: str) -> None:
        config = _config(driver)
        self._source = (vmfb, driver, function)
        self._device = config.device
        self._context = ireert.SystemContext(config=config)
        vm_module = ireert.VmModule.copy_buffer(self._context.instance, vmfb.read_bytes())
        self._context.add_vm_module(vm_module)
        try:
            self._function = self._context.modules[vm_module.name][function]
        except KeyError as exc:
            raise DeviceError(f"{vmfb}: no function @{function}") from exc

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run once on host arrays and return host arrays."""
        result = self._function(*inputs)
        results = result if isinstance(result, tuple | list) else [result]
        return [_to_host(self._device, r) for r in results]

    def runner(self, inputs: Sequence[np.ndarray]) -> Callable[[], None]:
        """A callable that runs once on inputs already on the device and waits for it.

        The modules tdsched compiles export synchronous functions (IREE's default ABI):
        a call returns once its results are computed, so nothing is copied back, which
        would add a host copy of every result to the time.
        """
        device_inputs = [ireert.asdevicearray(self._device, x) for x in inputs]

        def run() -> None:
            self._function(*device_inputs)

        return run

    def timing_runner(self, inputs: Sequence[np.ndarray]) -> Placements:
        """:meth:`runner` in :func:`timing_placements` placements: this load and fresh
        loads of the same module, each with its own device copy of ``inputs``, which a
        :class:`~.timing.RoundTimer` runs in turn within each sample."""
        vmfb, driver, _ = self._source
        count = timing_placements(driver, vmfb.stat().st_size)
        loads = [self] + [LoadedModule(*self._source) for _ in range(count - 1)]
        return Placements(tuple(load.runner(inputs) for load in loads))


def _to_host(device: ireert.HalDevice, array: ireert.DeviceArray) -> np.ndarray:
    """Copy a device array to a new host array through a mapped staging buffer.

    ``DeviceArray.to_host`` imports a numpy allocation as the copy target, which Vulkan
    drivers (lavapipe among them) reject unless it is page-aligned; a staging buffer
    allocated by the device works on every driver. Mappable arrays are read directly.
    """
    if array.is_host_accessible or array._is_mappable():
        return np.array(array.to_host())
    view = array._buffer_view
    source = view.get_buffer()
    staging = device.allocator.allocate_buffer(
        memory_type=int(ireert.MemoryType.HOST_LOCAL | ireert.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(ireert.BufferUsage.TRANSFER_TARGET | ireert.BufferUsage.MAPPING_SCOPED),
        allocation_size=source.byte_length(),
    )
    semaphore = device.create_semaphore(0)
    device.queue_copy(
        source,
        staging,
        wait_semaphores=ireert.HalFence.create_at(semaphore, 0),
        signal_semaphores=ireert.HalFence.create_at(semaphore, 1),
    )
    ireert.HalFence.create_at(semaphore, 1).wait()
    mapped = staging.map()
    return np.array(mapped.asarray(view.shape, array._get_raw_dtype()))
