"""What a recipe is built for, as ``when`` conditions and ``space`` constraints read it.

Besides a recipe's parameters, a condition (``when:``) or a constraint may read three
names that describe the build rather than the workload:

* :data:`TARGET`: the target's name, ``'x86'`` or ``'vulkan'``;
* :data:`ISA`: an x86 build's vector ISA, ``'avx512'``, ``'avx2'`` or ``'sse'``
  (:data:`~tdsched.targets.cpu_isa.ISAS`), and ``'none'`` on a GPU target or where the
  ISA of the CPU built for is not known;
* :data:`GPU`: a Vulkan build's GPU as ``--gpu`` names it (``'ampere'``, ``'rdna3'``),
  ``'generic'`` for IREE's generic Vulkan target (no ``--gpu``), and ``'none'`` on x86.

So one recipe can hold a register tile per ISA (``when: "ISA == 'avx2'"``) and one
space can sweep the tiles that fit each ISA's registers (a constraint
``ISA == 'avx512' or M0 * N0 <= 96``), or a workgroup size per GPU (``when: "GPU ==
'ampere'"``). The three names are reserved: no parameter may take them.
"""

from __future__ import annotations

from tdsched.targets.cpu_model import BuildCpu
from tdsched.targets.target import BuildGpu, BuildMachine, make_target

TARGET = "TARGET"
"""The name the target is read by (``TARGET == 'x86'``)."""
ISA = "ISA"
"""The name an x86 build's vector ISA is read by (``ISA == 'avx2'``)."""
GPU = "GPU"
"""The name a Vulkan build's GPU is read by (``GPU == 'ampere'``)."""
BUILD_NAMES = frozenset({TARGET, ISA, GPU})
NO_ISA = "none"
"""What :data:`ISA` reads on a GPU target, or where the CPU's ISA is not known; and what
:data:`GPU` reads on x86."""
GENERIC_GPU = "generic"
"""What :data:`GPU` reads on a Vulkan build for IREE's generic target (no ``--gpu``)."""


def gpu_name(machine: BuildGpu) -> str:
    """The name :data:`GPU` (and a shape-table entry's ``gpu``) gives the GPU ``machine``
    is built for: ``--gpu``'s, or :data:`GENERIC_GPU`."""
    return machine.gpu or GENERIC_GPU


def build_values(target: str, machine: BuildMachine | None) -> dict[str, str]:
    """The values of :data:`BUILD_NAMES` for a build on ``target`` for ``machine`` (None:
    not known, as for a recipe checked without a build)."""
    isa = machine.isa if isinstance(machine, BuildCpu) else None
    gpu = NO_ISA
    if make_target(target).is_gpu:
        gpu = gpu_name(machine) if isinstance(machine, BuildGpu) else GENERIC_GPU
    return {TARGET: target, ISA: isa or NO_ISA, GPU: gpu}
