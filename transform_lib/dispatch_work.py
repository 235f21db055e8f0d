"""What each dispatch of a build does: its arithmetic work, its compulsory memory traffic
and the kernel schedule attached to it.

Read from iree-compile's output stopped after kernel configuration
(:data:`CONFIGURED_FLAGS`, the scheduled build's kernel library passed as usual): every
dispatch function as it will run, named ``<function>_dispatch_<N>_<what>`` as IREE's
profiles name it, with its tensor-level linalg ops, the loads and stores of its bindings,
and what the library attached to it (:func:`~.kernel_library.attached_kernel`).

* **work**: :func:`~.work.count_work` of the function's linalg ops (FLOP for float
  bodies), with the same rules and ``uncounted`` ops as a whole workload's;
* **traffic**: every byte the function loads from and stores to its bindings, once: the
  least a dispatch must move between memory and the cores (data that stays in a cache
  moves less; a dispatch that reads its inputs twice, more). ``None`` when a load or
  store has a dynamic shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir

from .kernel_library import attached_kernel
from .payload import ops_under
from .work import Work, count_work

CONFIGURED_FLAGS: tuple[str, ...] = ("--compile-to=executable-configurations",)
"""iree-compile flags that stop after kernel configuration and write MLIR text."""

_LOADS = frozenset({"iree_codegen.load_from_buffer", "iree_tensor_ext.dispatch.tensor.load"})
"""Binding reads, by backend: llvm-cpu loads whole buffers, SPIR-V dispatch tensors."""
_STORES = frozenset({"iree_codegen.store_to_buffer", "iree_tensor_ext.dispatch.tensor.store"})


@dataclass(frozen=True)
class DispatchWork:
    """One dispatch function: its name, work, traffic and kernel schedule."""

    function: str
    work: Work
    traffic_bytes: int | None
    """Bytes loaded from and stored to its bindings, each once; ``None``: not static."""
    kernel: str | None
    """The kernel schedule attached to it; ``None``: IREE's own configuration."""


def read_dispatch_work(configured: str) -> list[DispatchWork]:
    """Every dispatch function in ``configured`` (iree-compile's MLIR output with
    :data:`CONFIGURED_FLAGS`), in the order IREE formed them."""
    found = []
    with ir.Context():
        module = ir.Module.parse(configured)
        for func in ops_under(module.operation, _is_dispatch_function):
            name = ir.StringAttr(func.attributes["sym_name"]).value
            work = count_work(ir.Module.parse(str(func)))
            found.append(DispatchWork(name, work, _traffic(func), attached_kernel(func)))
    return found


def _is_dispatch_function(op: ir.Operation) -> bool:
    """A function in an executable (``hal.executable.variant``'s inner module)."""
    if op.name != "func.func" or op.parent is None:
        return False
    variant = op.parent.parent
    return variant is not None and variant.name == "hal.executable.variant"


def _traffic(func: ir.Operation) -> int | None:
    moved = [
        _tensor_bytes(op.results[0].type if op.name in _LOADS else op.operands[0].type)
        for op in ops_under(func, lambda op: op.name in _LOADS | _STORES)
    ]
    return None if None in moved else sum(b for b in moved if b is not None)


def _tensor_bytes(value_type: ir.Type) -> int | None:
    """Bytes of a statically shaped tensor (sub-byte elements take a byte each)."""
    tensor = ir.RankedTensorType(value_type)
    element = tensor.element_type
    if not tensor.has_static_shape or not isinstance(element, ir.FloatType | ir.IntegerType):
        return None
    elements: int = math.prod(tensor.shape)
    width: int = element.width
    return elements * math.ceil(width / 8)
