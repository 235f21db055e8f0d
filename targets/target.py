"""What tdsched knows about each target: IREE backend, flags and runtime driver."""

from __future__ import annotations

from dataclasses import dataclass

from tdsched.transform_lib.lowering_config import Codegen

from .cpu_model import BuildCpu, build_cpu

TARGET_NAMES: tuple[str, ...] = ("x86", "vulkan")

DEFAULT_THREADS = 2
"""x86 runtime worker threads when none are asked for: the one default of ``run``,
``sweep``, ``regress`` (and its pytest plugin) and ``peak``, so a speedup found by a sweep
is gated and re-run on the same configuration. A baseline file or a command line may set
another count (tdsched's own CI subset uses 1: see docs/commands/regress.md)."""


def cpu_threads(target: str, threads: int | None) -> int | None:
    """The CPU threads a run with ``threads`` has on ``target``: None on a GPU target, which
    runs no worker threads."""
    return None if make_target(target).is_gpu else threads


@dataclass(frozen=True)
class BuildGpu:
    """The GPU a Vulkan build targets, as shape-table entries and ``when`` conditions
    tell builds apart."""

    gpu: str | None
    """IREE's Vulkan target it is built for (``--gpu``: ``ampere``, ``rdna3``, ...); None:
    IREE's generic Vulkan target, which runs on any Vulkan 1.3 device."""


BuildMachine = BuildCpu | BuildGpu
"""What a build targets: an x86 CPU (its vector ISA and model) or a Vulkan GPU."""


def build_machine(
    target: str, cpu: str = "host", cpu_features: str | None = None, gpu: str | None = None
) -> BuildMachine:
    """What a build for ``target`` with these options targets: the x86 CPU
    (:func:`.cpu_model.build_cpu`), or the Vulkan GPU ``gpu`` (None: generic). Options
    that do not belong to ``target`` are refused as :func:`make_target` refuses them."""
    if make_target(target, cpu=cpu, cpu_features=cpu_features, gpu=gpu).is_gpu:
        return BuildGpu(gpu)
    return build_cpu(cpu, cpu_features)


def run_conditions(target: str, threads: int | None) -> str:
    """How a table names where something ran: ``x86, 2 threads``, or ``vulkan`` (a GPU
    target runs no worker threads, so ``threads`` is ignored there)."""
    cpu = cpu_threads(target, threads)
    if cpu is None:
        return target
    return f"{target}, {cpu} thread" + "s" * (cpu != 1)


@dataclass(frozen=True)
class Target:
    """A compilation target.

    ``backend`` is IREE's HAL target backend, ``driver`` the runtime driver that runs its
    modules, ``flags`` the target-specific iree-compile flags (used identically for the
    scheduled build and IREE's default build, so the two are comparable).
    """

    name: str
    backend: str
    driver: str
    flags: tuple[str, ...]

    @property
    def is_gpu(self) -> bool:
        return self.backend != "llvm-cpu"

    @property
    def codegen(self) -> Codegen:
        """IREE's code generator that builds this target's dispatches (what a kernel
        schedule's ``config`` is written for)."""
        return Codegen(self.backend)

    @property
    def needs_lowered_packs(self) -> bool:
        """Whether ``tensor.pack``/``unpack`` dispatches must be lowered (to pad, reshape and
        transpose) before this target's codegen compiles them: true on Vulkan (SPIR-V)."""
        return self.backend == "vulkan-spirv"

    @property
    def profiling_mode(self) -> str:
        """The IREE HAL profiling data family (``--device_profiling_mode``) that times each
        dispatch on this target's driver. local-task (and local-sync, its one-thread form)
        records when the CPU ran each dispatch (``host-execution``; ``dispatch-events`` is
        UNIMPLEMENTED there); Vulkan
        records device timestamps (``dispatch-events``; ``host-execution`` is UNIMPLEMENTED
        there). Both checked with IREE 3.13, Vulkan on lavapipe."""
        return "host-execution" if self.driver == "local-task" else "dispatch-events"

    @property
    def open_device_keeps_cpu_busy(self) -> bool:
        """Whether a process that has opened this target's device keeps CPU cores busy even
        while idle: a Vulkan device may be Mesa's lavapipe, whose threads spin (measured:
        200% CPU). Such a process starves compiles running beside it."""
        return self.driver == "vulkan"


def make_target(
    name: str, *, cpu: str = "host", cpu_features: str | None = None, gpu: str | None = None
) -> Target:
    """The target called ``name``.

    x86: ``cpu`` is an LLVM CPU name (``host`` = this machine), ``cpu_features`` an LLVM
    feature string such as ``+avx512f``. vulkan: any Vulkan 1.3 device, including Mesa's
    lavapipe on CPU-only machines, unless ``gpu`` names the GPU to build for: one of IREE's
    known Vulkan targets (``--iree-vulkan-target``: an architecture such as ``ampere``,
    ``rdna3`` or ``valhall``, or a product such as ``rtx4090``), whose features (subgroup
    size, cooperative matrices, ...) IREE's codegen may then use; the module then runs on
    that GPU (or a newer one of its vendor) only.
    """
    if name == "x86":
        if gpu is not None:
            raise ValueError(
                f"--gpu {gpu} names the Vulkan GPU to build for, but this build targets x86: "
                "pass --target vulkan, or drop --gpu (x86 builds take --cpu / --cpu-features)"
            )
        flags = [f"--iree-llvmcpu-target-cpu={cpu}"]
        if cpu_features:
            flags.append(f"--iree-llvmcpu-target-cpu-features={cpu_features}")
        return Target("x86", "llvm-cpu", "local-task", tuple(flags))
    if name == "vulkan":
        if cpu != "host" or cpu_features:
            given = cpu if cpu != "host" else cpu_features
            raise ValueError(
                f"--cpu / --cpu-features ({given}) choose the x86 CPU to build for, but this "
                "build targets vulkan: pass --target x86, or drop them (Vulkan builds take "
                "--gpu)"
            )
        gpu_flags = (f"--iree-vulkan-target={gpu}",) if gpu else ()
        return Target("vulkan", "vulkan-spirv", "vulkan", gpu_flags)
    raise ValueError(f"unknown target {name!r}; available: {', '.join(TARGET_NAMES)}")
