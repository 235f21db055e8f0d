"""Which x86 vector ISA a build targets: AVX-512, AVX2, or neither.

The best register tile of a kernel depends on it: AVX-512 has 32 vector registers of 16
floats, AVX2 16 registers of 8, so a tile tuned for one spills or wastes the other. A
shape table entry records the ISA it was tuned for (``isa: avx512``), and a build picks
the entries of its own ISA first (:mod:`tdsched.schedules.dsl.shape_table`).

The ISA is read from what the build targets: ``--cpu host`` (the default) from this
machine's ``/proc/cpuinfo`` flags, an LLVM CPU name from the table below, and
``--cpu-features`` (``+avx512f``, ``-avx512f``, ``+avx2``) on top of either.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

ISAS = ("avx512", "avx2", "sse")
"""The vector ISAs entries are told apart by: AVX-512 (``avx512f``), AVX2 with FMA, and
x86 without either."""
REGISTER_FILES: dict[str, tuple[int, int]] = {"avx512": (32, 16), "avx2": (16, 8), "sse": (16, 4)}
"""Per ISA: its vector registers, and the f32 lanes of each (what bounds a register tile:
its accumulators, plus the operand vectors of one step, must fit)."""

_AVX512_CPUS = frozenset(
    [
        "skylake-avx512",
        "cascadelake",
        "cooperlake",
        "cannonlake",
        "icelake-client",
        "icelake-server",
        "tigerlake",
        "rocketlake",
        "sapphirerapids",
        "emeraldrapids",
        "graniterapids",
        "graniterapids-d",
        "diamondrapids",
        "knl",
        "knm",
        "znver4",
        "znver5",
        "x86-64-v4",
    ]
)
_AVX2_CPUS = frozenset(
    [
        "haswell",
        "broadwell",
        "skylake",
        "alderlake",
        "raptorlake",
        "meteorlake",
        "arrowlake",
        "arrowlake-s",
        "lunarlake",
        "pantherlake",
        "gracemont",
        "sierraforest",
        "grandridge",
        "clearwaterforest",
        "znver1",
        "znver2",
        "znver3",
        "bdver4",
        "x86-64-v3",
    ]
)
_SSE_CPUS = frozenset(
    [
        "x86-64",
        "x86-64-v2",
        "nehalem",
        "westmere",
        "sandybridge",
        "ivybridge",
        "core2",
        "penryn",
        "btver2",
        "silvermont",
        "goldmont",
        "goldmont-plus",
        "tremont",
    ]
)


def vector_isa(cpu: str = "host", cpu_features: str | None = None) -> str | None:
    """The vector ISA of an x86 build for LLVM CPU ``cpu`` with ``cpu_features``
    (``None``: a CPU name this table does not know, with no feature that decides)."""
    isa = host_isa() if cpu == "host" else _named_isa(cpu)
    for feature in (cpu_features or "").split(","):
        feature = feature.strip()
        if feature == "+avx512f":
            isa = "avx512"
        elif (feature == "-avx512f" and isa == "avx512") or (
            feature == "+avx2" and isa in (None, "sse")
        ):
            isa = "avx2"
        elif feature == "-avx2" and isa in ("avx512", "avx2"):
            isa = "sse"
    return isa


def cpuinfo() -> dict[str, str]:
    """/proc/cpuinfo's fields for the first CPU (empty where there is no such file)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_description() -> str:
    """The CPU as /proc/cpuinfo names it (model name, family, model), and its core count."""
    fields = cpuinfo()
    name = fields.get("model name", "unknown CPU")
    family, model = fields.get("cpu family", "?"), fields.get("model", "?")
    return f"{name} (family {family} model {model}), {os.cpu_count()} cores"


@lru_cache(maxsize=1)
def host_isa() -> str | None:
    """This machine's vector ISA, from ``/proc/cpuinfo`` (``None`` where it cannot be
    read: not Linux)."""
    listed = cpuinfo().get("flags")
    if listed is None:
        return None
    flags = listed.split()
    if "avx512f" in flags:
        return "avx512"
    return "avx2" if "avx2" in flags and "fma" in flags else "sse"


def _named_isa(cpu: str) -> str | None:
    if cpu in _AVX512_CPUS:
        return "avx512"
    if cpu in _AVX2_CPUS:
        return "avx2"
    return "sse" if cpu in _SSE_CPUS else None
