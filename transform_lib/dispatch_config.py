"""IREE's own kernel configuration of a dispatch, as a schedule template starts from it.

A kernel schedule's tile sizes count the loops of the ops as strategies see them, which
is not always the census view (IREE restores a convolution's unit batch dim before
strategies run). A compile that stops after kernel configuration
(``--compile-to=executable-configurations``, no kernel library) prints each dispatch in
that form, its root op carrying IREE's chosen tile sizes (``#iree_cpu.lowering_config``:
``distribution``, ``vector_common_parallel``, ``vector_reduction``). :func:`read_configured`
reads one dispatch of that output: its structured ops in order, their loops, and the
root's levels, which a template takes as the centre of its parameter space.

On Vulkan the root carries ``#iree_codegen.lowering_config<tile_sizes = [[...], ...]>``,
whose lists are unnamed; they are read as the levels a Vulkan ``config`` names
(``workgroup``, ``thread``, ``reduction``, in that order), each padded with zeros to one
size per loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from iree.compiler import ir
from iree.compiler.passmanager import PassManager

from .census import input_count
from .errors import ScheduleError
from .generic_build import static_loop_ranges
from .payload import is_structured, ops_under

_LEVEL = re.compile(r"(\w+) = \[([-\d, ]*)\]")
_GPU_TILE_SIZES = re.compile(r"tile_sizes = \[((?:\[[-\d, ]*\](?:, )?)*)\]")
_GPU_LEVELS = ("workgroup", "thread", "reduction")
_PIPELINE = re.compile(r"pipeline = (?:#iree_gpu\.spirv_pipeline<)?(\w+)")
DISTRIBUTION_LEVELS = ("distribution", "workgroup")
"""The level that distributes work to workgroups: x86's name, Vulkan's."""


@dataclass(frozen=True)
class ConfiguredOp:
    """A structured op of a configured dispatch."""

    op: str
    loop_ranges: tuple[int, ...]
    iterators: tuple[str, ...]
    """``parallel`` or ``reduction`` per loop."""
    output_loops: tuple[int, ...] | None
    """The loop indexing each dim of its (first) output, ``None`` unless every output
    dim is a plain loop."""
    levels: dict[str, tuple[int, ...]]
    """IREE's tile sizes per level of its ``lowering_config`` (empty without one)."""
    input_loops: tuple[tuple[int, ...] | None, ...] = ()
    """Per input operand, the loops indexing its dims (``None`` unless every dim is a
    plain loop)."""


@dataclass(frozen=True)
class ConfiguredDispatch:
    """One dispatch as strategies see it, with IREE's configuration."""

    function: str
    ops: tuple[ConfiguredOp, ...]
    root: int
    """The index in ``ops`` of IREE's root (the op configured with a distribution level,
    :data:`DISTRIBUTION_LEVELS`)."""
    root_reads: dict[int, int]
    """For each op after the root, the operand through which it reads the root's result."""
    init_is_fill: bool
    """Whether the root's output operand is a ``linalg.fill``'s result."""
    root_inputs: int
    """The root's number of input operands (its init is the operand after them)."""
    pipeline: str | None = None
    """The codegen pipeline IREE chose for the dispatch (its ``translation_info``:
    ``CPUDoubleTilingExpert``, ``BaseVectorize``, ``BaseDistribute``...), ``None`` when
    the function carries none."""
    reads_previous: dict[int, int] = field(default_factory=dict)
    """For each op after the root that reads the op just before it, the operand through
    which it does (a chain of epilogue ops: IREE splits a matmul that accumulates into a
    bias into its fill, the matmul and an add, then the activation)."""

    @property
    def root_op(self) -> ConfiguredOp:
        return self.ops[self.root]

    @property
    def epilogue(self) -> tuple[ConfiguredOp, ...]:
        return self.ops[self.root + 1 :]


def read_configured(output: str, function_prefix: str) -> list[ConfiguredDispatch]:
    """The dispatches whose function names start with ``function_prefix`` in ``output``
    (the MLIR an ``executable-configurations`` compile wrote). Raises ``ScheduleError``
    for a dispatch with dynamic loop bounds."""
    found = []
    with ir.Context():
        module = ir.Module.parse(output)
        functions = ops_under(
            module.operation,
            lambda op: (
                op.name == "func.func"
                and ir.StringAttr(op.attributes["sym_name"]).value.startswith(function_prefix)
            ),
        )
        for function in functions:
            found.append(_read(function))
    return found


def _read(function: ir.Operation) -> ConfiguredDispatch:
    name = ir.StringAttr(function.attributes["sym_name"]).value
    generic = ir.Module.parse(str(function))
    PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(
        generic.operation
    )
    ops = ops_under(function, is_structured)
    generics = ops_under(generic.operation, is_structured)
    configured = tuple(_op(op, g) for op, g in zip(ops, generics, strict=True))
    roots = [
        i for i, c in enumerate(configured) if any(lvl in c.levels for lvl in DISTRIBUTION_LEVELS)
    ]
    if len(roots) != 1:
        raise ScheduleError(f"@{name}: expected one op configured with distribution tile sizes")
    root = roots[0]
    reads: dict[int, int] = {}
    previous: dict[int, int] = {}
    for index in range(root + 1, len(ops)):
        for number, operand in enumerate(ops[index].operands):
            if operand.owner == ops[root]:
                reads[index] = number
            if operand.owner == ops[index - 1]:
                previous.setdefault(index, number)
    inputs = input_count(ops[root])
    init = ops[root].operands[inputs].owner
    attributes = function.attributes
    info = str(attributes["translation_info"]) if "translation_info" in attributes else ""
    pipeline = _PIPELINE.search(info)
    return ConfiguredDispatch(
        name,
        configured,
        root,
        reads,
        isinstance(init, ir.Operation | ir.OpView) and init.name == "linalg.fill",
        inputs,
        pipeline.group(1) if pipeline else None,
        previous,
    )


def _op(op: ir.Operation, generic: ir.Operation) -> ConfiguredOp:
    ranges = static_loop_ranges(generic)
    if ranges is None:
        raise ScheduleError(f"{op.name}: dynamic loop bounds")
    iterators = tuple(
        "reduction" if "reduction" in str(t) else "parallel"
        for t in ir.ArrayAttr(generic.attributes["iterator_types"])
    )
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    inputs = tuple(_plain_loops(m) for m in maps[: input_count(generic)])
    config = str(op.attributes["lowering_config"]) if "lowering_config" in op.attributes else ""
    levels = _levels(config, len(ranges))
    return ConfiguredOp(op.name, tuple(ranges), iterators, _plain_loops(maps[-1]), levels, inputs)


def _plain_loops(indexing: ir.AffineMap) -> tuple[int, ...] | None:
    """The loop indexing each dim of an operand, ``None`` if a dim is not a plain loop."""
    try:
        return tuple(ir.AffineDimExpr(expr).position for expr in indexing.results)
    except ValueError:
        return None


def _levels(config: str, loop_count: int) -> dict[str, tuple[int, ...]]:
    """The tile sizes per level of a ``lowering_config``'s text (see the module docstring)."""
    gpu = _GPU_TILE_SIZES.search(config)
    if gpu is None:
        return {m.group(1): _ints(m.group(2)) for m in _LEVEL.finditer(config)}
    lists = [_ints(text) for text in re.findall(r"\[([-\d, ]*)\]", gpu.group(1))]
    return {
        level: sizes + (0,) * (loop_count - len(sizes))
        for level, sizes in zip(_GPU_LEVELS, lists, strict=False)
    }


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())
