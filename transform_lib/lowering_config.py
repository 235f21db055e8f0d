"""``compilation_info`` attributes for config-only kernel schedules.

A config keeps IREE's own codegen pipeline and only sets its tile sizes (and GPU
workgroup size). Levels: ``workgroup`` (distribution to workgroups), ``vector`` or
``thread`` (per-thread / vector tile), ``reduction`` (reduction-loop tile), and on x86
``inner`` (the vector tile of parallel loops that IREE tiles after the reduction level,
``vector_inner_parallel``: a softmax's normalization reads a reduction's result there).

A dispatch's root op carries the ``compilation_info`` (pipeline and tile sizes); on x86
another op of the dispatch may carry its own ``lowering_config`` (:func:`op_lowering_config`),
which IREE's pipeline then uses for that op instead of deriving one from the root's.

On Vulkan, IREE's ``BaseVectorize`` pipeline gives each thread one ``thread`` tile of its
workgroup's ``workgroup`` tile, so the workgroup size follows from the two levels (as in
IREE's own configurations): ``x`` threads along the innermost loop, ``y`` along the one
before it, ``z`` for the rest. A config that leaves ``workgroup_size`` out gets that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

from .errors import ScheduleError

_CPU_LEVELS = {
    "workgroup": "distribution",
    "vector": "vector_common_parallel",
    "reduction": "vector_reduction",
    "inner": "vector_inner_parallel",
}
_GPU_LEVELS = {"workgroup": "workgroup", "thread": "thread", "reduction": "reduction"}
_DERIVES_WORKGROUP_SIZE = "BaseVectorize"


class Codegen(Enum):
    """IREE's code generator a config is written for; a target names its own
    (``Target.codegen`` in :mod:`tdsched.targets.target`). The value is IREE's HAL
    backend."""

    LLVM_CPU = "llvm-cpu"
    SPIRV = "vulkan-spirv"

    @property
    def is_cpu(self) -> bool:
        return self is Codegen.LLVM_CPU

    @property
    def levels(self) -> dict[str, str]:
        """The tile levels a config names, and IREE's name of each."""
        return _CPU_LEVELS if self.is_cpu else _GPU_LEVELS

    @property
    def default_pipeline(self) -> str:
        return "DoubleTilingExpert" if self.is_cpu else "BaseVectorize"

    @property
    def pipeline_attr(self) -> str:
        """IREE's pipeline attribute, ``{}`` standing for the pipeline's name."""
        return "#iree_cpu.pipeline<{}>" if self.is_cpu else "#iree_gpu.spirv_pipeline<{}>"


def _list(sizes: Sequence[int]) -> str:
    return "[" + ", ".join(str(s) for s in sizes) + "]"


def compilation_info(
    codegen: Codegen,
    tile_sizes: Mapping[str, Sequence[int]],
    workgroup_size: Sequence[int] | None = None,
    pipeline_name: str | None = None,
) -> str:
    """The ``#iree_codegen.compilation_info`` text for a config for ``codegen``.

    ``tile_sizes`` maps a level to sizes, ``workgroup_size`` is for GPUs, ``pipeline_name``
    names IREE's pipeline (x86 ``DoubleTilingExpert``...; vulkan ``BaseVectorize``,
    ``MatmulPromoteVectorize``...). Vulkan levels may be shorter than the loop count
    (trailing loops untiled), e.g. workgroup ``[64, 64]``, reduction ``[0, 0, 4]``.
    """
    pipeline = codegen.pipeline_attr.format(pipeline_name or codegen.default_pipeline)
    _check_levels(tile_sizes, codegen)
    if codegen.is_cpu:
        if workgroup_size:
            raise ScheduleError("config: workgroup_size applies to GPU targets (vulkan) only")
        config = _cpu_lowering_config(tile_sizes)
        info = f"#iree_codegen.translation_info<pipeline = {pipeline}>"
    else:
        name = pipeline_name or codegen.default_pipeline
        if not workgroup_size and name == _DERIVES_WORKGROUP_SIZE:
            workgroup_size = derived_workgroup_size(
                tile_sizes.get("workgroup", ()), tile_sizes.get("thread", ())
            )
        if not workgroup_size:
            raise ScheduleError(
                f"config: a Vulkan config with pipeline {name} needs workgroup_size [x, y, z] "
                f"(only {_DERIVES_WORKGROUP_SIZE} derives it from the workgroup and thread tiles)"
            )
        ordered = [tile_sizes.get(level) for level in ("workgroup", "thread", "reduction")]
        present = [_list(s) for s in ordered if s is not None]
        config = f"#iree_codegen.lowering_config<tile_sizes = [{', '.join(present)}]>"
        info = (
            f"#iree_codegen.translation_info<pipeline = {pipeline} "
            f"workgroup_size = {_list(workgroup_size)}>"
        )
    return f"#iree_codegen.compilation_info<lowering_config = {config}, translation_info = {info}>"


def op_lowering_config(codegen: Codegen, tile_sizes: Mapping[str, Sequence[int]]) -> str:
    """The ``#iree_cpu.lowering_config`` of a non-root op (a config with ``root: false``):
    its tile sizes, without a pipeline or a distribution level, which are the root's."""
    if not codegen.is_cpu:
        raise ScheduleError(
            "config: root: false (tile sizes for a non-root op of a dispatch) is for x86; "
            "on Vulkan configure the dispatch's root only"
        )
    if "workgroup" in tile_sizes:
        raise ScheduleError(
            "config: a root: false config has no 'workgroup' level: the dispatch's root "
            "distributes the work to workgroups; give vector, reduction or inner sizes"
        )
    _check_levels(tile_sizes, codegen)
    return _cpu_lowering_config(tile_sizes)


def _check_levels(tile_sizes: Mapping[str, Sequence[int]], codegen: Codegen) -> None:
    levels = codegen.levels
    unknown = sorted(set(tile_sizes) - set(levels))
    if unknown:
        raise ScheduleError(
            f"config: tile level(s) {', '.join(unknown)} do not exist for IREE's "
            f"{codegen.value} codegen; "
            f"use {', '.join(levels)}"
        )


def _cpu_lowering_config(tile_sizes: Mapping[str, Sequence[int]]) -> str:
    if len({len(s) for s in tile_sizes.values()}) != 1:
        raise ScheduleError("config: every tile level needs one size per loop (same length)")
    fields = ", ".join(f"{_CPU_LEVELS[k]} = {_list(v)}" for k, v in tile_sizes.items())
    return f"#iree_cpu.lowering_config<{fields}>"


def derived_workgroup_size(workgroup: Sequence[int], thread: Sequence[int]) -> list[int]:
    """The threads of a ``BaseVectorize`` workgroup: per loop, its ``workgroup`` tile over
    its ``thread`` tile (1 where either is 0: untiled, or one thread takes the whole
    tile); ``x`` is the innermost tiled loop's count, ``y`` the one before, ``z`` the
    product of the rest. Raises ``ScheduleError`` when a thread tile does not divide its
    workgroup tile, or without both levels."""
    if not workgroup or not thread:
        raise ScheduleError(
            "config: give workgroup_size [x, y, z], or both 'workgroup' and 'thread' tile "
            "sizes to derive it from"
        )
    counts = []
    for loop, size in enumerate(workgroup):
        per_thread = thread[loop] if loop < len(thread) else 0
        if size and per_thread and size % per_thread:
            raise ScheduleError(
                f"config: the thread tile {per_thread} does not divide the workgroup tile "
                f"{size} of loop {loop}: make it a divisor, or give workgroup_size"
            )
        counts.append(size // per_thread if size and per_thread else 1)
    counts = [1, 1, *counts]
    z = 1
    for count in counts[:-2]:
        z *= count
    return [counts[-1], counts[-2], z]
