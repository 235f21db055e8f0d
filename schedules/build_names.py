"""What a recipe is built for, as ``when`` conditions and ``space`` constraints read it.

Besides a recipe's parameters, a condition (``when:``) or a constraint may read two
names that describe the build rather than the workload:

* :data:`TARGET`: the target's name, ``'x86'`` or ``'vulkan'``;
* :data:`ISA`: an x86 build's vector ISA, ``'avx512'``, ``'avx2'`` or ``'sse'``
  (:data:`~tdsched.targets.cpu_isa.ISAS`), and ``'none'`` on a GPU target or where the
  ISA of the CPU built for is not known.

So one recipe can hold a register tile per ISA (``when: "ISA == 'avx2'"``) and one
space can sweep the tiles that fit each ISA's registers (a constraint
``ISA == 'avx512' or M0 * N0 <= 96``). Both names are reserved: no parameter may take
them.
"""

from __future__ import annotations

from tdsched.targets.cpu_model import BuildCpu

TARGET = "TARGET"
"""The name the target is read by (``TARGET == 'x86'``)."""
ISA = "ISA"
"""The name an x86 build's vector ISA is read by (``ISA == 'avx2'``)."""
BUILD_NAMES = frozenset({TARGET, ISA})
NO_ISA = "none"
"""What :data:`ISA` reads on a GPU target, or where the CPU's ISA is not known."""


def build_values(target: str, cpu: BuildCpu | None) -> dict[str, str]:
    """The values of :data:`BUILD_NAMES` for a build on ``target`` for the x86 CPU ``cpu``
    (None: a GPU target)."""
    return {TARGET: target, ISA: (cpu.isa if cpu else None) or NO_ISA}
