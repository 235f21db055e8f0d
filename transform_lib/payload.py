"""Payload helpers shared by every part of transform_lib: walking a module's ops, removing
tag attributes, and facts about a module that schedules check preconditions against."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from iree.compiler import ir
from iree.compiler.passmanager import PassManager

from .generic_build import static_loop_ranges

_NOT_STRUCTURED = {"linalg.yield", "linalg.index"}


def is_structured(op: ir.Operation) -> bool:
    """Whether ``op`` is a linalg structured op (not a body terminator or index op)."""
    return op.name.startswith("linalg.") and op.name not in _NOT_STRUCTURED


def _linalg_ops(op: ir.Operation) -> Iterator[ir.Operation]:
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                name = child.operation.name
                if name.startswith("linalg.") and name not in _NOT_STRUCTURED:
                    yield child.operation
                else:
                    yield from _linalg_ops(child.operation)


def ops_under(root: ir.Operation, wanted: Callable[[ir.Operation], bool]) -> list[ir.Operation]:
    """The ops nested in ``root`` (and ``root`` itself) that are ``wanted``, in walk order.

    Collected first, so callers may rewrite or raise afterwards (an exception raised
    inside a walk callback comes back as a RuntimeError).
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if wanted(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def strip_attributes(op: ir.Operation, names: Sequence[str]) -> None:
    """Remove the attributes ``names`` from ``op`` and every op nested in it."""

    def visit(inner: ir.Operation) -> ir.WalkResult:
        for name in names:
            if name in inner.attributes:
                del inner.attributes[name]
        return ir.WalkResult.ADVANCE

    op.walk(visit)


def loop_counts(module_text: str) -> dict[str, set[int]]:
    """Map each linalg op name in the module to the loop counts its instances may have:
    as written, and without their unit-extent loops (which IREE may drop inside a
    dispatch). Tile-size counts are checked only where this leaves one answer.

    Named ops are generalized on a copy to read their iterator types, so the answer is
    exact for every structured op, including ones tdsched has never heard of. Answers
    are remembered per module text (a sweep plans hundreds of candidates of one workload).
    """
    return {name: set(counts) for name, counts in _loop_counts(module_text)}


@functools.lru_cache(maxsize=16)
def _loop_counts(module_text: str) -> tuple[tuple[str, frozenset[int]], ...]:
    with ir.Context():
        original = ir.Module.parse(module_text)
        generalized = ir.Module.parse(module_text)
        PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(
            generalized.operation
        )
        counts: dict[str, set[int]] = {}
        for named, generic in zip(
            _linalg_ops(original.operation), _linalg_ops(generalized.operation), strict=True
        ):
            if "iterator_types" not in generic.attributes:
                continue
            n = len(ir.ArrayAttr(generic.attributes["iterator_types"]))
            counts.setdefault(named.name, set()).add(n)
            # Inside a dispatch IREE may drop unit-extent loops (a conv with a batch of 1
            # has 7 loops here, 6 in its dispatch): both counts are possible there.
            ranges = static_loop_ranges(generic)
            units = sum(r == 1 for r in ranges) if ranges else 0
            if units:
                counts[named.name].add(n - units)
        return tuple((name, frozenset(found)) for name, found in counts.items())


def op_histogram(module_text: str) -> Counter[str]:
    """How many ops of each name the module's functions hold (what a rewrite changed)."""
    counts: Counter[str] = Counter()

    def visit(op: ir.Operation) -> ir.WalkResult:
        counts[op.name] += 1
        return ir.WalkResult.ADVANCE

    with ir.Context():
        ir.Module.parse(module_text).operation.walk(visit)
    del counts["builtin.module"]
    return counts


def describe_change(before: Counter[str], after: Counter[str]) -> str:
    """``linalg.matmul 1→0, linalg.generic 1→2``, or ``changed no op`` when equal."""
    changed = [
        f"{name} {before[name]}→{after[name]}"
        for name in sorted(set(before) | set(after))
        if before[name] != after[name]
    ]
    return ", ".join(changed) if changed else "changed no op"
