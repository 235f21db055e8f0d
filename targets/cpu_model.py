"""Which CPU an x86 build targets: its vector ISA and its model.

Two AVX-512 CPUs need different kernels: Zen 4 runs a 512-bit FMA as two 256-bit halves,
Zen 5 and Sapphire Rapids at full width, so the register tile and layout that win on one
lose on the other (on a 2-core Zen 5 VM, a 512x512x512 matmul entry tuned on Zen 4 ran at
0.69x IREE data tiling on one thread). A shape-table entry may therefore record the CPU
model it was tuned on (``cpu: znver5``), besides its ISA (:mod:`.cpu_isa`), and a build
prefers the entries of its own model (:mod:`tdsched.schedules.shape_table`).

The model is LLVM's CPU name, the one ``--cpu`` takes (``znver4``, ``sapphirerapids``,
``haswell``). For ``--cpu host`` it is what LLVM (inside iree-compile) detects on this
machine, read from the target IREE resolves ``host`` to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .cpu_isa import vector_isa

_PROBE = """
func.func @probe(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.addf %a, %b : tensor<4xf32>
  return %c : tensor<4xf32>
}
"""
"""A module with one dispatch: compiled to its executable sources, its target names the
CPU ``host`` resolves to."""

_CPU_ATTRIBUTE = re.compile(rb'cpu = "([^"]+)"')


@dataclass(frozen=True)
class BuildCpu:
    """The CPU an x86 build targets, as shape-table entries are told apart by."""

    isa: str | None
    """Its vector ISA (:data:`~.cpu_isa.ISAS`); None: unknown."""
    cpu: str | None = "host"
    """The LLVM CPU it is built for, as asked: a name, ``host``, or None (unknown)."""

    @property
    def model(self) -> str | None:
        """Its LLVM CPU name (``znver5``; None: unknown). For ``host`` it takes a small
        compile, the first time in a process: ask only where an answer is needed."""
        return host_cpu_model() if self.cpu == "host" else self.cpu


def build_cpu(cpu: str = "host", cpu_features: str | None = None) -> BuildCpu:
    """The CPU of an x86 build for LLVM CPU ``cpu`` (``host``: this machine's) with
    ``cpu_features`` (which change its ISA, not its model)."""
    return BuildCpu(vector_isa(cpu, cpu_features), cpu)


@lru_cache(maxsize=1)
def host_cpu_model() -> str | None:
    """The LLVM CPU name of this machine, as iree-compile's ``--iree-llvmcpu-target-cpu=host``
    resolves it (one small compile, about 0.2 s, once per process); None where that
    fails or names no model (``generic``)."""
    from iree.compiler.tools import CompilerToolError, compile_str

    try:
        sources = compile_str(
            _PROBE,
            target_backends=["llvm-cpu"],
            extra_args=["--iree-llvmcpu-target-cpu=host", "--compile-to=executable-sources"],
        )
    except CompilerToolError:
        return None
    found = _CPU_ATTRIBUTE.search(sources if isinstance(sources, bytes) else b"")
    if found is None or found.group(1) == b"generic":
        return None
    return found.group(1).decode()
