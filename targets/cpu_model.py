"""Which CPU an x86 build targets: its vector ISA and its model.

Two AVX-512 CPUs need different kernels: Zen 4 runs a 512-bit FMA as two 256-bit halves,
Zen 5 and Sapphire Rapids at full width, so the register tile and layout that win on one
lose on the other (on a 2-core Zen 5 VM, a 512x512x512 matmul entry tuned on Zen 4 ran at
0.69x IREE data tiling on one thread). A shape-table entry may therefore record the CPU
model it was tuned on (``cpu: znver5``), besides its ISA (:mod:`.cpu_isa`), and a build
prefers the entries of its own model (:mod:`tdsched.schedules.dsl.shape_table`).

The model is LLVM's CPU name, the one ``--cpu`` takes (``znver4``, ``sapphirerapids``,
``haswell``). For ``--cpu host`` it is named from this machine's ``/proc/cpuinfo`` (vendor,
family, model, and for one Intel model its AVX-512 extensions), as LLVM names the host CPU
for ``--iree-llvmcpu-target-cpu=host``; a CPU this table does not know has no model, and
entries' ``cpu`` is then ignored. The name only selects table entries: a host build is
still compiled for what LLVM detects.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .cpu_isa import cpuinfo, vector_isa

_AMD_FAMILIES: dict[int, tuple[tuple[range, str], ...]] = {
    0x17: (
        (range(0x30, 0x50), "znver2"),
        (range(0x60, 0xB0), "znver2"),
        (range(0, 0x100), "znver1"),
    ),
    0x19: (
        (range(0x10, 0x20), "znver4"),
        (range(0x60, 0x80), "znver4"),
        (range(0xA0, 0xB0), "znver4"),
        (range(0, 0x100), "znver3"),
    ),
    0x1A: ((range(0, 0x100), "znver5"),),
}
"""AMD CPU families (Zen 1 to 5) and their models: the first range holding the model names it."""

_INTEL_MODELS: dict[str, tuple[int, ...]] = {
    "haswell": (0x3C, 0x3F, 0x45, 0x46),
    "broadwell": (0x3D, 0x47, 0x4F, 0x56),
    "skylake": (0x4E, 0x5E, 0x8E, 0x9E, 0xA5, 0xA6),
    "skylake-avx512": (0x55,),
    "cannonlake": (0x66,),
    "icelake-client": (0x7D, 0x7E),
    "icelake-server": (0x6A, 0x6C),
    "tigerlake": (0x8C, 0x8D),
    "rocketlake": (0xA7,),
    "alderlake": (0x97, 0x9A),
    "raptorlake": (0xB7, 0xBA, 0xBF),
    "meteorlake": (0xAA, 0xAC),
    "arrowlake": (0xB5, 0xC5),
    "arrowlake-s": (0xC6,),
    "lunarlake": (0xBD,),
    "sapphirerapids": (0x8F,),
    "emeraldrapids": (0xCF,),
    "graniterapids": (0xAD,),
    "graniterapids-d": (0xAE,),
    "sierraforest": (0xAF,),
    "knl": (0x57,),
    "knm": (0x85,),
}
"""Intel family-6 models by LLVM CPU name (model 0x55 is told apart by its flags)."""


@dataclass(frozen=True)
class BuildCpu:
    """The CPU an x86 build targets, as shape-table entries are told apart by."""

    isa: str | None
    """Its vector ISA (:data:`~.cpu_isa.ISAS`); None: unknown."""
    model: str | None
    """Its LLVM CPU name (``znver5``); None: unknown."""


def build_cpu(cpu: str = "host", cpu_features: str | None = None) -> BuildCpu:
    """The CPU of an x86 build for LLVM CPU ``cpu`` (``host``: this machine's) with
    ``cpu_features`` (which change its ISA, not its model)."""
    return BuildCpu(vector_isa(cpu, cpu_features), host_cpu_model() if cpu == "host" else cpu)


@lru_cache(maxsize=1)
def host_cpu_model() -> str | None:
    """This machine's CPU as LLVM names it (``znver5``), from ``/proc/cpuinfo``; None
    where that cannot be read or names a CPU the tables above do not know."""
    return cpu_model_of(cpuinfo())


def cpu_model_of(info: dict[str, str]) -> str | None:
    """The LLVM CPU name of the CPU whose ``/proc/cpuinfo`` fields are ``info``."""
    try:
        family, model = int(info["cpu family"]), int(info["model"])
    except (KeyError, ValueError):
        return None
    vendor = info.get("vendor_id")
    if vendor == "AuthenticAMD":
        for models, name in _AMD_FAMILIES.get(family, ()):
            if model in models:
                return name
        return None
    if vendor != "GenuineIntel" or family != 6:
        return None
    if model == 0x55:
        flags = info.get("flags", "").split()
        if "avx512_bf16" in flags:
            return "cooperlake"
        return "cascadelake" if "avx512_vnni" in flags else "skylake-avx512"
    return next((name for name, models in _INTEL_MODELS.items() if model in models), None)
