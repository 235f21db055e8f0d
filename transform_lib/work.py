"""The arithmetic work of a payload: how many operations its linalg ops perform.

GFLOP/s and "% of the machine's FMA peak" need the work a workload does, derived from
its IR, never typed in by hand. Each structured op is generalized (on a copy) to a
``linalg.generic``; its work is the number of points of its iteration space (the product
of its static loop ranges) times the arithmetic ops in its body:

* every ``arith`` or ``math`` op counts 1 (``addf``, ``mulf``, ``maximumf``, ``exp``...),
  except ``math.fma``, which counts 2 (a multiply and an add);
* constants, casts and conversions (``extf``, ``truncf``, ``sitofp``, ``index_cast``...),
  ``linalg.index`` and the yield count 0: they move or relabel data;
* ``linalg.pack``/``unpack`` and copies count 0.

So a matmul (``mulf`` + ``addf``) counts 2·M·N·K, a ``linalg.fill`` 0, a ReLU
(``maximumf``) 1 per element. Ops whose loop ranges are dynamic, or that have no
generic form (``linalg.softmax``), are listed in :attr:`Work.uncounted` and the total
is then a lower bound. Ops whose results are unused are not counted (generalization
erases them, as compilation does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.passmanager import PassManager

from .generic_build import static_loop_ranges
from .payload import is_structured, ops_under

_FREE = frozenset(
    {
        "arith.constant",
        "arith.extf",
        "arith.truncf",
        "arith.extsi",
        "arith.extui",
        "arith.trunci",
        "arith.sitofp",
        "arith.uitofp",
        "arith.fptosi",
        "arith.fptoui",
        "arith.bitcast",
        "arith.index_cast",
        "arith.index_castui",
    }
)
"""Body ops that do no arithmetic."""
_WEIGHT = {"math.fma": 2}
_DATA_MOVEMENT = frozenset({"linalg.pack", "linalg.unpack", "linalg.copy"})


@dataclass(frozen=True)
class Work:
    """The arithmetic operations of a module (FLOP for float bodies), per the rules in
    the module docstring. ``uncounted`` names the ops whose work is not in ``ops``."""

    ops: int
    uncounted: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        return not self.uncounted


def body_ops(generic: ir.Operation) -> int:
    """Arithmetic ops per iteration-space point of a ``linalg.generic``."""
    count = 0
    for op in generic.regions[0].blocks[0].operations:
        name = op.operation.name
        if name.startswith(("arith.", "math.")) and name not in _FREE:
            count += _WEIGHT.get(name, 1)
    return count


def count_work(module: ir.Module) -> Work:
    """The work of every structured op in ``module`` (all functions), summed."""
    generalized = ir.Module.parse(str(module), context=module.context)
    PassManager.parse(
        "builtin.module(func.func(linalg-generalize-named-ops))", context=module.context
    ).run(generalized.operation)
    total, uncounted = 0, []
    for op in ops_under(generalized.operation, is_structured):
        if op.name in _DATA_MOVEMENT:
            continue
        if "iterator_types" not in op.attributes:
            uncounted.append(f"{op.name} (no generic form)")
            continue
        ranges = static_loop_ranges(op)
        if ranges is None:
            uncounted.append(f"{op.name} (dynamic loop ranges)")
            continue
        total += math.prod(ranges) * body_ops(op)
    return Work(total, tuple(uncounted))


def count_work_of_text(text: str) -> Work:
    """:func:`count_work` of a module given as MLIR text, in a context of its own."""
    with ir.Context():
        return count_work(ir.Module.parse(text))
